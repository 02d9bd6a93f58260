//! A process that presents itself as a QEMU guest to `serve --vm-energy-dir`: Debian's dash
//! copied to a file named `qemu-system-x86_64` (so `/proc/<pid>/exe` names QEMU) and run with
//! QEMU's `-name guest=NAME,...` on its command line, burning one CPU in a shell loop. Real QEMU
//! (`qemu-system-x86_64 -machine none`) is not installed on the test machines.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::KillOnDrop;

/// Starts the stand-in in `dir` (where the copied executable is put), as guest `name`.
pub fn start(dir: &Path, name: &str) -> KillOnDrop {
    let exe = dir.join("qemu-system-x86_64");
    if !exe.exists() {
        std::fs::copy("/bin/dash", &exe).expect("copy /bin/dash as qemu-system-x86_64");
    }
    // dash -c CMD NAME ARGS...: what follows the command is $0 $1..., kept on the command line.
    let guest = format!("guest={name},debug-threads=on");
    let child = Command::new(&exe)
        .args(["-c", "while :; do :; done", "qemu-system-x86_64", "-machine", "none", "-name", &guest])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
    KillOnDrop::new(child)
}

/// Stops (SIGSTOP) or resumes (SIGCONT) it: stopped, it draws no energy, so a counter of its
/// energy stands still.
pub fn pause(child: &KillOnDrop, stopped: bool) {
    let sig = if stopped { libc::SIGSTOP } else { libc::SIGCONT };
    // SAFETY: a signal to our own child, which is alive until the KillOnDrop is dropped.
    assert_eq!(unsafe { libc::kill(child.pid() as i32, sig) }, 0);
}
