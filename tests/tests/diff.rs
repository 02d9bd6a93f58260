//! Issue 27 item 2: `joular-ebpf diff` on real runs. DiffWork is built in two versions
//! (tests/java/diff-base, diff-new) that differ in one method: NEW's `hash` does twice the work.
//! Each version is profiled with `record` on a fake 40 W powercap; then
//! - three runs against three: `diff` flags `hash` and only it, and `--fail-if-increase 20`
//!   exits 1 on it (with `20:DiffWork.render`, 0);
//! - one run against one (the bootstrap over cycles): `hash` is flagged;
//! - two sets of runs of the same version flag nothing in at least 9 of 10 trials: ten
//!   independent trials, each three fresh BASE runs against three others (60 runs).
//!
//! Run as root by `cargo xtask test diff`.

use std::path::Path;
use std::time::Duration;

use joular_tests::*;
use serde_json::Value;

const ROUNDS: &str = "3000";
/// Independent BASE-against-BASE trials, three runs a side.
const TRIALS: usize = 10;

/// Records one run of `version` into `out` (its own `--output`).
fn record(version: &str, out: &Path, rapl: &FakePowercap) {
    let classes = java_dir().join(format!("diff-{version}"));
    assert!(
        classes.join("DiffWork.class").is_file(),
        "{} has no DiffWork.class: run `cargo xtask test`",
        classes.display()
    );
    let (root, out_arg, cp) = (rapl.sysfs_root(), out.display().to_string(), classes.display().to_string());
    let args = [
        "record",
        "--sysfs-root",
        &root,
        "--interval",
        "0.25",
        // A round of DiffWork's three loops takes about 1 ms: at 100 Hz a run's method shares
        // came out 20-40% apart (few samples, and a period near a multiple of the round's);
        // at 499 Hz within a few %.
        "--frequency",
        "499",
        "--output",
        &out_arg,
        "--",
        "java",
        "-XX:+PreserveFramePointer",
        "-XX:CompileCommand=quiet",
        "-XX:CompileCommand=dontinline,DiffWork::*",
        "-cp",
        &cp,
        "DiffWork",
        ROUNDS,
    ];
    assert_success(&profile(&args, Duration::from_secs(120)));
}

/// `diff` with `args`: its exit code, its `diff.json` (when it wrote one) and its output.
fn diff(args: &[&str]) -> (i32, Value, String) {
    let out = profile(&[&["diff"], args].concat(), Duration::from_secs(60));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let json = args
        .iter()
        .position(|a| *a == "-o")
        .and_then(|i| std::fs::read(Path::new(args[i + 1]).join("diff.json")).ok())
        .map_or(Value::Null, |bytes| serde_json::from_slice(&bytes).unwrap());
    (out.status.code().expect("exited"), json, text)
}

/// Methods whose change is not within its uncertainty.
fn flagged(json: &Value) -> Vec<String> {
    json["methods"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["change"] != "same")
        .map(|m| m["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Copies a run's result tree (files and directories).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn diff_flags_the_method_that_does_twice_the_work() {
    statistical::two_attempts("diff flags hash", flags_hash_attempt);
}

#[test]
fn diff_flags_nothing_between_sets_of_runs_of_one_version() {
    statistical::two_attempts("diff of one version", same_version_attempt);
}

/// Three BASE runs against three NEW ones, then one against one. Whether a change is flagged
/// depends on the runs' spread: a statistical bar, measured once more on fresh runs if missed.
fn flags_hash_attempt() {
    let rapl = FakePowercap::start(40.0);
    let tmp = tempfile::tempdir().unwrap();
    let run_dir = |version: &str, i: usize| tmp.path().join(version).join(format!("run-{i}"));
    for i in 0..4 {
        record("base", &run_dir("base", i), &rapl);
    }
    for i in 0..3 {
        record("new", &run_dir("new", i), &rapl);
    }
    let p = |s: &str| tmp.path().join(s).display().to_string();

    // Three runs against three, as quoted globs.
    let (base, new, out) = (p("base3/run-*"), p("new/run-*"), p("out"));
    for i in 0..3 {
        copy_dir(&run_dir("base", i), &tmp.path().join("base3").join(format!("run-{i}")));
    }
    let (code, json, text) = diff(&[&base, &new, "--fail-if-increase", "20", "-o", &out]);
    assert_eq!(json["base_spread"], "runs", "{text}");
    statistical::check(code == 1, || format!("--fail-if-increase 20 did not trip on hash (exit {code}):\n{text}"));
    statistical::check(flagged(&json) == ["DiffWork.hash"], || format!("not hash alone flagged:\n{text}"));
    let pct = json["methods"][0]["delta_pct"].as_f64().unwrap();
    statistical::check((60.0..=140.0).contains(&pct), || format!("hash rose {pct}%, expected about 100%:\n{text}"));
    assert!(text.contains("--fail-if-increase 20: DiffWork.hash rose"), "{text}");
    let (code, _, text) = diff(&[&base, &new, "--fail-if-increase", "20:DiffWork.render", "--no-files"]);
    statistical::check(code == 0, || format!("render did not change, exit {code}:\n{text}"));

    // One run against one: the uncertainty comes from the cycles.
    let single = p("single");
    let (_, json, text) = diff(&[&p("base/run-3"), &p("new/run-0"), "-o", &single]);
    eprintln!("one run against one:\n{text}");
    assert_eq!(json["base_spread"], "cycles", "{text}");
    statistical::check(flagged(&json).contains(&"DiffWork.hash".to_owned()), || format!("one against one:\n{text}"));
}

/// Two sets of BASE runs, ten times: each trial its own six runs, three against three (no run
/// in two trials, so the trials are independent). At most one trial may flag a change.
fn same_version_attempt() {
    let rapl = FakePowercap::start(40.0);
    let tmp = tempfile::tempdir().unwrap();
    let run_dir = |i: usize| tmp.path().join("base").join(format!("run-{i}"));
    for i in 0..TRIALS * 6 {
        record("base", &run_dir(i), &rapl);
    }
    let mut noisy = Vec::new();
    for trial in 0..TRIALS {
        let sets = tmp.path().join(format!("trial-{trial}"));
        for i in trial * 6..trial * 6 + 6 {
            let side = if i < trial * 6 + 3 { "a" } else { "b" };
            copy_dir(&run_dir(i), &sets.join(side).join(format!("run-{i}")));
        }
        let out = sets.join("out").display().to_string();
        let (a, b) = (format!("{}/a/run-*", sets.display()), format!("{}/b/run-*", sets.display()));
        let (code, json, text) = diff(&[&a, &b, "--fail-if-increase", "0", "-o", &out]);
        if !flagged(&json).is_empty() || json["total"]["change"] != "same" || code != 0 {
            noisy.push(text);
        }
    }
    eprintln!("{} of {TRIALS} trials of BASE against BASE flagged a change", noisy.len());
    statistical::check(noisy.len() <= 1, || {
        format!("{} of {TRIALS} trials flagged a change:\n{}", noisy.len(), noisy.join("\n"))
    });
}
