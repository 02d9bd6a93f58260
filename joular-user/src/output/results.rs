//! The session sink: fed once per cycle by the session loop, rendered at the end.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::aggregate::{Scope, StackTable};
use super::cycle_sums::{add, add_energy, methods_only, named, push_methods, Charge, CycleSums};
use super::joularjx::{HeldRunDirs, Kind, RunDirRef, HELD_RUN_DIRS};
use super::methods::{bucket_stack, is_method_name, join_frames, MethodFilter, StackRules, NO_SAMPLES};
use super::paths::{all_path, PathStyle};
use super::profile::{FailedOutput, JvmShares, ProcessProfile, RunSummary, ThreadTotal};
use super::render::{render_process, OutputFiles, RenderSet};
use super::retired_writer::RetiredTree;
use super::table::top_methods_table;
use super::thread_kind::ThreadKind;
use super::timeline::Timeline;
use super::OutputError;
use crate::model::{CycleReport, FrameReport, Stack, StackReport, ThreadStack};
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
    /// `--native-frames`: graphs and call trees keep every frame.
    pub native_frames: bool,
    /// Also write `report.html` for each process (`--html`, `serve --results`).
    pub html: bool,
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
    /// Opened for each write: a descriptor held per process runs out on a busy host.
    dir: Option<RunDirRef>,
    table: StackTable,
    threads: BTreeMap<u32, ThreadTotal>,
    /// The process's own name when the cycle reports gave one (`processes[].comm`).
    comm: String,
    /// Seen to be a JVM (`methods` says how); never goes back.
    jvm: bool,
    java_unwinder: Option<crate::model::JavaUnwinder>,
    timeline: Timeline,
}

impl Process {
    fn rules(&self, native_frames: bool) -> StackRules {
        StackRules { jvm: self.jvm, native_frames }
    }

    /// A thread's name: this cycle's, else the last one seen.
    fn comm<'a>(&'a self, tid: u32, reported: Option<&'a str>) -> &'a str {
        reported.filter(|c| !c.is_empty()).or_else(|| self.threads.get(&tid).map(|t| t.comm.as_str())).unwrap_or("")
    }
}

/// Without a result tree, a process's run totals only feed the end table; past this many
/// distinct stacks they start over, so a JVM running for weeks holds bounded memory.
const MAX_STACKS_WITHOUT_FILES: usize = 1 << 16;

pub struct Results {
    config: ResultsConfig,
    /// The results root, held open from the start (`None` when no file is written): the one
    /// descriptor every process's directory is reopened from.
    root: Option<Arc<OutDir>>,
    /// Run directories whose descriptor stays open between writes (the most recent few).
    held_dirs: Arc<HeldRunDirs>,
    no_samples: Stack,
    processes: BTreeMap<u32, Process>,
    /// Processes that ended, set aside (`set_aside`) so that a later process with the same PID
    /// starts its own tree; written at the end with the others.
    ended: Vec<(u32, Process)>,
    cycles: u64,
    duration_s: f64,
    end_epoch_ms: u64,
    socket_energy_uj: f64,
    unattributed_uj: f64,
    drops: BTreeMap<String, u64>,
    degraded: BTreeMap<String, u64>,
    /// Outputs of the session that failed (`--json`...), for every `summary.json`.
    outputs_failed: Vec<FailedOutput>,
}

/// `degraded` cause of cycles in which a socket's counter went backwards (counted 0 J).
pub const FLAGGED_SOCKET_CYCLES: &str = "energy_counter_flagged_socket_cycles";

impl Results {
    pub fn new(config: ResultsConfig) -> Result<Self, OutputError> {
        let root = if config.write_files {
            Some(Arc::new(
                OutDir::create_all(&config.results_root, config.modes)
                    .map_err(|e| OutputError::io(&config.results_root, e))?,
            ))
        } else {
            None
        };
        Ok(Self {
            root,
            held_dirs: HeldRunDirs::new(HELD_RUN_DIRS),
            end_epoch_ms: config.start_epoch_ms,
            config,
            no_samples: bucket_stack(NO_SAMPLES),
            processes: BTreeMap::new(),
            ended: Vec::new(),
            cycles: 0,
            duration_s: 0.0,
            socket_energy_uj: 0.0,
            unattributed_uj: 0.0,
            drops: BTreeMap::new(),
            degraded: BTreeMap::new(),
            outputs_failed: Vec::new(),
        })
    }

