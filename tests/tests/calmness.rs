//! Issue 26 item 4: calmness on a fake cpufreq tree (a thread moves CPU 0 through three
//! frequencies, the others stay at one), with the real profiler:
//! - each run writes frequencies.csv (every CPU, every cycle, only frequencies the tree held)
//!   and summary.json says it did;
//! - `calmness RUN_A RUN_B` writes calmness.json/html whose distributions are shares (each sums
//!   to 1) over bins spanning the pooled frequencies, and a run against itself has r = 1;
//! - `calmness -- CMD` runs CMD observed only, then profiled, and compares them;
//! - without cpufreq: summary.json says why, and calmness exits 2 naming the run (or, for
//!   `-- CMD`, before running anything).
//!
//! Run as root by `cargo xtask test calmness`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use joular_tests::*;
use serde_json::Value;

/// CPU 0 cycles through these every `STEP`; the other CPUs stay at `OTHERS_KHZ`. The pattern's
/// period (390 ms) is no divisor of the 500 ms cycles, so successive cycles read CPU 0 at
/// different points of it and its distribution is not one bin.
const CPU0_KHZ: [u64; 3] = [800_000, 1_900_000, 3_000_000];
const OTHERS_KHZ: u64 = 2_200_000;
const STEP: Duration = Duration::from_millis(130);

