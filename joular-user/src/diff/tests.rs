//! `diff` on synthetic runs written by the result stage itself (`stages::Results`: the same
//! writers as a real run), so the format the diff reads cannot drift from the one written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::stats::SplitMix;
use super::*;
use crate::attribution::stacks::ThreadStacks;
use crate::model::{CycleReport, Frame, FrameKind, SocketReport, Stack, ThreadReport, ThreadStack};
use crate::output::{MethodFilter, ResultsConfig};
use crate::stages::Results;

const PID: u32 = 4242;
const CYCLES: u64 = 20;

/// The fixture's methods and their mean energy per cycle, µJ.
const METHODS: [(&str, f64); 4] = [
    ("com.acme.Shop.checkout", 2e6),
    ("com.acme.Shop.render", 1e6),
    ("com.acme.Db.query", 0.5e6),
    ("java.util.HashMap.get", 0.25e6),
];

fn java(short: &str) -> Frame {
    Frame {
        name: Arc::from(format!("void {short}()")),
        short: Arc::from(short),
        kind: FrameKind::JavaJit,
        line: None,
        raw_name: None,
    }
}

/// What a synthetic run does.
#[derive(Clone)]
pub struct Workload {
    /// Energy factor per method (1 when absent).
    pub factor: BTreeMap<&'static str, f64>,
    /// Relative noise of each method's energy per cycle, and of the whole run (a run-level
    /// factor common to its cycles: the machine's state, JIT decisions).
    pub cycle_noise: f64,
    pub run_noise: f64,
}

impl Default for Workload {
    fn default() -> Self {
        Self { factor: BTreeMap::new(), cycle_noise: 0.1, run_noise: 0.03 }
    }
}

/// Writes one run into `dir` (its own `joularjx-result`) with the result stage; returns `dir`.
pub fn write_run(dir: &Path, workload: &Workload, rng: &mut SplitMix) -> PathBuf {
    let run = java("java.lang.Thread.run");
    let stacks: Vec<(f64, Stack)> = METHODS
        .iter()
        .map(|(m, uj)| {
            let factor = workload.factor.get(m).copied().unwrap_or(1.0);
            (uj * factor, Arc::from(vec![run.clone(), java(m)]) as Stack)
        })
        .collect();
    let mut results = Results::new(ResultsConfig {
        results_root: dir.to_owned(),
        write_files: true,
        filter: MethodFilter::default(),
        start_epoch_ms: 1_700_000_000_000,
        energy_source: "powercap".into(),
        estimated: false,
        energy_detail: String::new(),
        carbon: None,
        report_stacks: false,
        evolution: true,
        runtime_call_trees: false,
        top_n: 10,
        native_frames: false,
        html: false,
        modes: crate::safe_write::Modes::for_caller(),
        cpu_frequencies: Default::default(),
    })
    .unwrap();
    let run_factor = 1.0 + workload.run_noise * rng.normal();
    for n in 0..CYCLES {
        // Samples in proportion to each method's energy this cycle (1 sample per 10 mJ), so the
        // split by samples gives each method its energy.
        let energies: Vec<f64> = stacks
            .iter()
            .map(|(uj, _)| (uj * run_factor * (1.0 + workload.cycle_noise * rng.normal())).max(0.0))
            .collect();
        let samples: Vec<u64> = energies.iter().map(|e| (e / 1e4).round() as u64).collect();
        let thread_uj = samples.iter().sum::<u64>() as f64 * 1e4;
        let mut report = CycleReport {
            cycle: n,
            start_ns: n * 1_000_000_000,
            end_ns: (n + 1) * 1_000_000_000,
            end_epoch_ms: 1_700_000_000_000 + (n + 1) * 1000,
            threads: vec![ThreadReport {
                pid: PID,
                tid: PID + 1,
                comm: "worker".into(),
                on_cpu_ns: 900_000_000,
                energy_uj: thread_uj,
                ..ThreadReport::default()
            }],
            sockets: vec![SocketReport {
                socket: 0,
                energy_uj: thread_uj * 1.5,
                unattributed_uj: thread_uj * 0.5,
                source: "powercap".into(),
                ..SocketReport::default()
            }],
            ..CycleReport::default()
        };
        let thread_stacks: Vec<ThreadStacks> = vec![(
            PID,
            PID + 1,
            stacks.iter().zip(&samples).map(|((_, s), &samples)| ThreadStack { stack: s.clone(), samples }).collect(),
        )];
        results.on_cycle(&mut report, &thread_stacks).unwrap();
    }
    results.finish().unwrap();
    dir.to_owned()
}

fn runs(root: &Path, side: &str, count: usize, workload: &Workload, rng: &mut SplitMix) -> Vec<Run> {
    (0..count).map(|i| Run::read(&write_run(&root.join(format!("{side}-{i}")), workload, rng)).unwrap()).collect()
}

fn doubled() -> Workload {
    Workload { factor: [("com.acme.Db.query", 2.0)].into(), ..Workload::default() }
}

