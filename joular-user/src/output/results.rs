//! The session sink: fed once per cycle by the session loop, rendered at the end.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::aggregate::{sort_totals, NamedTotal, Scope, StackTable};
use super::joularjx::{Kind, RunDir};
use super::methods::{bucket_stack, call_tree, MethodFilter, NO_SAMPLES};
use super::profile::{ProcessProfile, RunSummary, ThreadTotal};
use super::render::{render_process, OutputFiles, RenderSet};
use super::table::top_methods_table;
use super::OutputError;
use crate::model::{CycleReport, FrameReport, MethodReport, Stack, StackReport, ThreadStack};
use crate::safe_write::{Modes, OutDir};

/// The symbolized stacks of one thread in one cycle: `(pid, tid, stacks)`.
pub type ThreadStacks = (u32, u32, Vec<ThreadStack>);

#[derive(Debug, Clone)]
pub struct ResultsConfig {
    /// The `joularjx-result` directory; one `<pid>-<start_epoch_ms>` directory per process
    /// goes inside it.
    pub results_root: PathBuf,
    /// Write that tree. Off, the sink still fills each cycle's `methods` and stacks (JSON,
    /// metrics) and the end table, but touches no file (serve mode without `--results`).
    pub write_files: bool,
    /// `--filter` prefixes of the "app" view.
    pub filter: MethodFilter,
    pub start_epoch_ms: u64,
    /// Energy source label (`powercap`, `perf`, `msr`, `model`) and whether it is a model.
    pub energy_source: String,
    pub estimated: bool,
    /// Fill `threads[].stacks` of each cycle report: costly with many stacks, so only
    /// worth it when the report is printed (`--json`).
    pub report_stacks: bool,
    /// Append per-method rows to `evolution/` each cycle.
    pub evolution: bool,
    /// Rewrite `runtime/calltrees` each cycle (JoularJX `save-call-trees-runtime-data`):
    /// one row per distinct stack of the cycle, several MB a second on a busy JVM.
    pub runtime_call_trees: bool,
    /// Rows of the end-of-run table.
    pub top_n: usize,
    /// Permissions of the files and directories written.
    pub modes: Modes,
}

/// What `finish` wrote and the table to print.
#[derive(Debug, Clone, Default)]
pub struct FinishSummary {
    pub outputs: Vec<OutputFiles>,
    pub table: String,
}

struct Process {
    dir: Option<RunDir>,
    table: StackTable,
    threads: BTreeMap<u32, ThreadTotal>,
    /// The process's own name when the cycle reports gave one (`processes[].comm`).
    comm: String,
}

/// One cycle's energy and samples of one process, per method and call tree.
#[derive(Default)]
struct CycleSums {
    all_methods: HashMap<Arc<str>, (f64, u64)>,
    app_methods: HashMap<Arc<str>, (f64, u64)>,
    all_trees: HashMap<usize, (f64, u64)>,
    app_trees: HashMap<Arc<str>, (f64, u64)>,
}

/// Without a result tree, a process's run totals only feed the end table; past this many
/// distinct stacks they start over, so a JVM running for weeks holds bounded memory.
const MAX_STACKS_WITHOUT_FILES: usize = 1 << 16;

fn add(sum: &mut (f64, u64), energy_uj: f64, samples: u64) {
    sum.0 += energy_uj;
    sum.1 += samples;
}

fn named<K>(sums: HashMap<K, (f64, u64)>, name: impl Fn(K) -> Arc<str>) -> Vec<NamedTotal> {
    let mut totals: Vec<NamedTotal> = sums
        .into_iter()
        .map(|(k, (energy_uj, samples))| NamedTotal {
            name: name(k),
            energy_uj,
            samples,
        })
        .collect();
    sort_totals(&mut totals);
    totals
}

pub struct Results {
    config: ResultsConfig,
    /// The results root, held open from the start (`None` when no file is written).
    root: Option<OutDir>,
    no_samples: Stack,
    processes: BTreeMap<u32, Process>,
    cycles: u64,
    duration_s: f64,
    end_epoch_ms: u64,
    socket_energy_uj: f64,
    unattributed_uj: f64,
    drops: BTreeMap<String, u64>,
}

