//! HotSpot JIT symbols for a profiler running outside the JVM: perf-map parsing and
//! indexing, the HotSpot attach protocol (no JDK tools needed, no target binary ever run),
//! and JVM discovery, containers included. Every file, socket and directory a JVM controls is
//! treated as hostile and touched only with the JVM's own identity ([`Identity`]). No aya,
//! no root needed for most tests.
//!
//! [`hotspot`] reads HotSpot's introspection tables from outside the JVM to name
//! interpreted, inlined and compiled frames without a perf map.
//!
//! Typical use: [`discover`] a PID, [`dump_perf_map`], then keep a [`PerfMapFile`] and
//! [`PerfMapFile::refresh`] it; [`classify`] tells Java methods from stubs.
//!
//! # What other crates may use
//! Two protocols are public modules: [`attach`] (the HotSpot attach client) and [`hotspot`]
//! (HotSpot's introspection tables). Everything else is re-exported here, by group:
//! errors ([`Error`]); JVM discovery ([`discover`], [`JvmInfo`]); the identity files are
//! touched as ([`Identity`], [`run_as`]); perf maps ([`dump_perf_map`], [`PerfMapIndex`],
//! [`PerfMapFile`], [`MemoryPool`]); code names ([`classify`], [`short_name`]); process maps
//! ([`parse_maps`]); and printing target-controlled text ([`printable`]). The modules behind
//! them are private, so their layout can change without breaking a user.

// Two namespaces, each a protocol of its own: the attach client and HotSpot introspection.
pub mod attach;
pub mod hotspot;

mod discovery;
mod dump;
mod error;
mod identity;
mod index;
mod maps;
mod name_table;
mod names;
mod parser;
mod pool;
mod reload;
mod safe_open;
mod text;

// Errors: one type for the crate (HotSpot introspection has its own, `hotspot::HotspotError`).
pub use error::{Error, Result};

// Finding a JVM and what it runs with: PID in, JVM (or `None`) out, containers included.
pub use discovery::{discover, flag_from_vm_flags, FlagState, JvmInfo};

// Who a file or socket of the JVM is touched as: always the JVM's own user, never root.
pub use identity::{run_as, Identity, RunAsError};

// Perf maps: asking the JVM to write one, then loading, indexing and reloading it within a
// memory budget that several JVMs share.
pub use dump::dump_perf_map;
pub use index::{Limits, PerfMapIndex, ReadError, Symbol};
pub use parser::{parse_line, ParsedLine};
pub use pool::{MemoryPool, Reservation};
pub use reload::{LoadedMap, MapSource, PerfMapFile};
pub use safe_open::Fingerprint;

// Naming code: Java methods told from stubs, and Java names shortened for display.
pub use names::{classify, short_name, stable_name, CodeKind};

// A process's memory map (`/proc/<pid>/maps`), read bounded.
pub use maps::{parse_maps, Mapping, MAX_MAPS_BYTES};

// Target-controlled text made safe to print.
pub use text::{printable, printable_bytes};
