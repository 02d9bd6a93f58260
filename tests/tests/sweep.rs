//! Issue 27 item 1: `joular-ebpf sweep` on real runs.
//! - SweepWork's three methods cost n, n² and 2ⁿ units; swept over n = 1..6, 5 runs each, on a
//!   fake 40 W powercap, each gets its family's model, and the three carry most of the
//!   process's growth.
//! - A command that fails for one value: that run is reported as failed, the others complete,
//!   and the sweep exits 1; a malformed --param exits 2 before anything runs.
//!
//! Run as root by `cargo xtask test sweep`.

use std::path::Path;
use std::time::{Duration, Instant};

use joular_tests::*;
use serde_json::Value;

/// `sweep` with `args`: its exit code, its `sweep.json` (when it wrote one) and its output.
fn sweep(args: &[&str], out: &Path, timeout: Duration) -> (i32, Value, String) {
    let output = profile(&[&["sweep"], args].concat(), timeout);
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let json =
        std::fs::read(out.join("sweep.json")).ok().map_or(Value::Null, |bytes| serde_json::from_slice(&bytes).unwrap());
    (output.status.code().expect("exited"), json, text)
}

fn model<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["sweeps"][0]["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no model of {name}: {json:#}"))
}

#[test]
fn sweep_gives_each_method_a_model_of_its_true_growth() {
    statistical::two_attempts("sweep models", sweep_models_attempt);
}

/// One attempt: the family chosen for each method is a statistical bar (model selection on
/// 30 measured runs); the run counts and outputs are not.
///
/// Five runs per value, not three: this VM's CPU runs a 140-ms loop more than 20% slower (up
/// to 1.7 times) in about one window in five, whatever the JVM does (23 of 108: a loop timed
/// three times in each of 12 JVMs; a spinner on the other CPU changed nothing), and a
/// method's energy follows its CPU time. At
/// three runs, one such run at n = 1 or 2 let n·log n beat the line or a cubic beat 2ⁿ: both
/// attempts failed so in CI at 8e6ef36. Simulated with `fit::choose` on those curves, ±8%
/// noise and 6% of runs 1-3.5 J high, all three families right: 72% of attempts at three
/// runs, 82% at five. Measured: 4 of 4 sweeps right at the first attempt (6 of 6 at three runs
/// on the quiet machine). `-Xbatch` (compiles finished before the measured work) was tried
/// and made it worse: 3 of 10 attempts.
fn sweep_models_attempt() {
    let rapl = FakePowercap::start(40.0);
    let tmp = tempfile::tempdir().unwrap();
    let classes = java_dir();
    assert!(
        classes.join("SweepWork.class").is_file(),
        "{} has no SweepWork.class: run `cargo xtask test`",
        classes.display()
    );
    let out = tmp.path().join("sweep");
    let (sysfs, out_arg, cp) = (
        format!("--record-arg=--sysfs-root={}", rapl.sysfs_root()),
        out.display().to_string(),
        classes.display().to_string(),
    );
    let started = Instant::now();
    let (code, json, text) = sweep(
        &[
            "--param",
            "n=1,2,3,4,5,6",
            "--runs",
            "5",
            &sysfs,
            "--record-arg=--interval=0.25",
            // 499 Hz as the diff test: a method's share within a few % in a short run.
            "--record-arg=--frequency=499",
            "-o",
            &out_arg,
            "--",
            "java",
            "-XX:+PreserveFramePointer",
            "-XX:CompileCommand=quiet",
            "-XX:CompileCommand=dontinline,SweepWork::*",
            "-cp",
            &cp,
            "SweepWork",
            "{n}",
        ],
        &out,
        // ~98 s here (30 runs and 29 pauses).
        Duration::from_secs(360),
    );
    eprintln!("sweep took {:.1} s:\n{text}", started.elapsed().as_secs_f64());
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("run 30 of 30 (n=6): "), "a progress line per run:\n{text}");
    let sweep0 = &json["sweeps"][0];
    assert_eq!(sweep0["param"], "n");
    assert_eq!(sweep0["process"]["points"], 30, "{text}");
    // Each method's family itself. Each method's energy has a floor (0.2-0.5 J at 40 W);
    // before every family had one, a power law without it bent its exponent under the degree
    // (n² as a·x^1.90 in 2 of 5 quiet sweeps, n as a·x^0.89 once in CI). With it: 9 of 9
    // methods right in 3 quiet sweeps (`fit.rs` gives the noise figures).
    //
    // The line may come out as n·log n: over n = 1..6 the two differ by less than this VM's
    // noise. n·log n's best fit misses a line by 1.2 J² per value at the line's slope here
    // (2.4 J a unit), 5.9 J² over 5 runs, where the runs' own squared error is 20-30 J²; and
    // the loop's speed wanders by window (1.93-4.33 ns a trip, one loop timed 24 times).
    // Six quiet sweeps of 2026-11-29 got n² and 2ⁿ right 6 of 6 times and the line 5 of 6
    // (n·log n once); in CI at 11f3ab8 both attempts missed (the first read n·log n, the line
    // 5.4 AICc behind).
    // (A variant running each method on a thread of its own read n·log n in 2 of 2.)
    // Weighting each run by its relative error was tried: better on simulated noise, worse on
    // five real sweeps (2ⁿ read as a cubic twice), so the fit stays plain least squares.
    // What must not happen is a line read as n² or worse.
    let same_family = |m: &Value, families: &[&str]| families.iter().any(|f| m["model"]["best"]["family"] == *f);
    for (method, families) in [
        ("SweepWork.linear", &["linear", "n_log_n"][..]),
        ("SweepWork.quadratic", &["quadratic"][..]),
        ("SweepWork.exponential", &["exponential"][..]),
    ] {
        let m = model(&json, method);
        statistical::check(same_family(m, families), || format!("{method}: not {families:?}: {m:#}\n{text}"));
        // R² is a statistic of the runs too (the line's was 0.96-0.99 on a quiet machine).
        let r2 = m["model"]["best"]["r2"].as_f64().unwrap();
        statistical::check(r2 > 0.9, || format!("{method}: R² {r2}: {m:#}\n{text}"));
        assert!(m["model"]["runner_up"]["family"].is_string(), "{method}: a runner-up: {m:#}");
    }
    // 2ⁿ: the base is 2 within the runs' noise.
    let base = model(&json, "SweepWork.exponential")["model"]["best"]["b"].as_f64().unwrap();
    assert!((1.6..=2.5).contains(&base), "exponential's base {base}, expected about 2\n{text}");
    // The JVM's start costs the same at every n: the three methods carry the growth.
    let shares: f64 = ["SweepWork.linear", "SweepWork.quadratic", "SweepWork.exponential"]
        .iter()
        .map(|m| model(&json, m)["share_of_increase_pct"].as_f64().unwrap())
        .sum();
    assert!((75.0..=115.0).contains(&shares), "the three methods carry {shares}% of the process's growth\n{text}");
    let ranked: Vec<&str> = sweep0["methods"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    let linear_rank = ranked.iter().position(|m| *m == "SweepWork.linear").unwrap();
    assert!(linear_rank >= 2, "linear grows least of the three, ranked {ranked:?}");
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().filter(|l| l.contains(",ok,[process],")).count(), 30, "{csv}");
    let html = std::fs::read_to_string(out.join("sweep.html")).unwrap();
    assert!(
        html.contains("<h3>SweepWork.exponential</h3>") && html.matches("<svg").count() >= 4,
        "a chart per top method"
    );
}

