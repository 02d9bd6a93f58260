//! `Results` on a two-cycle fixture: invariants, golden JoularJX files, re-rendering.

use super::*;
use crate::attribution::stacks::methods::tests::{frame, java};
use crate::attribution::stacks::methods::{MethodFilter, NO_SAMPLES};
use crate::attribution::stacks::profile::RunSummary;
use crate::model::{Frame, FrameKind, SocketReport, Stack, ThreadReport, ThreadStack};
use crate::output::{report_to, ReportArgs, ReportFormat};
use crate::safe_write::Modes;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

pub(crate) const PID: u32 = 100;
pub(crate) const START_MS: u64 = 1_700_000_000_000;

fn stack(frames: &[Frame]) -> Stack {
    Arc::from(frames.to_vec())
}

fn thread(tid: u32, comm: &str, energy_uj: f64) -> ThreadReport {
    ThreadReport { pid: PID, tid, comm: comm.into(), on_cpu_ns: 1000, energy_uj, ..ThreadReport::default() }
}

fn cycle(n: u64, start_s: u64, end_s: u64, threads: Vec<ThreadReport>) -> CycleReport {
    CycleReport {
        cycle: n,
        start_ns: start_s * 1_000_000_000,
        end_ns: end_s * 1_000_000_000,
        end_epoch_ms: START_MS + end_s * 1000,
        threads,
        drops: [("samples".to_owned(), n)].into(),
        sockets: vec![SocketReport { socket: 0, energy_uj: 10e6, unattributed_uj: 2e6, ..SocketReport::default() }],
        ..CycleReport::default()
    }
}

fn at(frame: Frame, line: u32) -> Frame {
    Frame { line: Some(line), ..frame }
}

/// Two cycles (1 s, then 2 s) of a JVM: JDK work above an app method, a syscall, a thread
/// with energy but no samples, an idle thread, a thread with only JDK frames, a C2 compiler
/// thread and a sample-less GC thread. Java stacks sit on HotSpot's thread start.
pub(crate) fn fixture() -> Vec<(CycleReport, Vec<ThreadStacks>)> {
    let native = |name: &str| frame(name, FrameKind::Native);
    let entry = [
        native("[unknown]"),
        native("thread_native_entry(Thread*)"),
        native("JavaCalls::call_helper(...)"),
        frame("StubRoutines (1)", FrameKind::Stub),
        at(frame("java.lang.Thread.run", FrameKind::JavaInterpreted), 840),
    ];
    let java_stack = |tail: Vec<Frame>| -> Stack { Arc::from(entry.iter().cloned().chain(tail).collect::<Vec<_>>()) };
    let compute = java("com.acme.App.compute");
    let multiply =
        java_stack(vec![at(compute.clone(), 12), frame("java.math.BigInteger.multiply", FrameKind::JavaInlined)]);
    let write = java_stack(vec![at(compute, 17), native("write"), frame("ksys_write", FrameKind::Kernel)]);
    let jdk = java_stack(vec![java("java.util.HashMap.get")]);
    let compiler = stack(&[
        native("[unknown]"),
        native("thread_native_entry(Thread*)"),
        native("Thread::call_run()"),
        native("JavaThread::thread_main_inner()"),
        native("CompileBroker::compiler_thread_loop()"),
        native("C2Compiler::compile_method(...)"),
    ]);
    let ts = |stack: &Stack, samples| ThreadStack { stack: stack.clone(), samples };
    vec![
        (
            cycle(
                1,
                0,
                1,
                vec![
                    thread(101, "worker", 3e6),
                    thread(102, "gc", 1e6),
                    thread(103, "idle", 0.0),
                    thread(105, "C2 CompilerThre", 0.4e6),
                ],
            ),
            vec![
                (PID, 101, vec![ts(&multiply, 2), ts(&write, 1)]),
                (PID, 102, vec![]),
                (PID, 105, vec![ts(&compiler, 2)]),
            ],
        ),
        (
            cycle(
                2,
                1,
                3,
                vec![thread(101, "worker", 2e6), thread(104, "jdk", 0.5e6), thread(106, "GC Thread#0", 0.3e6)],
            ),
            vec![(PID, 101, vec![ts(&multiply, 1)]), (PID, 104, vec![ts(&jdk, 1)])],
        ),
    ]
}

