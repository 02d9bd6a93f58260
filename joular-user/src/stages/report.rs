//! Turns one drained `RawCycle` into the per-cycle report's thread and CPU rows. Thread names
//! the kernel did not give are read under `proc_root`, so a test hands it a tree of its own.

use std::collections::BTreeMap;
use std::path::Path;

use crate::collect::RawCycle;
use crate::model::{CpuReport, CycleReport, ThreadReport};

/// Threads, CPUs and drops of one cycle. Threads are sorted by on-CPU time, busiest first.
pub fn base_report(cycle_no: u64, raw: &RawCycle, proc_root: &Path) -> CycleReport {
    let mut threads: BTreeMap<(u32, u32), ThreadReport> = BTreeMap::new();
    for t in &raw.thread_cpu {
        threads
            .entry((t.pid, t.tid))
            .or_insert_with(|| ThreadReport { pid: t.pid, tid: t.tid, ..Default::default() })
            .on_cpu_ns += t.on_cpu_ns;
    }
    for s in &raw.samples {
        threads
            .entry((s.pid, s.tid))
            .or_insert_with(|| ThreadReport { pid: s.pid, tid: s.tid, ..Default::default() })
            .samples += s.count;
    }
    let mut threads: Vec<ThreadReport> = threads
        .into_values()
        .map(|mut t| {
            t.comm = thread_name(raw, t.pid, t.tid, proc_root);
            t
        })
        .collect();
    threads.sort_by(|a, b| b.on_cpu_ns.cmp(&a.on_cpu_ns).then(a.tid.cmp(&b.tid)));
    CycleReport {
        cycle: cycle_no,
        start_ns: raw.start_ns,
        end_ns: raw.end_ns,
        end_epoch_ms: epoch_ms(),
        threads,
        cpus: raw.cpus.iter().map(|c| CpuReport { cpu: c.cpu, busy_ns: c.busy_ns, idle_ns: c.idle_ns }).collect(),
        drops: raw.drops.clone(),
        ..Default::default()
    }
}

/// The kernel's comm when it saw the thread, else /proc, else the exit record.
fn thread_name(raw: &RawCycle, pid: u32, tid: u32, proc_root: &Path) -> String {
    if let Some((_, comm)) = raw.comms.get(&tid) {
        return comm.clone();
    }
    if let Ok(c) = std::fs::read_to_string(proc_root.join(format!("{pid}/task/{tid}/comm"))) {
        return c.trim_end().to_string();
    }
    raw.exits.iter().find(|e| e.tid == tid).map(|e| e.comm.clone()).unwrap_or_default()
}

/// The wall clock, ms since the epoch.
pub fn epoch_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CpuTime, RawSample, ThreadCpuTime};
    use std::sync::Arc;

    fn sample(pid: u32, tid: u32, count: u64) -> RawSample {
        RawSample { pid, tid, cpu: 0, user: Arc::from([1u64]), kernel: Arc::from([]), count, walked: None }
    }

    #[test]
    fn threads_sum_over_cpus_and_samples_and_sort_busiest_first() {
        let mut raw = RawCycle { start_ns: 10, end_ns: 20, ..Default::default() };
        raw.thread_cpu = vec![
            ThreadCpuTime { pid: 7, tid: 8, cpu: 0, on_cpu_ns: 100 },
            ThreadCpuTime { pid: 7, tid: 8, cpu: 1, on_cpu_ns: 50 },
            ThreadCpuTime { pid: 7, tid: 9, cpu: 1, on_cpu_ns: 400 },
        ];
        raw.samples = vec![sample(7, 8, 3), sample(7, 8, 2), sample(7, 9, 40)];
        raw.comms.insert(8, (7, "worker".into()));
        raw.cpus = vec![CpuTime { cpu: 0, busy_ns: 100, idle_ns: 900 }];
        let dir = tempfile::tempdir().unwrap();
        let r = base_report(3, &raw, dir.path());
        assert_eq!(r.cycle, 3);
        assert_eq!((r.start_ns, r.end_ns), (10, 20));
        let t: Vec<_> = r.threads.iter().map(|t| (t.tid, t.on_cpu_ns, t.samples)).collect();
        assert_eq!(t, vec![(9, 400, 40), (8, 150, 5)]);
        assert_eq!(r.threads[1].comm, "worker");
        assert_eq!(r.cpus[0].busy_ns, 100);
    }

    #[test]
    fn names_come_from_proc_when_the_kernel_had_none() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("7/task/9")).unwrap();
        std::fs::write(dir.path().join("7/task/9/comm"), "GC Thread#0\n").unwrap();
        let raw = RawCycle { samples: vec![sample(7, 9, 1)], ..Default::default() };
        assert_eq!(base_report(0, &raw, dir.path()).threads[0].comm, "GC Thread#0");
    }
}
