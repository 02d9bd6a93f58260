//! Draining the kernel's counters once per cycle into plain data (`RawCycle`).

mod drain;
pub mod monotonic;
pub mod walked;

pub use drain::{Collector, RawCycle, ThreadExit};