pub(crate) fn config(root: &Path) -> ResultsConfig {
    ResultsConfig {
        results_root: root.to_owned(),
        write_files: true,
        filter: MethodFilter::parse("com.acme"),
        start_epoch_ms: START_MS,
        energy_source: "model".into(),
        estimated: true,
        energy_detail: "utilisation (Cloud Carbon Footprint) model: test coefficients".into(),
        carbon: None,
        report_stacks: true,
        evolution: true,
        runtime_call_trees: true,
        top_n: 10,
        native_frames: false,
        html: false,
        modes: Modes::for_caller(),
        cpu_frequencies: Default::default(),
    }
}

pub(crate) fn run(root: &Path) -> (Results, Vec<CycleReport>) {
    let mut results = Results::new(config(root)).unwrap();
    let mut reports = Vec::new();
    for (mut report, stacks) in fixture() {
        results.on_cycle(&mut report, &stacks).unwrap();
        reports.push(report);
    }
    (results, reports)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6 * b.abs().max(1.0)
}

#[test]
fn methods_of_each_thread_sum_to_the_thread_and_nothing_is_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let (results, reports) = run(tmp.path());
    let mut cycles_uj = 0.0;
    for report in &reports {
        for t in &report.threads {
            let methods: f64 = report.methods.iter().filter(|m| m.tid == t.tid).map(|m| m.energy_uj).sum();
            assert!(close(methods, t.energy_uj), "tid {} methods {methods} thread {}", t.tid, t.energy_uj);
            cycles_uj += t.energy_uj;
            if !t.stacks.is_empty() {
                let stacks: f64 = t.stacks.iter().map(|s| s.energy_uj).sum();
                assert!(close(stacks, t.energy_uj));
            }
        }
    }
    let method_of = |cycle: usize, tid: u32| -> Vec<(&str, u64)> {
        reports[cycle].methods.iter().filter(|m| m.tid == tid).map(|m| (m.method.as_str(), m.samples)).collect()
    };
    // An application thread named "gc" is not the collector: its sample-less energy stays
    // unexplained; the real GC thread's is GC energy, the compiler's is the JIT's.
    assert_eq!(method_of(0, 102), [(NO_SAMPLES, 0)]);
    assert_eq!(method_of(1, 106), [("[GC]", 0)]);
    assert_eq!(method_of(0, 105), [("[JIT compiler]", 2)]);
    // The syscall under compute is compute's energy.
    assert_eq!(method_of(0, 101), [("java.math.BigInteger.multiply", 2), ("com.acme.App.compute", 1)]);
    let worker = &reports[0].threads[0];
    assert_eq!(worker.stacks.len(), 2);
    let frames = &worker.stacks[0].frames;
    assert_eq!(frames[0].name, "full [unknown]", "root first, every frame");
    let lines: Vec<(&str, Option<u32>)> =
        frames.iter().filter(|f| f.kind.is_java()).map(|f| (f.name.as_str(), f.line)).collect();
    assert_eq!(
        lines,
        [
            ("full java.lang.Thread.run", Some(840)),
            ("full com.acme.App.compute", Some(12)),
            ("full java.math.BigInteger.multiply", None),
        ]
    );
    let json = serde_json::to_string(&reports[0]).unwrap();
    assert!(json.contains(r#""kind":"java_interpreted","line":840"#), "{json}");

    let profiles = results.profiles();
    let summary = &profiles[0].summary;
    assert!(close(summary.energy_uj, cycles_uj), "{} vs {cycles_uj}", summary.energy_uj);
    assert!(close(profiles[0].stacks.iter().map(|s| s.energy_uj).sum(), cycles_uj));
    assert_eq!((summary.cycles, summary.duration_s, summary.samples), (2, 3.0, 7));
    assert_eq!((summary.socket_energy_uj, summary.unattributed_uj), (20e6, 4e6));
    assert_eq!(summary.drops["samples"], 3);
    assert_eq!(summary.comm, "worker", "no tid == pid thread: first thread's comm");
    let threads_uj: f64 = summary.threads.iter().map(|t| t.energy_uj).sum();
    assert!(close(threads_uj, cycles_uj));
}

#[test]
fn without_files_the_cycle_reports_are_the_same_and_nothing_is_written() {
    let with = tempfile::tempdir().unwrap();
    let without = tempfile::tempdir().unwrap();
    let root = without.path().join("never-created");
    let (_, expected) = run(with.path());
    let mut results = Results::new(ResultsConfig { write_files: false, ..config(&root) }).unwrap();
    for ((mut report, stacks), want) in fixture().into_iter().zip(&expected) {
        results.on_cycle(&mut report, &stacks).unwrap();
        let methods = |r: &CycleReport| -> Vec<(u32, String, u64)> {
            r.methods.iter().map(|m| (m.tid, m.method.clone(), m.samples)).collect()
        };
        assert_eq!(methods(&report), methods(want));
    }
    let finished = results.finish().unwrap();
    assert!(finished.outputs.is_empty());
    assert!(finished.table.contains("java.math.BigInteger.multiply"));
    assert!(!root.exists(), "no file may be written");
}

#[test]
fn a_retired_process_is_forgotten_and_its_files_written_from_what_was_taken() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut results, _) = run(tmp.path());
    let files = results.take_retired(PID).expect("files of the process").write().unwrap();
    assert!(files.dir.join("summary.json").is_file());
    assert!(files.dir.join("flamegraph-all.svg").is_file());
    assert_eq!(results.pids().count(), 0);
    assert!(results.take_retired(PID).is_none(), "already retired");
    assert!(results.finish().unwrap().outputs.is_empty());
}