impl Results {
    pub fn new(config: ResultsConfig) -> Result<Self, OutputError> {
        let root = if config.write_files {
            Some(
                OutDir::create_all(&config.results_root, config.modes)
                    .map_err(|e| OutputError::io(&config.results_root, e))?,
            )
        } else {
            None
        };
        Ok(Self {
            root,
            end_epoch_ms: config.start_epoch_ms,
            config,
            no_samples: bucket_stack(NO_SAMPLES),
            processes: BTreeMap::new(),
            cycles: 0,
            duration_s: 0.0,
            socket_energy_uj: 0.0,
            unattributed_uj: 0.0,
            drops: BTreeMap::new(),
        })
    }

    fn process(&mut self, pid: u32) -> Result<&mut Process, OutputError> {
        if !self.processes.contains_key(&pid) {
            let dir = match &self.root {
                Some(root) => Some(RunDir::create(root, pid, self.config.start_epoch_ms)?),
                None => None,
            };
            self.processes.insert(
                pid,
                Process {
                    dir,
                    table: StackTable::default(),
                    threads: BTreeMap::new(),
                    comm: String::new(),
                },
            );
        }
        Ok(self.processes.get_mut(&pid).expect("inserted above"))
    }

    /// Splits each thread's energy over its stacks by sample share (a thread with energy
    /// but no sample goes to `(no samples)`), fills `report.methods` ("all" rule) and, if
    /// configured, `report.threads[].stacks`, and writes the runtime and evolution files.
    pub fn on_cycle(
        &mut self,
        report: &mut CycleReport,
        stacks: &[ThreadStacks],
    ) -> Result<(), OutputError> {
        let duration_s = report.end_ns.saturating_sub(report.start_ns) as f64 / 1e9;
        self.cycles += 1;
        self.duration_s += duration_s;
        let end_epoch_ms = if report.end_epoch_ms > 0 {
            report.end_epoch_ms
        } else {
            now_epoch_ms()
        };
        self.end_epoch_ms = self.end_epoch_ms.max(end_epoch_ms);
        for socket in &report.sockets {
            self.socket_energy_uj += socket.energy_uj;
            self.unattributed_uj += socket.unattributed_uj;
        }
        for (cause, count) in &report.drops {
            *self.drops.entry(cause.clone()).or_default() += count;
        }

        let index: HashMap<(u32, u32), usize> = report
            .threads
            .iter()
            .enumerate()
            .map(|(i, t)| ((t.pid, t.tid), i))
            .collect();
        let mut covered = vec![false; report.threads.len()];
        let mut sums: BTreeMap<u32, CycleSums> = BTreeMap::new();
        let mut method_reports = Vec::new();
        let report_stacks = self.config.report_stacks;

        for (pid, tid, thread_stacks) in stacks {
            let slot = index.get(&(*pid, *tid)).copied();
            let energy_uj = slot.map_or(0.0, |i| report.threads[i].energy_uj);
            let total_samples: u64 = thread_stacks.iter().map(|s| s.samples).sum();
            if total_samples == 0 {
                // Left to the uncovered-thread pass below, which buckets it as no samples.
                continue;
            }
            if let Some(i) = slot {
                covered[i] = true;
            }
            let mut thread_methods: HashMap<Arc<str>, (f64, u64)> = HashMap::new();
            let mut stack_reports = Vec::new();
            let filter = self.config.filter.clone();
            let process = self.process(*pid)?;
            let cycle = sums.entry(*pid).or_default();
            for ts in thread_stacks.iter().filter(|s| s.samples > 0) {
                let stack_energy_uj = energy_uj * ts.samples as f64 / total_samples as f64;
                let id = process.table.intern(&ts.stack, &filter);
                charge(
                    process,
                    cycle,
                    &mut thread_methods,
                    id,
                    stack_energy_uj,
                    ts.samples,
                );
                if report_stacks && slot.is_some() {
                    stack_reports.push(StackReport {
                        frames: ts
                            .stack
                            .iter()
                            .map(|f| FrameReport {
                                name: f.name.to_string(),
                                kind: f.kind,
                                line: f.line,
                            })
                            .collect(),
                        samples: ts.samples,
                        energy_uj: stack_energy_uj,
                    });
                }
            }
            let thread = process.threads.entry(*tid).or_insert_with(|| ThreadTotal {
                tid: *tid,
                ..ThreadTotal::default()
            });
            thread.samples += total_samples;
            if let Some(i) = slot {
                report.threads[i].stacks = stack_reports;
            }
            push_methods(&mut method_reports, *pid, *tid, thread_methods);
        }

        for (i, thread) in report.threads.iter().enumerate() {
            if covered[i] || thread.energy_uj <= 0.0 {
                continue;
            }
            let no_samples = self.no_samples.clone();
            let filter = self.config.filter.clone();
            let process = self.process(thread.pid)?;
            let id = process.table.intern(&no_samples, &filter);
            let mut thread_methods = HashMap::new();
            charge(
                process,
                sums.entry(thread.pid).or_default(),
                &mut thread_methods,
                id,
                thread.energy_uj,
                0,
            );
            push_methods(&mut method_reports, thread.pid, thread.tid, thread_methods);
        }

        for thread in &report.threads {
            if let Some(process) = self.processes.get_mut(&thread.pid) {
                let total = process
                    .threads
                    .entry(thread.tid)
                    .or_insert_with(|| ThreadTotal {
                        tid: thread.tid,
                        ..ThreadTotal::default()
                    });
                total.energy_uj += thread.energy_uj;
                total.on_cpu_ns += thread.on_cpu_ns;
                if !thread.comm.is_empty() {
                    total.comm.clone_from(&thread.comm);
                }
            }
        }
        for p in report.processes.iter().filter(|p| !p.comm.is_empty()) {
            if let Some(process) = self.processes.get_mut(&p.pid) {
                process.comm.clone_from(&p.comm);
            }
        }
        report.methods = method_reports;

        if !self.config.write_files {
            for process in self.processes.values_mut() {
                if process.table.len() > MAX_STACKS_WITHOUT_FILES {
                    process.table = StackTable::default();
                }
            }
        }
        let filter = &self.config.filter;
        for (pid, cycle) in sums {
            let process = &self.processes[&pid];
            let Some(dir) = &process.dir else { continue };
            let table = &process.table;
            let all_methods = named(cycle.all_methods, |m| m);
            let app_methods = named(cycle.app_methods, |m| m);
            let app = Scope::App(filter);
            dir.write_runtime(Scope::All, Kind::Methods, &all_methods, duration_s)?;
            dir.write_runtime(app, Kind::Methods, &app_methods, duration_s)?;
            if self.config.runtime_call_trees {
                let all_trees = named(cycle.all_trees, |id| {
                    Arc::from(call_tree(&table.entry(id).total.stack))
                });
                let app_trees = named(cycle.app_trees, |t| t);
                dir.write_runtime(Scope::All, Kind::CallTrees, &all_trees, duration_s)?;
                dir.write_runtime(app, Kind::CallTrees, &app_trees, duration_s)?;
            }
            if self.config.evolution {
                dir.append_evolution(Scope::All, &all_methods, end_epoch_ms / 1000, duration_s)?;
                dir.append_evolution(app, &app_methods, end_epoch_ms / 1000, duration_s)?;
            }
        }
        Ok(())
    }

