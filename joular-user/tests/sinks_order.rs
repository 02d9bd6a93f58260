//! Sinks only read: a recorded run of three processes (a JVM, a native one, one that ends and
//! one whose PID is reused) goes through the stack stage once per cycle, then through the result
//! tree, the periodic profile, the metrics registry and the JSON lines, in the session's order
//! and in shuffled orders; every file they write must be the same, byte for byte. The cycles
//! carry network and disk energy (`--devices network,disk`), so the device outputs are held to
//! it too.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use joular_user::attribution::stacks::{AttributedCycle, Retired, RunEnd, StackStage, ThreadStacks};
use joular_user::device_reports::{Device, DeviceEnergy, PathDeviceEnergy, ProcessDeviceEnergy, ThreadDeviceEnergy};
use joular_user::fleet::{MetricsRegistry, ProcFs, RegistryConfig};
use joular_user::model::{
    CycleReport, Frame, FrameKind, FrameReport, ProcessReport, SocketReport, Stack, ThreadReport, ThreadStack,
};
use joular_user::output::{IntervalProfile, MethodFilter, OutputFiles, ResultTree, ResultsConfig, Sink, SinkError};
use joular_user::safe_write::{Modes, OutDir};

const START_MS: u64 = 1_700_000_000_000;

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn frame(short: &str, kind: FrameKind) -> Frame {
    Frame { name: Arc::from(format!("{short}(x)")), short: Arc::from(short), kind, line: None, raw_name: None }
}

/// Twelve 1 s cycles: JVM stacks (app, JDK, interpreter, stubs, kernel), an empty stack, a native
/// process, HotSpot thread names, threads with energy and no sample, samples of threads the
/// report does not list, a flagged socket and drops.
fn recorded_run() -> Vec<(CycleReport, Vec<ThreadStacks>)> {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let kinds = [
        FrameKind::JavaJit,
        FrameKind::JavaInlined,
        FrameKind::Native,
        FrameKind::Kernel,
        FrameKind::Stub,
        FrameKind::JavaInterpreted,
    ];
    let pool: Vec<Frame> = (0..60)
        .map(|i| {
            let name = match i % 4 {
                0 => format!("com.acme.A{i}.m"),
                1 => format!("java.util.X{i}.op"),
                2 => format!("fn_{i}"),
                _ if i % 8 == 3 => "Interpreter".into(),
                _ => format!("org.foo.B{i}.run"),
            };
            frame(&name, kinds[i % kinds.len()])
        })
        .collect();
    let entry = frame("thread_native_entry(Thread*)", FrameKind::Native);
    let mut stacks: Vec<Stack> = (0..80)
        .map(|i| {
            let depth = 1 + rng.below(8);
            let mut frames = Vec::new();
            if i % 3 == 0 {
                frames.push(entry.clone());
            }
            frames.extend((0..depth).map(|_| pool[rng.below(pool.len())].clone()));
            Arc::from(frames)
        })
        .collect();
    stacks.push(Arc::from(Vec::<Frame>::new()));
    stacks.push(Arc::from(vec![frame("main", FrameKind::Native), frame("write", FrameKind::Native)]));
    let names = ["worker", "GC Thread#0", "C2 CompilerThre", "VM Thread", "main", ""];
    let mut run = Vec::new();
    for n in 0..12u64 {
        let mut report = CycleReport {
            cycle: n,
            start_ns: n * 1_000_000_000,
            end_ns: (n + 1) * 1_000_000_000 + n * 1000,
            end_epoch_ms: START_MS + (n + 1) * 1000,
            ..CycleReport::default()
        };
        report.sockets.push(SocketReport {
            socket: 0,
            energy_uj: 9e6 + n as f64,
            unattributed_uj: 1e6 + 0.3 * n as f64,
            flagged: n == 4,
            ..SocketReport::default()
        });
        report.drops.insert("samples".into(), n);
        let mut thread_stacks: Vec<ThreadStacks> = Vec::new();
        for pid in [10u32, 20, 30] {
            if pid == 30 && n < 3 {
                continue;
            }
            let comm = if n % 5 == 2 { String::new() } else { format!("proc{pid}") };
            report.processes.push(ProcessReport { pid, comm, energy_uj: 1.0, ..ProcessReport::default() });
            for t in 0..4u32 {
                let tid = pid + t;
                if rng.below(6) != 0 {
                    report.threads.push(ThreadReport {
                        pid,
                        tid,
                        comm: names[(t as usize + n as usize) % names.len()].into(),
                        on_cpu_ns: 1000 + rng.below(1000) as u64,
                        samples: 3,
                        energy_uj: rng.below(100_000) as f64 * 1.37,
                        ..ThreadReport::default()
                    });
                }
                let mut list = Vec::new();
                for _ in 0..rng.below(4) {
                    let stack = if pid == 20 {
                        stacks[stacks.len() - 1 - rng.below(2)].clone()
                    } else {
                        stacks[rng.below(stacks.len())].clone()
                    };
                    list.push(ThreadStack { stack, samples: rng.below(4) as u64 });
                }
                if !list.is_empty() || rng.below(2) == 0 {
                    thread_stacks.push((pid, tid, list));
                }
            }
        }
        report.device_energy = device_energy(&report, &stacks, &mut rng);
        run.push((report, thread_stacks));
    }
    run
}