/// Compares every file under `tests/data/golden/<pid>-<ms>` with the run's tree, both ways.
#[test]
fn joularjx_csv_tree_matches_the_golden_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (results, _) = run(tmp.path());
    results.finish().unwrap();
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden");
    let run_dir = format!("{PID}-{START_MS}");
    let csvs = |root: &Path| {
        let mut files = Vec::new();
        let mut dirs = vec![root.to_owned()];
        while let Some(dir) = dirs.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "csv") {
                    files.push(path.strip_prefix(root).unwrap().to_owned());
                }
            }
        }
        files.sort();
        files
    };
    let expected = csvs(&golden.join(&run_dir));
    assert!(expected.len() >= 12, "golden tree missing: {expected:?}");
    assert_eq!(csvs(&tmp.path().join(&run_dir)), expected);
    for file in expected {
        let got = fs::read_to_string(tmp.path().join(&run_dir).join(&file)).unwrap();
        let want = fs::read_to_string(golden.join(&run_dir).join(&file)).unwrap();
        assert_eq!(got, want, "{}", file.display());
    }
}

#[test]
fn finish_writes_every_output_and_report_rerenders_them() {
    let tmp = tempfile::tempdir().unwrap();
    let (results, _) = run(tmp.path());
    let finished = results.finish().unwrap();
    assert!(finished.table.contains("java.math.BigInteger.multiply"), "{}", finished.table);
    assert!(finished.table.contains("(app: com.acme)"), "{}", finished.table);
    let dir = &finished.outputs[0].dir;
    for name in [
        "stacks-all.folded",
        "stacks-app.folded",
        "flamegraph-all.svg",
        "flamegraph-app.svg",
        "profile.pb.gz",
        "summary.json",
        "profile.json",
    ] {
        assert!(dir.join(name).is_file(), "{name} missing");
    }
    let folded = fs::read_to_string(dir.join("stacks-app.folded")).unwrap();
    assert_eq!(
        folded,
        "(no app frame) 500000\n(no samples) 1000000\n[GC] 300000\n[JIT compiler] 400000\n\
         com.acme.App.compute 5000000\n"
    );
    // Graphs start at the first Java frame and keep the native leaves; the compiler thread
    // is rooted at its bucket, without the thread start.
    let folded = fs::read_to_string(dir.join("stacks-all.folded")).unwrap();
    assert_eq!(
        folded,
        "(no samples) 1000000\n\
         [GC] 300000\n\
         [JIT compiler];CompileBroker::compiler_thread_loop();C2Compiler::compile_method(...) 400000\n\
         java.lang.Thread.run;com.acme.App.compute;java.math.BigInteger.multiply 4000000\n\
         java.lang.Thread.run;com.acme.App.compute;write;ksys_write 1000000\n\
         java.lang.Thread.run;java.util.HashMap.get 500000\n"
    );
    let summary: RunSummary = serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!((summary.energy_source.as_str(), summary.estimated), ("model", true));
    assert_eq!(summary.energy_detail, "utilisation (Cloud Carbon Footprint) model: test coefficients");
    let jvm = summary.jvm.expect("a JVM");
    assert_eq!((jvm.jit_compiler.energy_uj, jvm.jit_compiler.samples), (0.4e6, 2));
    assert!(close(jvm.jit_compiler.percent, 100.0 * 0.4 / 7.2), "{jvm:?}");
    assert_eq!((jvm.gc.energy_uj, jvm.gc.samples), (0.3e6, 0));
    assert!(close(jvm.gc.percent, 100.0 * 0.3 / 7.2), "{jvm:?}");
    assert_eq!((jvm.jvm_other.energy_uj, jvm.native.energy_uj), (0.0, 0.0));
    assert!(finished.table.contains("JIT compiler 0.400 J (5.6%), GC 0.300 J (4.2%)"), "{}", finished.table);

    let out = tmp.path().join("rerendered");
    let args = ReportArgs {
        result_dir: tmp.path().to_owned(),
        output: Some(out.clone()),
        format: vec![ReportFormat::Table, ReportFormat::Svg, ReportFormat::Pprof],
        top: 5,
        filter: Some("java.math".into()),
        native_frames: false,
        output_mode: None,
    };
    let mut table = Vec::new();
    let outputs = report_to(&args, &mut table).unwrap();
    let table = String::from_utf8(table).unwrap();
    assert!(table.contains("(app: java.math)"), "{table}");
    let app_first = table.lines().skip_while(|l| !l.contains("(app:")).nth(2).unwrap();
    assert!(app_first.contains("java.math.BigInteger.multiply"), "{table}");
    assert_eq!(outputs[0].dir, out);
    assert!(out.join("flamegraph-app.svg").is_file() && out.join("profile.pb.gz").is_file());
    assert!(!out.join("profile.json").exists(), "only the asked formats");
    assert!(matches!(
        report_to(
            &ReportArgs {
                result_dir: out.clone(),
                output: None,
                format: vec![ReportFormat::Table],
                top: 1,
                filter: None,
                native_frames: false,
                output_mode: None,
            },
            &mut Vec::new()
        ),
        Err(OutputError::NoProfile(_))
    ));
}

