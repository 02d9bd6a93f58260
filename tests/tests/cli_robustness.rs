//! Issue 11 acceptance (items 3-6): `record` follows the command's process tree, a closed stdout
//! costs nothing but the printing, `record` can always be stopped, and bad input gets a clear
//! message and exit code. Run as root by `cargo xtask test` (the input checks fail before any
//! eBPF is loaded).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use joular_tests::*;

const DONTINLINE: &str = "-XX:CompileCommand=dontinline,MethodSplit::*";

/// A fixture's command line for `sh -c`, every word quoted.
fn java_script(class: &str, args: &[&str], jvm_flags: &[&str]) -> String {
    java_cmd(class, args, jvm_flags).iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" ")
}

/// `pid -> (summary.json, result directory)` for every process of a result tree.
fn summaries(root: &Path) -> HashMap<u32, (serde_json::Value, PathBuf)> {
    std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("summary.json").is_file())
        .map(|dir| {
            let summary: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
            (summary["pid"].as_u64().unwrap() as u32, (summary, dir))
        })
        .collect()
}

/// The JVM's result directory: named `java` (its leader), holding MethodSplit's methods.
fn assert_jvm_profiled(root: &Path, not_pid: u32) {
    let all = summaries(root);
    let jvms: Vec<_> = all.iter().filter(|(_, (s, _))| s["comm"] == "java").collect();
    assert_eq!(
        jvms.len(),
        1,
        "one result tree named java expected: {:?}",
        all.values().map(|(s, _)| (&s["pid"], &s["comm"])).collect::<Vec<_>>()
    );
    let (&pid, (_, dir)) = jvms[0];
    assert_ne!(pid, not_pid, "the JVM is a child, not the process started or given");
    let csv = dir.join(format!("all/total/methods/joularJX-{pid}-all-methods-energy.csv"));
    let methods = std::fs::read_to_string(&csv).unwrap_or_else(|e| panic!("{}: {e}", csv.display()));
    for m in ["MethodSplit.alpha", "MethodSplit.beta"] {
        assert!(
            methods.lines().any(|l| l.starts_with(&format!("{m},"))),
            "{m} missing from the JVM's methods:\n{methods}"
        );
    }
}

#[test]
fn record_follows_a_shell_to_the_jvm_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("results");
    // `; true` keeps the shell alive, so the JVM is its child (a lone command would be exec'd).
    let java = java_script("MethodSplit", &["4"], &[DONTINLINE]);
    let out = profile(
        &["record", "--output", out_dir.to_str().unwrap(), "--", "sh", "-c", &format!("{java} > /dev/null; true")],
        Duration::from_secs(90),
    );
    assert_success(&out);
    let all = summaries(&out_dir);
    let shell = all
        .iter()
        .find(|(_, (s, _))| s["comm"] == "sh")
        .map(|(&pid, _)| pid)
        .expect("the shell has its own result tree");
    assert_jvm_profiled(&out_dir, shell);
}

#[test]
fn follow_children_profiles_what_a_given_pid_starts() {
    let java = java_script("MethodSplit", &["4"], &[DONTINLINE]);
    // The JVM starts once the profiler is loaded.
    let mut shell = Command::new("sh").args(["-c", &format!("sleep 3; {java} > /dev/null; true")]).spawn().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("results");
    let pid = shell.id().to_string();
    let out = profile(
        &["--pid", &pid, "--follow-children", "--duration", "8", "--output", out_dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    let _ = shell.kill();
    let _ = shell.wait();
    assert_success(&out);
    assert_jvm_profiled(&out_dir, shell.id());
}

#[test]
fn follow_children_profiles_what_a_given_pid_started_before_the_profiler() {
    let java = java_script("MethodSplit", &["12"], &[DONTINLINE]);
    let mut shell = Command::new("sh").args(["-c", &format!("{java} > /dev/null; true")]).spawn().unwrap();
    // The JVM is the shell's child before the profiler loads: only /proc says so.
    let started = std::time::Instant::now();
    let proc_children = format!("/proc/{0}/task/{0}/children", shell.id());
    while std::fs::read_to_string(&proc_children).unwrap_or_default().trim().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(10), "the shell started no JVM");
        std::thread::sleep(Duration::from_millis(50));
    }
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("results");
    let pid = shell.id().to_string();
    let out = profile(
        &["--pid", &pid, "--follow-children", "--duration", "6", "--output", out_dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    let _ = shell.kill();
    let _ = shell.wait();
    assert_success(&out);
    assert_jvm_profiled(&out_dir, shell.id());
}

#[test]
fn a_closed_stdout_and_stderr_end_the_printing_not_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("results");
    let mut args = vec!["record".to_string(), "--output".into(), out_dir.display().to_string(), "--".into()];
    args.extend(java_cmd("DutyCycle", &["2"], &[]));
    // As `joular-ebpf ... 2>&1 | head -c 0`: the reader is gone before the first line.
    let mut child = Command::new(bin()).args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    drop(child.stderr.take());
    let out = wait_bounded(child, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "the run must not fail on a closed pipe");
    let all = summaries(&out_dir);
    assert_eq!(all.len(), 1, "{all:?}");
    let (_, run) = all.values().next().unwrap();
    assert!(run.join("profile.json").is_file(), "profile.json missing");
}

/// Starts `record` on a shell that ignores SIGTERM; returns it once its first cycle is out.
fn record_stubborn_child(out_dir: &Path, marker: &str) -> std::process::Child {
    let script = format!("trap '' TERM INT; sleep {marker}; true");
    let mut child = Command::new(bin())
        .args(["record", "--output", out_dir.to_str().unwrap(), "--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("[cycle") {
        line.clear();
        assert!(std::io::BufRead::read_line(&mut stderr, &mut line).unwrap() > 0, "record ended early");
    }
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    child
}

fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: plain syscall on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// Fails if a live (not zombie) process whose command line holds `marker` remains after a
/// moment (SIGKILL is delivered asynchronously).
fn assert_gone(marker: &str) {
    let t0 = Instant::now();
    let mut alive = alive_with(marker);
    while !alive.is_empty() && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(50));
        alive = alive_with(marker);
    }
    assert_eq!(alive, Vec::<u32>::new(), "the command's child outlived the profiler");
}

fn alive_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| !s[s.rfind(')').unwrap()..].starts_with(") Z"))
        })
        .collect()
}

