//! The stack stage: each cycle, every thread's energy split over its sampled stacks (eq. 10),
//! each stack named by the method rules, and the run's totals per stack, thread and process
//! kept for the end-of-run outputs. A thread with energy but no sample goes to `(no samples)`
//! (or its thread kind's bucket in a JVM), so a process's stacks always sum to its threads.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::aggregate::{named, StackTable};
use super::cycle::{AttributedCycle, CycleCarbon, Energy, ProcessCycle, ProcessKey, StackShare, ThreadCharge};
use super::device_run::{by_process, DeviceRuns};
use super::methods::{bucket_stack, MethodFilter, StackRules, NO_SAMPLES};
use super::profile::{FailedOutput, JvmShares, ProcessProfile, RunSummary, ThreadTotal};
use super::thread_kind::ThreadKind;
use super::timeline::Timeline;
use crate::attribution::devices::DeviceTotals;
use crate::carbon::{Carbon, CarbonSummary};
use crate::model::{CycleReport, FrameReport, JavaUnwinder, MethodReport, Stack, StackReport, ThreadStack};

/// The symbolized stacks of one thread in one cycle: `(pid, tid, stacks)`.
pub type ThreadStacks = (u32, u32, Vec<ThreadStack>);

/// `degraded` cause of cycles in which a socket's counter went backwards (counted 0 J).
pub const FLAGGED_SOCKET_CYCLES: &str = "energy_counter_flagged_socket_cycles";

#[derive(Debug, Clone, Default)]
pub struct StackConfig {
    /// `--filter` prefixes of the "app" view.
    pub filter: MethodFilter,
    /// `--native-frames`: graphs and call trees keep every frame.
    pub native_frames: bool,
    /// Fill `threads[].stacks` of each cycle report: costly with many stacks, so only worth it
    /// when the report is printed (`--json`).
    pub report_stacks: bool,
    pub start_epoch_ms: u64,
    /// Energy source label (`powercap`, `perf`, `msr`, `model`) and whether it is a model.
    pub energy_source: String,
    pub estimated: bool,
    /// What the figures are beyond the source's name (the model, its coefficients and their
    /// source; a counter measured on the host); empty for a plain measured source.
    pub energy_detail: String,
    /// `--carbon-intensity[-file]` and `--pue`: grams of CO₂e beside every joule. `None`: no
    /// carbon figure anywhere (there is no default intensity).
    pub carbon: Option<Carbon>,
    /// Past this many distinct stacks a process's run totals start over, so a JVM running for
    /// weeks holds bounded memory when no output needs its whole run (serve without
    /// `--results`). `None`: the whole run is kept.
    pub max_stacks: Option<usize>,
    /// Whether the session records CPU frequencies (`summary.json` `cpu_frequencies`).
    pub cpu_frequencies: crate::model::FrequencyRecording,
}

/// The run so far, for every process's `summary.json`.
#[derive(Debug, Clone, Default)]
struct RunTotals {
    cycles: u64,
    duration_s: f64,
    end_epoch_ms: u64,
    socket_energy_uj: f64,
    unattributed_uj: f64,
    /// Grams of the machine's energy, and its energy weighted by intensity (for the mean).
    socket_carbon_g: f64,
    socket_uj_g_per_kwh: f64,
    drops: BTreeMap<String, u64>,
    degraded: BTreeMap<String, u64>,
    /// Outputs of the session that failed (`--json`...).
    outputs_failed: Vec<FailedOutput>,
}

struct Process {
    key: ProcessKey,
    table: StackTable,
    threads: BTreeMap<u32, ThreadTotal>,
    /// The process's own name when the cycle reports gave one (`processes[].comm`).
    comm: String,
    /// Seen to be a JVM (`methods` says how); never goes back.
    jvm: bool,
    java_unwinder: Option<JavaUnwinder>,
    timeline: Timeline,
    /// `--devices`: its bytes over the run (None: no cycle carried byte counts).
    devices: Option<DeviceTotals>,
    /// `--devices network,disk`: its device energy over the run, per device.
    device_runs: DeviceRuns,
}