#[test]
fn sweep_reports_a_value_whose_command_fails_and_the_other_runs_complete() {
    let rapl = FakePowercap::start(40.0);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("sweep");
    let (sysfs, out_arg) = (format!("--record-arg=--sysfs-root={}", rapl.sysfs_root()), out.display().to_string());
    // Some work, then exit 3 for n = 3 only.
    let script = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; [ {n} -ne 3 ] || exit 3";
    let args = ["--param", "n=1,2,3,4,5", "--runs", "1", &sysfs, "-o", &out_arg, "--", "sh", "-c", script];
    let (code, json, text) = sweep(&args, &out, Duration::from_secs(120));
    assert_eq!(code, 1, "a failed run makes the sweep exit 1:\n{text}");
    assert!(text.contains("run 3 of 5 (n=3): FAILED (exit status 3, see "), "{text}");
    for (i, n) in [(1, 1), (2, 2), (4, 4), (5, 5)] {
        let line = text.lines().find(|l| l.contains(&format!("run {i} of 5 (n={n}): "))).unwrap_or("");
        assert!(line.contains(" J in "), "run {i} completed: {line}\n{text}");
    }
    assert_eq!(json["failed_runs"].as_array().unwrap().len(), 1, "{json:#}");
    assert_eq!(json["failed_runs"][0]["setting"], "n=3");
    assert_eq!(json["sweeps"][0]["process"]["points"], 4, "the four other runs are fitted");
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert!(csv.lines().any(|l| l.starts_with("n,3,1,failed,,,\"exit status 3, see ")), "{csv}");
    assert_eq!(csv.lines().filter(|l| l.contains(",ok,[process],")).count(), 4, "{csv}");

    // Bad input: exit 2, naming the flag and the fix, before anything runs.
    let bad = tmp.path().join("bad");
    let bad_arg = bad.display().to_string();
    let (code, _, text) =
        sweep(&["--param", "n=1,two", "-o", &bad_arg, "--", "sh", "-c", "exit {n}"], &bad, Duration::from_secs(30));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--param n=1,two: `two` is not a number"), "{text}");
    let (code, _, text) =
        sweep(&["--param", "n=1,2", "-o", &bad_arg, "--", "sh", "-c", "exit 0"], &bad, Duration::from_secs(30));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("the command has no {n}"), "{text}");
    assert!(!bad.exists(), "bad input runs nothing and writes nothing");
}