#[test]
fn record_kills_a_command_that_ignores_sigterm_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("results");
    let marker = "61.0117";
    let child = record_stubborn_child(&out_dir, marker);
    signal(&child, libc::SIGINT);
    let t0 = Instant::now();
    let out = wait_bounded(child, Duration::from_secs(30));
    let took = t0.elapsed();
    assert!(took <= Duration::from_secs(12), "the profiler took {took:?} after Ctrl-C");
    assert!(took >= Duration::from_secs(9), "the command got no grace period ({took:?})");
    assert_eq!(out.status.code(), Some(137), "the command's exit code (SIGKILL)");
    assert!(summaries(&out_dir).values().any(|(s, _)| s["comm"] == "sh"), "no results written");
    assert_gone(marker);
}

#[test]
fn a_second_signal_kills_the_command_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("results");
    let marker = "61.0231";
    let child = record_stubborn_child(&out_dir, marker);
    signal(&child, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, libc::SIGTERM);
    let t0 = Instant::now();
    let out = wait_bounded(child, Duration::from_secs(30));
    assert!(t0.elapsed() <= Duration::from_secs(3), "the profiler took {:?} after the second signal", t0.elapsed());
    assert_eq!(out.status.code(), Some(137));
    assert!(!summaries(&out_dir).is_empty(), "no results written");
    assert_gone(marker);
}

#[test]
fn a_thread_id_stands_for_its_process_with_a_note() {
    let jvm = Jvm::start("DutyCycle", &["20"], &[]);
    let tid = jvm.tid_of("busy");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.jsonl");
    let out = profile(
        &[
            "--pid",
            &tid.to_string(),
            "--duration",
            "2",
            "--json",
            json.to_str().unwrap(),
            "--output",
            dir.path().join("r").to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("note: --pid {tid} is a thread of process {}", jvm.pid())), "{err}");
    let pids: Vec<u64> = read_jsonl(&json)
        .iter()
        .flat_map(|c| c["threads"].as_array().unwrap().iter().map(|t| t["pid"].as_u64().unwrap()).collect::<Vec<_>>())
        .collect();
    assert!(
        pids.len() > 2 && pids.iter().all(|&p| p == jvm.pid() as u64),
        "threads of the whole JVM expected: {pids:?}"
    );
    let summary = summaries(&dir.path().join("r"));
    assert_eq!(summary[&jvm.pid()].0["comm"], "java", "a process is named after its leader");
}

/// Loading the eBPF programs alone takes longer: a refusal this fast came before it.
const BEFORE_LOADING: Duration = Duration::from_millis(300);

/// Runs the binary on input it must refuse before loading anything: exit code 2, one line,
/// within [`BEFORE_LOADING`].
fn refused(args: &[&str]) -> String {
    let started = Instant::now();
    let out = profile(args, Duration::from_secs(20));
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line expected: {err}");
    assert!(took < BEFORE_LOADING, "{args:?}: refused after {took:?}, not before loading: {err}");
    err
}