impl Process {
    fn rules(&self, native_frames: bool) -> StackRules {
        StackRules { jvm: self.jvm, native_frames }
    }

    /// A thread's name: this cycle's, else the last one seen.
    fn comm<'a>(&'a self, tid: u32, reported: Option<&'a str>) -> &'a str {
        reported.filter(|c| !c.is_empty()).or_else(|| self.threads.get(&tid).map(|t| t.comm.as_str())).unwrap_or("")
    }

    fn profile(&self, pid: u32, config: &StackConfig, run: &RunTotals) -> ProcessProfile {
        let stacks = self.table.totals();
        let threads: Vec<ThreadTotal> = self.threads.values().cloned().collect();
        let comm = Some(&self.comm)
            .filter(|c| !c.is_empty())
            .or_else(|| self.threads.get(&pid).map(|t| &t.comm))
            .or_else(|| self.threads.values().next().map(|t| &t.comm))
            .cloned()
            .unwrap_or_default();
        let carbon = config.carbon.as_ref().map(|c| CarbonSummary {
            grams: stacks.iter().map(|s| s.carbon_g).sum(),
            host_grams: run.socket_carbon_g,
            mean_g_per_kwh: if run.socket_energy_uj > 0.0 {
                run.socket_uj_g_per_kwh / run.socket_energy_uj
            } else {
                c.g_per_kwh(run.end_epoch_ms)
            },
            pue: c.pue,
            intensity: c.to_string(),
        });
        let mut profile = ProcessProfile {
            summary: RunSummary {
                pid,
                comm,
                start_epoch_ms: config.start_epoch_ms,
                end_epoch_ms: run.end_epoch_ms,
                duration_s: run.duration_s,
                cycles: run.cycles,
                filters: config.filter.prefixes().to_vec(),
                energy_source: config.energy_source.clone(),
                estimated: config.estimated,
                energy_detail: config.energy_detail.clone(),
                energy_uj: stacks.iter().map(|s| s.energy_uj).sum(),
                samples: stacks.iter().map(|s| s.samples).sum(),
                socket_energy_uj: run.socket_energy_uj,
                unattributed_uj: run.unattributed_uj,
                drops: run.drops.clone(),
                threads,
                native_frames: config.native_frames,
                jvm: self.jvm.then(JvmShares::default),
                java_unwinder: self.java_unwinder.clone(),
                unattributed: Default::default(),
                degraded: run.degraded.clone(),
                outputs_failed: run.outputs_failed.clone(),
                carbon,
                cpu_frequencies: config.cpu_frequencies.clone(),
                devices: self.devices.as_ref().map(DeviceTotals::report),
                device_energy: None,
            },
            stacks,
            devices: self.device_runs.profiles(),
            timeline: self.timeline.clone(),
        };
        profile.complete();
        profile
    }
}

/// A process that ended and was retired: everything the stage held for it, handed to the sinks
/// once and then dropped.
pub struct Retired {
    pub pid: u32,
    pub key: ProcessKey,
    process: Process,
    config: Arc<StackConfig>,
    run: RunTotals,
}

impl Retired {
    /// Its run's profile, as `RunEnd` would have given it (built only by a sink that needs it).
    pub fn profile(&self) -> ProcessProfile {
        self.process.profile(self.pid, &self.config, &self.run)
    }
}

/// The end of the run: every process's profile, live ones by pid, then the ones set aside in
/// the order they ended.
#[derive(Debug, Clone, Default)]
pub struct RunEnd {
    pub profiles: Vec<ProcessProfile>,
    /// Each profile's process.
    pub keys: Vec<ProcessKey>,
}

/// One thread's share of a cycle before it is split: its energy and its stacks' ids.
struct Charge {
    pid: u32,
    tid: u32,
    /// Its row in `report.threads`.
    slot: Option<usize>,
    energy_uj: f64,
    stacks: Vec<(usize, u64)>,
}

