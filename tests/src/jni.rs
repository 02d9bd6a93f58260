//! JNI libraries of the Java fixtures, compiled at test time without frame pointers, so a
//! test can check that native frames are stepped by their unwind tables.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compiles `tests/java/<source>` into `dir/<library>` with `-O2 -fomit-frame-pointer`
/// (and `-pthread`), against JDK 17's JNI headers.
pub fn build_jni_library(dir: &Path, source: &str, library: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("java").join(source);
    let include = Path::new("/usr/lib/jvm/java-17-openjdk-amd64/include");
    let out = dir.join(library);
    let status = Command::new("gcc")
        .args(["-O2", "-fomit-frame-pointer", "-shared", "-fPIC", "-pthread", "-o"])
        .arg(&out)
        .arg("-I")
        .arg(include)
        .arg("-I")
        .arg(include.join("linux"))
        .arg(&source)
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc failed on {}", source.display());
    out
}
