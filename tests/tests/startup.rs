//! Issue 23, item 3: a JVM profiled from its first Java code. `record -- java` on a fixture that
//! loads, runs, compiles, deoptimizes and unloads many classes in its first seconds
//! (StartupMany.java, its classes unloaded with their code by a full GC every half second), with
//! no JVM flags: the Java frames of its samples are named from the start, on JDK 11, 17, 21 and
//! 25. Run as root by `cargo xtask test`; each run prints what it
//! lost, by cause and cycle.
//!
//! The target is 98% of the Java-thread samples with every Java frame named, and this
//! test holds it ([`MIN_NAMED_SHARE`]). Measured on the 2-CPU test machine after the interpreter's
//! range was taken from its committed codelets (`jvm_symbols::hotspot::codecache::InterpreterCode`):
//! 98.6-99.9% in 16 runs of the four JDKs on an idle machine, 98.7-100% in 8 at load 8
//! (2026-11-29). The floor was 90% before (57-67% before the walk configuration was published
//! while the JVM starts, 91.7-99.4% at load 8-12 after). One cause of those losses, found since:
//! a JVM whose tables were read before it trimmed its interpreter's buffer had the stubs and
//! adapters the JVM then puts in the freed tail walked as interpreted frames (the demo: 27-74
//! unnamed `Interpreter` frames in 4 of 7 runs). It also bounds what is lost to freed code ([`MAX_FREED_SHARE`]:
//! 4-8% of the samples had an `[unknown JIT code]` frame before the last cycle when compiled
//! frames were named from their pc alone; 0-1.8% when the reports were read only between
//! cycles, 150-350 ms late after a JVM's first cycle; none in 12 runs since they are read while
//! a cycle is named too).

use std::collections::BTreeMap;
use std::time::Duration;

use joular_tests::java_stack::{is_java, UNKNOWN_JIT};
use joular_tests::*;
use serde_json::Value;

/// The share of Java-thread samples with every Java frame named that a run must reach.
const MIN_NAMED_SHARE: f64 = 0.98;

/// The share of Java-thread samples a compiled frame freed before anything named it may cost,
/// outside the JVM's last cycle (the bound, 0.5%).
const MAX_FREED_SHARE: f64 = 0.005;

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
    /// The samples not named, by why (see [`loss`]), and by cycle.
    lost: BTreeMap<String, u64>,
    /// Samples with an `[unknown JIT code]` frame outside the last cycle: code freed (or a pc
    /// in no blob) before anything named it.
    unknown_jit_before_exit: u64,
    /// Compiled frames of samples whose code was freed before anything named them, and those
    /// named by their method only (summary.json).
    freed_before_named: u64,
    named_by_method: u64,
    stderr: String,
}

impl Startup {
    fn share(&self, n: u64) -> f64 {
        n as f64 / self.java_samples.max(1) as f64
    }

    /// The samples lost, by cause, as a share of the Java samples.
    fn breakdown(&self) -> String {
        let mut by_cause: BTreeMap<&str, u64> = BTreeMap::new();
        for (key, n) in &self.lost {
            *by_cause.entry(key.split_once(' ').map_or(key.as_str(), |(_, cause)| cause)).or_default() += n;
        }
        let causes: Vec<String> =
            by_cause.iter().map(|(cause, n)| format!("{cause} {n} ({:.1}%)", 100.0 * self.share(*n))).collect();
        let cycles: Vec<String> = self.lost.iter().map(|(key, n)| format!("{key}: {n}")).collect();
        format!("lost: {}; by cycle: {}", causes.join(", "), cycles.join(", "))
    }
}