pub struct StackStage {
    config: Arc<StackConfig>,
    no_samples: Stack,
    processes: BTreeMap<u32, Process>,
    /// Processes that ended, set aside (`set_aside`) so that a later process with the same PID
    /// starts afresh; their profiles come at the end with the others.
    ended: Vec<(u32, Process)>,
    next_key: u64,
    run: RunTotals,
}

impl StackStage {
    pub fn new(config: StackConfig) -> Self {
        Self {
            run: RunTotals { end_epoch_ms: config.start_epoch_ms, ..RunTotals::default() },
            config: Arc::new(config),
            no_samples: bucket_stack(NO_SAMPLES),
            processes: BTreeMap::new(),
            ended: Vec::new(),
            next_key: 0,
        }
    }

    pub fn config(&self) -> &StackConfig {
        &self.config
    }

    fn process(&mut self, pid: u32) -> &mut Process {
        let next_key = &mut self.next_key;
        self.processes.entry(pid).or_insert_with(|| {
            *next_key += 1;
            Process {
                key: ProcessKey(*next_key),
                table: StackTable::default(),
                threads: BTreeMap::new(),
                comm: String::new(),
                jvm: false,
                java_unwinder: None,
                timeline: Timeline::default(),
                devices: None,
                device_runs: DeviceRuns::default(),
            }
        })
    }