/// Network and disk energy on up to three threads of the cycle (not the native process's), each
/// on a call path from the pool, plus some no profiled byte explains.
fn device_energy(report: &CycleReport, stacks: &[Stack], rng: &mut Rng) -> Vec<DeviceEnergy> {
    let frames = |stack: &Stack| -> Vec<FrameReport> {
        stack
            .iter()
            .map(|f| FrameReport {
                // As HotSpot names a Java method, so its short name is the CPU frame's.
                name: if f.kind.is_java() { format!("void {}()", f.short) } else { f.name.to_string() },
                kind: f.kind,
                line: f.line,
                raw_name: None,
            })
            .collect()
    };
    Device::ALL
        .iter()
        .map(|&device| {
            let mut paths = Vec::new();
            for t in report.threads.iter().filter(|t| t.pid != 20).take(3) {
                let energy_uj = (1 + rng.below(50_000)) as f64 * 0.91;
                let stack = &stacks[rng.below(stacks.len())];
                paths.push(PathDeviceEnergy { pid: t.pid, tid: t.tid, frames: frames(stack), energy_uj, bytes: 10 });
            }
            let mut threads: BTreeMap<(u32, u32), f64> = BTreeMap::new();
            let mut processes: BTreeMap<u32, f64> = BTreeMap::new();
            for p in &paths {
                *threads.entry((p.pid, p.tid)).or_default() += p.energy_uj;
                *processes.entry(p.pid).or_default() += p.energy_uj;
            }
            let unattributed_uj = 1000.0;
            DeviceEnergy {
                device,
                estimated: true,
                source: "model: test".into(),
                energy_uj: processes.values().sum::<f64>() + unattributed_uj,
                unattributed_uj,
                units: vec![],
                processes: processes
                    .into_iter()
                    .map(|(pid, energy_uj)| ProcessDeviceEnergy { pid, energy_uj, bytes: 10 })
                    .collect(),
                threads: threads
                    .into_iter()
                    .map(|((pid, tid), energy_uj)| ThreadDeviceEnergy {
                        pid,
                        tid,
                        comm: String::new(),
                        energy_uj,
                        bytes: 10,
                    })
                    .collect(),
                paths,
            }
        })
        .collect()
}

/// `serve --profile-dir`'s interval files, every 4 cycles.
struct Intervals {
    profile: IntervalProfile,
    dir: OutDir,
}

impl Sink for Intervals {
    fn on_cycle(&mut self, cycle: &AttributedCycle) -> Result<(), SinkError> {
        self.profile.on_cycle(cycle);
        if cycle.report.cycle % 4 == 3 {
            let n = cycle.report.cycle;
            self.profile.write_pprof(&self.dir, &format!("i{n}.pprof.gz")).unwrap();
            self.profile.write_folded(&self.dir, &format!("i{n}.folded")).unwrap();
            self.profile.reset(cycle.report.end_epoch_ms);
        }
        Ok(())
    }
}

/// The Prometheus registry, scraped after every cycle.
struct Metrics {
    registry: MetricsRegistry,
    procs: ProcFs,
    out: std::fs::File,
}

impl Sink for Metrics {
    fn on_cycle(&mut self, cycle: &AttributedCycle) -> Result<(), SinkError> {
        self.registry.on_cycle(cycle, &self.procs);
        writeln!(self.out, "{}", self.registry.render()).unwrap();
        Ok(())
    }
}

/// `--json`: the attributed cycle report, one a line.
struct Json(std::fs::File);

impl Sink for Json {
    fn on_cycle(&mut self, cycle: &AttributedCycle) -> Result<(), SinkError> {
        serde_json::to_writer(&mut self.0, &cycle.report).unwrap();
        writeln!(self.0).unwrap();
        Ok(())
    }

    fn on_retire(&mut self, retired: &Retired) -> Result<Option<OutputFiles>, SinkError> {
        writeln!(self.0, "retired {}", retired.pid).unwrap();
        Ok(None)
    }

