//! A thread's totals over the run, as `summary.json` lists them (the CPU's; the devices' are
//! `device_run.rs`'s, which reads these for the threads' names).

use serde::{Deserialize, Serialize};

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadTotal {
    pub tid: u32,
    pub comm: String,
    pub energy_uj: f64,
    /// Grams of CO₂e of `energy_uj` (0 without a carbon intensity).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub carbon_g: f64,
    pub on_cpu_ns: u64,
    pub samples: u64,
}
