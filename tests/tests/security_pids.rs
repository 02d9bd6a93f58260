//! Issue 22, item 5 ("PID reuse mixes users"): a root process exits and `nobody` takes its PID
//! at once (`ns_last_pid` set to the PID before it, then a fork, retried until the PID is the
//! one wanted). Under `--all` the root process's result tree must hold only its own stacks and
//! name, and the impostor must get a tree of its own; with `--pid P` and no `--duration` the run
//! must end when the root process dies, not when the impostor does.
//!
//! The root process is `md5sum /dev/zero` and the impostor `sha256sum /dev/zero`: two busy
//! processes told apart by their comm and their code.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use joular_tests::attack::NOBODY;
use joular_tests::*;
use serde_json::Value;

/// The attacker's interpreter (a pyenv shim under /root is out of nobody's reach).
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// Forks until a child gets PID `argv[1]` (setting `ns_last_pid` to the PID before it each time),
/// makes that child `nobody` and execs the rest of argv in it; prints the attempts it took and
/// waits for it. Other children exit at once.
const TAKE_PID: &str = r#"
import os, sys
target, uid, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
for attempt in range(1, 5001):
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(target - 1))
    pid = os.fork()
    if pid == 0:
        if os.getpid() != target:
            os._exit(0)
        os.nice(-20)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        os.execvp(argv[0], argv)
    if pid == target:
        print(attempt, flush=True)
        os.waitpid(pid, 0)
        sys.exit(0)
    os.waitpid(pid, 0)
sys.exit(3)
"#;

/// Starts the profiler with its output in `dir/stdout` and `dir/stderr` (under `--all` its end
/// summary is larger than a pipe holds) and returns once it profiles (loading takes seconds on
/// a loaded machine), plus two cycles.
fn start_profiler(dir: &Path, args: &[&str]) -> Child {
    let (out, log) =
        (std::fs::File::create(dir.join("stdout")).unwrap(), std::fs::File::create(dir.join("stderr")).unwrap());
    let prof = Command::new(bin()).args(args).stdout(out).stderr(log).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !profiler_log(dir).contains("joular-ebpf: profiling") {
        assert!(Instant::now() < deadline, "the profiler did not start:\n{}", profiler_log(dir));
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(2500));
    prof
}

fn profiler_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("stderr")).unwrap_or_default()
}

/// A busy root process with a comm of its own. Both burners run at nice -20, so that each gets
/// its samples on a loaded machine.
fn root_burner() -> KillOnDrop {
    KillOnDrop::new(
        Command::new("nice").args(["-n", "-20", "md5sum", "/dev/zero"]).stdout(Stdio::null()).spawn().unwrap(),
    )
}

/// `nobody`'s process with the root process's PID, killed when dropped (a failed test leaves no
/// burner behind), with the taker that waits for it.
struct Impostor {
    pid: u32,
    taker: Child,
}

impl Drop for Impostor {
    fn drop(&mut self) {
        if self.taker.try_wait().ok().flatten().is_none() {
            let _ = Command::new("kill").args(["-KILL", &self.pid.to_string()]).status();
            let _ = self.taker.kill();
            let _ = self.taker.wait();
        }
    }
}

/// Kills `root` and gives its PID to `nobody`'s `sha256sum /dev/zero`; returns once the impostor
/// runs, with when the root process died.
fn kill_and_reuse(mut root: KillOnDrop) -> (Impostor, Instant) {
    let pid = root.pid();
    root.kill().unwrap();
    root.wait().unwrap();
    let died = Instant::now();
    let taker = Command::new(SYSTEM_PYTHON)
        .args(["-c", TAKE_PID, &pid.to_string(), &NOBODY.to_string(), "sha256sum", "/dev/zero"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut impostor = Impostor { pid, taker };
    let mut line = String::new();
    std::io::BufReader::new(impostor.taker.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.trim().parse::<u32>().is_ok(), "nobody could not take PID {pid}: {line:?}");
    // The taker reports the fork; the exec follows.
    let exec_deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() != "sha256sum")
        && Instant::now() < exec_deadline
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(
        stat.contains("Name:\tsha256sum") && stat.lines().any(|l| l.starts_with("Uid:") && l.contains("65534")),
        "PID {pid} is not nobody's impostor:\n{stat}"
    );
    eprintln!(
        "PID {pid} reused by nobody after {} fork(s), {:?} after the root process died",
        line.trim(),
        died.elapsed()
    );
    (impostor, died)
}

/// The `<pid>-<ms>` result directories of `pid` under `root`, with their summaries.
fn trees_of(root: &Path, pid: u32) -> Vec<(PathBuf, Value)> {
    let mut trees: Vec<(PathBuf, Value)> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("{pid}-")))
        .map(|p| {
            let summary =
                std::fs::read_to_string(p.join("summary.json")).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, serde_json::from_str(&summary).unwrap())
        })
        .collect();
    trees.sort_by(|a, b| a.0.cmp(&b.0));
    trees
}