    /// Attributes one cycle: splits each thread's energy over its stacks by sample share, fills
    /// the report's `methods` ("all" view) and, if configured, `threads[].stacks`, and adds the
    /// cycle to the run's totals.
    pub fn on_cycle(&mut self, mut report: CycleReport, stacks: &[ThreadStacks]) -> AttributedCycle {
        let duration_s = report.end_ns.saturating_sub(report.start_ns) as f64 / 1e9;
        let offset_s = self.run.duration_s;
        self.run.cycles += 1;
        self.run.duration_s += duration_s;
        // A report without a wall clock (a recorded one) ends where its cycles say.
        let end_epoch_ms = match report.end_epoch_ms {
            0 => self.config.start_epoch_ms + ((offset_s + duration_s) * 1e3) as u64,
            ms => ms,
        };
        self.run.end_epoch_ms = self.run.end_epoch_ms.max(end_epoch_ms);
        let mut carbon = self.config.carbon.as_ref().map(|c| {
            let middle_ms = end_epoch_ms.saturating_sub((duration_s * 500.0) as u64);
            CycleCarbon { g_per_kwh: c.g_per_kwh(middle_ms), pue: c.pue, g_per_uj: c.g_per_uj(middle_ms), host_g: 0.0 }
        });
        let g_per_uj = carbon.map_or(0.0, |c| c.g_per_uj);
        for socket in &report.sockets {
            if let Some(c) = carbon.as_mut() {
                c.host_g += socket.energy_uj * c.g_per_uj;
                self.run.socket_carbon_g += socket.energy_uj * c.g_per_uj;
                self.run.socket_uj_g_per_kwh += socket.energy_uj * c.g_per_kwh;
            }
            self.run.socket_energy_uj += socket.energy_uj;
            self.run.unattributed_uj += socket.unattributed_uj;
            if socket.flagged {
                self.add_degraded(FLAGGED_SOCKET_CYCLES, 1);
            }
        }
        for (cause, count) in &report.drops {
            *self.run.drops.entry(cause.clone()).or_default() += count;
        }
        if let Some(max) = self.config.max_stacks {
            for process in self.processes.values_mut() {
                if process.table.len() > max {
                    process.table = StackTable::default();
                }
                if process.device_runs.len() > max {
                    process.device_runs.clear_stacks();
                }
            }
        }

        let (charges, flipped) = self.intern_cycle(&report, stacks);
        let config = Arc::clone(&self.config);
        for pid in flipped {
            let process = self.processes.get_mut(&pid).expect("interned above");
            process.jvm = true;
            process.table.relabel(&config.filter, process.rules(config.native_frames));
            process.device_runs.relabel(&config.filter, process.rules(config.native_frames));
        }

        let mut method_reports = Vec::new();
        let mut attributed = Vec::with_capacity(charges.len());
        for charge in charges {
            let process = self.processes.get_mut(&charge.pid).expect("interned above");
            let mut thread_methods: HashMap<Arc<str>, (f64, u64)> = HashMap::new();
            let mut stack_reports = Vec::new();
            let mut shares = Vec::with_capacity(charge.stacks.len());
            let total_samples: u64 = charge.stacks.iter().map(|&(_, n)| n).sum();
            for &(id, samples) in &charge.stacks {
                let stack_energy_uj = if total_samples > 0 {
                    charge.energy_uj * samples as f64 / total_samples as f64
                } else {
                    charge.energy_uj
                };
                process.table.add(id, stack_energy_uj, stack_energy_uj * g_per_uj, samples);
                let entry = process.table.entry(id);
                let sum = thread_methods.entry(entry.all_method.clone()).or_default();
                sum.0 += stack_energy_uj;
                sum.1 += samples;
                if config.report_stacks && charge.slot.is_some() && total_samples > 0 {
                    stack_reports.push(StackReport {
                        frames: entry.total.stack.iter().map(FrameReport::from).collect(),
                        samples,
                        energy_uj: stack_energy_uj,
                    });
                }
                shares.push(StackShare {
                    id,
                    stack: entry.total.stack.clone(),
                    kind: entry.total.thread,
                    shows_jvm: entry.shows_jvm,
                    all_method: entry.all_method.clone(),
                    app_method: entry.app_method.clone(),
                    app_tree: entry.app_tree.clone(),
                    energy: Energy { cpu_uj: stack_energy_uj, carbon_g: stack_energy_uj * g_per_uj },
                    samples,
                });
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
            attributed.push(ThreadCharge {
                pid: charge.pid,
                tid: charge.tid,
                energy: Energy { cpu_uj: charge.energy_uj, carbon_g: charge.energy_uj * g_per_uj },
                samples: total_samples,
                stacks: shares,
            });
        }

        for thread in &report.threads {
            if let Some(process) = self.processes.get_mut(&thread.pid) {
                let total = process
                    .threads
                    .entry(thread.tid)
                    .or_insert_with(|| ThreadTotal { tid: thread.tid, ..ThreadTotal::default() });
                total.energy_uj += thread.energy_uj;
                total.carbon_g += thread.energy_uj * g_per_uj;
                total.on_cpu_ns += thread.on_cpu_ns;
                if !thread.comm.is_empty() {
                    total.comm.clone_from(&thread.comm);
                }
            }
        }
        if let Some(devices) = &report.devices {
            // Every profiled process gets its totals (zero bytes too: "counted, none moved").
            for (pid, process) in &mut self.processes {
                process.devices.get_or_insert_with(DeviceTotals::default).add(*pid, devices);
            }
        }
        let mut device_charges = Vec::new();
        if !report.device_energy.is_empty() {
            // A process with device energy and no CPU share in the cycle is still charged.
            for pid in report.device_energy.iter().flat_map(|d| d.processes.iter().map(|p| p.pid)) {
                self.process(pid);
            }
            // After the threads' names: a device path's thread kind comes from them.
            let grouped = by_process(&report.device_energy);
            for (pid, process) in &mut self.processes {
                let rules = process.rules(config.native_frames);
                device_charges.extend(process.device_runs.add(*pid, &grouped, &process.threads, &config.filter, rules));
            }
            device_charges.sort_by_key(|c| (c.device, c.pid));
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

        let mut pids: Vec<u32> = attributed.iter().map(|c| c.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        let processes = pids
            .into_iter()
            .map(|pid| {
                let p = &self.processes[&pid];
                ProcessCycle { pid, key: p.key, rules: p.rules(config.native_frames) }
            })
            .collect();
        AttributedCycle {
            report,
            offset_s,
            duration_s,
            end_epoch_ms,
            processes,
            charges: attributed,
            device_charges,
            carbon,
        }
    }

    /// Interns every stack of the cycle (and the `(no samples)` stack of each thread with
    /// energy but no sample), so that a process found to be a JVM in this cycle is one
    /// before any of the cycle's energy is charged. Returns what to charge and those
    /// processes.
    fn intern_cycle(&mut self, report: &CycleReport, stacks: &[ThreadStacks]) -> (Vec<Charge>, Vec<u32>) {
        let index: HashMap<(u32, u32), usize> =
            report.threads.iter().enumerate().map(|(i, t)| ((t.pid, t.tid), i)).collect();
        let mut covered = vec![false; report.threads.len()];
        let mut charges = Vec::with_capacity(stacks.len());
        let mut flipped = Vec::new();
        let config = Arc::clone(&self.config);
        let no_samples = self.no_samples.clone();
        let intern = |process: &mut Process, stack: &Stack, comm: &str| {
            let kind = ThreadKind::classify(comm, stack);
            let rules = process.rules(config.native_frames);
            let id = process.table.intern(stack, kind, &config.filter, rules);
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
            let process = self.process(*pid);
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
            let process = self.process(thread.pid);
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
        (charges, flipped)
    }

    /// Which unwinder walks a JVM's stacks, as of the last symbolized cycle (a process not
    /// seen in a cycle yet is left alone).
    pub fn set_java_unwinder(&mut self, pid: u32, unwinder: &JavaUnwinder) {
        if let Some(p) = self.processes.get_mut(&pid) {
            p.java_unwinder = Some(unwinder.clone());
        }
    }

    /// Counts a loss or degradation the session saw (`summary.json` `degraded`).
    pub fn add_degraded(&mut self, cause: &str, count: u64) {
        if count > 0 {
            *self.run.degraded.entry(cause.to_owned()).or_default() += count;
        }
    }

    /// Records an output of the session that failed (`summary.json` `outputs_failed`).
    pub fn add_failed_output(&mut self, failed: FailedOutput) {
        self.run.outputs_failed.push(failed);
    }

    /// Sets an ended process aside: its profile comes at the end with the others, and a later
    /// process with its PID is another process.
    pub fn set_aside(&mut self, pid: u32) {
        if let Some(process) = self.processes.remove(&pid) {
            self.ended.push((pid, process));
        }
    }

    /// Retires a process that has ended: the stage forgets it, so a long host-mode run holds
    /// only live processes, and hands what it held to the sinks. Unknown pids give `None`.
    pub fn retire(&mut self, pid: u32) -> Option<Retired> {
        let process = self.processes.remove(&pid)?;
        Some(Retired { pid, key: process.key, process, config: Arc::clone(&self.config), run: self.run.clone() })
    }

    /// Pids the stage holds state for.
    pub fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.processes.keys().copied()
    }

    /// The run so far, one profile per process (ended ones too).
    pub fn profiles(&self) -> Vec<ProcessProfile> {
        self.all_processes().map(|(pid, p)| p.profile(pid, &self.config, &self.run)).collect()
    }

    /// The run so far, for the sinks' `finish` (a long run may also checkpoint with it).
    pub fn run_end(&self) -> RunEnd {
        RunEnd { profiles: self.profiles(), keys: self.all_processes().map(|(_, p)| p.key).collect() }
    }

    fn all_processes(&self) -> impl Iterator<Item = (u32, &Process)> {
        self.processes.iter().map(|(&pid, p)| (pid, p)).chain(self.ended.iter().map(|(pid, p)| (*pid, p)))
    }
}

fn push_methods(out: &mut Vec<MethodReport>, pid: u32, tid: u32, methods: HashMap<Arc<str>, (f64, u64)>) {
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

#[cfg(test)]
mod tests;