/// cpufreq files in a fake sysfs tree, rewritten atomically by a thread until dropped.
struct FakeCpufreq {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn write_atomically(path: &Path, khz: u64) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{khz}\n")).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

impl FakeCpufreq {
    fn start(sysfs: &Path) -> Self {
        let cpus = std::thread::available_parallelism().unwrap().get();
        let files: Vec<_> = (0..cpus)
            .map(|cpu| {
                let dir = sysfs.join(format!("devices/system/cpu/cpu{cpu}/cpufreq"));
                std::fs::create_dir_all(&dir).unwrap();
                let file = dir.join("scaling_cur_freq");
                write_atomically(&file, if cpu == 0 { CPU0_KHZ[0] } else { OTHERS_KHZ });
                file
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut i = 0;
            while !stop2.load(Ordering::Relaxed) {
                i += 1;
                write_atomically(&files[0], CPU0_KHZ[i % CPU0_KHZ.len()]);
                std::thread::sleep(STEP);
            }
        });
        Self { stop, thread: Some(thread) }
    }
}

impl Drop for FakeCpufreq {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn record(sysfs: &str, out: &Path) {
    let out_arg = out.display().to_string();
    let args = ["record", "--sysfs-root", sysfs, "--interval", "0.5", "--output", &out_arg, "--", "sleep", "2.2"];
    assert_success(&profile(&args, Duration::from_secs(60)));
}

/// The `<pid>-<epochms>` directories of a run.
fn process_dirs(run: &Path) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(run)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("summary.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// `(cycle, cpu, khz)` rows of a run's frequencies.csv.
fn frequency_rows(run: &Path) -> Vec<(u64, u64, u64)> {
    let text = std::fs::read_to_string(run.join("frequencies.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("cycle,start_epoch_ms,end_epoch_ms,cpu,khz"));
    lines
        .map(|l| {
            let f: Vec<u64> = l.split(',').map(|x| x.parse().unwrap()).collect();
            assert!(f[1] <= f[2], "a cycle ends after it starts: {l}");
            (f[0], f[3], f[4])
        })
        .collect()
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn assert_shares(side: &Value) {
    let sum = |v: &Value| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).sum::<f64>();
    assert!((sum(&side["spatial"]) - 1.0).abs() < 1e-9, "C_S sums to 1: {side}");
    for row in side["temporal"].as_array().unwrap() {
        assert!((sum(row) - 1.0).abs() < 1e-9, "each C_T row sums to 1: {row}");
    }
}

#[test]
fn two_runs_on_a_fake_cpufreq_tree() {
    let rapl = FakePowercap::start(40.0);
    let _freq = FakeCpufreq::start(rapl.root.path());
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    record(&rapl.sysfs_root(), &a);
    record(&rapl.sysfs_root(), &b);

    let mut pooled = Vec::new();
    for run in [&a, &b] {
        let rows = frequency_rows(run);
        let cycles: std::collections::BTreeSet<u64> = rows.iter().map(|r| r.0).collect();
        assert!(cycles.len() >= 3, "{} cycles in {}", cycles.len(), run.display());
        assert_eq!(rows.len() as u64, cycles.len() as u64 * cpus, "every CPU in every cycle");
        for &(_, cpu, khz) in &rows {
            let held = if cpu == 0 { CPU0_KHZ.contains(&khz) } else { khz == OTHERS_KHZ };
            assert!(held, "cpu {cpu} at {khz} kHz, a frequency the tree never held");
            pooled.push(khz as f64);
        }
        for process in process_dirs(run) {
            let f = &read_json(&process.join("summary.json"))["cpu_frequencies"];
            assert_eq!(f["available"], true, "{f}");
            assert_eq!(f["cpus"].as_u64(), Some(cpus));
            assert_eq!(f["file"], "../frequencies.csv");
        }
    }

    let out_dir = dir.path().join("calm");
    let out = profile(
        &["calmness", a.to_str().unwrap(), b.to_str().unwrap(), "-o", out_dir.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_success(&out);
    assert!(text(&out).contains("spatial r (Pearson of C_S)"), "{}", text(&out));
    let c = read_json(&out_dir.join("calmness.json"));
    assert_eq!(c["bins"]["samples"].as_u64(), Some(pooled.len() as u64));
    let edges = c["bins"]["edges_khz"].as_array().unwrap();
    let (lo, hi) = pooled.iter().fold((f64::MAX, 0f64), |(l, h), &f| (l.min(f), h.max(f)));
    assert_eq!((edges[0].as_f64().unwrap(), edges[edges.len() - 1].as_f64().unwrap()), (lo, hi));
    for side in [&c["a"], &c["b"]] {
        assert_shares(side);
    }
    match c["spatial_pearson"].as_f64() {
        Some(r) => assert!((-1.0..=1.0).contains(&r), "r = {r}"),
        None => assert!(c["notes"].to_string().contains("spatial correlation is undefined"), "{c}"),
    }
    let html = std::fs::read_to_string(out_dir.join("calmness.html")).unwrap();
    assert!(html.contains("<svg") && html.contains(a.to_str().unwrap()), "the chart names the runs");

    // A run against itself, once by its process's directory: the same distribution, r = 1.
    let same = profile(
        &["calmness", a.to_str().unwrap(), process_dirs(&a)[0].to_str().unwrap(), "--no-files"],
        Duration::from_secs(30),
    );
    assert_success(&same);
    assert!(text(&same).contains("spatial r (Pearson of C_S):  1.000"), "{}", text(&same));
    assert!(text(&same).contains("temporal r (Pearson of C_T): 1.000"), "{}", text(&same));
}

#[test]
fn without_cpufreq_calmness_exits_2_and_runs_nothing() {
    let rapl = FakePowercap::start(40.0);
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("vm-run");
    record(&rapl.sysfs_root(), &run);
    assert!(!run.join("frequencies.csv").exists(), "no trace without cpufreq");
    for process in process_dirs(&run) {
        let f = &read_json(&process.join("summary.json"))["cpu_frequencies"];
        assert_eq!(f["available"], false, "{f}");
        assert!(f["reason"].as_str().unwrap().contains("exposes no CPU frequency"), "{f}");
    }
    let out =
        profile(&["calmness", run.to_str().unwrap(), run.to_str().unwrap(), "--no-files"], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("calmness RUN_A {}: this machine exposes no CPU frequency", run.display())), "{err}");
    assert!(err.contains("calmness cannot be computed") && err.contains("cpufreq"), "{err}");
    assert!(out.stdout.is_empty(), "no made-up table: {}", String::from_utf8_lossy(&out.stdout));

    let marker = dir.path().join("ran");
    let out = profile(
        &["calmness", "--sysfs-root", &rapl.sysfs_root(), "--", "touch", marker.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("this machine exposes no CPU frequency"), "{}", text(&out));
    assert!(!marker.exists(), "the command ran although nothing could be compared");
}

#[test]
fn a_command_observed_then_profiled() {
    let rapl = FakePowercap::start(40.0);
    let _freq = FakeCpufreq::start(rapl.root.path());
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("calm");
    let out = profile(
        &[
            "calmness",
            "--sysfs-root",
            &rapl.sysfs_root(),
            "--interval",
            "0.5",
            "-o",
            out_dir.to_str().unwrap(),
            "--",
            "sleep",
            "1.6",
        ],
        Duration::from_secs(60),
    );
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("run 1 of 2, observed only") && err.contains("run 2 of 2, profiled"), "{err}");
    assert!(!frequency_rows(&out_dir.join("observed")).is_empty());
    assert!(!frequency_rows(&out_dir.join("profiled")).is_empty());
    assert!(!process_dirs(&out_dir.join("profiled")).is_empty(), "the second run was profiled");
    assert!(process_dirs(&out_dir.join("observed")).is_empty(), "the first was not");
    let c = read_json(&out_dir.join("calmness.json"));
    assert_eq!((c["a"]["name"].as_str(), c["b"]["name"].as_str()), (Some("observed"), Some("profiled")));
    assert!(c["a"]["cycles"].as_u64().unwrap() >= 3, "{c}");
    assert_shares(&c["a"]);
    assert_shares(&c["b"]);
}

/// Issue 26 item 5: `report --format jcarbon` writes jcarbon's signal shape, and its energies
/// are summary.json's.
#[test]
fn the_jcarbon_report_has_jcarbon_s_shape_and_summary_json_s_energies() {
    let rapl = FakePowercap::start(40.0);
    let _freq = FakeCpufreq::start(rapl.root.path());
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("busy");
    let busy = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";
    let run_arg = run.display().to_string();
    let root = rapl.sysfs_root();
    let args = ["record", "--sysfs-root", &root, "--interval", "0.5", "--output", &run_arg, "--", "sh", "-c", busy];
    assert_success(&profile(&args, Duration::from_secs(60)));
    assert_success(&profile(&["report", &run_arg, "--format", "jcarbon"], Duration::from_secs(30)));
    let cycles = frequency_rows(&run).iter().map(|r| r.0).collect::<std::collections::BTreeSet<_>>().len();

    let processes = process_dirs(&run);
    assert!(!processes.is_empty());
    let mut total_j = 0.0;
    for process in processes {
        let summary = read_json(&process.join("summary.json"));
        let j = read_json(&process.join("jcarbon.json"));
        let classes: Vec<&String> = j.as_object().unwrap().keys().collect();
        assert_eq!(classes, ["CpuFrequency", "ProcessEnergy", "TaskActivity", "TaskEnergy"]);
        for (class, intervals) in j.as_object().unwrap() {
            for interval in intervals.as_array().unwrap() {
                for instant in ["start", "end"] {
                    assert!(
                        interval[instant]["secs"].is_u64() && interval[instant]["nanos"].is_u64(),
                        "{class}: {interval}"
                    );
                }
                for datum in interval["data"].as_array().unwrap() {
                    assert!(datum["id"].is_u64() && datum["value"].is_f64(), "{class}: {datum}");
                }
            }
        }
        let value = |class: &str, id: u64| -> f64 {
            let data = j[class][0]["data"].as_array().unwrap();
            data.iter().find(|d| d["id"] == id).unwrap_or_else(|| panic!("{class} {id}: {j}"))["value"]
                .as_f64()
                .unwrap()
        };
        let pid = summary["pid"].as_u64().unwrap();
        let energy_uj = summary["energy_uj"].as_f64().unwrap();
        assert!((value("ProcessEnergy", pid) * 1e6 - energy_uj).abs() <= 1e-6 * energy_uj.max(1.0));
        for t in summary["threads"].as_array().unwrap() {
            let tid = t["tid"].as_u64().unwrap();
            let uj = t["energy_uj"].as_f64().unwrap();
            assert!((value("TaskEnergy", tid) * 1e6 - uj).abs() <= 1e-6 * uj.max(1.0), "thread {tid}");
            let activity = t["on_cpu_ns"].as_f64().unwrap() / (summary["duration_s"].as_f64().unwrap() * 1e9);
            assert!((value("TaskActivity", tid) - activity).abs() < 1e-9, "thread {tid}");
        }
        let freq = j["CpuFrequency"].as_array().unwrap();
        assert!(!freq.is_empty() && freq.len() <= cycles, "{} of {cycles} cycles", freq.len());
        total_j += value("ProcessEnergy", pid);
    }
    assert!(total_j > 0.0, "the busy loop used energy");
}