/// `name,value` rows of a JoularJX CSV.
pub(crate) fn csv_rows(path: &Path) -> Vec<(String, f64)> {
    fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| {
            let (name, value) = l.rsplit_once(',').expect("name,value");
            (name.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

/// A Java method as JoularJX names one (`package.Class.method`), by a rule of the test's own.
fn is_java_method(name: &str) -> bool {
    let parts: Vec<&str> = name.split('.').collect();
    parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | '<' | '>')))
}

/// Per cycle, both views' methods plus what is not a method sum to the process's threads;
/// the JoularJX files hold only methods, and over the run their totals are summary.json's
/// energy less its `unattributed` buckets, and what the cycles' JSON methods add up to.
#[test]
fn joularjx_files_hold_methods_only_and_add_up_with_the_unattributed_energy() {
    let tmp = tempfile::tempdir().unwrap();
    let mut results = Results::new(config(tmp.path())).unwrap();
    let run_dir = tmp.path().join(format!("{PID}-{START_MS}"));
    let mut json_uj: BTreeMap<String, f64> = BTreeMap::new();
    // What the fixture's app view has no method for, per cycle: thread 102's sample-less
    // energy and the compiler thread, then HashMap.get (no app frame) and the GC thread.
    let app_unattributed_j = [1.0 + 0.4, 0.5 + 0.3];
    for ((mut report, stacks), app_unattributed_j) in fixture().into_iter().zip(app_unattributed_j) {
        results.on_cycle(&mut report, &stacks).unwrap();
        let duration_s = (report.end_ns - report.start_ns) as f64 / 1e9;
        let threads_j: f64 = report.threads.iter().map(|t| t.energy_uj).sum::<f64>() / 1e6;
        let all_unattributed_j: f64 =
            report.methods.iter().filter(|m| !is_java_method(&m.method)).map(|m| m.energy_uj).sum::<f64>() / 1e6;
        for (view, infix, unattributed_j) in
            [("all", "all", all_unattributed_j), ("app", "filtered", app_unattributed_j)]
        {
            let file = run_dir.join(format!("{view}/runtime/methods/joularJX-{PID}-{infix}-methods-power.csv"));
            let rows = csv_rows(&file);
            assert!(rows.iter().all(|r| is_java_method(&r.0)), "{rows:?}");
            let methods_j: f64 = rows.iter().map(|r| r.1).sum::<f64>() * duration_s;
            let rounding_j = 5e-5 * duration_s * rows.len() as f64;
            assert!(
                (methods_j + unattributed_j - threads_j).abs() <= rounding_j,
                "cycle {} {view}: methods {methods_j} J + {unattributed_j} J, threads {threads_j} J",
                report.cycle
            );
        }
        for m in report.methods.iter().filter(|m| is_java_method(&m.method)) {
            *json_uj.entry(m.method.clone()).or_default() += m.energy_uj;
        }
    }
    let finished = results.finish().unwrap();
    let summary: RunSummary =
        serde_json::from_str(&fs::read_to_string(finished.outputs[0].dir.join("summary.json")).unwrap()).unwrap();
    let total = |view: &str, infix: &str, kind: &str, suffix: &str| -> Vec<(String, f64)> {
        csv_rows(&run_dir.join(format!("{view}/total/{kind}/joularJX-{PID}-{infix}-{suffix}-energy.csv")))
    };
    for (view, infix, unattributed) in
        [("all", "all", &summary.unattributed.all), ("app", "filtered", &summary.unattributed.app)]
    {
        let unattributed_j: f64 = unattributed.values().map(|s| s.energy_uj).sum::<f64>() / 1e6;
        assert!(unattributed_j > 0.0, "{view}: {unattributed:?}");
        for (kind, suffix) in [("methods", "methods"), ("calltrees", "call-trees")] {
            let rows = total(view, infix, kind, suffix);
            for (name, _) in &rows {
                assert!(name.split(';').all(is_java_method), "{view} {kind}: {name:?} is not a method");
            }
            let rows_j: f64 = rows.iter().map(|r| r.1).sum();
            assert!(
                (rows_j + unattributed_j - summary.energy_uj / 1e6).abs() <= 5e-5 * rows.len() as f64,
                "{view} {kind}: {rows_j} J + unattributed {unattributed_j} J != {} J",
                summary.energy_uj / 1e6
            );
        }
    }
    assert_eq!(summary.unattributed.all.keys().collect::<Vec<_>>(), ["(no samples)", "[GC]", "[JIT compiler]"]);
    assert_eq!(
        summary.unattributed.app.keys().collect::<Vec<_>>(),
        ["(no app frame)", "(no samples)", "[GC]", "[JIT compiler]"]
    );
    let csv: BTreeMap<String, f64> = total("all", "all", "methods", "methods").into_iter().collect();
    assert_eq!(csv.keys().collect::<Vec<_>>(), json_uj.keys().collect::<Vec<_>>());
    for (method, uj) in &json_uj {
        assert!((csv[method] - uj / 1e6).abs() <= 5e-5, "{method}: CSV {} J, JSON {} J", csv[method], uj / 1e6);
    }
    for view in ["all", "app"] {
        for entry in fs::read_dir(run_dir.join(view).join("evolution")).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let method =
                name.strip_prefix(&format!("joularJX-{PID}-")).and_then(|n| n.strip_suffix("-evolution.csv")).unwrap();
            assert!(is_java_method(method), "{view}/evolution/{name}");
        }
    }
}

