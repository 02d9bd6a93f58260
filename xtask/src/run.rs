//! Small process helpers shared by the tasks.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context as _};

/// The workspace root (xtask lives one level below it).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask has a parent").to_path_buf()
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"))
}

/// Runs a command, echoing it, and fails with its exit status.
pub fn status(cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("+ {}", show(cmd));
    let st = cmd.status().with_context(|| format!("cannot run {}", show(cmd)))?;
    if !st.success() {
        bail!("`{}` failed ({st})", show(cmd));
    }
    Ok(())
}

/// Runs a command and returns its stdout, or None if it cannot run or fails.
pub fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn show(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no failure mode.
    unsafe { libc::geteuid() == 0 }
}

/// Fixtures that need a newer API than Java 11's (Unix domain sockets: JDK 16+); they run on
/// the system's JDK 17 only.
const JAVA_17_FIXTURES: [&str; 1] = ["SilentAttach.java"];

/// Directories of `tests/java` compiled into a class directory of the same name.
const VERSIONED_FIXTURES: [&str; 2] = ["diff-base", "diff-new"];

/// Compiles the Java fixtures (for Java 11) into `<target>/java` and returns that directory.
pub fn compile_java() -> anyhow::Result<PathBuf> {
    let out = target_dir().join("java");
    std::fs::create_dir_all(&out)?;
    let (newer, sources): (Vec<PathBuf>, Vec<PathBuf>) = std::fs::read_dir(root().join("tests/java"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "java"))
        .partition(|p| JAVA_17_FIXTURES.iter().any(|f| p.ends_with(f)));
    // Class files for Java 11, so the JDK 11, 17 and 21 runtimes all load them.
    status(Command::new("javac").args(["--release", "11", "-d"]).arg(&out).args(&sources))?;
    status(Command::new("javac").args(["--release", "17", "-d"]).arg(&out).args(&newer))?;
    // Fixtures built in two versions of one program (`diff`): same class names, so each
    // version gets its own class directory.
    for version in VERSIONED_FIXTURES {
        let source = root().join("tests/java").join(version);
        let sources: Vec<PathBuf> = std::fs::read_dir(&source)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "java"))
            .collect();
        status(Command::new("javac").args(["--release", "11", "-d"]).arg(out.join(version)).args(&sources))?;
    }
    Ok(out)
}

/// Builds the profiler (release) and returns the binary's path.
pub fn build_profiler() -> anyhow::Result<PathBuf> {
    status(
        Command::new(env!("CARGO"))
            .args(["build", "--release", "-p", "joular-user", "--bin", "joular-ebpf"])
            .current_dir(root()),
    )?;
    Ok(target_dir().join("release/joular-ebpf"))
}