#[test]
fn bad_input_is_refused_with_the_flag_and_exit_code_2() {
    let kthreadd = std::fs::read_to_string("/proc/2/comm").unwrap();
    let err = refused(&["--pid", "2", "--duration", "1"]);
    assert!(err.contains(&format!("--pid 2: PID 2 is a kernel thread ({})", kthreadd.trim_end())), "{err}");
    let err = refused(&["--pid", "999999999"]);
    assert!(err.contains("--pid 999999999: PID 999999999 not found"), "{err}");
    for (flag, value) in [
        ("--duration", "1e20"),
        ("--interval", "1e19"),
        ("--duration", "NaN"),
        ("--interval", "0"),
        ("--duration", "-1"),
        ("--max-symbol-mb", "4"),
    ] {
        let arg = format!("{flag}={value}");
        let err = refused(&["--pid", "1", &arg]);
        assert!(err.contains(&format!("error: {flag} must be")), "{arg}: {err}");
    }
    let err = refused(&["record", "--duration", "1e20", "--", "true"]);
    assert!(err.contains("--duration must be at most 2592000 s"), "{err}");
    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().display().to_string();
    let err = refused(&["--pid", "1", "--output", &path]);
    assert!(err.contains(&format!("--output {path}: {path} is not a directory")), "{err}");
    assert!(!err.contains("os error"), "{err}");
}

#[test]
fn bad_flags_are_refused_fast_with_exit_2_naming_flag_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let out = out.to_str().unwrap();
    let profiles = dir.path().join("profiles");
    let profiles = profiles.to_str().unwrap();
    // (arguments, what the line must say: the flag, and how to fix it)
    let cases: &[(&[&str], &[&str])] = &[
        (&["--pid", "1", "--tdp", "0", "--output", out], &["--tdp must be above 0", "e.g. --tdp 120"]),
        (&["--pid", "1", "--tdp", "NaN", "--output", out], &["--tdp must be"]),
        (&["--pid", "1", "--idle-power=-1", "--output", out], &["--idle-power must be between 0"]),
        (
            &["--pid", "1", "--tdp", "50", "--idle-power", "60", "--output", out],
            &["--idle-power 60 W must be below --tdp 50 W"],
        ),
        (
            &["--pid", "1", "--tdp", "100", "--energy-source", "powercap", "--output", out],
            &["--tdp only sets the model's power", "drop one of them"],
        ),
        (
            &["--pid", "1", "--sysfs-root", "/nonexistent", "--output", out],
            &["--sysfs-root /nonexistent: no such directory", "pass an existing directory"],
        ),
        (
            &["--pid", "1", "--proc-root", "/nonexistent", "--output", out],
            &["--proc-root /nonexistent: no such directory"],
        ),
        (
            &["--pid", "1", "--energy-source", "powercap", "--sysfs-root", "/tmp", "--output", out],
            &["--energy-source powercap is not available", "leave --energy-source out"],
        ),
        (
            &["--pid", "1", "--output", "/proc/sys/kernel"],
            &["--output /proc/sys/kernel: ", "choose a directory on a disk"],
        ),
        (
            &["--pid", "1", "--output", "/sys/kernel/results"],
            &["--output /sys/kernel/results: ", "choose a directory on a disk"],
        ),
        (
            &["--pid", "1", "--json", "/proc/sys/kernel/cycles.jsonl", "--output", out],
            &["--json /proc/sys/kernel/cycles.jsonl: ", "choose a directory"],
        ),
        (&["--pid", "1", "--interval", "0.001", "--output", out], &["--interval must be at least 0.1 s"]),
        (&["--all", "--follow-children", "--output", out], &["--follow-children needs --pid"]),
        (&["record", "--tdp", "0", "--output", out, "--", "true"], &["--tdp must be above 0"]),
        (&["serve", "--top-methods", "1000000"], &["--top-methods must be at most 1000"]),
        (
            &["serve", "--profile-dir", profiles, "--profile-interval", "0.5"],
            &["--profile-interval 0.5 is shorter than one cycle (--interval 1)"],
        ),
        (
            &["serve", "--profile-dir", profiles, "--profile-max-mb", "18446744073709551615"],
            &["--profile-max-mb must be between 1 and 1048576 MB"],
        ),
        (&["serve", "--profile-dir", "/proc/sys/kernel"], &["--profile-dir /proc/sys/kernel: "]),
        (&["serve", "--results", "--output", "/sys/kernel"], &["--output /sys/kernel: "]),
    ];
    for (args, says) in cases {
        let err = refused(args);
        for part in *says {
            assert!(err.contains(part), "{args:?}: {part:?} missing from: {err}");
        }
    }
    assert!(!Path::new(out).exists() && !Path::new(profiles).exists(), "nothing written by a refused run");
}