fn flagged(diff: &Diff) -> Vec<&str> {
    diff.methods.iter().filter(|r| r.change != Change::Same).map(|r| r.name.as_str()).collect()
}

#[test]
fn a_run_reads_back_what_the_result_stage_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let run = &runs(
        tmp.path(),
        "base",
        1,
        &Workload { cycle_noise: 0.0, run_noise: 0.0, ..Workload::default() },
        &mut SplitMix(1),
    )[0];
    assert_eq!(run.methods.len(), METHODS.len());
    let checkout = run.methods["com.acme.Shop.checkout"];
    assert!((checkout - 2e6 * CYCLES as f64).abs() < 1.0, "{checkout}");
    assert!((run.total_uj - 3.75e6 * CYCLES as f64).abs() < 1.0, "{}", run.total_uj);
    // One stratum (one process), one bucket a cycle, and the cycles add up to the totals.
    assert_eq!(run.strata.len(), 1);
    let cycles = &run.strata[0].methods["com.acme.Shop.checkout"];
    assert_eq!(cycles.len(), CYCLES as usize);
    assert!((cycles.iter().sum::<f64>() - checkout).abs() < 1e-3 * checkout);
    assert_eq!(run.folded.len(), METHODS.len(), "{:?}", run.folded);
}

#[test]
fn one_method_doubled_is_flagged_and_only_it_from_single_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = SplitMix(11);
    let base = runs(tmp.path(), "base", 1, &Workload::default(), &mut rng);
    let new = runs(tmp.path(), "new", 1, &doubled(), &mut rng);
    let diff = compare(&base, &new, DiffOptions::default());
    assert_eq!((diff.base_spread, diff.new_spread), (Spread::Cycles, Spread::Cycles));
    assert_eq!(flagged(&diff), ["com.acme.Db.query"], "{}", table(&diff, 20));
    let query = &diff.methods[0];
    assert_eq!(query.change, Change::Increase);
    assert!((query.delta_pct.unwrap() - 100.0).abs() < 15.0, "{query:?}");
    assert_eq!(diff.total.change, Change::Increase, "the process rose by ~13%: {:?}", diff.total);
}

#[test]
fn one_method_doubled_is_flagged_and_only_it_from_repeated_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = SplitMix(12);
    let base = runs(tmp.path(), "base", 3, &Workload::default(), &mut rng);
    let new = runs(tmp.path(), "new", 3, &doubled(), &mut rng);
    let diff = compare(&base, &new, DiffOptions::default());
    assert_eq!((diff.base_spread, diff.new_spread), (Spread::Runs, Spread::Runs));
    assert_eq!(flagged(&diff), ["com.acme.Db.query"], "{}", table(&diff, 20));
}

#[test]
fn two_sets_of_the_same_program_flag_nothing_in_at_least_9_of_10_trials() {
    let tmp = tempfile::tempdir().unwrap();
    let mut quiet = 0;
    let mut tables = String::new();
    for trial in 0..10u64 {
        let mut rng = SplitMix(100 + trial);
        let dir = tmp.path().join(trial.to_string());
        let base = runs(&dir, "base", 3, &Workload::default(), &mut rng);
        let new = runs(&dir, "new", 3, &Workload::default(), &mut rng);
        let diff = compare(&base, &new, DiffOptions::default());
        if flagged(&diff).is_empty() && diff.total.change == Change::Same {
            quiet += 1;
        } else {
            tables.push_str(&table(&diff, 20));
        }
    }
    assert!(quiet >= 9, "{quiet} of 10 quiet:\n{tables}");
}

#[test]
fn the_gate_trips_on_a_rise_beyond_pct_and_its_uncertainty() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = SplitMix(13);
    let base = runs(tmp.path(), "base", 1, &Workload::default(), &mut rng);
    let new = runs(tmp.path(), "new", 1, &doubled(), &mut rng);
    let diff = compare(&base, &new, DiffOptions::default());
    let gate = |s: &str| s.parse::<Gate>().unwrap();
    let names = |g: &str| gate(g).tripped(&diff).into_iter().map(|r| r.name.clone()).collect::<Vec<_>>();
    assert_eq!(names("20"), ["com.acme.Db.query"], "the process rose ~13%, the method ~100%");
    assert_eq!(names("5"), ["(process)", "com.acme.Db.query"]);
    assert_eq!(names("20:com.acme.Db"), ["com.acme.Db.query"]);
    assert!(names("20:com.acme.Shop").is_empty());
    assert!(names("150").is_empty());
    for bad in ["", "x", "-1", "20:", "inf"] {
        assert!(bad.parse::<Gate>().is_err(), "{bad}");
    }
    assert_eq!(gate("12.5%:a.B"), Gate { pct: 12.5, prefix: Some("a.B".into()) });
}

#[test]
fn a_missing_or_foreign_directory_is_an_error_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let err = Run::read(&tmp.path().join("nope")).unwrap_err().to_string();
    assert!(err.contains("nope"), "{err}");
    let garbage = tmp.path().join("garbage");
    std::fs::create_dir(&garbage).unwrap();
    std::fs::write(garbage.join("profile.json"), "{ not json").unwrap();
    let err = Run::read(&garbage).unwrap_err().to_string();
    assert!(err.contains("garbage/profile.json"), "{err}");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = Run::read(&empty).unwrap_err().to_string();
    assert!(err.contains("no raw profile"), "{err}");
}

