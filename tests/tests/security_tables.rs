//! Issue 22, items 1 and 3: a local user (`nobody`) runs a process that maps a crafted
//! `libjvm.so` (built here with gcc from `tests/fakes/`) exporting HotSpot's introspection
//! tables, filled to attack the root profiler that reads them:
//! - `CodeBlob::_name` at offset 2^40 (the blob reader allocated a terabyte: SIGABRT);
//! - four tables of 131,071 entries with distinct 511-byte names (558 MB against a 64 MB
//!   budget, every sample on the host unsymbolized, runs 5 to 7 s late);
//! - a code heap whose segment map is all 1s (65,536 reads per pc).
//!
//! Each attack is run against `--pid`, `--all` and `serve`: the run must end on time with
//! exit 0 and its results, within `--max-symbol-mb 64`, the fake reported. A real JVM beside
//! six fakes keeps its Java methods named. Run as root by `cargo xtask test security_tables`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use joular_tests::fake_jvm::{build_fake_jvm, FakeJvm as Fake};
use joular_tests::*;
use serde_json::Value;

const RUN_S: u64 = 3;
const BUDGET_MB: u64 = 64;
/// What the symbol budget does not cover (eBPF maps, per-process state, blazesym's caches):
/// 8 MB under `--pid`, 40 to 60 MB under `--all` and `serve` on a busy test machine. The
/// hostile tables took 558 MB before.
const UNBUDGETED_MB: u64 = 32;
/// How late a run may end (issue 22: hostile tables made runs 5 to 7 s late).
const SLACK: Duration = Duration::from_secs(1);
/// Loading the eBPF programs and the first discovery, on a loaded machine.
const START_UP: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attack {
    HugeOffset,
    HugeTables,
    SegmapOfOnes,
}

impl Attack {
    fn define(self) -> &'static str {
        match self {
            Attack::HugeOffset => "-DHUGE_OFFSET",
            Attack::HugeTables => "-DHUGE_TABLES",
            Attack::SegmapOfOnes => "-DSEGMAP_ONES",
        }
    }
}

/// The attacker's build: `libjvm.so` and the program that maps it, in a directory nobody can
/// read.
fn build(attack: Attack) -> tempfile::TempDir {
    build_fake_jvm(attack.define())
}

/// One profiler run: exit code, peak RSS, time until it stopped, stderr, cycles, summary.json.
struct Run {
    code: i32,
    max_rss_kb: i64,
    /// When its first cycle was printed, from the start.
    first_cycle_at: Duration,
    /// From the first cycle to "stopping": `--duration` less one cycle when on time.
    elapsed: Duration,
    stderr: String,
    cycles: Vec<Value>,
    summaries: Vec<Value>,
}

impl Run {
    fn degraded(&self, cause: &str) -> u64 {
        self.summaries.iter().map(|s| s["degraded"][cause].as_u64().unwrap_or(0)).max().unwrap_or(0)
    }

    /// Samples of `pid` whose method is named `prefix...`, and all its samples with a method.
    fn named_share(&self, pid: u32, prefix: &str) -> (u64, u64) {
        let mut named = 0;
        let mut all = 0;
        for m in self.cycles.iter().flat_map(|c| c["methods"].as_array().cloned().unwrap_or_default()) {
            if m["pid"] == pid {
                let samples = m["samples"].as_u64().unwrap();
                all += samples;
                named += samples * u64::from(m["method"].as_str().unwrap().starts_with(prefix));
            }
        }
        (named, all)
    }
}

fn find_summaries(dir: &Path, out: &mut Vec<Value>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            find_summaries(&path, out);
        } else if path.file_name().is_some_and(|n| n == "summary.json") {
            out.push(serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap());
        }
    }
}

