//! `--verbose`: each thread's eBPF on-CPU time next to its /proc jiffies over the same window
//! (snapshots taken right after each drain, so both describe the same instants ±1 tick).

use std::collections::HashMap;
use std::path::Path;

use joular_user::model::CycleReport;
use joular_user::procstat::{ProcStatReader, Snapshot};

pub struct CrossCheck {
    reader: ProcStatReader,
    /// None = every process (host mode).
    pids: Option<Vec<u32>>,
    last: Snapshot,
}

impl CrossCheck {
    pub fn start(proc_root: &Path, pids: Option<Vec<u32>>) -> anyhow::Result<Self> {
        let reader = ProcStatReader::new(proc_root)?;
        let last = reader.snapshot(pids.as_deref())?;
        Ok(Self { reader, pids, last })
    }

    /// Fills `proc_on_cpu_ns` of every thread in the report.
    pub fn fill(&mut self, report: &mut CycleReport) -> anyhow::Result<()> {
        let now = self.reader.snapshot(self.pids.as_deref())?;
        let window = self.reader.diff(&self.last, &now);
        self.last = now;
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
