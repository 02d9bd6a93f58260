//! The session sink: fed once per cycle by the session loop, rendered at the end.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::aggregate::{sort_totals, NamedTotal, Scope, StackTable};
use super::joularjx::{Kind, RunDir};
use super::methods::{bucket_stack, MethodFilter, NO_SAMPLES};
use super::profile::{ProcessProfile, RunSummary, ThreadTotal};
use super::render::{render_process, OutputFiles, RenderSet};
use super::table::top_methods_table;
use super::OutputError;
use crate::model::{CycleReport, FrameReport, MethodReport, Stack, StackReport, ThreadStack};

/// The symbolized stacks of one thread in one cycle: `(pid, tid, stacks)`.
pub type ThreadStacks = (u32, u32, Vec<ThreadStack>);

#[derive(Debug, Clone)]
pub struct ResultsConfig {
    /// The `joularjx-result` directory; one `<pid>-<start_epoch_ms>` directory per process
    /// goes inside it.
    pub results_root: PathBuf,
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
    /// Rows of the end-of-run table.
    pub top_n: usize,
}

/// What `finish` wrote and the table to print.
#[derive(Debug, Clone, Default)]
pub struct FinishSummary {
    pub outputs: Vec<OutputFiles>,
    pub table: String,
}

struct Process {
    dir: RunDir,
    table: StackTable,
    threads: BTreeMap<u32, ThreadTotal>,
}

/// One cycle's energy and samples of one process, per method and call tree.
#[derive(Default)]
struct CycleSums {
    all_methods: HashMap<Arc<str>, (f64, u64)>,
    app_methods: HashMap<Arc<str>, (f64, u64)>,
    all_trees: HashMap<usize, (f64, u64)>,
    app_trees: HashMap<Arc<str>, (f64, u64)>,
}

fn add(sum: &mut (f64, u64), energy_uj: f64, samples: u64) {
    sum.0 += energy_uj;
    sum.1 += samples;
}

fn named<K>(sums: HashMap<K, (f64, u64)>, name: impl Fn(K) -> Arc<str>) -> Vec<NamedTotal> {
    let mut totals: Vec<NamedTotal> = sums
        .into_iter()
        .map(|(k, (energy_uj, samples))| NamedTotal { name: name(k), energy_uj, samples })
        .collect();
    sort_totals(&mut totals);
    totals
}

pub struct Results {
    config: ResultsConfig,
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
        std::fs::create_dir_all(&config.results_root).map_err(|e| OutputError::io(&config.results_root, e))?;
        Ok(Self {
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
            let dir = RunDir::create(&self.config.results_root, pid, self.config.start_epoch_ms)?;
            self.processes.insert(pid, Process { dir, table: StackTable::default(), threads: BTreeMap::new() });
        }
        Ok(self.processes.get_mut(&pid).expect("inserted above"))
    }

