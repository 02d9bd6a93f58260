//! HotSpot's own introspection data, read from outside the JVM: no agent, no attach, no
//! JVM flag. This is how Java frames get named: interpreted ones from the `Method*` and bcp
//! in their frame, compiled ones (with the methods C1/C2 inlined into them) from the pc.
//!
//! # Finding the tables
//! `libjvm.so` exports four tables, `gHotSpotVMStructs` (fields: type, name, type string,
//! static or not, offset or address), `gHotSpotVMTypes` (type, superclass, size),
//! `gHotSpotVMIntConstants` and `gHotSpotVMLongConstants`, each with symbols giving the
//! entry stride and the offset of every entry field (`gHotSpotVMStructEntryArrayStride`,
//! `...TypeNameOffset`, ...). [`libjvm`] finds libjvm.so in `/proc/<pid>/maps`, reads its
//! dynamic symbols from the mapped file (`/proc/<pid>/map_files/`, else the process's root)
//! and adds the load bias; [`vmstructs`] parses the tables; [`layout`] picks the fields the
//! readers use, by name, so no offset is hard-coded per JDK version. Checked on JDK 11.0.13,
//! 17.0.15, 21.0.8 and 25.0.2 (x86_64).
//!
//! All target memory goes through [`MemoryReader`]: `process_vm_readv` for a live pid,
//! recorded segments for tests ([`fixture`], `cargo xtask dump-hotspot-fixture`). A failed
//! read is a counted miss ([`Misses`]), never a panic. A JVM's reader is a
//! [`bounded::BoundedReader`]: no object over a fixed cap is allocated, and each JVM's reads
//! stop once its budget of bytes and time is spent.
//!
//! # Bounds
//! The target writes the tables, so every size, count, offset and stride read from them is
//! checked against what HotSpot itself produces before use (`vmstructs`: strides, entry
//! counts, name lengths and their total; `layout`: field offsets and object sizes of a few KB;
//! `codecache`: heap spans, segment-map hops, interpreter size). A table that breaks one makes
//! the JVM unreadable with [`HotspotError::Bound`], which is final (never retried).
//!
//! # Fields used
//! - Naming a `Method*` ([`method`]): `Method::_constMethod`; `ConstMethod::_constants`,
//!   `_name_index`, `_signature_index`, `_method_idnum`, `_code_size`, `_flags` (u2) or
//!   `_flags._flags` (u4, JDK 21+), `sizeof(ConstMethod)` (bytecodes follow the header, the
//!   compressed line table follows the bytecodes when flag `ConstMethod::_has_linenumber_table`
//!   / `ConstMethodFlags::_misc_has_linenumber_table` is set); `ConstantPool::_pool_holder`,
//!   `_length`, `sizeof(ConstantPool)` (the slots follow the header, 8 bytes each, a `Symbol*`
//!   for a Utf8 entry); `Klass::_name`; `InstanceKlass::_methods`, `_constants`;
//!   `Array<Method*>::_data`, `Array<T>::_length`; `Symbol::_length` (or
//!   `_length_and_refcount`, JDK 12 to 15) and `Symbol::_body`.
//! - Checking it: HotSpot's `ConstMethod` has no pointer back to its `Method`; the back-pointer
//!   used is the holder class's `_methods` array, which must list this `Method*` (method-handle
//!   intrinsics, which no class lists, are recognised by their private constant pool).
//! - pc -> blob ([`codecache`]): `CodeCache::_heaps` (`GrowableArrayBase::_len` or
//!   `GenericGrowableArray::_len`, `GrowableArray<int>::_data`), `CodeHeap::_memory`,
//!   `_segmap`, `_log2_segment_size`, `VirtualSpace::_low`, `_high`, `_high_boundary`, `sizeof(HeapBlock)`,
//!   `HeapBlock::_header`, `HeapBlock::Header::_length`, `_used`; `CodeBlob::_name`, `_size`,
//!   `_code_begin` (or `_code_offset`, from the blob, JDK 23+), `_frame_size`,
//!   `_frame_complete_offset` (an int, an int16_t from JDK 23); `nmethod::_method` (on
//!   `CompiledMethod` up to JDK 22), `_compile_id`. Blob kinds come from `_name` (`nmethod`,
//!   `native nmethod`), as JDK 9 to 22 have no kind field. Interpreter: `AbstractInterpreter::_code` ->
//!   `StubQueue::_stub_buffer`, `_buffer_limit`. Stubs: every static `address` field of
//!   `StubRoutines` is a stub entry (the call stub's return address is the one used); stubs
//!   are named from HotSpot's own lists, `StubCodeDesc::_list` and `VtableStubs::_table`,
//!   found in libjvm's `.symtab` ([`stub_names`]).
//! - Inlining ([`scopes`]), where the tables say the debug info is
//!   ([`layout::DebugInfoAt`], chosen by which fields exist, never by version): JDK 9 to 22
//!   `nmethod::_metadata_offset`, `_scopes_data_begin`, `_scopes_pcs_offset`,
//!   `_dependencies_offset`; JDK 23+ `nmethod::_immutable_data`, `_immutable_data_size`,
//!   `_scopes_pcs_offset`, `_scopes_data_offset`, with the metadata at `CodeBlob::_data_offset`
//!   plus `nmethod::_metadata_offset` (JDK 23, 24) or after `CodeBlob::_relocation_size` bytes of
//!   `CodeBlob::_mutable_data` (`_mutable_data_size`, JDK 25+); `PcDesc::_pc_offset`,
//!   `_scope_decode_offset`, `sizeof(PcDesc)`. A JDK lacking one of them keeps its method
//!   names and code cache, names compiled frames by their nmethod only, and
//!   [`layout::Layout::missing`] names the field. Streams are UNSIGNED5 with 6 bits per byte;
//!   from JDK 20+15 every byte is stored plus one ([`stream`]), chosen from
//!   `Abstract_VM_Version::_vm_major_version` etc.
//! - Flags ([`flags`]): `JVMFlag::flags`, `numFlags`, `_name`, `_addr`, `sizeof(JVMFlag)`
//!   (`Flag` before JDK 11): what the JVM runs with, whatever set it.
//! - Inlined chains are returned innermost (the inlined leaf) first, the nmethod's own
//!   method last, i.e. in stack order from the top.
//!
//! # Interpreter frames (for the eBPF sampler)
//! x86_64 `frame_x86.hpp`: `interpreter_frame_sender_sp_offset = -1`, `last_sp = -2`,
//! `method = -3`, then `mirror = -4` (JDK 9+), `mdp = -5`, `cache = -6`, `locals = -7`,
//! `bcp = -8` words from fp. The same on JDK 11, 17 and 21 (JDK 8, without the mirror slot,
//! had bcp at -7). Only `frame::interpreter_frame_sender_sp_offset` and
//! `frame::interpreter_frame_last_sp_offset` are exported (int constants, JDK 11 to 21), so
//! [`layout::InterpreterFrame`] takes `method = last_sp - 1` and `bcp = method - 5`, or the
//! `frame::interpreter_frame_method_offset` / `_bcp_offset` constants where a JDK exports them.
//! The live test reads both slots of real `-Xint` frames. In the top frame the current bcp
//! is in r13; the slot holds the bcp saved at the last call or safepoint (same method).
//! A bcp becomes a bci by subtracting `ConstMethod* + sizeof(ConstMethod)`.

pub mod bounded;
pub mod codecache;
pub mod error;
pub mod fixture;
pub mod flags;
pub mod jvm;
pub mod layout;
pub mod libjvm;
pub mod memory;
pub mod method;
mod name_pages;
pub mod poll_blobs;
pub mod scopes;
pub mod stream;
pub mod stub_names;
pub mod vmstructs;

#[cfg(test)]
mod bounds_tests;
#[cfg(test)]
mod interpreter_bounds_tests;

pub use bounded::{BoundedReader, Overrun, ReadBudget};
pub use error::HotspotError;
pub use jvm::{CodeAt, FrameKind, HotspotJvm, JavaFrame, Misses, PcRole, Reads};
pub use libjvm::{locate_libjvm, locate_tables, open_libjvm, table_symbols_from_elf, TableSymbols};
pub use memory::{MemoryReader, ProcessMemory, ReadError, RecordingReader, SegmentsMemory, MAX_OBJECT_BYTES};
pub use method::JavaMethod;
pub use vmstructs::VmStructs;