/// Names of the threads a summary holds.
fn thread_names(summary: &Value) -> Vec<String> {
    summary["threads"].as_array().unwrap().iter().map(|t| t["comm"].as_str().unwrap().to_string()).collect()
}

fn samples(summary: &Value) -> u64 {
    summary["samples"].as_u64().unwrap()
}

/// The tree of the process named `comm`: only that process's threads, its name, and no stack
/// of the other one's code.
fn assert_own_tree(trees: &[(PathBuf, Value)], comm: &str, other: &str) -> u64 {
    // Before the fix, the root process's tree had one thread (the main thread's TID is the PID)
    // named after the impostor, its stacks included, and took the impostor's name.
    let matching: Vec<_> = trees.iter().filter(|(_, s)| s["comm"] == comm).collect();
    assert_eq!(
        matching.len(),
        1,
        "one tree named {comm} expected: {:?}",
        trees.iter().map(|(p, s)| (p, &s["comm"])).collect::<Vec<_>>()
    );
    let (dir, summary) = matching[0];
    let names = thread_names(summary);
    assert!(
        !names.is_empty() && names.iter().all(|n| n == comm),
        "{}: threads {names:?}, only {comm} expected",
        dir.display()
    );
    let folded = std::fs::read_to_string(dir.join("stacks-all.folded")).unwrap_or_default();
    assert!(!folded.contains(other), "{}: stacks of {other} in {comm}'s tree:\n{folded}", dir.display());
    assert!(samples(summary) > 0, "{}: no samples", dir.display());
    samples(summary)
}

#[test]
fn pid_reuse_under_all_gives_the_new_process_its_own_tree_and_the_root_process_keeps_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let root = root_burner();
    let pid = root.pid();
    let prof = start_profiler(dir.path(), &["--all", "--duration", "8", "--output", results.to_str().unwrap()]);
    let (impostor, _) = kill_and_reuse(root);
    std::thread::sleep(Duration::from_secs(3));
    drop(impostor);
    let out = wait_bounded(prof, Duration::from_secs(120));
    assert!(out.status.success(), "{}", profiler_log(dir.path()));
    let trees = trees_of(&results, pid);
    assert_eq!(trees.len(), 2, "two processes had PID {pid}: {:?}", trees.iter().map(|t| &t.0).collect::<Vec<_>>());
    let root_samples = assert_own_tree(&trees, "md5sum", "sha256");
    let impostor_samples = assert_own_tree(&trees, "sha256sum", "md5");
    eprintln!("samples: root md5sum {root_samples}, nobody's sha256sum {impostor_samples}");
}

#[test]
fn pid_reuse_with_pid_and_no_duration_ends_the_run_when_the_process_dies_not_its_pid() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let root = root_burner();
    let pid = root.pid();
    let prof = start_profiler(dir.path(), &["--pid", &pid.to_string(), "--output", results.to_str().unwrap()]);
    let (impostor, died) = kill_and_reuse(root);
    let out = wait_bounded(prof, Duration::from_secs(30));
    let after_death = died.elapsed();
    drop(impostor);
    let err = profiler_log(dir.path());
    assert!(out.status.success(), "{err}");
    eprintln!("the run ended {after_death:?} after the root process died");
    assert!(err.contains("stopping (target exited)"), "{err}");
    assert!(
        after_death < Duration::from_millis(3500),
        "the run followed the impostor: it ended {after_death:?} after the root process died\n{err}"
    );
    let trees = trees_of(&results, pid);
    assert_eq!(trees.len(), 1, "{:?}", trees.iter().map(|t| &t.0).collect::<Vec<_>>());
    assert_own_tree(&trees, "md5sum", "sha256");
}