#[test]
fn native_frames_keep_every_frame_and_report_honours_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let mut results = Results::new(ResultsConfig { native_frames: true, ..config(tmp.path()) }).unwrap();
    for (mut report, stacks) in fixture() {
        results.on_cycle(&mut report, &stacks).unwrap();
    }
    let finished = results.finish().unwrap();
    let dir = &finished.outputs[0].dir;
    let entry =
        "[unknown];thread_native_entry(Thread*);JavaCalls::call_helper(...);StubRoutines (1);java.lang.Thread.run";
    let folded = fs::read_to_string(dir.join("stacks-all.folded")).unwrap();
    assert!(folded.contains(&format!("{entry};com.acme.App.compute;write;ksys_write 1000000\n")), "{folded}");
    assert!(!folded.contains("[JIT compiler]"), "{folded}");
    let trees =
        fs::read_to_string(dir.join(format!("all/total/calltrees/joularJX-{PID}-all-call-trees-energy.csv"))).unwrap();
    assert!(trees.contains(&format!("{entry};com.acme.App.compute;write;ksys_write,1.0000\n")), "{trees}");
    // The method rules do not change.
    assert!(finished.table.contains("[JIT compiler]"), "{}", finished.table);

    // A default run keeps the full stacks in its raw profile: `report --native-frames`
    // re-renders them.
    let plain = tempfile::tempdir().unwrap();
    run(plain.path()).0.finish().unwrap();
    let out = plain.path().join("rerendered");
    report_to(
        &ReportArgs {
            result_dir: plain.path().to_owned(),
            output: Some(out.clone()),
            format: vec![ReportFormat::Folded],
            top: 5,
            filter: None,
            native_frames: true,
            output_mode: None,
        },
        &mut Vec::new(),
    )
    .unwrap();
    assert_eq!(fs::read_to_string(out.join("stacks-all.folded")).unwrap(), folded);
}

