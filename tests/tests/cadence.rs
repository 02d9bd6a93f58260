//! Issue 22 item 8: a JVM that starts 5,000 busy threads cannot stretch the profiler's cycles.
//! Run as root by `cargo xtask test`.

use std::time::Duration;

use joular_tests::*;

/// The cycle length asked for (the default `--interval`), and how far one may stray from it.
const INTERVAL_S: f64 = 1.0;
const TOLERANCE: f64 = 0.10;
const THREADS: usize = 5_000;

#[test]
fn cycles_keep_their_length_while_a_jvm_starts_5000_busy_threads() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cycles.jsonl");
    let out_dir = dir.path().join("results");
    let mut args = vec![
        "record".to_string(),
        "--json".into(),
        json.display().to_string(),
        "--output".into(),
        out_dir.display().to_string(),
        "--".into(),
    ];
    // Each thread spins 1 ms every 100 ms: 5,000 of them want ~50 CPUs, so every CPU is full.
    args.extend(java_cmd("ThreadStorm", &[&THREADS.to_string(), "8", "1000"], &[]));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = profile(&argv, Duration::from_secs(90));
    assert_success(&out);
    let cycles = read_jsonl(&json);
    assert!(cycles.len() >= 7, "an 8 s run gives 8 cycles or so: {}", cycles.len());
    // The JVM did start its threads while it was profiled. Counted over the run, not per cycle:
    // 5,000 threads that each want 1 ms in 100 ms ask ~50 CPUs of 2, so on a loaded machine a
    // thread can miss a whole cycle without the profiler missing anything.
    let seen: std::collections::HashSet<u64> = cycles
        .iter()
        .flat_map(|c| c["threads"].as_array().unwrap().iter().map(|t| t["tid"].as_u64().unwrap()))
        .collect();
    let peak_threads = cycles.iter().map(|c| c["threads"].as_array().unwrap().len()).max().unwrap();
    assert!(
        seen.len() >= THREADS,
        "the JVM's {THREADS} threads were not seen: {} over the run, at most {peak_threads} in a cycle",
        seen.len()
    );
    // Every cycle but the last, which ends when the JVM exits.
    let spans_s: Vec<f64> = cycles[..cycles.len() - 1]
        .iter()
        .map(|c| (c["end_ns"].as_u64().unwrap() - c["start_ns"].as_u64().unwrap()) as f64 / 1e9)
        .collect();
    let off: Vec<String> = spans_s
        .iter()
        .enumerate()
        .filter(|(_, s)| (*s - INTERVAL_S).abs() > TOLERANCE * INTERVAL_S)
        .map(|(i, s)| format!("cycle {i}: {s:.3} s"))
        .collect();
    assert!(off.is_empty(), "cycles outside {INTERVAL_S} s ± {:.0}%: {off:?} (all: {spans_s:.3?})", TOLERANCE * 100.0);
}