#[test]
fn sweep_stops_on_ctrl_c_after_the_run_under_way_and_writes_what_was_measured() {
    let rapl = FakePowercap::start(40.0);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("sweep");
    let (sysfs, out_arg) = (format!("--record-arg=--sysfs-root={}", rapl.sysfs_root()), out.display().to_string());
    let script = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 1; : {n}";
    let child = std::process::Command::new(bin())
        .args([
            "sweep",
            "--param",
            "n=1,2,3,4,5,6,7,8",
            "--runs",
            "1",
            &sysfs,
            "-o",
            &out_arg,
            "--",
            "sh",
            "-c",
            script,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Each run takes over a second: the signal comes while the first or second is under way,
    // and reaches only the sweep (a terminal's Ctrl-C would reach its `record` too).
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill has no memory effects; the pid is our child's, not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let output = wait_bounded(child, Duration::from_secs(60));
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(130), "{text}");
    assert!(text.contains("joular-ebpf: stopped after "), "{text}");
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap_or_else(|e| panic!("no sweep.csv: {e}\n{text}"));
    let done = csv.lines().filter(|l| l.contains(",ok,[process],")).count();
    assert!((1..=3).contains(&done), "the run under way completes, no run starts after: {done} runs\n{csv}\n{text}");
}

/// `--warmup` runs each value's command unprofiled before its first measured run, and
/// `--grid` measures every combination of two parameters where the default plan varies one at
/// a time around the others' first values (Jalen Unit's strategy). The command logs each
/// invocation, so the test sees the runs the sweep made, warm-ups included.
#[test]
fn sweep_warms_up_unprofiled_and_grids_every_combination() {
    let rapl = FakePowercap::start(40.0);
    let tmp = tempfile::tempdir().unwrap();
    let sysfs = format!("--record-arg=--sysfs-root={}", rapl.sysfs_root());
    let log = tmp.path().join("invocations.log");
    let script = format!("echo {{a}},{{b}} >> {}; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done", log.display());
    let invocations = || -> Vec<String> {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        std::fs::remove_file(&log).ok();
        text.lines().map(str::to_owned).collect()
    };

    // `sweep` over a in {1, 2} and b in {10, 20, 30}, one run per point, with `plan` (the
    // --warmup or --grid flags), into `name`.
    let two_params = |name: &str, plan: &[&str]| {
        let out = tmp.path().join(name);
        let out_arg = out.display().to_string();
        let mut args = vec!["--param", "a=1,2", "--param", "b=10,20,30", "--runs", "1", &sysfs, "-o", &out_arg];
        args.splice(6..6, plan.iter().copied());
        args.extend(["--", "sh", "-c", &script]);
        let (code, json, text) = sweep(&args, &out, Duration::from_secs(180));
        assert_eq!(code, 0, "{text}");
        (out, json, text)
    };

    // One at a time around the defaults (a=1, b=10), each value's command once unprofiled,
    // then once profiled.
    let (out, json, text) = two_params("one-at-a-time", &["--warmup", "1"]);
    let seen = invocations();
    // Five points: (1,10) (2,10) for a, (1,10) (1,20) (1,30) for b; each warmed up just before
    // its measured run.
    let points = ["1,10", "2,10", "1,10", "1,20", "1,30"];
    let expected: Vec<String> = points.iter().flat_map(|p| [p.to_string(), p.to_string()]).collect();
    assert_eq!(seen, expected, "warm-up then run, per point, one parameter at a time\n{text}");
    assert!(text.contains("run 5 of 5 (a=1 b=30): "), "progress counts measured runs only:\n{text}");
    assert_eq!(json["warmup_runs"], 1, "{json:#}");
    assert_eq!(json["runs"], 5, "{json:#}");
    assert_eq!(json["grid"], false, "{json:#}");
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().filter(|l| l.contains(",ok,[process],")).count(), 5, "warm-ups are not measured:\n{csv}");

    // The grid: every combination, 2 x 3, no warm-up.
    let (out, json, text) = two_params("grid", &["--grid"]);
    let mut seen = invocations();
    seen.sort();
    let mut all: Vec<String> = ["1", "2"].iter().flat_map(|a| ["10", "20", "30"].map(|b| format!("{a},{b}"))).collect();
    all.sort();
    assert_eq!(seen, all, "every combination once\n{text}");
    assert_eq!(json["grid"], true, "{json:#}");
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().filter(|l| l.contains(",ok,[process],")).count(), 6, "{csv}");
    // A model per parameter, along its own axis with the other at its default.
    let sweeps = json["sweeps"].as_array().expect("sweeps");
    assert_eq!(sweeps.len(), 2, "{json:#}");
    for (s, param, points) in [(&sweeps[0], "a", 2), (&sweeps[1], "b", 3)] {
        assert_eq!(s["param"], param, "{s:#}");
        assert_eq!(s["process"]["points"], points, "{param}: {s:#}");
    }
}