    /// The run so far, one profile per process.
    pub fn profiles(&self) -> Vec<ProcessProfile> {
        self.processes
            .iter()
            .map(|(&pid, process)| self.profile(pid, process))
            .collect()
    }

    fn profile(&self, pid: u32, process: &Process) -> ProcessProfile {
        let stacks = process.table.totals();
        let threads: Vec<ThreadTotal> = process.threads.values().cloned().collect();
        let comm = Some(&process.comm)
            .filter(|c| !c.is_empty())
            .or_else(|| process.threads.get(&pid).map(|t| &t.comm))
            .or_else(|| process.threads.values().next().map(|t| &t.comm))
            .cloned()
            .unwrap_or_default();
        ProcessProfile {
            summary: RunSummary {
                pid,
                comm,
                start_epoch_ms: self.config.start_epoch_ms,
                end_epoch_ms: self.end_epoch_ms,
                duration_s: self.duration_s,
                cycles: self.cycles,
                filters: self.config.filter.prefixes().to_vec(),
                energy_source: self.config.energy_source.clone(),
                estimated: self.config.estimated,
                energy_uj: stacks.iter().map(|s| s.energy_uj).sum(),
                samples: stacks.iter().map(|s| s.samples).sum(),
                socket_energy_uj: self.socket_energy_uj,
                unattributed_uj: self.unattributed_uj,
                drops: self.drops.clone(),
                threads,
            },
            stacks,
        }
    }

