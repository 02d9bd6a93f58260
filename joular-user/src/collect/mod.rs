//! Draining the kernel's counters once per cycle into plain data (`RawCycle`).

mod cpu_time;
mod drain;
mod exit;
mod incarnations;
pub mod monotonic;
mod sample_log;
mod sample_names;
pub mod walked;

pub use drain::{Collector, RawCycle};
pub use exit::ThreadExit;
pub use incarnations::{parse_start_ticks, start_ticks};
