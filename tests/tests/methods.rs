//! Issue 5 acceptance: method energy from a real JVM under a fake 40 W powercap, the app
//! filter, and the result tree. Run as root by `cargo xtask test`.

use std::collections::HashMap;
use std::time::Duration;

use joular_tests::*;

const DONTINLINE: &str = "-XX:CompileCommand=dontinline,MethodSplit::*";

#[test]
fn method_energy_follows_the_known_cpu_split_and_sums_to_the_thread() {
    statistical::two_attempts("method split", method_split_attempt);
}

/// One attempt: the per-cycle sums are invariants (a miss fails at once); the split is a
/// statistical bar ([`statistical::check`]).
fn method_split_attempt() {
    let jvm = Jvm::start("MethodSplit", &["30"], &[DONTINLINE]);
    std::thread::sleep(Duration::from_secs(2));
    // `_dir` holds the result tree until the end of the test.
    // 400 Hz: ~2,000 samples of the splitter, so a share's sampling noise is ~1 pp against the
    // 5 pp bar (at 100 Hz it was ~2.2 pp, and a CI run once saw alpha at 51.8%).
    let ProfiledRun { cycles, results: run, dir: _dir, .. } =
        profile_outputs(jvm.pid(), &["--duration", "5", "--frequency", "400"]);
    let splitter = jvm.tid_of("splitter") as u64;

    let mut energy: HashMap<String, f64> = HashMap::new();
    for c in &cycles {
        // Per cycle: the methods of each thread sum to the thread's energy.
        let mut by_thread: HashMap<u64, f64> = HashMap::new();
        for m in c["methods"].as_array().expect("methods") {
            let e = m["energy_uj"].as_f64().unwrap();
            assert!(e >= 0.0);
            *by_thread.entry(m["tid"].as_u64().unwrap()).or_default() += e;
            if m["tid"].as_u64() == Some(splitter) {
                *energy.entry(m["method"].as_str().unwrap().to_string()).or_default() += e;
            }
        }
        for t in c["threads"].as_array().unwrap() {
            let te = t["energy_uj"].as_f64().unwrap();
            let me = by_thread.get(&t["tid"].as_u64().unwrap()).copied().unwrap_or(0.0);
            assert!(
                (te - me).abs() <= 1e-6 * te.max(1.0),
                "cycle {} tid {}: methods {me} != thread {te}",
                c["cycle"],
                t["tid"]
            );
        }
    }
    let picked: f64 = ["MethodSplit.alpha", "MethodSplit.beta", "MethodSplit.gamma"]
        .iter()
        .map(|m| energy.get(*m).copied().unwrap_or(0.0))
        .sum();
    assert!(picked > 0.0, "no energy in the expected methods: {energy:?}");
    for (m, want) in [("MethodSplit.alpha", 0.60), ("MethodSplit.beta", 0.30), ("MethodSplit.gamma", 0.10)] {
        let got = energy.get(m).copied().unwrap_or(0.0) / picked;
        statistical::check((got - want).abs() <= 0.05, || {
            format!("{m}: {:.1}% of the energy, expected {:.0}% ±5 pp", got * 100.0, want * 100.0)
        });
    }

    // The JoularJX tree holds the same totals (joules), and the end-of-run outputs exist.
    let totals = csv_rows(&run.join(format!("all/total/methods/joularJX-{}-all-methods-energy.csv", jvm.pid())));
    let alpha_j = totals.get("MethodSplit.alpha").copied().expect("alpha in the total CSV");
    assert!(
        (alpha_j - energy["MethodSplit.alpha"] / 1e6).abs() <= 0.01 * alpha_j.max(1e-3),
        "CSV {alpha_j} J vs JSON {} J",
        energy["MethodSplit.alpha"] / 1e6
    );
    for f in ["flamegraph-all.svg", "stacks-all.folded", "profile.pb.gz", "summary.json"] {
        assert!(run.join(f).exists(), "missing {f}");
    }
    let svg = std::fs::read_to_string(run.join("flamegraph-all.svg")).unwrap();
    assert!(svg.contains("MethodSplit.alpha"), "the hot method is not in the flame graph");
}

#[test]
fn the_app_filter_charges_jdk_work_to_the_app_method_that_caused_it() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("results");
    let mut args: Vec<String> = ["record", "--filter", "EnergyDemo", "--output", out_dir.to_str().unwrap(), "--"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(java_cmd("EnergyDemo", &["5"], &[]));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = profile(&argv, Duration::from_secs(90));
    assert_success(&out);
    let run = std::fs::read_dir(&out_dir).unwrap().flatten().next().expect("a result directory").path();
    let pid = run.file_name().unwrap().to_string_lossy().split('-').next().unwrap().to_string();
    let all = csv_rows(&run.join(format!("all/total/methods/joularJX-{pid}-all-methods-energy.csv")));
    let app = csv_rows(&run.join(format!("app/total/methods/joularJX-{pid}-filtered-methods-energy.csv")));
    let jdk_in_all: f64 = all.iter().filter(|(k, _)| k.starts_with("java.math.BigInteger")).map(|(_, v)| v).sum();
    assert!(jdk_in_all > 0.0, "the demo's BigInteger work does not show in the all view: {all:?}");
    assert!(app.keys().all(|k| !k.starts_with("java.")), "JDK methods in the app view: {app:?}");
    let factorial_app = app.get("EnergyDemo.factorial").copied().unwrap_or(0.0);
    let factorial_all = all.get("EnergyDemo.factorial").copied().unwrap_or(0.0);
    // factorial's own frames plus the BigInteger work it calls.
    assert!(
        factorial_app >= factorial_all + 0.5 * jdk_in_all,
        "factorial: app {factorial_app} J, own {factorial_all} J, BigInteger {jdk_in_all} J"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("EnergyDemo.factorial") && stdout.contains("flame graph:"), "{stdout}");

    // Issues 12 and 15: "all" charges the nearest Java frame, so no native symbol (libc,
    // libjvm) is a method; the JoularJX files hold methods only, and what the JVM's own threads
    // spent without Java code (the JIT compiler compiles from the first second) is in
    // summary.json's buckets, which with the CSV rows make the process's energy.
    for method in all.keys() {
        assert!(
            method.contains('.') && !method.contains("::") && !method.starts_with('[') && !method.starts_with('('),
            "{method:?} is not a Java method: {all:?}"
        );
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let jit_j = summary["jvm"]["jit_compiler"]["energy_uj"].as_f64().expect("summary.json jvm.jit_compiler") / 1e6;
    let jit_bucket_j =
        summary["unattributed"]["all"]["[JIT compiler]"]["energy_uj"].as_f64().expect("unattributed [JIT compiler]")
            / 1e6;
    assert!(jit_j > 0.0 && (jit_j - jit_bucket_j).abs() <= 1e-9, "JIT compiler: {jit_j} J, bucket {jit_bucket_j} J");
    let unattributed_j: f64 = summary["unattributed"]["all"]
        .as_object()
        .unwrap()
        .values()
        .map(|b| b["energy_uj"].as_f64().unwrap())
        .sum::<f64>()
        / 1e6;
    let csv_j: f64 = all.values().sum();
    let process_j = summary["energy_uj"].as_f64().unwrap() / 1e6;
    assert!(
        (csv_j + unattributed_j - process_j).abs() <= 1e-4 * all.len() as f64,
        "CSV {csv_j} J + unattributed {unattributed_j} J != {process_j} J"
    );
    assert!(stdout.contains("JVM outside Java code: JIT compiler"), "{stdout}");
}
