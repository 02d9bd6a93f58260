//! The stack stage on recorded cycles: the conservation invariants (methods sum to threads,
//! threads plus unattributed to the socket, nothing negative), the JVM rules and retirement.

use std::sync::Arc;

use super::*;
use crate::attribution::stacks::methods::{NO_SAMPLES, NO_STACK};
use crate::model::{Frame, FrameKind, SocketReport, ThreadReport};

const JVM: u32 = 100;
const NATIVE: u32 = 200;
const SOCKET_UJ: f64 = 10e6;

fn frame(short: &str, kind: FrameKind) -> Frame {
    Frame { name: Arc::from(format!("full {short}")), short: Arc::from(short), kind, line: None, raw_name: None }
}

fn stack(frames: &[Frame]) -> Stack {
    Arc::from(frames.to_vec())
}

fn thread(pid: u32, tid: u32, comm: &str, energy_uj: f64) -> ThreadReport {
    ThreadReport { pid, tid, comm: comm.into(), on_cpu_ns: 1_000_000, energy_uj, ..ThreadReport::default() }
}

/// A cycle whose socket energy is its threads' plus what no thread took.
fn cycle(n: u64, threads: Vec<ThreadReport>) -> CycleReport {
    let threads_uj: f64 = threads.iter().map(|t| t.energy_uj).sum();
    CycleReport {
        cycle: n,
        start_ns: n * 1_000_000_000,
        end_ns: (n + 1) * 1_000_000_000,
        end_epoch_ms: 1_700_000_000_000 + (n + 1) * 1000,
        threads,
        sockets: vec![SocketReport {
            socket: 0,
            energy_uj: SOCKET_UJ,
            unattributed_uj: SOCKET_UJ - threads_uj,
            ..SocketReport::default()
        }],
        ..CycleReport::default()
    }
}

/// Three recorded cycles. Cycle 0: process 100 shows only native frames (not yet a JVM), a
/// thread with energy and no sample, a thread with samples the report does not list, an empty
/// stack; process 200 is a C program. Cycle 1: a Java frame shows up in 100 (it is a JVM from now
/// on) and its GC thread runs. Cycle 2: the same stacks again.
fn recorded() -> Vec<(CycleReport, Vec<ThreadStacks>)> {
    let native = |s: &str| frame(s, FrameKind::Native);
    let java = |s: &str| frame(s, FrameKind::JavaJit);
    let boot = stack(&[native("main"), native("os::init")]);
    let compute = stack(&[java("java.lang.Thread.run"), java("com.acme.App.compute"), native("memcpy")]);
    let jdk = stack(&[java("java.lang.Thread.run"), java("java.util.HashMap.get")]);
    let gc = stack(&[native("start_thread"), native("G1ParTask::work")]);
    let write = stack(&[native("main"), native("write"), frame("ksys_write", FrameKind::Kernel)]);
    let empty = stack(&[]);
    let ts = |s: &Stack, samples| ThreadStack { stack: s.clone(), samples };
    let c0 = (
        cycle(0, vec![thread(JVM, 101, "main", 3e6), thread(JVM, 102, "worker", 1e6), thread(NATIVE, 201, "c", 2e6)]),
        vec![
            (JVM, 101, vec![ts(&boot, 3), ts(&empty, 1)]),
            (JVM, 103, vec![ts(&boot, 2)]),
            (NATIVE, 201, vec![ts(&write, 4)]),
        ],
    );
    let later = |n| {
        (
            cycle(
                n,
                vec![
                    thread(JVM, 101, "main", 4e6),
                    thread(JVM, 102, "worker", 0.5e6),
                    thread(JVM, 104, "GC Thread#0", 1.5e6),
                    thread(NATIVE, 201, "c", 1e6),
                ],
            ),
            vec![
                (JVM, 101, vec![ts(&compute, 3), ts(&jdk, 1), ts(&boot, 0)]),
                (JVM, 104, vec![ts(&gc, 2)]),
                (NATIVE, 201, vec![ts(&write, 1)]),
            ],
        )
    };
    vec![c0, later(1), later(2)]
}

