//! joular-ebpf user space. Data flows one way:
//! `ebpf` (load/attach) → `collect` (drain maps per cycle) → `attribution` (pure: counters in,
//! joules out) ← `energy` (sources behind one trait); `symbols` turns raw addresses into frames;
//! `output` sinks consume only the attributed, symbolized `model`, and write through
//! `safe_write` (directory descriptors, never a path another user could redirect).

pub mod attribution;
pub mod collect;
pub mod ebpf;
pub mod energy;
pub mod fleet;
pub mod model;
pub mod output;
pub mod printable;
pub mod procstat;
pub mod safe_write;
pub mod symbols;
pub mod unwind;