/// Why a stack with a Java frame is not named: cut (its truncation root says where), a
/// placeholder in a stack the sampler did not walk (in the first cycle, taken before the JVM's
/// walk configuration reached the kernel: no interpreted frame is named in such a stack), or a
/// placeholder in a walked one.
fn loss(frames: &[Value], truncated: bool, first_cycle: bool) -> String {
    let name = |f: &Value| f["name"].as_str().unwrap_or_default().to_owned();
    if truncated {
        return name(&frames[0]);
    }
    let placeholders: Vec<String> =
        PLACEHOLDERS.iter().filter(|p| frames.iter().any(|f| f["name"] == **p)).map(|p| p.to_string()).collect();
    if placeholders.is_empty() {
        return "no thread root".into();
    }
    let walked = frames.iter().any(|f| f["kind"] == "java_interpreted" || f["kind"] == "java_inlined");
    let unwalked_interpreter = first_cycle && !walked && placeholders == ["Interpreter"];
    match unwalked_interpreter {
        true => "not walked yet (Interpreter)".into(),
        false => placeholders.join("+"),
    }
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
    // `unload`: a full GC every half second frees compiled code of classes it unloads.
    args.extend(java_cmd_bare_on(&java_launcher(jdk), "StartupMany", &["3", "unload"], &[]));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = profile(&argv, Duration::from_secs(40));
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let mut run = Startup {
        java_samples: 0,
        named_samples: 0,
        rooted_samples: 0,
        lost: BTreeMap::new(),
        unknown_jit_before_exit: 0,
        freed_before_named: 0,
        named_by_method: 0,
        stderr,
    };
    let cycles = read_jsonl(&json);
    let last = cycles.len().saturating_sub(1);
    for (i, cycle) in cycles.iter().enumerate() {
        for thread in cycle["threads"].as_array().unwrap() {
            for stack in thread["stacks"].as_array().expect("threads[].stacks") {
                let frames = stack["frames"].as_array().unwrap();
                let placeholder = |f: &Value| PLACEHOLDERS.contains(&f["name"].as_str().unwrap_or_default());
                if !frames.iter().any(|f| is_java(f) || placeholder(f)) {
                    continue;
                }
                let samples = stack["samples"].as_u64().unwrap();
                run.java_samples += samples;
                if i < last && frames.iter().any(|f| f["name"] == UNKNOWN_JIT) {
                    run.unknown_jit_before_exit += samples;
                }
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
                } else {
                    let key = format!("c{} {}", cycle["cycle"], loss(frames, truncated, i == 0));
                    *run.lost.entry(key).or_default() += samples;
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
    run.named_by_method = find_count(&summary, "compiled_frames_named_by_method_only");
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
/// every Java frame named, and at most [`MAX_FREED_SHARE`] of them, before its last cycle, have
/// a compiled frame nothing named.
fn startup_is_named(jdk: u32) {
    let run = record_from_launch(jdk);
    eprintln!(
        "JDK {jdk}: {} Java samples, named {:.1}%, reaching a root {:.1}%; [unknown JIT code] before the last \
         cycle {}; compiled frames freed before named {}, named by their method only {}; {}",
        run.java_samples,
        100.0 * run.share(run.named_samples),
        100.0 * run.share(run.rooted_samples),
        run.unknown_jit_before_exit,
        run.freed_before_named,
        run.named_by_method,
        run.breakdown()
    );
    assert!(run.java_samples >= 100, "JDK {jdk}: only {} Java samples in 3 s at 250 Hz: {run:?}", run.java_samples);
    statistical::check(run.share(run.named_samples) >= MIN_NAMED_SHARE, || {
        format!(
            "JDK {jdk}: {:.1}% of {} Java-thread samples have every Java frame named (want >= {:.0}%); {}\n{}",
            100.0 * run.share(run.named_samples),
            run.java_samples,
            100.0 * MIN_NAMED_SHARE,
            run.breakdown(),
            run.stderr
        )
    });
    statistical::check(run.share(run.unknown_jit_before_exit) <= MAX_FREED_SHARE, || {
        format!(
            "JDK {jdk}: {} of {} Java-thread samples before the JVM's last cycle have an [unknown JIT code] frame \
             (want <= {:.1}%); {}\n{}",
            run.unknown_jit_before_exit,
            run.java_samples,
            100.0 * MAX_FREED_SHARE,
            run.breakdown(),
            run.stderr
        )
    });
}

#[test]
fn jdk11_startup_is_named_from_launch() {
    statistical::two_attempts("jdk11_startup_is_named_from_launch", || startup_is_named(11));
}

#[test]
fn jdk17_startup_is_named_from_launch() {
    statistical::two_attempts("jdk17_startup_is_named_from_launch", || startup_is_named(17));
}

#[test]
fn jdk21_startup_is_named_from_launch() {
    statistical::two_attempts("jdk21_startup_is_named_from_launch", || startup_is_named(21));
}

#[test]
fn jdk25_startup_is_named_from_launch() {
    statistical::two_attempts("jdk25_startup_is_named_from_launch", || startup_is_named(25));
}
