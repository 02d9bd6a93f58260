//! Issue 22 item 8: the attach protocol's trigger file (`.attach_pid<pid>`, in the JVM's working
//! directory or its /tmp) never outlives the attach, whether the JVM answered or the profiler
//! ended first. Run as root by `cargo xtask test`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use joular_tests::*;

/// Where HotSpot looks for the trigger file: the JVM's working directory, then /tmp.
fn trigger_files(cwd: &Path, pid: u32) -> [PathBuf; 2] {
    let name = format!(".attach_pid{pid}");
    [cwd.join(&name), Path::new("/tmp").join(name)]
}

fn assert_no_trigger_file(cwd: &Path, pid: u32, when: &str) {
    for path in trigger_files(cwd, pid) {
        assert!(path.symlink_metadata().is_err(), "{when}: {} left behind", path.display());
    }
}

#[test]
fn trigger_files_are_removed_after_a_perf_map_attach() {
    let cwd = tempfile::tempdir().unwrap();
    let jvm = Jvm::start_in(cwd.path(), "MethodSplit", &["60"], &[]);
    let pid = jvm.pid().to_string();
    let perf_map = PathBuf::from(format!("/tmp/perf-{pid}.map"));
    let _ = std::fs::remove_file(&perf_map);
    let out = profile(
        &[
            "--pid",
            &pid,
            "--duration",
            "3",
            "--java-symbols",
            "perf-map",
            "--output",
            cwd.path().join("r").to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert_success(&out);
    assert!(
        perf_map.is_file(),
        "the JVM wrote no perf map: no attach happened: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_file(&perf_map);
    assert_no_trigger_file(cwd.path(), jvm.pid(), "after an attach the JVM answered");
}

#[test]
fn trigger_files_are_removed_when_the_run_ends_before_the_jvm_answers() {
    let cwd = tempfile::tempdir().unwrap();
    let jvm = Jvm::start_in(cwd.path(), "MethodSplit", &["60"], &[]);
    // A stopped JVM never starts its listener: the attach waits for it past the run's end.
    // SAFETY: plain syscall on our own child.
    let signal = |sig: i32| assert_eq!(unsafe { libc::kill(jvm.pid() as i32, sig) }, 0);
    signal(libc::SIGSTOP);
    let pid = jvm.pid().to_string();
    let child = Command::new(bin())
        .args([
            "--pid",
            &pid,
            "--duration",
            "2",
            "--java-symbols",
            "perf-map",
            "--output",
            cwd.path().join("r").to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let [in_cwd, in_tmp] = trigger_files(cwd.path(), jvm.pid());
    let (mut child, mut seen) = (child, false);
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(30) {
        seen |= in_cwd.exists() || in_tmp.exists();
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = wait_bounded(child, Duration::from_secs(30));
    signal(libc::SIGCONT);
    assert_success(&out);
    assert!(seen, "no trigger file was made: the attach was not tried: {}", String::from_utf8_lossy(&out.stderr));
    assert_no_trigger_file(cwd.path(), jvm.pid(), "after a run that ended during the attach");
}
