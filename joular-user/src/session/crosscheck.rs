//! CPU time from /proc jiffies, snapshotted right after each drain so it describes the same
//! window as the kernel's counters (±1 tick). Two uses: `--verbose` shows each thread's eBPF
//! on-CPU time next to it, and without the eBPF scheduler hook it replaces the kernel's
//! per-thread and per-CPU time.

use std::collections::HashMap;
use std::path::Path;

use joular_user::collect::RawCycle;
use joular_user::model::CycleReport;
use joular_user::procstat::{ProcCycle, ProcStatReader, Snapshot};

pub struct ProcTime {
    reader: ProcStatReader,
    /// None = every process (host mode).
    pids: Option<Vec<u32>>,
    last: Snapshot,
}

impl ProcTime {
    pub fn start(proc_root: &Path, pids: Option<Vec<u32>>) -> anyhow::Result<Self> {
        let reader = ProcStatReader::new(proc_root)?;
        let last = reader.snapshot(pids.as_deref())?;
        Ok(Self { reader, pids, last })
    }

    fn next_window(&mut self) -> anyhow::Result<ProcCycle> {
        let now = self.reader.snapshot(self.pids.as_deref())?;
        let window = self.reader.diff(&self.last, &now);
        self.last = now;
        Ok(window)
    }

    /// The procfs path: this window's jiffies replace the kernel's CPU time.
    pub fn replace_cpu_time(&mut self, raw: &mut RawCycle) -> anyhow::Result<()> {
        let window = self.next_window()?;
        for t in &window.threads {
            if let Some(comm) = window.comms.get(&t.tid) {
                raw.comms.entry(t.tid).or_insert_with(|| (t.pid, comm.clone()));
            }
        }
        raw.thread_cpu = window.threads;
        raw.cpus = window.cpus;
        Ok(())
    }

    /// Fills `proc_on_cpu_ns` of every thread in the report.
    pub fn fill(&mut self, report: &mut CycleReport) -> anyhow::Result<()> {
        let window = self.next_window()?;
        let mut by_tid: HashMap<u32, u64> = HashMap::new();
        for t in &window.threads {
            *by_tid.entry(t.tid).or_default() += t.on_cpu_ns;
        }
        for t in &mut report.threads {
            t.proc_on_cpu_ns = Some(by_tid.get(&t.tid).copied().unwrap_or(0));
        }
        Ok(())
    }
}