/// Runs the profiler in `mode` (`--pid P`, `--all`, `serve ...`) for `seconds` with a
/// 64 MB symbol budget.
fn profile_run(mode: &[&str], seconds: u64) -> Run {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("cycles.jsonl");
    let results = out.path().join("results");
    let started = Instant::now();
    // `serve` writes a result tree only with `--results`.
    let results_flag: &[&str] = if mode[0] == "serve" { &["--results"] } else { &[] };
    let mut child = Command::new(bin())
        .args(mode)
        .args([
            "--duration",
            &seconds.to_string(),
            "--energy-source",
            "model",
            "--max-symbol-mb",
            &BUDGET_MB.to_string(),
        ])
        .arg("--json")
        .arg(&json)
        .args(results_flag)
        .arg("--output")
        .arg(&results)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pipe = child.stderr.take().unwrap();
    // When the first cycle ends and when the profiler says it stops: the run's own length,
    // apart from start-up and from writing the results (under --all on a busy host, both
    // scale with the other processes).
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let (mut first_cycle, mut stopped) = (None, None);
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
    let (code, max_rss_kb) = wait_with_rusage(&mut child, Duration::from_secs(seconds + 60));
    let (stderr, first_cycle, stopped) = reader.join().unwrap();
    let first_cycle_at = first_cycle.unwrap_or(Duration::MAX);
    let elapsed = stopped.unwrap_or_else(|| started.elapsed()).saturating_sub(first_cycle_at.min(started.elapsed()));
    let cycles = if json.exists() { read_jsonl(&json) } else { Vec::new() };
    let mut summaries = Vec::new();
    find_summaries(&results, &mut summaries);
    Run { code, max_rss_kb, first_cycle_at, elapsed, stderr, cycles, summaries }
}

