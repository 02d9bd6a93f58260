//! What a finished run knows about one process: the totals every end-of-run output is
//! rendered from, during the run (`Results::finish`) and later (`joular-ebpf report`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Stack;

/// `summary.json`, also the header of the raw profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub pid: u32,
    /// The process's name: its leader's comm when the session read it, else the main thread's
    /// (tid = pid), else the first thread's.
    pub comm: String,
    pub start_epoch_ms: u64,
    pub end_epoch_ms: u64,
    /// Sum of the cycles' lengths (monotonic clock).
    pub duration_s: f64,
    pub cycles: u64,
    /// `--filter` prefixes that define the "app" view.
    pub filters: Vec<String>,
    /// `powercap`, `perf`, `msr` or `model`.
    pub energy_source: String,
    /// True when the energy comes from a model, not a meter.
    pub estimated: bool,
    /// Energy attributed to this process (sum of its threads).
    pub energy_uj: f64,
    pub samples: u64,
    /// Machine-wide, summed over sockets and cycles: socket energy, and the part of it that
    /// no monitored task took (idle and other processes).
    pub socket_energy_uj: f64,
    pub unattributed_uj: f64,
    /// Losses per map or cause, summed over cycles (machine-wide, as collected).
    pub drops: BTreeMap<String, u64>,
    pub threads: Vec<ThreadTotal>,
}

impl RunSummary {
    pub fn power_w(&self, energy_uj: f64) -> f64 {
        if self.duration_s > 0.0 {
            energy_uj / 1e6 / self.duration_s
        } else {
            0.0
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadTotal {
    pub tid: u32,
    pub comm: String,
    pub energy_uj: f64,
    pub on_cpu_ns: u64,
    pub samples: u64,
}

/// Energy and samples of one distinct stack over the whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct StackTotal {
    pub stack: Stack,
    pub energy_uj: f64,
    pub samples: u64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessProfile {
    pub summary: RunSummary,
    pub stacks: Vec<StackTotal>,
}
