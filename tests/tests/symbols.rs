//! Issue 4 acceptance: Java frames from a real JVM, method shares against a known split and
//! against JFR, and a JVM without frame pointers. Run as root by `cargo xtask test`.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use joular_tests::*;

const DONTINLINE: &str = "-XX:CompileCommand=dontinline,MethodSplit::*";
const EXPECTED: [(&str, f64); 3] =
    [("MethodSplit.alpha", 0.60), ("MethodSplit.beta", 0.30), ("MethodSplit.gamma", 0.10)];

/// Leaf-method sample shares of the `splitter` thread among alpha/beta/gamma, from the
/// `threads[].stacks` of the JSON report (the topmost non-kernel frame of each stack).
fn profiler_shares(cycles: &[serde_json::Value], tid: u64) -> HashMap<String, f64> {
    let mut counts: HashMap<String, f64> = HashMap::new();
    for c in cycles {
        for t in c["threads"].as_array().unwrap().iter().filter(|t| t["tid"] == tid) {
            for s in t["stacks"].as_array().expect("threads[].stacks") {
                let frames = s["frames"].as_array().unwrap();
                // Kernel-only stacks (user stack unavailable) have no method to compare.
                let Some(leaf) = frames.iter().rev().find(|f| f["kind"] != "kernel") else { continue };
                *counts.entry(leaf["name"].as_str().unwrap().to_string()).or_default() +=
                    s["samples"].as_f64().unwrap();
            }
        }
    }
    shares_of_expected(counts, |name| name.to_string())
}

/// Keeps the three expected methods (matched by short name inside the full name) and
/// normalises their counts to shares.
fn shares_of_expected(counts: HashMap<String, f64>, short: impl Fn(&str) -> String) -> HashMap<String, f64> {
    let mut picked: HashMap<String, f64> = HashMap::new();
    for (name, n) in counts {
        let short = short(&name);
        if let Some((m, _)) = EXPECTED.iter().find(|(m, _)| short.contains(&format!("{m}("))) {
            *picked.entry(m.to_string()).or_default() += n;
        }
    }
    let total: f64 = picked.values().sum();
    assert!(total > 100.0, "too few samples in the expected methods: {picked:?}");
    picked.into_iter().map(|(k, v)| (k, v / total)).collect()
}

#[test]
fn java_methods_appear_as_leaves_with_their_known_cpu_split_and_agree_with_jfr() {
    statistical::two_attempts("split vs JFR", split_against_jfr_attempt);
}

/// One attempt: both splits are statistical bars (shares of ~800 and ~1,000 samples).
fn split_against_jfr_attempt() {
    let jvm = Jvm::start("MethodSplit", &["30"], &[DONTINLINE]);
    // Let C2 compile the three methods so samples land in the JIT code the perf map covers.
    std::thread::sleep(Duration::from_secs(2));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("s.jsonl");
    let pid = jvm.pid().to_string();
    let out = profile(&["--pid", &pid, "--duration", "8", "--json", json.to_str().unwrap()], Duration::from_secs(90));
    assert_success(&out);
    let cycles = read_jsonl(&json);
    let kinds: Vec<String> = cycles
        .iter()
        .flat_map(|c| c["threads"].as_array().unwrap().clone())
        .flat_map(|t| t["stacks"].as_array().unwrap().clone())
        .flat_map(|s| s["frames"].as_array().unwrap().clone())
        .map(|f| f["kind"].as_str().unwrap().to_string())
        .collect();
    assert!(kinds.iter().any(|k| k == "java_jit"), "no JIT frame resolved: {:?}", &kinds[..kinds.len().min(20)]);

    let ours = profiler_shares(&cycles, jvm.tid_of("splitter") as u64);
    for (m, want) in EXPECTED {
        let got = ours.get(m).copied().unwrap_or(0.0);
        statistical::check((got - want).abs() <= 0.05, || {
            format!("{m}: {:.1}% of samples, expected {:.0}% ±5 pp ({ours:?})", got * 100.0, want * 100.0)
        });
    }

    // JFR's execution samples of a comparable run: recorded after the same 2 s of warm-up, and
    // long enough (~1,000 samples) that its own sampling noise stays well inside 5 pp.
    let jfr_file = dir.path().join("split.jfr");
    let rec =
        format!("-XX:StartFlightRecording=settings=profile,delay=2s,duration=15s,filename={}", jfr_file.display());
    let argv = java_cmd("MethodSplit", &["18"], &[DONTINLINE, &rec]);
    let st = Command::new(&argv[0]).args(&argv[1..]).stdout(std::process::Stdio::null()).status().unwrap();
    assert!(st.success());
    let printed =
        Command::new("jfr").args(["print", "--events", "jdk.ExecutionSample"]).arg(&jfr_file).output().unwrap();
    assert!(printed.status.success(), "jfr print failed");
    let text = String::from_utf8_lossy(&printed.stdout);
    let mut counts: HashMap<String, f64> = HashMap::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.trim_start().starts_with("stackTrace = [") {
            if let Some(top) = lines.next() {
                *counts.entry(top.trim().to_string()).or_default() += 1.0;
            }
        }
    }
    let jfr = shares_of_expected(counts, |frame| frame.to_string());
    for (m, _) in EXPECTED {
        let (a, b) = (ours.get(m).copied().unwrap_or(0.0), jfr.get(m).copied().unwrap_or(0.0));
        statistical::check((a - b).abs() <= 0.05, || {
            format!("{m}: profiler {:.1}% vs JFR {:.1}%", a * 100.0, b * 100.0)
        });
    }
}

