//! Issue 23, item 3: a JVM profiled from its first Java code. `record -- java` on a fixture that
//! loads, runs, compiles, deoptimizes and unloads many classes in its first seconds
//! (StartupMany.java), with no JVM flags: the Java frames of its samples are named from the
//! start, on JDK 11, 17, 21 and 25. Run as root by `cargo xtask test`.
//!
//! The target is 98% of the Java-thread samples with every Java frame named. Measured
//! on the 2-CPU test machine: 91-95% with the walk configuration published as soon as the
//! tables are readable and names kept past a free, 57-67% before (the first cycle's stacks were
//! cut at the first compiled frame). The rest is code freed within the cycle it first ran in,
//! samples taken before the configuration reached the kernel, and cut walks; on a machine
//! loaded by other builds the share drops by up to 15 points, so this test holds a floor,
//! [`MIN_NAMED_SHARE`], that the code before failed on every JDK.

use std::time::Duration;

use joular_tests::java_stack::{is_java, UNKNOWN_JIT};
use joular_tests::*;
use serde_json::Value;

/// The share of Java-thread samples with every Java frame named that a run must reach.
const MIN_NAMED_SHARE: f64 = 0.70;

/// Placeholders for a Java frame that could not be named.
const PLACEHOLDERS: [&str; 2] = ["Interpreter", UNKNOWN_JIT];

/// What a launch-to-exit run of the fixture gave.
#[derive(Debug)]
struct Startup {
    /// Samples with a Java frame (named or a placeholder).
    java_samples: u64,
    /// Of those, samples with every Java frame named: no placeholder, and not cut (a cut
    /// stack's callers are Java frames nobody named).
    named_samples: u64,
    /// Of those, samples whose stack reaches a thread's first Java frame (`main`,
    /// `Thread.run`, or a method the VM called through its call stub) with no
    /// `[truncated: ...]` root.
    rooted_samples: u64,
    /// Compiled frames whose code was freed before they were named (summary.json).
    freed_before_named: u64,
    stderr: String,
}

fn record_from_launch(jdk: u32) -> Startup {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.jsonl");
    let out_dir = dir.path().join("results");
    let mut args: Vec<String> = ["record", "--frequency", "250", "--json", json.to_str().unwrap(), "--output"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend([out_dir.display().to_string(), "--".into()]);
    args.extend(java_cmd_bare_on(&java_launcher(jdk), "StartupMany", &["3"], &[]));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = profile(&argv, Duration::from_secs(40));
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let mut run = Startup { java_samples: 0, named_samples: 0, rooted_samples: 0, freed_before_named: 0, stderr };
    for cycle in read_jsonl(&json) {
        for thread in cycle["threads"].as_array().unwrap() {
            for stack in thread["stacks"].as_array().expect("threads[].stacks") {
                let frames = stack["frames"].as_array().unwrap();
                let placeholder = |f: &Value| PLACEHOLDERS.contains(&f["name"].as_str().unwrap_or_default());
                if !frames.iter().any(|f| is_java(f) || placeholder(f)) {
                    continue;
                }
                let samples = stack["samples"].as_u64().unwrap();
                run.java_samples += samples;
                let truncated =
                    frames.first().and_then(|f| f["name"].as_str()).is_some_and(|n| n.starts_with("[truncated"));
                let entry = |f: &Value| {
                    let name = f["name"].as_str().unwrap_or_default();
                    is_java(f) && (name.contains(".main(") || name.contains("Thread.run("))
                };
                // Java the VM calls itself (class initializers, `initPhase1`) starts at a call stub.
                let first_java = frames.iter().position(|f| is_java(f) || placeholder(f)).unwrap_or(0);
                let called_by_vm = first_java > 0 && frames[first_java - 1]["name"] == "StubRoutines::call_stub";
                let rooted = !truncated && (frames.iter().any(entry) || called_by_vm);
                run.rooted_samples += if rooted { samples } else { 0 };
                if rooted && !frames.iter().any(placeholder) {
                    run.named_samples += samples;
                }
            }
        }
    }
    let summary = std::fs::read_dir(&out_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("summary.json"))
        .find(|p| p.is_file())
        .expect("a result directory with summary.json");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap();
    run.freed_before_named = find_count(&summary, "compiled_frames_freed_before_named");
    run
}

/// The first number under `key` anywhere in `v` (0 when absent: nothing was counted).
fn find_count(v: &Value, key: &str) -> u64 {
    match v {
        Value::Object(m) => m
            .get(key)
            .and_then(Value::as_u64)
            .or_else(|| m.values().map(|v| find_count(v, key)).find(|&n| n > 0))
            .unwrap_or(0),
        Value::Array(a) => a.iter().map(|v| find_count(v, key)).find(|&n| n > 0).unwrap_or(0),
        _ => 0,
    }
}

/// At least [`MIN_NAMED_SHARE`] of the Java-thread samples of a JVM profiled from launch have
/// every Java frame named.
fn startup_is_named(jdk: u32) {
    let run = record_from_launch(jdk);
    let share = |n: u64| n as f64 / run.java_samples.max(1) as f64;
    eprintln!(
        "JDK {jdk}: {} Java samples, named {:.1}%, reaching a root {:.1}%, {} compiled frames freed before named",
        run.java_samples,
        100.0 * share(run.named_samples),
        100.0 * share(run.rooted_samples),
        run.freed_before_named
    );
    assert!(run.java_samples >= 100, "JDK {jdk}: only {} Java samples in 3 s at 250 Hz: {run:?}", run.java_samples);
    assert!(
        share(run.named_samples) >= MIN_NAMED_SHARE,
        "JDK {jdk}: {:.1}% of {} Java-thread samples have every Java frame named (want >= {:.0}%)\n{}",
        100.0 * share(run.named_samples),
        run.java_samples,
        100.0 * MIN_NAMED_SHARE,
        run.stderr
    );
}

#[test]
fn jdk11_startup_is_named_from_launch() {
    startup_is_named(11);
}

#[test]
fn jdk17_startup_is_named_from_launch() {
    startup_is_named(17);
}

#[test]
fn jdk21_startup_is_named_from_launch() {
    startup_is_named(21);
}

#[test]
fn jdk25_startup_is_named_from_launch() {
    startup_is_named(25);
}
