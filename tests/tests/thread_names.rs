//! Issue 24, item 3 ("thread names at sample time"): a thread is reported under the name it had
//! when it was sampled. A real JVM (`ThreadNames`) starts, under the profiler, a thread that
//! renames itself after 2.5 s of work and one that burns 250 ms and exits mid-cycle. Both first
//! run under the process's name ("java"): the JVM names a native thread only once it runs. Every
//! cycle must name each thread as it was when sampled in that cycle: never "java", the renamer
//! "renamer-a" and then "renamer-b", never the old name after the new one.

use std::fs::File;
use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use joular_tests::*;
use serde_json::Value;

/// (cycle index, comm, samples) of each cycle row of thread `tid` that holds samples.
fn sampled_names(cycles: &[Value], tid: u64) -> Vec<(usize, String, u64)> {
    let mut out = Vec::new();
    for (i, c) in cycles.iter().enumerate() {
        for t in c["threads"].as_array().expect("threads array") {
            let samples = t["samples"].as_u64().unwrap_or(0);
            if t["tid"].as_u64() == Some(tid) && samples > 0 {
                out.push((i, t["comm"].as_str().unwrap_or_default().to_string(), samples));
            }
        }
    }
    out
}

#[test]
fn sampled_names_follow_a_thread_that_renames_itself_and_one_that_exits_mid_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let trigger = dir.path().join("go");
    let argv = java_cmd("ThreadNames", &[trigger.to_str().unwrap()], &[]);
    let mut jvm =
        Jvm { child: KillOnDrop::new(Command::new(&argv[0]).args(&argv[1..]).stdout(Stdio::piped()).spawn().unwrap()) };
    let (tx, lines) = mpsc::channel();
    let stdout = BufReader::new(jvm.child.stdout.take().unwrap());
    std::thread::spawn(move || stdout.lines().map_while(Result::ok).try_for_each(|l| tx.send(l)));
    let next_line = || lines.recv_timeout(Duration::from_secs(60)).expect("a line from the fixture");
    assert!(next_line().starts_with("ready"));

    let (json, log) = (dir.path().join("cycles.jsonl"), dir.path().join("stderr"));
    let prof = Command::new(bin())
        .args(["--pid", &jvm.pid().to_string(), "--duration", "9", "--energy-source", "model", "--json"])
        .arg(&json)
        .arg("--output")
        .arg(dir.path().join("out"))
        .stdout(Stdio::piped())
        .stderr(File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log).unwrap_or_default().contains("joular-ebpf: profiling") {
        assert!(Instant::now() < deadline, "the profiler did not start:\n{}", std::fs::read_to_string(&log).unwrap());
        std::thread::sleep(Duration::from_millis(50));
    }
    File::create(&trigger).unwrap();
    let (mut renamer, mut shortburn) = (None, None);
    loop {
        let line = next_line();
        match line.split_once(' ') {
            Some(("renamer-a", tid)) => renamer = Some(tid.parse::<u64>().unwrap()),
            Some(("shortburn", tid)) => shortburn = Some(tid.parse::<u64>().unwrap()),
            _ if line == "done" => break,
            _ => {}
        }
    }
    let out = wait_bounded(prof, Duration::from_secs(60));
    assert_success(&out);
    let cycles = read_jsonl(&json);

    let short = sampled_names(&cycles, shortburn.expect("shortburn's tid"));
    assert!(!short.is_empty(), "shortburn was never sampled");
    assert!(short.iter().all(|(_, comm, _)| comm == "shortburn"), "shortburn's cycles: {short:?}");

    let renamed = sampled_names(&cycles, renamer.expect("renamer's tid"));
    assert!(
        renamed.iter().all(|(_, comm, _)| comm == "renamer-a" || comm == "renamer-b"),
        "renamer's cycles: {renamed:?}"
    );
    let first_b = renamed.iter().position(|(_, comm, _)| comm == "renamer-b");
    assert!(first_b.is_some_and(|b| b > 0), "renamer's cycles name both, a first: {renamed:?}");
    assert!(renamed[first_b.unwrap()..].iter().all(|(_, comm, _)| comm == "renamer-b"), "{renamed:?}");
}