/// A JVM without -XX:+PreserveFramePointer is walked by the HotSpot unwinder: nobody is told
/// to add the flag, the end-of-run line says which unwinder ran, and nothing crashes. Where
/// the unwinder cannot run (`--java-symbols perf-map` reads no HotSpot tables), the flag to
/// add is said once, with the reason.
#[test]
fn a_jvm_without_frame_pointers_is_unwound_or_gets_the_warning_with_the_reason() {
    let argv = java_cmd("DutyCycle", &["20", "1.0", "0.3"], &[]);
    // Same fixture, minus -XX:+PreserveFramePointer.
    let argv: Vec<&String> = argv.iter().filter(|a| !a.contains("PreserveFramePointer")).collect();
    let mut child = Command::new(argv[0]).args(&argv[1..]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut line).unwrap();
    let pid = child.id().to_string();
    let unwound = profile(&["--pid", &pid, "--duration", "2"], Duration::from_secs(60));
    let perf_map = profile(&["--pid", &pid, "--duration", "2", "--java-symbols", "perf-map"], Duration::from_secs(60));
    let _ = child.kill();
    let _ = child.wait();
    assert_success(&unwound);
    assert_success(&perf_map);
    let err = String::from_utf8_lossy(&unwound.stderr);
    assert_eq!(err.matches("-XX:+PreserveFramePointer").count(), 0, "flag advice with the HotSpot unwinder: {err}");
    assert!(err.contains(&format!("JVM {pid}: Java stacks walked by the HotSpot unwinder (compiled frames stepped by their code blobs' frame sizes")), "{err}");
    let err = String::from_utf8_lossy(&perf_map.stderr);
    assert_eq!(err.matches("restart it with -XX:+PreserveFramePointer").count(), 1, "the flag to add, once: {err}");
    assert!(err.contains("--java-symbols perf-map reads no HotSpot tables"), "no reason given: {err}");
}

/// Kernel frames are named by the kernel's own symbol table (an eBPF `bpf_snprintf("%ps")`
/// per new address), not by reading /proc/kallsyms, and the names are those kallsyms gives:
/// a process that spends its time copying zeroes in the kernel shows its system-call path.
#[test]
fn kernel_frames_are_named_by_the_kernels_symbol_table_with_kallsyms_names() {
    let mut dd = Command::new("dd")
        .args(["if=/dev/zero", "of=/dev/null", "bs=64k", "count=100000000"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("k.jsonl");
    let pid = dd.id().to_string();
    let out = {
        let child = Command::new(bin())
            .args([
                "--pid",
                &pid,
                "--duration",
                "3",
                "--json",
                json.to_str().unwrap(),
                "--output",
                dir.path().join("r").to_str().unwrap(),
            ])
            .env("RUST_LOG", "joular_user::symbols=info")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_bounded(child, Duration::from_secs(60))
    };
    let _ = dd.kill();
    let _ = dd.wait();
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("kernel frames are named by the kernel's own symbol table"), "{err}");
    assert!(!err.contains("kernel frames are named through"), "kallsyms was read: {err}");

    let functions: std::collections::HashSet<String> = std::fs::read_to_string("/proc/kallsyms")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, kind, name) = (f.next()?, f.next()?, f.next()?);
            matches!(kind, "T" | "t" | "W" | "w").then(|| name.to_string())
        })
        .collect();
    let mut kernel_samples = 0.0;
    let mut named_samples = 0.0;
    let mut names = std::collections::BTreeSet::new();
    for c in read_jsonl(&json) {
        for t in c["threads"].as_array().unwrap() {
            for s in t["stacks"].as_array().unwrap() {
                let frames = s["frames"].as_array().unwrap();
                let kernel: Vec<&str> =
                    frames.iter().filter(|f| f["kind"] == "kernel").map(|f| f["name"].as_str().unwrap()).collect();
                if kernel.is_empty() {
                    continue;
                }
                let n = s["samples"].as_f64().unwrap();
                kernel_samples += n;
                if kernel.iter().all(|name| functions.contains(*name)) {
                    named_samples += n;
                }
                names.extend(kernel.iter().map(|s| s.to_string()));
            }
        }
    }
    assert!(
        kernel_samples >= 50.0,
        "dd should spend most of its time in the kernel: {kernel_samples} samples, {names:?}"
    );
    assert!(
        named_samples >= 0.95 * kernel_samples,
        "{named_samples} of {kernel_samples} kernel stacks fully named as in kallsyms: {names:?}"
    );
    assert!(names.iter().any(|n| n.contains("read")), "no read path among {names:?}");
}