    fn process(&mut self, pid: u32) -> Result<&mut Process, OutputError> {
        if !self.processes.contains_key(&pid) {
            let dir = match &self.root {
                Some(root) => Some(RunDirRef::create(
                    root,
                    &self.held_dirs,
                    pid,
                    unused_epoch_ms(root, pid, self.config.start_epoch_ms),
                )?),
                None => None,
            };
            self.processes.insert(
                pid,
                Process {
                    dir,
                    table: StackTable::default(),
                    threads: BTreeMap::new(),
                    comm: String::new(),
                    jvm: false,
                    java_unwinder: None,
                    timeline: Timeline::default(),
                },
            );
        }
        Ok(self.processes.get_mut(&pid).expect("inserted above"))
    }

    /// Splits each thread's energy over its stacks by sample share (a thread with energy
    /// but no sample goes to `(no samples)`, or to its bucket for the JVM's own threads),
    /// fills `report.methods` ("all" rule) and, if configured, `report.threads[].stacks`, and
    /// writes the runtime and evolution files.
    pub fn on_cycle(&mut self, report: &mut CycleReport, stacks: &[ThreadStacks]) -> Result<(), OutputError> {
        let duration_s = report.end_ns.saturating_sub(report.start_ns) as f64 / 1e9;
        let offset_s = self.duration_s;
        self.cycles += 1;
        self.duration_s += duration_s;
        let end_epoch_ms = if report.end_epoch_ms > 0 { report.end_epoch_ms } else { now_epoch_ms() };
        self.end_epoch_ms = self.end_epoch_ms.max(end_epoch_ms);
        for socket in &report.sockets {
            self.socket_energy_uj += socket.energy_uj;
            self.unattributed_uj += socket.unattributed_uj;
            if socket.flagged {
                self.add_degraded(FLAGGED_SOCKET_CYCLES, 1);
            }
        }
        for (cause, count) in &report.drops {
            *self.drops.entry(cause.clone()).or_default() += count;
        }
        if !self.config.write_files {
            for process in self.processes.values_mut() {
                if process.table.len() > MAX_STACKS_WITHOUT_FILES {
                    process.table = StackTable::default();
                }
            }
        }

        let (charges, flipped) = self.intern_cycle(report, stacks)?;
        let filter = self.config.filter.clone();
        let native_frames = self.config.native_frames;
        for pid in flipped {
            let process = self.processes.get_mut(&pid).expect("interned above");
            process.jvm = true;
            process.table.relabel(&filter, process.rules(native_frames));
        }

        let mut sums: BTreeMap<u32, CycleSums> = BTreeMap::new();
        let mut method_reports = Vec::new();
        for charge in charges {
            let process = self.processes.get_mut(&charge.pid).expect("interned above");
            let cycle = sums.entry(charge.pid).or_default();
            let mut thread_methods: HashMap<Arc<str>, (f64, u64)> = HashMap::new();
            let mut stack_reports = Vec::new();
            let total_samples: u64 = charge.stacks.iter().map(|&(_, n)| n).sum();
            for &(id, samples) in &charge.stacks {
                let stack_energy_uj = if total_samples > 0 {
                    charge.energy_uj * samples as f64 / total_samples as f64
                } else {
                    charge.energy_uj
                };
                add_energy(&mut process.table, cycle, &mut thread_methods, id, stack_energy_uj, samples);
                if self.config.report_stacks && charge.slot.is_some() && total_samples > 0 {
                    stack_reports.push(StackReport {
                        frames: process
                            .table
                            .entry(id)
                            .total
                            .stack
                            .iter()
                            .map(|f| FrameReport { name: f.name.to_string(), kind: f.kind, line: f.line })
                            .collect(),
                        samples,
                        energy_uj: stack_energy_uj,
                    });
                }
            }
            if total_samples > 0 {
                process
                    .threads
                    .entry(charge.tid)
                    .or_insert_with(|| ThreadTotal { tid: charge.tid, ..ThreadTotal::default() })
                    .samples += total_samples;
                if let Some(i) = charge.slot {
                    report.threads[i].stacks = stack_reports;
                }
            }
            push_methods(&mut method_reports, charge.pid, charge.tid, thread_methods);
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
        for p in report.processes.iter().filter(|p| !p.comm.is_empty()) {
            if let Some(process) = self.processes.get_mut(&p.pid) {
                process.comm.clone_from(&p.comm);
            }
        }
        let mut threads_of: HashMap<u32, Vec<(u32, &str, f64)>> = HashMap::new();
        for t in &report.threads {
            threads_of.entry(t.pid).or_default().push((t.tid, &t.comm, t.energy_uj));
        }
        for (pid, process) in &mut self.processes {
            let threads = threads_of.remove(pid).unwrap_or_default();
            process.timeline.add_cycle(offset_s, duration_s, end_epoch_ms / 1000, threads);
        }
        report.methods = method_reports;
        self.write_cycle_files(sums, duration_s, end_epoch_ms)
    }

    /// Interns every stack of the cycle (and the `(no samples)` stack of each thread with
    /// energy but no sample), so that a process found to be a JVM in this cycle is one
    /// before any of the cycle's energy is charged. Returns what to charge and those
    /// processes.
    fn intern_cycle(
        &mut self,
        report: &CycleReport,
        stacks: &[ThreadStacks],
    ) -> Result<(Vec<Charge>, Vec<u32>), OutputError> {
        let index: HashMap<(u32, u32), usize> =
            report.threads.iter().enumerate().map(|(i, t)| ((t.pid, t.tid), i)).collect();
        let mut covered = vec![false; report.threads.len()];
        let mut charges = Vec::with_capacity(stacks.len());
        let mut flipped = Vec::new();
        let filter = self.config.filter.clone();
        let native_frames = self.config.native_frames;
        let no_samples = self.no_samples.clone();
        let intern = |process: &mut Process, stack: &Stack, comm: &str| {
            let kind = ThreadKind::classify(comm, stack);
            let rules = process.rules(native_frames);
            let id = process.table.intern(stack, kind, &filter, rules);
            let shows = kind.is_jvm_internal() || process.table.entry(id).shows_jvm;
            (id, shows && !process.jvm)
        };
        for (pid, tid, thread_stacks) in stacks {
            if thread_stacks.iter().all(|s| s.samples == 0) {
                // Left to the uncovered-thread pass below, which buckets it as no samples.
                continue;
            }
            let slot = index.get(&(*pid, *tid)).copied();
            if let Some(i) = slot {
                covered[i] = true;
            }
            let reported = slot.map(|i| report.threads[i].comm.as_str());
            let process = self.process(*pid)?;
            let comm = process.comm(*tid, reported).to_owned();
            let mut ids = Vec::with_capacity(thread_stacks.len());
            for ts in thread_stacks.iter().filter(|s| s.samples > 0) {
                let (id, now_jvm) = intern(process, &ts.stack, &comm);
                if now_jvm && !flipped.contains(pid) {
                    flipped.push(*pid);
                }
                ids.push((id, ts.samples));
            }
            charges.push(Charge {
                pid: *pid,
                tid: *tid,
                slot,
                energy_uj: slot.map_or(0.0, |i| report.threads[i].energy_uj),
                stacks: ids,
            });
        }
        for (i, thread) in report.threads.iter().enumerate() {
            if covered[i] || thread.energy_uj <= 0.0 {
                continue;
            }
            let process = self.process(thread.pid)?;
            let comm = process.comm(thread.tid, Some(&thread.comm)).to_owned();
            let (id, now_jvm) = intern(process, &no_samples, &comm);
            if now_jvm && !flipped.contains(&thread.pid) {
                flipped.push(thread.pid);
            }
            charges.push(Charge {
                pid: thread.pid,
                tid: thread.tid,
                slot: None,
                energy_uj: thread.energy_uj,
                stacks: vec![(id, 0)],
            });
        }
        Ok((charges, flipped))
    }

    /// Which unwinder walks a JVM's stacks, as of the last symbolized cycle (a process not
    /// seen in a cycle yet is left alone).
    pub fn set_java_unwinder(&mut self, pid: u32, unwinder: &crate::model::JavaUnwinder) {
        if let Some(p) = self.processes.get_mut(&pid) {
            p.java_unwinder = Some(unwinder.clone());
        }
    }

    /// Counts a loss or degradation the session saw (`summary.json` `degraded`).
    pub fn add_degraded(&mut self, cause: &str, count: u64) {
        if count > 0 {
            *self.degraded.entry(cause.to_owned()).or_default() += count;
        }
    }

    /// Records an output of the session that failed (`summary.json` `outputs_failed`).
    pub fn add_failed_output(&mut self, failed: FailedOutput) {
        self.outputs_failed.push(failed);
    }

    fn write_cycle_files(
        &mut self,
        sums: BTreeMap<u32, CycleSums>,
        duration_s: f64,
        end_epoch_ms: u64,
    ) -> Result<(), OutputError> {
        let filter = &self.config.filter;
        let mut lost = Vec::new();
        for (pid, cycle) in sums {
            let process = &self.processes[&pid];
            let Some(dir) = &process.dir else { continue };
            let dir = match dir.open() {
                Ok(dir) => dir,
                // Moved away and replaced, or removed: that process's files stop, said once; the
                // run and the other processes' files go on.
                Err(e) => {
                    log::warn!("results of process {pid} are no longer written: {e}");
                    lost.push(pid);
                    continue;
                }
            };
            // JoularJX files hold methods only; the rest is `unattributed` in summary.json.
            let all_methods = methods_only(named(cycle.all_methods, |m| m));
            let app_methods = methods_only(named(cycle.app_methods, |m| m));
            let app = Scope::App(filter);
            dir.write_runtime(Scope::All, Kind::Methods, &all_methods, duration_s)?;
            dir.write_runtime(app, Kind::Methods, &app_methods, duration_s)?;
            if self.config.runtime_call_trees {
                let rules = process.rules(self.config.native_frames);
                // Stacks that differ only in frames the tree leaves out share a row.
                let mut trees: HashMap<Arc<str>, (f64, u64)> = HashMap::new();
                for (id, (energy_uj, samples)) in cycle.all_trees {
                    let entry = process.table.entry(id);
                    if !is_method_name(&entry.all_method) {
                        continue;
                    }
                    let total = &entry.total;
                    let path = all_path(&total.stack, total.thread, rules, PathStyle::CallTree);
                    let tree: Arc<str> = Arc::from(join_frames(path.into_iter(), false));
                    add(trees.entry(tree).or_default(), energy_uj, samples);
                }
                let all_trees = named(trees, |t| t);
                // A stack whose app method is not a method has that name as its app tree.
                let app_trees = methods_only(named(cycle.app_trees, |t| t));
                dir.write_runtime(Scope::All, Kind::CallTrees, &all_trees, duration_s)?;
                dir.write_runtime(app, Kind::CallTrees, &app_trees, duration_s)?;
            }
            if self.config.evolution {
                dir.append_evolution(Scope::All, &all_methods, end_epoch_ms / 1000, duration_s)?;
                dir.append_evolution(app, &app_methods, end_epoch_ms / 1000, duration_s)?;
            }
        }
        for pid in lost {
            if let Some(process) = self.processes.get_mut(&pid) {
                process.dir = None;
            }
        }
        Ok(())
    }

    /// The run so far, one profile per process (ended ones too).
    pub fn profiles(&self) -> Vec<ProcessProfile> {
        self.all_processes().map(|(pid, process)| self.profile(pid, process)).collect()
    }

    fn all_processes(&self) -> impl Iterator<Item = (u32, &Process)> {
        self.processes.iter().map(|(&pid, p)| (pid, p)).chain(self.ended.iter().map(|(pid, p)| (*pid, p)))
    }

    /// Sets an ended process aside: its files are written at the end with the others, and a
    /// later process with its PID is another process, with a tree of its own.
    pub fn set_aside(&mut self, pid: u32) {
        if let Some(process) = self.processes.remove(&pid) {
            self.ended.push((pid, process));
        }
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
        let mut profile = ProcessProfile {
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
                native_frames: self.config.native_frames,
                jvm: process.jvm.then(JvmShares::default),
                java_unwinder: process.java_unwinder.clone(),
                unattributed: Default::default(),
                degraded: self.degraded.clone(),
                outputs_failed: self.outputs_failed.clone(),
            },
            stacks,
            timeline: process.timeline.clone(),
        };
        profile.complete();
        profile
    }