#[test]
fn the_outputs_are_written_and_the_flame_graph_is_differential() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = SplitMix(14);
    let base = runs(tmp.path(), "base", 1, &Workload::default(), &mut rng);
    let new = runs(tmp.path(), "new", 1, &doubled(), &mut rng);
    let diff = compare(&base, &new, DiffOptions::default());
    let out = crate::safe_write::test_dir(&tmp.path().join("out"));
    write_outputs(&out, &diff, &base, &new).unwrap();
    let svg = std::fs::read_to_string(tmp.path().join("out").join(DIFF_FLAMEGRAPH_FILE)).unwrap();
    assert!(svg.contains("com.acme.Db.query"), "the method is drawn");
    // inferno colours a differential frame from red (more) to blue (less).
    assert!(svg.contains("rgb(255,"), "a red frame");
    let html = std::fs::read_to_string(tmp.path().join("out").join(DIFF_HTML_FILE)).unwrap();
    assert!(html.contains(r#"class="jr-increase" data-change="MORE""#) && html.contains("<svg"), "{html}");
    assert!(!html.contains("\\x0a"), "the header's lines are lines, not escapes");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("out").join(DIFF_JSON_FILE)).unwrap()).unwrap();
    assert_eq!(json["methods"][0]["name"], "com.acme.Db.query");
    assert_eq!(json["methods"][0]["change"], "increase");
}

#[test]
fn hidden_class_addresses_do_not_split_a_method() {
    use crate::attribution::stacks::aggregate::StackTotal;
    use crate::attribution::stacks::profile::{ProcessProfile, RunSummary};
    use crate::attribution::stacks::thread_kind::ThreadKind;
    use crate::output::{write_raw_profile, RAW_PROFILE_FILE};
    // The same lambda in two runs, at two addresses (as a profile keeping the JVM's names
    // would show it): read back, both are one method.
    let tmp = tempfile::tempdir().unwrap();
    let read = |side: &str, class: &str| {
        let dir = tmp.path().join(side);
        let stack: Stack = Arc::from(vec![java(&format!("a.B$$Lambda${class}.run"))]);
        let profile = ProcessProfile {
            summary: RunSummary { pid: PID, energy_uj: 1e6, ..RunSummary::default() },
            stacks: vec![StackTotal {
                stack,
                thread: ThreadKind::Application,
                energy_uj: 1e6,
                carbon_g: 0.0,
                samples: 100,
            }],
            timeline: Default::default(),
            devices: Vec::new(),
        };
        write_raw_profile(&crate::safe_write::test_dir(&dir), RAW_PROFILE_FILE, &profile).unwrap();
        Run::read(&dir).unwrap()
    };
    let (a, b) = (read("a", "14/0x0000000800c02a00"), read("b", "15/0x0000000800d01000"));
    assert_eq!(a.methods.keys().collect::<Vec<_>>(), ["a.B$$Lambda.run"]);
    assert_eq!(a.folded.keys().collect::<Vec<_>>(), ["a.B$$Lambda.run"]);
    let diff = compare(&[a], &[b], DiffOptions::default());
    assert_eq!(diff.methods.len(), 1);
    assert_eq!(
        (diff.base_spread, diff.methods[0].change),
        (Spread::None, Change::Unknown),
        "no cycles: no uncertainty"
    );
}

#[test]
fn power_compares_mean_watts_of_fixed_length_runs() {
    let tmp = tempfile::tempdir().unwrap();
    // The runs of `one_method_doubled_is_flagged_and_only_it_from_single_runs`.
    let mut rng = SplitMix(11);
    let base = runs(tmp.path(), "base", 1, &Workload::default(), &mut rng);
    let new = runs(tmp.path(), "new", 1, &doubled(), &mut rng);
    let options = DiffOptions { metric: Metric::Power, ..DiffOptions::default() };
    let diff = compare(&base, &new, options);
    assert_eq!(diff.unit, "W");
    assert_eq!(flagged(&diff), ["com.acme.Db.query"], "{}", table(&diff, 20));
    // 20 cycles of 1 s: watts are joules / 20.
    let joules = compare(&base, &new, DiffOptions::default());
    assert!((diff.methods[0].new * 20.0 - joules.methods[0].new).abs() < 1e-9);
}

#[test]
fn a_side_with_no_energy_still_gets_a_flame_graph() {
    let tmp = tempfile::tempdir().unwrap();
    let base = runs(tmp.path(), "base", 1, &Workload::default(), &mut SplitMix(16));
    let empty = [Run::default()];
    for (b, n) in [(&base[..], &empty[..]), (&empty[..], &base[..]), (&empty[..], &empty[..])] {
        let svg = String::from_utf8(render_diff_svg(b, n, "t").unwrap()).unwrap();
        assert!(svg.contains("<svg"), "{svg}");
    }
}