    fn finish(&mut self, run: &RunEnd) -> Vec<OutputFiles> {
        writeln!(self.0, "end {}", run.profiles.len()).unwrap();
        Vec::new()
    }
}

fn config(out: &Path) -> ResultsConfig {
    ResultsConfig {
        results_root: out.join("results"),
        write_files: true,
        filter: MethodFilter::parse("com.acme,org.foo"),
        start_epoch_ms: START_MS,
        energy_source: "model".into(),
        estimated: true,
        energy_detail: String::new(),
        carbon: None,
        report_stacks: true,
        evolution: true,
        runtime_call_trees: true,
        top_n: 10,
        native_frames: false,
        html: true,
        modes: Modes::for_caller(),
        cpu_frequencies: Default::default(),
    }
}

/// Runs the recorded cycles through the stage and the sinks in `order` (a permutation of the
/// session's order), with a process set aside at cycle 5 and one retired at cycle 8.
fn run(out: &Path, order: &[usize]) {
    let config = config(out);
    let mut stage = StackStage::new(config.stack_config());
    let interval_dir = OutDir::create_all(&out.join("interval"), Modes::for_caller()).unwrap();
    let mut sinks: Vec<Box<dyn Sink>> = vec![
        Box::new(ResultTree::new(config).unwrap()),
        Box::new(Metrics {
            registry: MetricsRegistry::new(RegistryConfig { top_methods: 3, ..RegistryConfig::default() }),
            procs: ProcFs::new(out.join("no-proc")),
            out: std::fs::File::create(out.join("metrics.txt")).unwrap(),
        }),
        Box::new(Intervals {
            profile: IntervalProfile::new("model", true, "host-1", START_MS, false),
            dir: interval_dir,
        }),
        Box::new(Json(std::fs::File::create(out.join("cycles.jsonl")).unwrap())),
    ];
    let mut ordered: Vec<Box<dyn Sink>> = Vec::new();
    let mut slots: Vec<Option<Box<dyn Sink>>> = sinks.drain(..).map(Some).collect();
    for &i in order {
        ordered.push(slots[i].take().expect("a permutation"));
    }
    for (report, stacks) in recorded_run() {
        let n = report.cycle;
        let cycle = stage.on_cycle(report, &stacks);
        for sink in &mut ordered {
            sink.on_cycle(&cycle).unwrap();
        }
        if n == 5 {
            stage.set_aside(20);
        }
        if n == 8 {
            let retired = stage.retire(10).expect("process 10 is live");
            for sink in &mut ordered {
                sink.on_retire(&retired).unwrap();
            }
        }
    }
    stage.add_degraded("x_cause", 3);
    let end = stage.run_end();
    for sink in &mut ordered {
        sink.finish(&end);
    }
}

/// Every file under `root` by path, with the run directories of reused PIDs (named after the
/// wall clock) renamed `<pid>-reused`.
fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let relative: PathBuf = path
                    .strip_prefix(root)
                    .unwrap()
                    .components()
                    .map(|c| {
                        let c = c.as_os_str().to_string_lossy().into_owned();
                        match c.split_once('-') {
                            Some((pid, ms)) if ms.parse::<u64>().is_ok_and(|ms| ms != START_MS) => {
                                format!("{pid}-reused")
                            }
                            _ => c,
                        }
                    })
                    .collect();
                out.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

#[test]
fn the_order_of_the_sinks_changes_no_output_file() {
    let tmp = tempfile::tempdir().unwrap();
    let session_order = [0, 1, 2, 3];
    run(&tmp.path().join("session"), &session_order);
    let expected = files(&tmp.path().join("session"));
    // The tree, the interval files, the metrics and the JSON all wrote, for both processes.
    for want in [
        "cycles.jsonl",
        "metrics.txt",
        "interval/i11.folded",
        "results/10-1700000000000/summary.json",
        "results/10-1700000000000/network/all/total/methods/joularJX-10-all-methods-energy.csv",
        "results/30-1700000000000/total/app/total/calltrees/joularJX-30-filtered-call-trees-energy.csv",
    ] {
        assert!(expected.contains_key(Path::new(want)), "{want} missing: {:?}", expected.keys());
    }
    assert!(expected.keys().any(|p| p.starts_with("results/20-reused")), "the reused PID's tree");
    let mut rng = Rng(0x5eed);
    for seed in 0..4 {
        let mut order = session_order.to_vec();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        if seed == 0 {
            order.reverse();
        }
        let dir = tmp.path().join(format!("shuffled-{seed}"));
        run(&dir, &order);
        let got = files(&dir);
        assert_eq!(got.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>(), "order {order:?}");
        for (path, bytes) in &expected {
            assert!(got[path] == *bytes, "{} differs with the sinks in order {order:?}", path.display());
        }
    }
}