    /// Ends a process that has exited: writes its end-of-run files now (when the tree is
    /// written) and frees everything held for it, so a long host-mode run holds only live
    /// processes. Unknown pids are ignored.
    pub fn retire(&mut self, pid: u32) -> Result<Option<OutputFiles>, OutputError> {
        let Some(process) = self.processes.remove(&pid) else {
            return Ok(None);
        };
        let Some(dir) = &process.dir else {
            return Ok(None);
        };
        let profile = self.profile(pid, &process);
        render_process(dir.out_dir(), &profile, &self.config.filter, RenderSet::ALL).map(Some)
    }

    /// Pids this sink holds state for.
    pub fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.processes.keys().copied()
    }

    /// Writes every end-of-run file from the totals so far and returns the top-methods
    /// table. Takes `&self` so a long run can also checkpoint; calling it again rewrites.
    pub fn finish(&self) -> Result<FinishSummary, OutputError> {
        let profiles = self.profiles();
        let mut outputs = Vec::with_capacity(profiles.len());
        for (profile, process) in profiles.iter().zip(self.processes.values()) {
            if let Some(dir) = &process.dir {
                outputs.push(render_process(
                    dir.out_dir(),
                    profile,
                    &self.config.filter,
                    RenderSet::ALL,
                )?);
            }
        }
        Ok(FinishSummary {
            outputs,
            table: top_methods_table(&profiles, None, self.config.top_n),
        })
    }
}

fn charge(
    process: &mut Process,
    cycle: &mut CycleSums,
    thread_methods: &mut HashMap<Arc<str>, (f64, u64)>,
    id: usize,
    energy_uj: f64,
    samples: u64,
) {
    process.table.add(id, energy_uj, samples);
    let entry = process.table.entry(id);
    add(
        cycle
            .all_methods
            .entry(entry.all_method.clone())
            .or_default(),
        energy_uj,
        samples,
    );
    add(
        cycle
            .app_methods
            .entry(entry.app_method.clone())
            .or_default(),
        energy_uj,
        samples,
    );
    add(cycle.all_trees.entry(id).or_default(), energy_uj, samples);
    add(
        cycle.app_trees.entry(entry.app_tree.clone()).or_default(),
        energy_uj,
        samples,
    );
    add(
        thread_methods.entry(entry.all_method.clone()).or_default(),
        energy_uj,
        samples,
    );
}

fn push_methods(
    out: &mut Vec<MethodReport>,
    pid: u32,
    tid: u32,
    methods: HashMap<Arc<str>, (f64, u64)>,
) {
    for total in named(methods, |m| m) {
        out.push(MethodReport {
            pid,
            tid,
            method: total.name.to_string(),
            energy_uj: total.energy_uj,
            samples: total.samples,
        });
    }
}

