//! HotSpot's own introspection data, read from outside the JVM (no agent, no attach).
//!
//! `libjvm.so` exports four tables (`gHotSpotVMStructs`, `gHotSpotVMTypes`,
//! `gHotSpotVMIntConstants`, `gHotSpotVMLongConstants`) and, for each, symbols giving the
//! entry stride and the offset of each entry field. [`libjvm`] resolves those symbols in
//! the target, [`vmstructs`] parses the tables into a model, and the readers above it ask
//! for the fields they need by name, so no offset is hard-coded per JDK version.
//!
//! All target memory goes through [`MemoryReader`]: `process_vm_readv` for a live pid,
//! recorded segments for tests and fixtures.

pub mod codecache;
pub mod error;
pub mod fixture;
pub mod jvm;
pub mod layout;
pub mod libjvm;
pub mod memory;
pub mod method;
pub mod scopes;
pub mod stream;
pub mod vmstructs;

pub use error::HotspotError;
pub use jvm::{CodeAt, FrameKind, HotspotJvm, JavaFrame, Misses};
pub use libjvm::{locate_tables, TableSymbols};
pub use memory::{MemoryReader, ProcessMemory, ReadError, RecordingReader, SegmentsMemory};
pub use method::JavaMethod;
pub use vmstructs::VmStructs;
