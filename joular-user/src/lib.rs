//! joular-ebpf user space. Data flows one way:
//! `ebpf` (load/attach) → `collect` (drain maps per cycle) → `attribution` (pure: counters in,
//! joules out) ← `energy` (sources behind one trait); `symbols` turns raw addresses into frames;
//! `output` sinks consume only the attributed, symbolized `model`, and write through
//! `safe_write` (directory descriptors, never a path another user could redirect).
//!
//! # What the binary, benches and fuzz targets may use
//! Each stage is a public module, and each chooses its own surface with `pub use` over private
//! files (as blazesym's topics do), so `joular_user::energy::open_source` is the API and
//! `energy/select.rs` is not. Helpers the stages share among themselves (the escaping of
//! target-chosen names) stay private to the crate.

// The stages (the order a cycle goes through them is in the paragraph above).
pub mod attribution;
pub mod calmness;
pub mod carbon;
pub mod collect;
pub mod device_models;
pub mod diff;
pub mod ebpf;
pub mod energy;
pub mod fleet;
pub mod output;
pub mod procstat;
pub mod stages;
pub mod sweep;
pub mod symbols;
pub(crate) mod target_read;
pub mod unwind;
pub(crate) mod urgency;
pub mod vm_export;

// The types every stage hands on, and the one way results reach the disk.
pub mod device_reports;
pub mod frames;
pub mod model;
pub mod safe_write;

mod printable;
mod svg_chart;