fn now_epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Frame, FrameKind, SocketReport, ThreadReport};
    use crate::output::methods::tests::{frame, java};
    use crate::output::report::{report_to, ReportArgs, ReportFormat};
    use std::fs;
    use std::path::Path;

    const PID: u32 = 100;
    const START_MS: u64 = 1_700_000_000_000;

    fn stack(frames: &[Frame]) -> Stack {
        Arc::from(frames.to_vec())
    }

    fn thread(tid: u32, comm: &str, energy_uj: f64) -> ThreadReport {
        ThreadReport {
            pid: PID,
            tid,
            comm: comm.into(),
            on_cpu_ns: 1000,
            energy_uj,
            ..ThreadReport::default()
        }
    }

    fn cycle(n: u64, start_s: u64, end_s: u64, threads: Vec<ThreadReport>) -> CycleReport {
        CycleReport {
            cycle: n,
            start_ns: start_s * 1_000_000_000,
            end_ns: end_s * 1_000_000_000,
            end_epoch_ms: START_MS + end_s * 1000,
            threads,
            drops: [("samples".to_owned(), n)].into(),
            sockets: vec![SocketReport {
                socket: 0,
                energy_uj: 10e6,
                unattributed_uj: 2e6,
                ..SocketReport::default()
            }],
            ..CycleReport::default()
        }
    }

    /// Two cycles (1 s, then 2 s): JDK work above an app method, a syscall, a thread with
    /// energy but no samples, an idle thread, and a thread with only JDK frames.
    fn fixture() -> Vec<(CycleReport, Vec<ThreadStacks>)> {
        let run = java("java.lang.Thread.run");
        let compute = java("com.acme.App.compute");
        let multiply = stack(&[
            run.clone(),
            compute.clone(),
            java("java.math.BigInteger.multiply"),
        ]);
        let write = stack(&[
            run.clone(),
            compute,
            frame("write", FrameKind::Native),
            frame("ksys_write", FrameKind::Kernel),
        ]);
        let jdk = stack(&[run, java("java.util.HashMap.get")]);
        let ts = |stack: &Stack, samples| ThreadStack {
            stack: stack.clone(),
            samples,
        };
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
                    ],
                ),
                vec![
                    (PID, 101, vec![ts(&multiply, 2), ts(&write, 1)]),
                    (PID, 102, vec![]),
                ],
            ),
            (
                cycle(
                    2,
                    1,
                    3,
                    vec![thread(101, "worker", 2e6), thread(104, "jdk", 0.5e6)],
                ),
                vec![
                    (PID, 101, vec![ts(&multiply, 1)]),
                    (PID, 104, vec![ts(&jdk, 1)]),
                ],
            ),
        ]
    }

    fn config(root: &Path) -> ResultsConfig {
        ResultsConfig {
            results_root: root.to_owned(),
            write_files: true,
            filter: MethodFilter::parse("com.acme"),
            start_epoch_ms: START_MS,
            energy_source: "model".into(),
            estimated: true,
            report_stacks: true,
            evolution: true,
            runtime_call_trees: true,
            top_n: 10,
            modes: Modes::for_caller(),
        }
    }

    fn run(root: &Path) -> (Results, Vec<CycleReport>) {
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
                let methods: f64 = report
                    .methods
                    .iter()
                    .filter(|m| m.tid == t.tid)
                    .map(|m| m.energy_uj)
                    .sum();
                assert!(
                    close(methods, t.energy_uj),
                    "tid {} methods {methods} thread {}",
                    t.tid,
                    t.energy_uj
                );
                cycles_uj += t.energy_uj;
                if !t.stacks.is_empty() {
                    let stacks: f64 = t.stacks.iter().map(|s| s.energy_uj).sum();
                    assert!(close(stacks, t.energy_uj));
                }
            }
        }
        let gc = reports[0].methods.iter().find(|m| m.tid == 102).unwrap();
        assert_eq!((gc.method.as_str(), gc.samples), (NO_SAMPLES, 0));
        let worker = &reports[0].threads[0];
        assert_eq!(worker.stacks.len(), 2);
        assert_eq!(
            worker.stacks[0].frames[0].name, "full java.lang.Thread.run",
            "root first"
        );

        let profiles = results.profiles();
        let summary = &profiles[0].summary;
        assert!(
            close(summary.energy_uj, cycles_uj),
            "{} vs {cycles_uj}",
            summary.energy_uj
        );
        assert!(close(
            profiles[0].stacks.iter().map(|s| s.energy_uj).sum(),
            cycles_uj
        ));
        assert_eq!(
            (summary.cycles, summary.duration_s, summary.samples),
            (2, 3.0, 5)
        );
        assert_eq!(
            (summary.socket_energy_uj, summary.unattributed_uj),
            (20e6, 4e6)
        );
        assert_eq!(summary.drops["samples"], 3);
        assert_eq!(
            summary.comm, "worker",
            "no tid == pid thread: first thread's comm"
        );
        let threads_uj: f64 = summary.threads.iter().map(|t| t.energy_uj).sum();
        assert!(close(threads_uj, cycles_uj));
    }

    #[test]
    fn without_files_the_cycle_reports_are_the_same_and_nothing_is_written() {
        let with = tempfile::tempdir().unwrap();
        let without = tempfile::tempdir().unwrap();
        let root = without.path().join("never-created");
        let (_, expected) = run(with.path());
        let mut results = Results::new(ResultsConfig {
            write_files: false,
            ..config(&root)
        })
        .unwrap();
        for ((mut report, stacks), want) in fixture().into_iter().zip(&expected) {
            results.on_cycle(&mut report, &stacks).unwrap();
            let methods = |r: &CycleReport| -> Vec<(u32, String, u64)> {
                r.methods
                    .iter()
                    .map(|m| (m.tid, m.method.clone(), m.samples))
                    .collect()
            };
            assert_eq!(methods(&report), methods(want));
        }
        let finished = results.finish().unwrap();
        assert!(finished.outputs.is_empty());
        assert!(finished.table.contains("java.math.BigInteger.multiply"));
        assert!(!root.exists(), "no file may be written");
    }

    #[test]
    fn retire_writes_the_process_files_and_forgets_it() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut results, _) = run(tmp.path());
        let files = results.retire(PID).unwrap().expect("files of the process");
        assert!(files.dir.join("summary.json").is_file());
        assert!(files.dir.join("flamegraph-all.svg").is_file());
        assert_eq!(results.pids().count(), 0);
        assert!(results.retire(PID).unwrap().is_none(), "already retired");
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
        assert!(expected.len() >= 14, "golden tree missing: {expected:?}");
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
        assert!(
            finished.table.contains("java.math.BigInteger.multiply"),
            "{}",
            finished.table
        );
        assert!(
            finished.table.contains("(app: com.acme)"),
            "{}",
            finished.table
        );
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
            "(no app frame) 500000\n(no samples) 1000000\ncom.acme.App.compute 5000000\n"
        );
        let summary: RunSummary =
            serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
        assert_eq!(
            (summary.energy_source.as_str(), summary.estimated),
            ("model", true)
        );

        let out = tmp.path().join("rerendered");
        let args = ReportArgs {
            result_dir: tmp.path().to_owned(),
            output: Some(out.clone()),
            format: vec![ReportFormat::Table, ReportFormat::Svg, ReportFormat::Pprof],
            top: 5,
            filter: Some("java.math".into()),
            output_mode: None,
        };
        let mut table = Vec::new();
        let outputs = report_to(&args, &mut table).unwrap();
        let table = String::from_utf8(table).unwrap();
        assert!(table.contains("(app: java.math)"), "{table}");
        let app_first = table
            .lines()
            .skip_while(|l| !l.contains("(app:"))
            .nth(2)
            .unwrap();
        assert!(
            app_first.contains("java.math.BigInteger.multiply"),
            "{table}"
        );
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
                    output_mode: None,
                },
                &mut Vec::new()
            ),
            Err(OutputError::NoProfile(_))
        ));
    }
}