/// A process's directory moved away and replaced between cycles (possible where others may write
/// in the results root): its files follow the directory the run created (its descriptor is held
/// while it is among the most recently written), none go into the replacement, the run goes on.
#[test]
fn a_run_directory_replaced_mid_run_is_not_written_into_and_the_run_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let mut results = Results::new(config(tmp.path())).unwrap();
    let mut cycles = fixture().into_iter();
    let (mut report, stacks) = cycles.next().unwrap();
    results.on_cycle(&mut report, &stacks).unwrap();
    let run_dir = tmp.path().join(format!("{PID}-{START_MS}"));
    fs::rename(&run_dir, tmp.path().join("moved")).unwrap();
    fs::create_dir(&run_dir).unwrap();
    for (mut report, stacks) in cycles {
        results.on_cycle(&mut report, &stacks).unwrap();
    }
    let finished = results.finish().unwrap();
    assert_eq!(finished.outputs.len(), 1, "{:?}", finished.outputs);
    assert_eq!(fs::read_dir(&run_dir).unwrap().count(), 0, "written into the replacement");
    assert!(tmp.path().join("moved/summary.json").is_file());
}

#[test]
fn a_reused_pid_gets_its_own_tree_beside_the_ended_process_set_aside() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut results, _) = run(tmp.path());
    results.set_aside(PID);
    assert_eq!(results.pids().count(), 0);
    // A new process takes PID 100: the same cycles again make a tree of its own.
    for (mut report, stacks) in fixture() {
        results.on_cycle(&mut report, &stacks).unwrap();
    }
    let finished = results.finish().unwrap();
    let mut dirs: Vec<_> = finished.outputs.iter().map(|o| o.dir.clone()).collect();
    dirs.sort();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    assert_eq!(
        dirs[0].file_name().unwrap().to_string_lossy(),
        format!("{PID}-{START_MS}"),
        "the first process keeps the run's name"
    );
    assert_ne!(dirs[0], dirs[1]);
    for dir in &dirs {
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["pid"], PID);
        assert!(dir.file_name().unwrap().to_string_lossy().starts_with(&format!("{PID}-")));
    }
}

