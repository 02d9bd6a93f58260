//! Run totals for the end summary: energy per thread, process and socket over the attributed
//! cycles' reports (what the energy stage filled in), and average power over the whole run.

use std::collections::BTreeMap;

use super::power_w;
use crate::model::CycleReport;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TotalEnergy {
    pub on_cpu_ns: u64,
    pub energy_uj: f64,
}

impl TotalEnergy {
    pub fn energy_j(&self) -> f64 {
        self.energy_uj / 1e6
    }

    /// Average power over `duration_ns` (the run's, so threads compare on one time base).
    pub fn power_w(&self, duration_ns: u64) -> f64 {
        power_w(self.energy_uj, duration_ns)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SocketTotal {
    pub energy_uj: f64,
    pub unattributed_uj: f64,
    pub dynamic_energy_uj: f64,
    pub dram_energy_uj: f64,
    /// Cycles whose counter misbehaved and counted as 0.
    pub flagged_cycles: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    pub cycles: u64,
    pub duration_ns: u64,
    pub threads: BTreeMap<(u32, u32), TotalEnergy>,
    pub processes: BTreeMap<u32, TotalEnergy>,
    pub sockets: BTreeMap<u32, SocketTotal>,
    /// Processes that ended, set aside (`set_aside`) from later processes with their PID: the
    /// process's total, then its threads'.
    pub ended: Vec<(u32, TotalEnergy, BTreeMap<u32, TotalEnergy>)>,
}

impl Totals {
    /// Adds one cycle's report, once its energy is filled in (`Attribution::fill_report`).
    pub fn add(&mut self, report: &CycleReport) {
        self.cycles += 1;
        self.duration_ns += report.end_ns.saturating_sub(report.start_ns);
        for t in &report.threads {
            accumulate(self.threads.entry((t.pid, t.tid)).or_default(), t.on_cpu_ns, t.energy_uj);
        }
        for p in &report.processes {
            accumulate(self.processes.entry(p.pid).or_default(), p.on_cpu_ns, p.energy_uj);
        }
        for s in &report.sockets {
            let total = self.sockets.entry(s.socket).or_default();
            total.energy_uj += s.energy_uj;
            total.unattributed_uj += s.unattributed_uj;
            total.dynamic_energy_uj += s.dynamic_energy_uj;
            total.dram_energy_uj += s.dram_energy_uj.unwrap_or(0.0);
            total.flagged_cycles += u64::from(s.flagged);
        }
    }

    /// Drops the per-thread and per-process totals of processes that have ended (a long
    /// host-mode run keeps only live ones); socket totals keep their energy.
    pub fn forget_processes(&mut self, pids: &std::collections::HashSet<u32>) {
        if pids.is_empty() {
            return;
        }
        self.threads.retain(|(pid, _), _| !pids.contains(pid));
        self.processes.retain(|pid, _| !pids.contains(pid));
    }

    /// Keeps an ended process's totals apart: a later process with the same PID (a reused PID)
    /// starts from zero.
    pub fn set_aside(&mut self, pid: u32) {
        let threads: BTreeMap<u32, TotalEnergy> =
            self.threads.range((pid, 0)..=(pid, u32::MAX)).map(|(&(_, tid), &t)| (tid, t)).collect();
        self.threads.retain(|&(p, _), _| p != pid);
        if let Some(total) = self.processes.remove(&pid) {
            self.ended.push((pid, total, threads));
        }
    }

    /// Drops the totals of threads that have exited (a long host-mode run keeps only live ones).
    pub fn forget_threads(&mut self, threads: &std::collections::HashSet<(u32, u32)>) {
        if threads.is_empty() {
            return;
        }
        self.threads.retain(|key, _| !threads.contains(key));
    }

    /// Average power of a socket over the run.
    pub fn socket_power_w(&self, socket: u32) -> f64 {
        self.sockets.get(&socket).map_or(0.0, |s| power_w(s.energy_uj, self.duration_ns))
    }
}

fn accumulate(total: &mut TotalEnergy, on_cpu_ns: u64, energy_uj: f64) {
    total.on_cpu_ns += on_cpu_ns;
    total.energy_uj += energy_uj;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::{attribute, Attribution, IdleBaseline};
    use crate::energy::{SocketEnergy, SourceKind, Topology};
    use crate::model::{CpuTime, ThreadCpuTime};

    /// The report of a cycle of `duration_ns` once the energy stage has filled it.
    fn report(a: &Attribution, duration_ns: u64) -> CycleReport {
        let mut report = CycleReport { end_ns: duration_ns, ..CycleReport::default() };
        a.fill_report(&mut report, SourceKind::Model, true);
        report
    }

    #[test]
    fn totals_add_cycles_and_average_power_over_the_run() {
        let sec = 1_000_000_000;
        let topo = Topology::from_pairs([(0, 0)]);
        let cpus = [CpuTime { cpu: 0, busy_ns: sec, idle_ns: 0 }];
        let mut totals = Totals::default();
        let mut cycles = Vec::new();
        for (energy_uj, flagged) in [(4e6, false), (0.0, true), (6e6, false)] {
            let rows = [ThreadCpuTime { pid: 1, tid: 2, cpu: 0, on_cpu_ns: sec / 2 }];
            let reading = SocketEnergy { socket: 0, energy_uj, flagged, ..Default::default() };
            let a = attribute(&cpus, &rows, &topo, &[reading], sec, &IdleBaseline::new(None));
            totals.add(&report(&a, sec));
            cycles.push(a);
        }
        let thread_uj: f64 = cycles.iter().map(|a| a.threads[0].energy_uj).sum();
        let t = totals.threads[&(1, 2)];
        assert_eq!(totals.cycles, 3);
        assert_eq!(t.on_cpu_ns, 3 * sec / 2);
        assert!((t.energy_uj - thread_uj).abs() < 1e-6);
        assert!((t.power_w(totals.duration_ns) - thread_uj / 3e6).abs() < 1e-9);
        assert_eq!(totals.processes[&1], t);
        assert_eq!(totals.sockets[&0].flagged_cycles, 1);
        assert!((totals.socket_power_w(0) - 10.0 / 3.0).abs() < 1e-9);
        let s = totals.sockets[&0];
        assert!((t.energy_uj + s.unattributed_uj - s.energy_uj).abs() < 1e-6);

        totals.forget_threads(&[(1, 3)].into());
        assert_eq!(totals.threads.len(), 1, "only the named thread goes");
        totals.forget_threads(&[(1, 2)].into());
        assert!(totals.threads.is_empty());
        assert_eq!(totals.processes[&1], t, "a process outlives its threads");
        totals.forget_processes(&[1].into());
        assert!(totals.threads.is_empty() && totals.processes.is_empty());
        assert_eq!(totals.sockets[&0], s, "socket energy is kept");
    }

    #[test]
    fn an_ended_process_is_set_aside_and_a_reused_pid_starts_from_zero() {
        let sec = 1_000_000_000;
        let topo = Topology::from_pairs([(0, 0)]);
        let cpus = [CpuTime { cpu: 0, busy_ns: sec, idle_ns: 0 }];
        let reading = [SocketEnergy { socket: 0, energy_uj: 1e6, ..Default::default() }];
        let cycle = |rows: &[ThreadCpuTime]| {
            report(&attribute(&cpus, rows, &topo, &reading, sec, &IdleBaseline::new(None)), sec)
        };
        let mut totals = Totals::default();
        totals.add(&cycle(&[
            ThreadCpuTime { pid: 7, tid: 7, cpu: 0, on_cpu_ns: sec / 2 },
            ThreadCpuTime { pid: 8, tid: 8, cpu: 0, on_cpu_ns: sec / 4 },
        ]));
        let jvm = totals.processes[&7];
        totals.set_aside(7);
        totals.add(&cycle(&[ThreadCpuTime { pid: 7, tid: 7, cpu: 0, on_cpu_ns: sec / 10 }]));
        assert_eq!(totals.ended.len(), 1);
        let (pid, total, threads) = &totals.ended[0];
        assert_eq!((*pid, *total, threads[&7]), (7, jvm, jvm), "the ended process keeps its own totals");
        assert_eq!(totals.processes[&7].on_cpu_ns, sec / 10, "the new process with PID 7 starts from zero");
        assert_eq!(totals.threads[&(7, 7)].on_cpu_ns, sec / 10);
        assert_eq!(totals.processes[&8].on_cpu_ns, sec / 4, "other processes are untouched");
    }
}