fn config() -> StackConfig {
    StackConfig {
        filter: MethodFilter::parse("com.acme"),
        report_stacks: true,
        start_epoch_ms: 1_700_000_000_000,
        energy_source: "model".into(),
        ..StackConfig::default()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

/// The invariants every attributed cycle keeps.
fn assert_conserved(cycle: &AttributedCycle) {
    let report = &cycle.report;
    for charge in &cycle.charges {
        assert!(charge.energy.cpu_uj >= 0.0, "{charge:?}");
        assert!(charge.stacks.iter().all(|s| s.energy.cpu_uj >= 0.0), "{charge:?}");
        let stacks_uj: f64 = charge.stacks.iter().map(|s| s.energy.cpu_uj).sum();
        assert!(close(stacks_uj, charge.energy.cpu_uj), "stacks of {charge:?}");
        let samples: u64 = charge.stacks.iter().map(|s| s.samples).sum();
        assert_eq!(samples, charge.samples);
    }
    for t in &report.threads {
        // Methods sum to threads, in the report and in the charges.
        let methods_uj: f64 =
            cycle.methods().iter().filter(|m| (m.pid, m.tid) == (t.pid, t.tid)).map(|m| m.energy_uj).sum();
        assert!(close(methods_uj, t.energy_uj), "methods of thread {}: {methods_uj} != {}", t.tid, t.energy_uj);
        let charged: f64 =
            cycle.charges.iter().filter(|c| (c.pid, c.tid) == (t.pid, t.tid)).map(|c| c.energy.cpu_uj).sum();
        assert!(close(charged, t.energy_uj), "thread {} charged {charged}", t.tid);
        if !t.stacks.is_empty() {
            assert!(close(t.stacks.iter().map(|s| s.energy_uj).sum(), t.energy_uj));
        }
    }
    assert!(cycle.methods().iter().all(|m| m.energy_uj >= 0.0));
    // Threads plus unattributed make the socket.
    let charged: f64 = cycle.charges.iter().map(|c| c.energy.cpu_uj).sum();
    let unattributed: f64 = report.sockets.iter().map(|s| s.unattributed_uj).sum();
    assert!(unattributed >= 0.0);
    assert!(close(charged + unattributed, report.socket_energy_uj()), "{charged} + {unattributed}");
}

fn methods_of(cycle: &AttributedCycle, tid: u32) -> Vec<(&str, u64)> {
    cycle.methods().iter().filter(|m| m.tid == tid).map(|m| (m.method.as_str(), m.samples)).collect()
}

#[test]
fn every_cycle_splits_thread_energy_over_stacks_and_loses_nothing() {
    let mut stage = StackStage::new(config());
    let cycles: Vec<AttributedCycle> = recorded().into_iter().map(|(r, s)| stage.on_cycle(r, &s)).collect();
    for cycle in &cycles {
        assert_conserved(cycle);
    }
    // Eq. 10: 3 samples in 4 of the main thread's 3 J, the empty stack is `(no stack)`.
    let main = cycles[0].charges.iter().find(|c| c.tid == 101).unwrap();
    assert_eq!(main.stacks.iter().map(|s| s.energy.cpu_uj).collect::<Vec<_>>(), [2.25e6, 0.75e6]);
    assert_eq!(&*main.stacks[1].all_method, NO_STACK);
    // Not a JVM yet: the native leaf is the method. A sampled thread the report does not list
    // has no energy to split; a listed one without samples is `(no samples)`.
    assert_eq!(methods_of(&cycles[0], 101), [("os::init", 3), (NO_STACK, 1)]);
    assert_eq!(methods_of(&cycles[0], 103), [("os::init", 2)]);
    assert_eq!(methods_of(&cycles[0], 102), [(NO_SAMPLES, 0)]);
    assert_eq!(
        cycles[0].processes.iter().map(|p| (p.pid, p.rules.jvm)).collect::<Vec<_>>(),
        [(JVM, false), (NATIVE, false)]
    );
    // A JVM from cycle 1: the nearest Java frame is the method, the GC thread's work is [GC].
    assert_eq!(methods_of(&cycles[1], 101), [("com.acme.App.compute", 3), ("java.util.HashMap.get", 1)]);
    assert_eq!(methods_of(&cycles[1], 104), [("[GC]", 2)]);
    let shares = &cycles[1].charges.iter().find(|c| c.tid == 101).unwrap().stacks;
    assert_eq!(shares.iter().map(|s| &*s.app_method).collect::<Vec<_>>(), ["com.acme.App.compute", "(no app frame)"]);
    assert!(cycles[1].process(JVM).unwrap().rules.jvm);
    // The same stack keeps its id from cycle to cycle.
    let ids = |c: &AttributedCycle| c.charges.iter().flat_map(|c| c.stacks.iter().map(|s| s.id)).collect::<Vec<_>>();
    assert_eq!(ids(&cycles[1]), ids(&cycles[2]));
}

#[test]
fn run_totals_are_the_sum_of_the_cycles_and_relabelled_when_a_process_turns_out_a_jvm() {
    let mut stage = StackStage::new(config());
    let mut threads_uj = 0.0;
    for (report, stacks) in recorded() {
        threads_uj += report.threads.iter().map(|t| t.energy_uj).sum::<f64>();
        stage.on_cycle(report, &stacks);
    }
    let run = stage.run_end();
    assert_eq!(run.profiles.len(), 2);
    let total: f64 = run.profiles.iter().map(|p| p.summary.energy_uj).sum();
    assert!(close(total, threads_uj));
    for p in &run.profiles {
        let stacks_uj: f64 = p.stacks.iter().map(|s| s.energy_uj).sum();
        let threads_uj: f64 = p.summary.threads.iter().map(|t| t.energy_uj).sum();
        assert!(close(stacks_uj, p.summary.energy_uj) && close(threads_uj, p.summary.energy_uj), "{}", p.summary.pid);
        assert!(p.stacks.iter().all(|s| s.energy_uj >= 0.0));
        assert_eq!(p.summary.cycles, 3);
        assert!(close(p.summary.socket_energy_uj, 3.0 * SOCKET_UJ));
    }
    let jvm = &run.profiles[0];
    assert!(jvm.summary.jvm.is_some());
    // Cycle 0's native stacks were relabelled once the process showed Java frames.
    assert!(!jvm.summary.unattributed.all.contains_key("os::init"));
    assert!(jvm.summary.unattributed.all.contains_key("[native]"));
}

#[test]
fn a_retired_process_leaves_the_stage_and_a_reused_pid_is_another_process() {
    let mut stage = StackStage::new(config());
    let mut run = recorded().into_iter();
    let (report, stacks) = run.next().unwrap();
    let first = stage.on_cycle(report, &stacks);
    let retired = stage.retire(NATIVE).expect("a live process");
    assert_eq!(retired.key, first.process(NATIVE).unwrap().key);
    assert!(close(retired.profile().summary.energy_uj, 2e6));
    assert!(stage.retire(NATIVE).is_none(), "already retired");
    assert_eq!(stage.pids().collect::<Vec<_>>(), [JVM]);
    stage.set_aside(JVM);
    let (report, stacks) = run.next().unwrap();
    let second = stage.on_cycle(report, &stacks);
    assert_conserved(&second);
    assert_ne!(second.process(JVM).unwrap().key, first.process(JVM).unwrap().key);
    assert_ne!(second.process(NATIVE).unwrap().key, first.process(NATIVE).unwrap().key);
    // The process set aside and its successor both end the run; the retired one does not.
    let end = stage.run_end();
    assert_eq!(end.profiles.iter().map(|p| p.summary.pid).collect::<Vec<_>>(), [JVM, NATIVE, JVM]);
    assert!(close(end.profiles[2].summary.energy_uj, 4e6));
}

/// `recorded()` cycles end at 1_700_000_001_000 + n s: their middles are 0.5 s before.
fn carbon_config(intensity: crate::carbon::Intensity, pue: f64) -> StackConfig {
    StackConfig { carbon: Some(Carbon { intensity, pue }), ..config() }
}

/// Grams the formula gives for `energy_uj` at `g_per_kwh` and `pue`: kWh · intensity · PUE.
fn grams(energy_uj: f64, g_per_kwh: f64, pue: f64) -> f64 {
    energy_uj / 3.6e12 * g_per_kwh * pue
}

#[test]
fn no_intensity_means_no_carbon_anywhere() {
    let mut stage = StackStage::new(config());
    let cycles: Vec<AttributedCycle> = recorded().into_iter().map(|(r, s)| stage.on_cycle(r, &s)).collect();
    assert!(cycles.iter().all(|c| c.carbon.is_none() && c.charges.iter().all(|t| t.energy.carbon_g == 0.0)));
    assert!(stage.run_end().profiles.iter().all(|p| p.summary.carbon.is_none()));
}

#[test]
fn constant_intensity_gives_kwh_times_intensity_times_pue_at_every_level() {
    let (g_per_kwh, pue) = (400.0, 1.25);
    let mut stage = StackStage::new(carbon_config(crate::carbon::Intensity::Constant { g_per_kwh }, pue));
    let cycles: Vec<AttributedCycle> = recorded().into_iter().map(|(r, s)| stage.on_cycle(r, &s)).collect();
    for cycle in &cycles {
        let c = cycle.carbon.expect("carbon settings in every cycle");
        assert!(close(c.host_g * 1e6, grams(SOCKET_UJ, g_per_kwh, pue) * 1e6));
        for charge in &cycle.charges {
            assert!(close(charge.energy.carbon_g * 1e6, grams(charge.energy.cpu_uj, g_per_kwh, pue) * 1e6));
            let stacks_g: f64 = charge.stacks.iter().map(|s| s.energy.carbon_g).sum();
            assert!(close(stacks_g * 1e6, charge.energy.carbon_g * 1e6), "{charge:?}");
        }
    }
    let run = stage.run_end();
    let jvm = run.profiles.iter().find(|p| p.summary.pid == JVM).unwrap();
    let carbon = jvm.summary.carbon.as_ref().unwrap();
    assert!(close(carbon.grams * 1e6, grams(jvm.summary.energy_uj, g_per_kwh, pue) * 1e6), "{carbon:?}");
    assert!(close(carbon.host_grams * 1e6, grams(3.0 * SOCKET_UJ, g_per_kwh, pue) * 1e6), "{carbon:?}");
    assert_eq!((carbon.mean_g_per_kwh, carbon.pue), (g_per_kwh, pue));
    assert!(carbon.intensity.contains("400 gCO2e/kWh") && carbon.intensity.contains("PUE 1.25"));
    // Threads and methods hold the process's grams between them.
    let threads_g: f64 = jvm.summary.threads.iter().map(|t| t.carbon_g).sum();
    assert!(close(threads_g * 1e6, carbon.grams * 1e6));
    let methods = crate::attribution::stacks::aggregate::method_totals(
        &jvm.stacks,
        crate::attribution::stacks::aggregate::Scope::All,
        jvm.rules(),
    );
    assert!(close(methods.iter().map(|m| m.carbon_g).sum::<f64>() * 1e6, carbon.grams * 1e6));
}

#[test]
fn time_varying_intensity_is_interpolated_per_cycle_and_summed() {
    // 100 g/kWh at the first cycle's start, rising 50 g/kWh per second: cycle n's middle is at
    // 100 + 50 (n + 0.5).
    let first_start_s = 1_700_000_000;
    let csv = format!("timestamp,intensity\n{first_start_s},100\n{},300\n", first_start_s + 4);
    let timeline = crate::carbon::IntensityTimeline::parse(&csv).unwrap();
    let pue = 1.5;
    let intensity = crate::carbon::Intensity::Timeline { file: "grid.csv".into(), timeline };
    let mut stage = StackStage::new(carbon_config(intensity, pue));
    let cycles: Vec<AttributedCycle> = recorded().into_iter().map(|(r, s)| stage.on_cycle(r, &s)).collect();
    let mut expect_jvm_g = 0.0;
    for (n, cycle) in cycles.iter().enumerate() {
        let at = 100.0 + 50.0 * (n as f64 + 0.5);
        let c = cycle.carbon.unwrap();
        assert!(close(c.g_per_kwh, at), "cycle {n}: {} g/kWh, expected {at}", c.g_per_kwh);
        let jvm_uj: f64 = cycle.charges.iter().filter(|t| t.pid == JVM).map(|t| t.energy.cpu_uj).sum();
        expect_jvm_g += grams(jvm_uj, at, pue);
    }
    let run = stage.run_end();
    let jvm = run.profiles.iter().find(|p| p.summary.pid == JVM).unwrap();
    let carbon = jvm.summary.carbon.as_ref().unwrap();
    assert!(close(carbon.grams * 1e6, expect_jvm_g * 1e6), "{} g, expected {expect_jvm_g}", carbon.grams);
    // The machine's energy is the same each cycle: its mean intensity is the cycles' mean.
    assert!(close(carbon.mean_g_per_kwh, 100.0 + 50.0 * 1.5), "{carbon:?}");
    assert!(carbon.intensity.contains("grid.csv") && carbon.intensity.contains("interpolated"), "{carbon:?}");
}

/// Device paths are named by the process's rules as they stand at the end: a native-only path of
/// process 100 seen before it showed a Java frame is `[native]` once it is a JVM, as its CPU
/// stacks are; a GC thread's path is `[GC]`; a process with device energy and no CPU share in a
/// cycle still gets it; the native process's path is its topmost user frame.
#[test]
fn device_paths_follow_the_jvm_flip_and_the_thread_kinds() {
    use crate::attribution::stacks::device_run::tests::{device_cycle, java_report};
    use crate::device_reports::Device;
    let native = |name: &str| FrameReport { name: name.into(), kind: FrameKind::Native, line: None, raw_name: None };
    let boot = vec![native("main"), native("os::init"), native("write")];
    let send =
        vec![java_report("void java.lang.Thread.run()"), java_report("void com.acme.App.send()"), native("write")];
    let gc = vec![native("start_thread"), native("G1ParTask::work"), native("write")];
    let mut stage = StackStage::new(config());
    for (n, (mut report, stacks)) in recorded().into_iter().enumerate() {
        let mut paths = vec![(101, boot.clone(), 1e6)];
        if n > 0 {
            paths.extend([(101, send.clone(), 2e6), (104, gc.clone(), 0.5e6)]);
        }
        let mut net = device_cycle(Device::Network, JVM, "", paths, 0.0);
        let native_process = device_cycle(
            Device::Network,
            300,
            "other",
            vec![(301, vec![native("main"), native("write")], 0.25e6)],
            0.0,
        );
        net.processes.extend(native_process.processes);
        net.threads.extend(native_process.threads);
        net.paths.extend(native_process.paths);
        report.device_energy = vec![net];
        stage.on_cycle(report, &stacks);
    }
    let profiles = stage.profiles();
    let jvm = profiles.iter().find(|p| p.summary.pid == JVM).unwrap();
    let s = jvm.summary.device_energy.as_ref().unwrap().network.as_ref().unwrap();
    assert_eq!(s.threads.iter().map(|t| (t.tid, t.energy_j)).collect::<Vec<_>>(), [(101, 7.0), (104, 1.0)]);
    let all: Vec<(&str, f64)> = s.methods.all.iter().map(|m| (m.name.as_str(), m.energy_j)).collect();
    // Hand-checked: boot 3 × 1 J, send 2 × 2 J, the GC thread 2 × 0.5 J.
    assert_eq!(all, [("com.acme.App.send", 4.0), ("[native]", 3.0), ("[GC]", 1.0)]);
    assert_eq!(s.energy_j, 8.0);
    let other = profiles.iter().find(|p| p.summary.pid == 300).expect("a process with device energy only");
    let s = other.summary.device_energy.as_ref().unwrap().network.as_ref().unwrap();
    assert_eq!((s.methods.all[0].name.as_str(), s.methods.all[0].energy_j), ("write", 0.75));
    let native_c = profiles.iter().find(|p| p.summary.pid == NATIVE).unwrap();
    let s = native_c.summary.device_energy.as_ref().unwrap().network.as_ref().unwrap();
    assert_eq!((s.energy_j, s.methods.all.len()), (0.0, 0), "profiled, no byte moved: 0 J");
}