    /// Ends a process that has exited: frees everything held for it, so a long host-mode run
    /// holds only live processes, and returns its end-of-run files to write (when the tree is
    /// written), owned, for another thread. Unknown pids are ignored.
    pub fn take_retired(&mut self, pid: u32) -> Option<RetiredTree> {
        let mut process = self.processes.remove(&pid)?;
        let dir = process.dir.take()?;
        let profile = self.profile(pid, &process);
        Some(RetiredTree::new(dir.detach(), profile, self.config.filter.clone(), self.render_set()))
    }

    fn render_set(&self) -> RenderSet {
        RenderSet { html: self.config.html, ..RenderSet::ALL }
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
        for (profile, (_, process)) in profiles.iter().zip(self.all_processes()) {
            if let Some(dir) = &process.dir {
                let dir = match dir.open() {
                    Ok(dir) => dir,
                    Err(e) => {
                        log::warn!("results of process {}: {e}", profile.summary.pid);
                        continue;
                    }
                };
                outputs.push(render_process(
                    dir.out_dir(),
                    dir.out_dir(),
                    profile,
                    &self.config.filter,
                    self.render_set(),
                ));
            }
        }
        Ok(FinishSummary { outputs, table: top_methods_table(&profiles, None, self.config.top_n) })
    }
}

/// The `<pid>-<epochms>` directory name's time: the run's start, or, when a process with this
/// PID already has that directory (it ended and the PID was reused), the first free time from
/// now on: two processes never share a tree.
fn unused_epoch_ms(root: &OutDir, pid: u32, start_epoch_ms: u64) -> u64 {
    let taken = |ms: u64| root.path().join(format!("{pid}-{ms}")).symlink_metadata().is_ok();
    if !taken(start_epoch_ms) {
        return start_epoch_ms;
    }
    let mut ms = now_epoch_ms().max(start_epoch_ms + 1);
    while taken(ms) {
        ms += 1;
    }
    ms
}

fn now_epoch_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
#[path = "results_tests.rs"]
pub(crate) mod tests;