/// Waits for `child` (bounded); its exit code (-signal when killed) and peak RSS in KiB.
/// The peak is the process's own `VmHWM`, read until it exits: `wait4`'s `ru_maxrss` also
/// counts the test process's image the child was forked from.
fn wait_with_rusage(child: &mut Child, timeout: Duration) -> (i32, i64) {
    let start = Instant::now();
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0;
    loop {
        if let Some(kb) = std::fs::read_to_string(&status_path).ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<i64>().ok())
        }) {
            peak_kb = peak_kb.max(kb);
        }
        let mut status = 0;
        // SAFETY: pid is our child; status is a valid out-pointer.
        let rc = unsafe { libc::waitpid(child.id() as i32, &mut status, libc::WNOHANG) };
        if rc == child.id() as i32 {
            let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -libc::WTERMSIG(status) };
            return (code, peak_kb);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            panic!("joular-ebpf did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What every run under attack must show: it survived, ended on time with all its cycles
/// and results, and stayed within its symbol budget.
fn assert_survived(run: &Run, what: &str) {
    eprintln!(
        "{what}: rc {}, peak RSS {} MiB, first cycle after {:.2} s, then {:.2} s to stop for {} more cycle(s), {} cycles written",
        run.code,
        run.max_rss_kb >> 10,
        run.first_cycle_at.as_secs_f64(),
        run.elapsed.as_secs_f64(),
        RUN_S - 1,
        run.cycles.len()
    );
    assert_eq!(run.code, 0, "{what}: the profiler failed\n{}", run.stderr);
    assert!(!run.summaries.is_empty(), "{what}: no summary.json written\n{}", run.stderr);
    assert_eq!(run.cycles.len() as u64, RUN_S, "{what}: one cycle per second, all written\n{}", run.stderr);
    assert!(
        run.first_cycle_at <= Duration::from_secs(1) + START_UP,
        "{what}: the first cycle came after {:?}\n{}",
        run.first_cycle_at,
        run.stderr
    );
    assert!(
        run.elapsed <= Duration::from_secs(RUN_S - 1) + SLACK,
        "{what}: {} more cycles took {:?}\n{}",
        RUN_S - 1,
        run.elapsed,
        run.stderr
    );
    let max_rss_mb = BUDGET_MB + UNBUDGETED_MB;
    assert!(
        run.max_rss_kb < (max_rss_mb << 10) as i64,
        "{what}: peak RSS {} KiB over --max-symbol-mb {BUDGET_MB} + {UNBUDGETED_MB} MB",
        run.max_rss_kb
    );
    assert_eq!(run.degraded("hotspot_reader_panics"), 0, "{what}: a reader panicked\n{}", run.stderr);
}

fn modes(pid: u32) -> Vec<(String, Vec<String>)> {
    vec![
        ("--pid".into(), vec!["--pid".into(), pid.to_string()]),
        ("--all".into(), vec!["--all".into()]),
        ("serve".into(), vec!["serve".into(), "--listen".into(), "127.0.0.1:0".into()]),
    ]
}

/// Attacks whose tables break a bound: the fake is reported unreadable, once, by pid and
/// bound, and counted in summary.json.
fn unreadable_tables_are_refused(attack: Attack, bound: &str) {
    let dir = build(attack);
    let fake = Fake::start(dir.path());
    for (name, mode) in modes(fake.pid()) {
        let what = format!("{attack:?} {name}");
        let args: Vec<&str> = mode.iter().map(String::as_str).collect();
        let run = profile_run(&args, RUN_S);
        assert_survived(&run, &what);
        let warning = format!(
            "JVM {}: HotSpot tables unreadable (HotSpot introspection tables out of bounds: {bound}",
            fake.pid()
        );
        assert_eq!(
            run.stderr.matches(&warning).count(),
            1,
            "{what}: the fake is reported once, with the bound it broke\n{}",
            run.stderr
        );
        assert!(run.degraded("jvms_with_unreadable_hotspot_tables") >= 1, "{what}: not counted in summary.json");
    }
}

#[test]
fn hostile_tables_a_blob_name_offset_of_2_to_the_40_is_refused_not_allocated() {
    unreadable_tables_are_refused(Attack::HugeOffset, "offset of CodeBlob::_name = 1099511627776");
}

#[test]
fn hostile_tables_of_131071_entries_with_long_distinct_names_are_refused_within_budget() {
    unreadable_tables_are_refused(Attack::HugeTables, "name length");
}

/// The segment map is within bounds value by value: the fake is read, and each of its pcs
/// costs a few reads, not 65,536, so the cycles keep their cadence.
#[test]
fn hostile_tables_a_segment_map_of_ones_costs_a_few_reads_per_pc() {
    let dir = build(Attack::SegmapOfOnes);
    let fake = Fake::start(dir.path());
    for (name, mode) in modes(fake.pid()) {
        let what = format!("SegmapOfOnes {name}");
        let args: Vec<&str> = mode.iter().map(String::as_str).collect();
        let run = profile_run(&args, RUN_S);
        assert_survived(&run, &what);
        let fake_samples: u64 = run
            .cycles
            .iter()
            .flat_map(|c| c["threads"].as_array().cloned().unwrap_or_default())
            .filter(|t| t["pid"] == fake.pid())
            .map(|t| t["samples"].as_u64().unwrap())
            .sum();
        assert!(fake_samples > 0, "{what}: the fake was not sampled");
        assert_eq!(
            run.degraded("cycles_written_before_symbols"),
            0,
            "{what}: cycles went out unsymbolized\n{}",
            run.stderr
        );
    }
}

/// Six fakes (two of each attack) cannot blind a real JVM beside them under `--all`.
#[test]
fn hostile_tables_a_real_jvm_beside_six_fakes_keeps_its_methods_named() {
    let dirs: Vec<tempfile::TempDir> =
        [Attack::HugeOffset, Attack::HugeTables, Attack::SegmapOfOnes].into_iter().map(build).collect();
    let fakes: Vec<Fake> =
        dirs.iter().flat_map(|d| [Fake::start_niced(d.path(), 10), Fake::start_niced(d.path(), 10)]).collect();
    let jvm = Jvm::start(
        "MethodSplit",
        &["60"],
        &["-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,MethodSplit::*"],
    );
    let run = profile_run(&["--all"], RUN_S);
    let (named, all) = run.named_share(jvm.pid(), "MethodSplit.");
    eprintln!("real JVM + 6 fakes --all: {named} of {all} samples of the real JVM named in MethodSplit");
    assert_survived(&run, "real JVM + 6 fakes --all");
    assert!(all > 0, "the real JVM was not sampled\n{}", run.stderr);
    assert!(named * 2 > all, "the real JVM lost its names: {named} of {all} samples named\n{}", run.stderr);
    for fake in &fakes[..4] {
        assert!(
            run.stderr.contains(&format!("JVM {}: HotSpot tables unreadable", fake.pid())),
            "fake {} not reported\n{}",
            fake.pid(),
            run.stderr
        );
    }
}
