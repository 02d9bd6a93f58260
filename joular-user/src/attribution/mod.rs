//! Attribution (docs/architecture.md, "The energy formulas"): one cycle's counters in, joules
//! out. Pure: no file, no map, no clock; everything it needs is passed in, so every rule is
//! testable on fixtures.
//!
//! Per socket `s` and cycle of length `d` (jcarbon's scheduler-time formula):
//!
//! - CPU share of a task on CPU `c`: `A_task = t_task / max(1, t_c, Σ t_task' on c)`, with `t_c`
//!   the CPU's whole cycle (busy + idle). Every task on `c`, monitored or not, takes together
//!   `busy_c / max(t_c, busy_c)`, so the others need no per-task data.
//! - Task energy: `E_task = E_s · A_task / max(1, Σ_{all tasks on s} A)`; what monitored tasks
//!   did not take is the socket's unattributed remainder, so `Σ tasks + unattributed = E_s`.
//! - Power: `P = E / d`.
//!
//! This is the E-Surgeon model (Noureddine et al., eq. 3, 6 and 10) in scheduler time:
//! `P_pid = P_cpu · t_pid / t_cpu` (eq. 3), `P_thread = t_thread · P_pid / d` (eq. 6), and
//! `P_method = samples_method / samples_thread · P_thread` (eq. 10, done by `stacks`, the stack stage:
//! samples only split a thread's energy, never set it).
//!
//! The dynamic view subtracts an idle baseline per socket (`--idle-power`, or the lowest
//! socket power seen so far) and splits the rest the same way; it is labelled "dynamic".

mod attribute;
mod baseline;
pub mod device_split;
pub mod devices;
mod report;
pub mod stacks;
mod totals;
pub mod writeback;

pub use attribute::attribute;
pub use baseline::IdleBaseline;
pub use totals::{SocketTotal, TotalEnergy, Totals};

/// One thread's energy in one cycle, summed over the CPUs it ran on.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ThreadEnergy {
    pub pid: u32,
    pub tid: u32,
    pub on_cpu_ns: u64,
    pub energy_uj: f64,
    /// Share of the socket's energy above its idle baseline.
    pub dynamic_energy_uj: f64,
    pub power_w: f64,
}

/// One process's energy in one cycle: the sum of its threads.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ProcessEnergy {
    pub pid: u32,
    pub on_cpu_ns: u64,
    pub energy_uj: f64,
    pub dynamic_energy_uj: f64,
    pub power_w: f64,
}

/// One socket's split: `attributed_uj + unattributed_uj == energy_uj`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SocketAttribution {
    pub socket: u32,
    /// `E_s` (package, plus DRAM when asked for); 0 when the counter was flagged.
    pub energy_uj: f64,
    pub attributed_uj: f64,
    /// Energy no monitored thread took: idle, other processes, the kernel.
    pub unattributed_uj: f64,
    pub dynamic_energy_uj: f64,
    pub dynamic_unattributed_uj: f64,
    /// The baseline the dynamic view subtracted.
    pub idle_power_w: f64,
    pub dram_energy_uj: Option<f64>,
    pub psys_energy_uj: Option<f64>,
    pub flagged: bool,
    pub power_w: f64,
}

/// A cycle's attribution. Threads are sorted by `(pid, tid)`, processes by pid, sockets by id.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Attribution {
    pub duration_ns: u64,
    pub threads: Vec<ThreadEnergy>,
    pub processes: Vec<ProcessEnergy>,
    pub sockets: Vec<SocketAttribution>,
}

/// `P = E / d`; 0 for an empty cycle rather than infinity.
pub(crate) fn power_w(energy_uj: f64, duration_ns: u64) -> f64 {
    match duration_ns {
        0 => 0.0,
        // µJ / ns = kW: scale by 1e3 to get W.
        d => energy_uj / d as f64 * 1e3,
    }
}
