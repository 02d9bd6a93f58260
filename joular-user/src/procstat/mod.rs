//! The procfs path: CPU time from jiffies, for when eBPF scheduler accounting is unavailable
//! and as a cross-check of it (`--verbose`). `/proc/stat` gives each CPU's busy and idle
//! jiffies; `/proc/<pid>/task/<tid>/stat` each thread's `utime + stime`. Two snapshots,
//! diffed and converted to ns, give the same `CpuTime`/`ThreadCpuTime` rows as eBPF.
//!
//! Jiffies carry no per-CPU split of a thread's time: the whole window's time is put on the
//! CPU the thread last ran on (the `processor` field), so a thread that migrated is charged
//! to one CPU. Attribution stays conservative either way (per-CPU shares are capped), but
//! per-socket placement of a migrating thread is approximate on this path.

mod descendants;
mod parse;
mod reader;

use std::io;
use std::path::PathBuf;

use thiserror::Error;

pub use descendants::descendants;
pub use parse::{parse_proc_stat, parse_task_stat, CpuJiffies, TaskStat};
pub use reader::{ProcCycle, ProcStatReader, Snapshot};

#[derive(Debug, Error)]
pub enum ProcStatError {
    #[error("procfs root {0} does not exist: pass --proc-root pointing at a mounted procfs (default /proc)")]
    MissingRoot(PathBuf),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: no per-CPU `cpuN` line (is this a procfs stat file?)")]
    NoCpuLines { path: PathBuf },
}
