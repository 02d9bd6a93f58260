//! HotSpot JIT symbols for a profiler running outside the JVM: perf-map parsing and
//! indexing, the HotSpot attach protocol (no JDK tools needed, no target binary ever run),
//! and JVM discovery, containers included. Every file, socket and directory a JVM controls is
//! treated as hostile and touched only with the JVM's own identity ([`identity`]). No aya,
//! no root needed for most tests.
//!
//! [`hotspot`] reads HotSpot's introspection tables from outside the JVM to name
//! interpreted, inlined and compiled frames without a perf map.
//!
//! Typical use: [`discover`] a PID, [`dump_perf_map`], then keep a [`PerfMapFile`] and
//! [`PerfMapFile::refresh`] it; [`names`] tells Java methods from stubs.

pub mod attach;
pub mod discovery;
pub mod dump;
pub mod error;
pub mod hotspot;
pub mod identity;
pub mod index;
pub mod maps;
mod name_table;
pub mod names;
pub mod parser;
pub mod pool;
pub mod reload;
pub mod safe_open;
pub mod text;

pub use discovery::{discover, flag_from_vm_flags, FlagState, JvmInfo};
pub use dump::dump_perf_map;
pub use error::{Error, Result};
pub use identity::Identity;
pub use index::{Limits, PerfMapIndex, Symbol};
pub use maps::{parse_maps, Mapping};
pub use names::{classify, short_name, stable_name, CodeKind};
pub use pool::{MemoryPool, Reservation};
pub use reload::{LoadedMap, MapSource, PerfMapFile};