#[test]
fn with_an_intensity_carbon_sits_beside_total_in_every_output() {
    let tmp = tempfile::tempdir().unwrap();
    // 3,600 gCO2e/kWh at PUE 1 is 1e-9 g per µJ: a row's grams are its joules / 1000.
    let intensity = crate::carbon::Intensity::Constant { g_per_kwh: 3600.0 };
    let carbon = crate::carbon::Carbon { intensity, pue: 1.0 };
    let mut results = Results::new(ResultsConfig { carbon: Some(carbon), html: true, ..config(tmp.path()) }).unwrap();
    for (mut report, stacks) in fixture() {
        results.on_cycle(&mut report, &stacks).unwrap();
    }
    let finished = results.finish().unwrap();
    let dir = &finished.outputs[0].dir;
    for (view, infix) in [("all", "all"), ("app", "filtered")] {
        for (kind, name) in [("methods", "methods"), ("calltrees", "call-trees")] {
            let total = csv_rows(&dir.join(format!("{view}/total/{kind}/joularJX-{PID}-{infix}-{name}-energy.csv")));
            let carbon = csv_rows(&dir.join(format!("{view}/carbon/{kind}/joularJX-{PID}-{infix}-{name}-carbon.csv")));
            assert_eq!(total.len(), carbon.len(), "{view} {kind}");
            assert!(!carbon.is_empty());
            for ((name_j, joules), (name_g, grams)) in total.iter().zip(&carbon) {
                assert_eq!(name_j, name_g);
                assert!((grams - joules / 1000.0).abs() < 1e-8, "{view} {kind} {name_g}: {grams} g for {joules} J");
            }
        }
    }
    let summary: RunSummary = serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let carbon = summary.carbon.expect("summary.json carbon");
    assert!(close(carbon.grams * 1e9, summary.energy_uj), "{carbon:?}");
    assert!(close(carbon.host_grams * 1e9, summary.socket_energy_uj), "{carbon:?}");
    assert!(carbon.intensity.contains("3600 gCO2e/kWh") && carbon.intensity.contains("embodied"), "{carbon:?}");
    for t in &summary.threads {
        assert!(close(t.carbon_g * 1e9, t.energy_uj), "{t:?}");
    }
    assert!(finished.table.contains("gCO2e") && finished.table.contains("carbon: pid 100"), "{}", finished.table);
    let html = fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("id=\"jr-carbon\"") && html.contains("3600 gCO2e/kWh"), "the report names the intensity");
}

#[test]
fn without_an_intensity_there_is_no_carbon_directory_or_field() {
    let tmp = tempfile::tempdir().unwrap();
    let (results, _) = run(tmp.path());
    let finished = results.finish().unwrap();
    let dir = &finished.outputs[0].dir;
    assert!(!dir.join("all/carbon").exists());
    let summary = fs::read_to_string(dir.join("summary.json")).unwrap();
    assert!(!summary.contains("carbon"), "{summary}");
    assert!(!finished.table.contains("gCO2e"));
}