#[test]
fn bad_report_directories_are_refused_fast_with_exit_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("results");
    assert_success(&profile(
        &["record", "--output", out_dir.to_str().unwrap(), "--", "sleep", "1"],
        Duration::from_secs(30),
    ));
    let (_, run) = summaries(&out_dir).into_values().next().unwrap();
    let good = std::fs::read(run.join("profile.json")).unwrap();
    let summary = std::fs::read(run.join("summary.json")).unwrap();
    // A copy of the run, its profile.json replaced by `bad` (or removed), summary.json by `bad_summary`.
    let case = |name: &str, bad: Option<&[u8]>, bad_summary: Option<&[u8]>| {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        if let Some(bytes) = bad {
            std::fs::write(d.join("profile.json"), bytes).unwrap();
        }
        std::fs::write(d.join("summary.json"), bad_summary.unwrap_or(&summary)).unwrap();
        d
    };
    let truncated = case("truncated", Some(&good[..good.len() / 2]), None);
    let empty = case("empty", Some(b""), None);
    let foreign = case("foreign", Some(br#"{"traceEvents":[],"displayTimeUnit":"ms"}"#), None);
    let binary = case("binary", Some(b"\xff\xfe\x00garbage"), None);
    let newer = case(
        "newer",
        Some(&String::from_utf8_lossy(&good).replacen("\"version\":", "\"version\":9", 1).into_bytes()),
        None,
    );
    let summary_only = case("summary-only", None, Some(b"{\"pid\": 1, trunc"));
    let missing = dir.path().join("missing");
    for (dir, file) in [
        (&truncated, "profile.json"),
        (&empty, "profile.json"),
        (&foreign, "profile.json"),
        (&binary, "profile.json"),
        (&newer, "profile.json"),
        (&summary_only, ""),
        (&missing, ""),
    ] {
        for format in ["table", "svg,pprof"] {
            let err = refused(&["report", dir.to_str().unwrap(), "--format", format]);
            let named = dir.join(file);
            let named = named.to_str().unwrap().trim_end_matches('/');
            assert!(err.contains(named), "{format}: {} not named: {err}", named);
            assert!(err.contains("pass a result directory written by joular-ebpf"), "no fix given: {err}");
        }
        assert!(!dir.join("flamegraph-all.svg").exists(), "nothing rendered from a refused profile");
    }
    // With a good profile beside a bad one, nothing is rendered either: all are read first.
    let both = dir.path().join("both");
    std::fs::create_dir(&both).unwrap();
    std::fs::rename(&truncated, both.join("1-1")).unwrap();
    std::fs::create_dir(both.join("2-2")).unwrap();
    std::fs::write(both.join("2-2/profile.json"), &good).unwrap();
    let err = refused(&["report", both.to_str().unwrap(), "--format", "svg"]);
    assert!(err.contains(&both.join("1-1/profile.json").display().to_string()), "{err}");
    assert!(!both.join("2-2/flamegraph-all.svg").exists(), "rendered before every profile was read");
    let out =
        profile(&["report", both.join("2-2").to_str().unwrap(), "--format", "table,svg"], Duration::from_secs(30));
    assert_success(&out);
}

#[test]
fn report_refuses_impossible_numbers_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("results");
    let mut args = vec!["record".to_string(), "--output".into(), out_dir.display().to_string(), "--".into()];
    args.extend(java_cmd("DutyCycle", &["1"], &[]));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_success(&profile(&argv, Duration::from_secs(60)));
    let (_, run) = summaries(&out_dir).into_values().next().unwrap();
    let raw = run.join("profile.json");
    let text = std::fs::read_to_string(&raw).unwrap();
    // A closed stdout ends the table, not the command.
    let mut child = Command::new(bin())
        .args(["report", run.to_str().unwrap(), "--format", "table,svg"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = wait_bounded(child, Duration::from_secs(30));
    assert_success(&out);
    let energy_at = text.find("\"stacks\":[{").expect("a stack")
        + text[text.find("\"stacks\":[{").unwrap()..].find("\"energy_uj\":").unwrap();
    let value_end = energy_at + text[energy_at..].find(',').unwrap();
    for bad in ["-3.5", "1e308"] {
        std::fs::write(&raw, format!("{}\"energy_uj\":{bad}{}", &text[..energy_at], &text[value_end..])).unwrap();
        let out = profile(&["report", run.to_str().unwrap(), "--format", "table"], Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: bad input: {err}");
        assert!(err.contains(&raw.display().to_string()) && err.contains("stacks[0].energy_uj"), "{bad}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(out.stdout.is_empty(), "no table from a refused profile");
    }
}