    /// Splits each thread's energy over its stacks by sample share (a thread with energy
    /// but no sample goes to `(no samples)`), fills `report.methods` ("all" rule) and, if
    /// configured, `report.threads[].stacks`, and writes the runtime and evolution files.
    pub fn on_cycle(&mut self, report: &mut CycleReport, stacks: &[ThreadStacks]) -> Result<(), OutputError> {
        let duration_s = report.end_ns.saturating_sub(report.start_ns) as f64 / 1e9;
        self.cycles += 1;
        self.duration_s += duration_s;
        let end_epoch_ms = if report.end_epoch_ms > 0 { report.end_epoch_ms } else { now_epoch_ms() };
        self.end_epoch_ms = self.end_epoch_ms.max(end_epoch_ms);
        for socket in &report.sockets {
            self.socket_energy_uj += socket.energy_uj;
            self.unattributed_uj += socket.unattributed_uj;
        }
        for (cause, count) in &report.drops {
            *self.drops.entry(cause.clone()).or_default() += count;
        }

        let index: HashMap<(u32, u32), usize> =
            report.threads.iter().enumerate().map(|(i, t)| ((t.pid, t.tid), i)).collect();
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
                charge(process, cycle, &mut thread_methods, id, stack_energy_uj, ts.samples);
                if report_stacks && slot.is_some() {
                    stack_reports.push(StackReport {
                        frames: ts.stack.iter().map(|f| FrameReport { name: f.name.to_string(), kind: f.kind }).collect(),
                        samples: ts.samples,
                        energy_uj: stack_energy_uj,
                    });
                }
            }
            let thread = process.threads.entry(*tid).or_insert_with(|| ThreadTotal { tid: *tid, ..ThreadTotal::default() });
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
            charge(process, sums.entry(thread.pid).or_default(), &mut thread_methods, id, thread.energy_uj, 0);
            push_methods(&mut method_reports, thread.pid, thread.tid, thread_methods);
        }

        for thread in &report.threads {
            if let Some(process) = self.processes.get_mut(&thread.pid) {
                let total = process
                    .threads
                    .entry(thread.tid)
                    .or_insert_with(|| ThreadTotal { tid: thread.tid, ..ThreadTotal::default() });
                total.energy_uj += thread.energy_uj;
                total.on_cpu_ns += thread.on_cpu_ns;
                if !thread.comm.is_empty() {
                    total.comm.clone_from(&thread.comm);
                }
            }
        }
        report.methods = method_reports;

        let filter = &self.config.filter;
        for (pid, cycle) in sums {
            let process = &self.processes[&pid];
            let table = &process.table;
            let all_methods = named(cycle.all_methods, |m| m);
            let app_methods = named(cycle.app_methods, |m| m);
            let all_trees = named(cycle.all_trees, |id| Arc::from(Scope::All.call_tree(&table.entry(id).total.stack, false)));
            let app_trees = named(cycle.app_trees, |t| t);
            let dir = &process.dir;
            let app = Scope::App(filter);
            dir.write_runtime(Scope::All, Kind::Methods, &all_methods, duration_s)?;
            dir.write_runtime(app, Kind::Methods, &app_methods, duration_s)?;
            dir.write_runtime(Scope::All, Kind::CallTrees, &all_trees, duration_s)?;
            dir.write_runtime(app, Kind::CallTrees, &app_trees, duration_s)?;
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
            .map(|(&pid, process)| {
                let stacks = process.table.totals();
                let threads: Vec<ThreadTotal> = process.threads.values().cloned().collect();
                let comm = process
                    .threads
                    .get(&pid)
                    .or_else(|| process.threads.values().next())
                    .map(|t| t.comm.clone())
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
            })
            .collect()
    }

    /// Writes every end-of-run file from the totals so far and returns the top-methods
    /// table. Takes `&self` so a long run can also checkpoint; calling it again rewrites.
    pub fn finish(&self) -> Result<FinishSummary, OutputError> {
        let profiles = self.profiles();
        let mut outputs = Vec::with_capacity(profiles.len());
        for (profile, process) in profiles.iter().zip(self.processes.values()) {
            outputs.push(render_process(process.dir.path(), profile, &self.config.filter, RenderSet::ALL)?);
        }
        Ok(FinishSummary { outputs, table: top_methods_table(&profiles, None, self.config.top_n) })
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
    add(cycle.all_methods.entry(entry.all_method.clone()).or_default(), energy_uj, samples);
    add(cycle.app_methods.entry(entry.app_method.clone()).or_default(), energy_uj, samples);
    add(cycle.all_trees.entry(id).or_default(), energy_uj, samples);
    add(cycle.app_trees.entry(entry.app_tree.clone()).or_default(), energy_uj, samples);
    add(thread_methods.entry(entry.all_method.clone()).or_default(), energy_uj, samples);
}

fn push_methods(out: &mut Vec<MethodReport>, pid: u32, tid: u32, methods: HashMap<Arc<str>, (f64, u64)>) {
    for total in named(methods, |m| m) {
        out.push(MethodReport { pid, tid, method: total.name.to_string(), energy_uj: total.energy_uj, samples: total.samples });
    }
}

fn now_epoch_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
