//! Issue 22: a target cannot stall the profiler with reads that never end. A local user
//! (`nobody`) runs a crafted "JVM" (`tests/fakes/libjvm.c -DUFFD_SEGMAP`) whose code heap's
//! segment map is memory registered with userfaultfd and never served: the profiler's
//! `process_vm_readv` of it sleeps until the fake ends, and the one symbols worker with it.
//! Before the fix that stopped every name on the host (a real JVM beside it included) and made
//! the run end late; now that read is given up after its deadline, the fake marked bad and
//! reported, and the run goes on. Run as root by `cargo xtask test stall_`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use joular_tests::attack::Sysctl;
use joular_tests::fake_jvm::{build_fake_jvm, FakeJvm};
use joular_tests::*;
use serde_json::Value;

const RUN_S: u64 = 5;
/// Loading the eBPF programs and the first discovery, on a loaded machine.
const START_UP: Duration = Duration::from_secs(4);
/// From the first cycle to "stopping", beyond `RUN_S - 1` cycles.
const SLACK: Duration = Duration::from_secs(1);

fn degraded(summaries: &[Value], cause: &str) -> u64 {
    summaries.iter().map(|s| s["degraded"][cause].as_u64().unwrap_or(0)).max().unwrap_or(0)
}

fn summaries_under(dir: &std::path::Path, out: &mut Vec<Value>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            summaries_under(&path, out);
        } else if path.file_name().is_some_and(|n| n == "summary.json") {
            out.push(serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap());
        }
    }
}

#[test]
fn stall_a_jvm_whose_memory_never_answers_is_dropped_and_a_real_jvm_keeps_its_names() {
    // Unprivileged userfaultfd that blocks kernel reads too (not UFFD_USER_MODE_ONLY).
    let _uffd = Sysctl::set("vm.unprivileged_userfaultfd", 1);
    let dir = build_fake_jvm("-DUFFD_SEGMAP");
    let fake = FakeJvm::start_niced(dir.path(), 10);
    let jvm = Jvm::start(
        "MethodSplit",
        &["60"],
        &["-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,MethodSplit::*"],
    );
    let pids = format!("{},{}", fake.pid(), jvm.pid());
    for mode in [&["--pid", pids.as_str()][..], &["--all"][..]] {
        run_beside_a_stalled_jvm(mode, &fake, &jvm);
    }
}

/// One run in `mode` with the fake and the real JVM: it ends on time, on cadence, the real JVM
/// named and the fake reported and counted.
fn run_beside_a_stalled_jvm(mode: &[&str], fake: &FakeJvm, jvm: &Jvm) {
    let what = mode[0];
    let out = tempfile::tempdir().unwrap();
    let (json, results) = (out.path().join("cycles.jsonl"), out.path().join("results"));
    let started = Instant::now();
    let mut child = Command::new(bin())
        .args(mode)
        .args(["--duration", &RUN_S.to_string(), "--energy-source", "model", "--json"])
        .arg(&json)
        .arg("--output")
        .arg(&results)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let (mut text, mut first_cycle, mut stopped) = (String::new(), None, None);
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if line.starts_with("[cycle ") {
                first_cycle.get_or_insert(started.elapsed());
            }
            if line.starts_with("joular-ebpf: stopping") {
                stopped.get_or_insert(started.elapsed());
            }
            text.push_str(&line);
            text.push('\n');
        }
        (text, first_cycle, stopped)
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(RUN_S + 60) {
            let _ = child.kill();
            panic!("joular-ebpf did not end within {} s", RUN_S + 60);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let ended_after = started.elapsed();
    let (stderr, first_cycle, stopped) = reader.join().unwrap();
    let first_cycle = first_cycle.unwrap_or_else(|| panic!("no cycle printed\n{stderr}"));
    let stopped = stopped.unwrap_or_else(|| panic!("never said it stopped\n{stderr}"));
    let cycles = read_jsonl(&json);
    let mut summaries = Vec::new();
    summaries_under(&results, &mut summaries);

    let lengths_s: Vec<f64> =
        cycles.iter().map(|c| (c["end_ns"].as_u64().unwrap() - c["start_ns"].as_u64().unwrap()) as f64 / 1e9).collect();
    let (mut named, mut all) = (0u64, 0u64);
    for m in cycles.iter().flat_map(|c| c["methods"].as_array().cloned().unwrap_or_default()) {
        if m["pid"] == jvm.pid() {
            let samples = m["samples"].as_u64().unwrap();
            all += samples;
            named += samples * u64::from(m["method"].as_str().unwrap().starts_with("MethodSplit."));
        }
    }
    eprintln!(
        "{what}: stalled fake + real JVM: rc {:?}, ended after {:.2} s (first cycle at {:.2} s, stopping at {:.2} s), cycles {lengths_s:?}, real JVM {named} of {all} samples named, degraded jvms_with_blocked_reads {} target_reads_blocked {}",
        status.code(),
        ended_after.as_secs_f64(),
        first_cycle.as_secs_f64(),
        stopped.as_secs_f64(),
        degraded(&summaries, "jvms_with_blocked_reads"),
        degraded(&summaries, "target_reads_blocked"),
    );
    assert!(status.success(), "{what}: the profiler failed\n{stderr}");
    assert!(first_cycle <= Duration::from_secs(1) + START_UP, "{what}: first cycle after {first_cycle:?}\n{stderr}");
    assert!(
        stopped.saturating_sub(first_cycle) <= Duration::from_secs(RUN_S - 1) + SLACK,
        "{what}: {} more cycles took {:?}\n{stderr}",
        RUN_S - 1,
        stopped.saturating_sub(first_cycle)
    );
    // The end (results written, threads left behind) is not held up by the blocked read either.
    assert!(ended_after <= stopped + Duration::from_secs(3), "{what}: ended {ended_after:?} after start\n{stderr}");
    assert_eq!(cycles.len() as u64, RUN_S, "{what}: one cycle per second, all written\n{stderr}");
    let full = &lengths_s[..lengths_s.len() - 1];
    assert!(
        full.iter().all(|l| (0.9..=1.1).contains(l)),
        "{what}: cycles off their 1 s cadence: {lengths_s:?}\n{stderr}"
    );
    assert!(all > 0, "{what}: the real JVM was not sampled\n{stderr}");
    assert!(named * 2 > all, "{what}: the real JVM lost its names: {named} of {all} samples named\n{stderr}");
    let warning = format!("JVM {}: a read of its memory blocked", fake.pid());
    assert_eq!(stderr.matches(&warning).count(), 1, "{what}: the fake is reported once, by pid\n{stderr}");
    assert!(!summaries.is_empty(), "{what}: no summary.json\n{stderr}");
    assert!(degraded(&summaries, "jvms_with_blocked_reads") >= 1, "{what}: not counted in summary.json\n{stderr}");
    assert!(degraded(&summaries, "target_reads_blocked") >= 1, "{what}: not counted in summary.json\n{stderr}");
    assert_eq!(
        degraded(&summaries, "cycles_written_before_symbols"),
        0,
        "{what}: cycles went out unsymbolized\n{stderr}"
    );
}
