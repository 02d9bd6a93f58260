//! Crafted "JVMs" of a local user (`nobody`): a process that maps a `libjvm.so` built from
//! `tests/fakes/libjvm.c` with one attack's `-D` define (see that file), exporting HotSpot's
//! introspection tables for the root profiler to read.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::attack::{nobody_cmd, open_dir};
use crate::child::KillOnDrop;

fn fakes_src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fakes")
}

/// The attacker's build with `define` (`-DHUGE_OFFSET`...): `libjvm.so` and the program `fake`
/// that maps it, in a directory nobody can read.
pub fn build_fake_jvm(define: &str) -> tempfile::TempDir {
    let dir = open_dir(true);
    let gcc = |args: &[&str]| {
        let out = Command::new("gcc")
            .args(["-O1", "-Wall", "-Werror"])
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("gcc is installed");
        assert!(out.status.success(), "gcc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let lib = fakes_src().join("libjvm.c");
    gcc(&["-shared", "-fPIC", define, "-o", "libjvm.so", lib.to_str().unwrap()]);
    let main = fakes_src().join("fake_jvm.c");
    let rpath = format!("-Wl,-rpath,{}", dir.path().display());
    gcc(&["-o", "fake", main.to_str().unwrap(), "-L.", "-ljvm", &rpath]);
    dir
}

/// A crafted "JVM" run by nobody, from a [`build_fake_jvm`] directory; killed on drop.
pub struct FakeJvm {
    child: KillOnDrop,
}

impl FakeJvm {
    pub fn start(dir: &Path) -> Self {
        Self::start_niced(dir, 0)
    }

    /// Started at `nice` (the fakes spin: several at full priority would take the 2 CPUs of a
    /// small test machine from the profiler itself, whatever it reads).
    pub fn start_niced(dir: &Path, nice: u8) -> Self {
        let fake = dir.join("fake");
        let nice = nice.to_string();
        let mut child = nobody_cmd(&["nice", "-n", &nice, fake.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        if line != "ready\n" {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("the fake JVM did not start: {}", String::from_utf8_lossy(&out.stderr));
        }
        FakeJvm { child: KillOnDrop::new(child) }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}
