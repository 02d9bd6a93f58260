//! The offsets and sizes the readers need, taken by name from [`VmStructs`]. Where JDK
//! versions differ, the alternatives are listed here and the first that exists wins; a
//! reader whose fields are all present works on a JDK it was never tested on.

use std::cell::RefCell;

use super::error::{bound, HotspotError};
use super::memory::MemoryReader;
use super::stream::Encoding;
use super::vmstructs::VmStructs;

/// A non-static field: where it is in its object and how wide it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: u64,
    pub size_bytes: usize,
}

impl Field {
    /// The field's value in an object already read into `bytes`.
    pub fn get(&self, bytes: &[u8]) -> Option<u64> {
        let start = usize::try_from(self.offset).ok()?;
        let b = bytes.get(start..start.checked_add(self.size_bytes)?)?;
        let mut v = [0u8; 8];
        v.get_mut(..b.len())?.copy_from_slice(b);
        Some(u64::from_le_bytes(v))
    }

    pub fn read(&self, reader: &impl MemoryReader, object: u64) -> Result<u64, super::ReadError> {
        reader.read_uint(object.wrapping_add(self.offset), self.size_bytes)
    }
}

/// Fields of `Method`, `ConstMethod`, `ConstantPool`, `Klass`, `InstanceKlass`, `Array` and
/// `Symbol`: enough to name a `Method*` and check it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodLayout {
    pub method_const_method: u64,
    pub const_method_size: u64,
    pub const_method_constants: u64,
    pub const_method_code_size: Field,
    pub const_method_name_index: Field,
    pub const_method_signature_index: Field,
    pub const_method_idnum: Field,
    /// `_flags` (u2, up to JDK 20) or `_flags._flags` (u4, JDK 21+).
    pub const_method_flags: Field,
    pub has_linenumber_table_flag: u64,
    pub constant_pool_size: u64,
    pub constant_pool_holder: u64,
    pub constant_pool_length: Field,
    pub klass_name: u64,
    pub instance_klass_methods: u64,
    /// `InstanceKlass::_constants`, to recognise method-handle intrinsics.
    pub instance_klass_constants: Option<u64>,
    pub array_length: u64,
    pub method_array_data: u64,
    pub symbol_length: Field,
    pub symbol_body: u64,
}

/// Where a `CodeBlob`'s code starts: a pointer (JDK 9 to 22) or an offset from the blob
/// (JDK 23+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeStart {
    Pointer(u64),
    Offset(Field),
}

/// Fields of `CodeCache`, `CodeHeap`, `HeapBlock`, `CodeBlob`, `nmethod` and the
/// interpreter's `StubQueue`: enough to map a pc to its blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeLayout {
    /// Address of the static `CodeCache::_heaps` (a `GrowableArray<CodeHeap*>*`).
    pub code_cache_heaps: u64,
    /// Addresses of the statics `CodeCache::_low_bound` and `_high_bound`: the whole
    /// reserved code cache, committed or not.
    pub code_cache_bounds: Option<(u64, u64)>,
    pub growable_array_len: Field,
    pub growable_array_data: u64,
    pub code_heap_memory: u64,
    pub code_heap_segmap: u64,
    pub code_heap_log2_segment_size: Field,
    pub virtual_space_low: u64,
    pub virtual_space_high: u64,
    /// `VirtualSpace::_high_boundary`, the end of what the space reserved (`_high` is the
    /// end of what is committed so far, which grows as the JIT places code).
    pub virtual_space_high_boundary: Option<u64>,
    pub heap_block_size: u64,
    pub heap_block_length: Field,
    pub heap_block_used: Field,
    pub blob_name: u64,
    pub blob_size: Field,
    pub blob_code_start: CodeStart,
    /// `CodeBlob::_frame_size`, in words: a frame of this code spans this many words from
    /// its sp to its caller's sp (return address and saved rbp included).
    pub blob_frame_size: Field,
    /// `CodeBlob::_frame_complete_offset`: code before it (from the code start) runs
    /// before the frame is set up.
    pub blob_frame_complete_offset: Field,
    pub nmethod_method: u64,
    pub nmethod_compile_id: Field,
    /// Address of the static `AbstractInterpreter::_code` (a `StubQueue*`).
    pub interpreter_code: u64,
    pub stub_queue_buffer: u64,
    pub stub_queue_limit: Field,
    /// `StubQueue::_queue_end`: the end of the codelets committed so far. The interpreter's
    /// buffer is reserved larger than its code and trimmed once the code is generated
    /// (`StubQueue::deallocate_unused_tail`); the freed tail goes to other blobs (stubs,
    /// adapters), so the reserved limit read before the trim covers code that is not the
    /// interpreter's. `None` when not exported: the limit is used.
    pub stub_queue_end: Option<Field>,
}

/// Fields of `nmethod` and `PcDesc` for the inlining chain at a pc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopesLayout {
    pub debug_info: DebugInfoAt,
    pub pc_desc_size: u64,
    pub pc_desc_pc_offset: Field,
    pub pc_desc_scope_decode_offset: Field,
}

/// Where an nmethod keeps its metadata (the `Method*`s scopes name), scopes data and
/// `PcDesc`s. Chosen by which fields the tables export, not by version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DebugInfoAt {
    /// In the blob, in this order, between `nmethod::_metadata_offset` and
    /// `_dependencies_offset` (the scopes data at the pointer `_scopes_data_begin`); JDK 9
    /// to 22.
    InBlob { metadata_offset: Field, scopes_data_begin: u64, scopes_pcs_offset: Field, dependencies_offset: Field },
    /// PcDescs then scopes data in the buffer at `nmethod::_immutable_data`, from
    /// `_scopes_pcs_offset` and `_scopes_data_offset` to `_immutable_data_size` (JDK 23+).
    Immutable {
        metadata: MetadataAt,
        immutable_data: u64,
        immutable_data_size: Field,
        scopes_pcs_offset: Field,
        scopes_data_offset: Field,
    },
}

/// Where the metadata array of a JDK 23+ nmethod is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataAt {
    /// In the blob's data section, at `CodeBlob::_data_offset + nmethod::_metadata_offset`,
    /// to the blob's end (`CodeBlob::_size`); JDK 23 and 24.
    DataSection { data_offset: Field, metadata_offset: Field, blob_size: Field },
    /// After the relocations (`CodeBlob::_relocation_size`) in the buffer at
    /// `CodeBlob::_mutable_data`, to its `_mutable_data_size`; JDK 25+.
    Mutable { mutable_data: u64, mutable_data_size: Field, relocation_size: Field },
}

/// The JVM's flag table (see [`super::flags`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagsLayout {
    /// Addresses of the statics `JVMFlag::flags` (a `JVMFlag*`) and `JVMFlag::numFlags`.
    pub flags: u64,
    pub num_flags: u64,
    pub entry_size: u64,
    pub name_offset: u64,
    pub addr_offset: u64,
}

/// HotSpot's version, from `Abstract_VM_Version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct JvmVersion {
    pub major: u32,
    pub minor: u32,
    pub security: u32,
    pub build: u32,
}

impl JvmVersion {
    /// `CompressedStream` became UNSIGNED5 with a reserved zero byte in JDK 20, build 15
    /// (opentelemetry-ebpf-profiler switches on the same version; JDK 17 and 21 fixtures
    /// check both sides).
    pub fn stream_encoding(&self) -> Encoding {
        if (self.major, self.minor, self.security, self.build) >= (20, 0, 0, 15) {
            Encoding::Unsigned5
        } else {
            Encoding::Classic
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub version: JvmVersion,
    pub encoding: Encoding,
    pub methods: MethodLayout,
    /// `None` when this JDK's code cache differs from what the readers know (JDK 8's single
    /// heap, for one): methods can still be named, pcs cannot.
    pub code: Option<CodeLayout>,
    pub scopes: Option<ScopesLayout>,
    /// `None` when the tables do not export the flag table.
    pub flags: Option<FlagsLayout>,
    /// Why `code` or `scopes` is `None`: the first field each lacks, by name.
    pub missing: Vec<String>,
    /// Frame slots of an interpreted frame, in words from fp (see the module docs).
    pub interpreter_frame: InterpreterFrame,
    /// `StubRoutines::_<name>` static `address` fields: (name, address of the field). Their
    /// values, read once the JVM has generated its stubs, are the stubs' entry points.
    pub stub_entry_fields: Vec<(String, u64)>,
}

/// Where an x86_64 interpreter frame keeps its `Method*` and bcp, in words relative to fp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterpreterFrame {
    /// The caller's sp as it was before the callee's arguments and locals were pushed
    /// (`interpreter_frame_sender_sp_offset`): a compiled caller's frame is measured
    /// from it.
    pub sender_sp_slot: i64,
    pub method_slot: i64,
    pub bcp_slot: i64,
}

fn missing(what: String) -> HotspotError {
    HotspotError::MissingField { what }
}

/// Offsets of the fields the readers use: they sit in the first KB or so of their objects
/// (`Method`, `ConstMethod`, `CodeBlob`, `nmethod`...; the largest offset of any field in JDK
/// 11 to 21 is 3,408, in a GC heap no reader touches).
pub const MAX_FIELD_OFFSET_BYTES: u64 = 4096;
/// Sizes of the objects read whole (`ConstMethod`, `ConstantPool`, `HeapBlock`, `PcDesc`:
/// 16 to ~100 bytes).
pub const MAX_OBJECT_SIZE_BYTES: u64 = 4096;

/// The fields of [`VmStructs`] by name, each checked against the bounds above. The first
/// field out of bounds is kept: it makes the whole layout an error, even for the parts
/// (code cache, scopes) whose absence is otherwise tolerated.
struct Lookup<'a>(&'a VmStructs, RefCell<Option<HotspotError>>);

impl Lookup<'_> {
    fn size_of_type(&self, type_string: &str) -> Option<usize> {
        if type_string.ends_with('*') {
            return Some(8);
        }
        let known = match type_string {
            "u1" | "bool" | "jbyte" | "char" | "signed char" | "volatile signed char" => Some(1),
            "u2" | "jushort" | "jshort" | "uint16_t" => Some(2),
            "u4" | "int" | "jint" | "juint" | "uint" | "unsigned int" | "uint32_t" | "CompLevel" => Some(4),
            "u8" | "address" | "size_t" | "intx" | "uintx" | "uint64_t" | "long" => Some(8),
            _ => None,
        };
        known.or_else(|| self.0.type_size(type_string).and_then(|s| usize::try_from(s).ok()))
    }

    /// Records (the first) bound broken, and returns it.
    fn broken(&self, what: String, value: u64, limit: u64) -> HotspotError {
        let mut first = self.1.borrow_mut();
        if first.is_none() {
            *first = Some(bound(what.clone(), value, limit));
        }
        bound(what, value, limit)
    }

    /// The first of `names` that `type_name` (or a superclass) has: its name, offset and
    /// type.
    fn entry<'n>(&self, type_name: &str, names: &[&'n str]) -> Result<(&'n str, u64, &str), HotspotError> {
        for name in names {
            if let Some(f) = self.0.field(type_name, name).filter(|f| !f.is_static) {
                if f.offset > MAX_FIELD_OFFSET_BYTES {
                    return Err(self.broken(
                        format!("offset of {type_name}::{name}"),
                        f.offset,
                        MAX_FIELD_OFFSET_BYTES,
                    ));
                }
                return Ok((name, f.offset, &f.type_string));
            }
        }
        Err(missing(format!("{type_name}::{}", names.join("|"))))
    }

    /// A field whose value is read: an integer or a pointer.
    fn field(&self, type_name: &str, names: &[&str]) -> Result<Field, HotspotError> {
        let (name, offset, type_string) = self.entry(type_name, names)?;
        let size_bytes = self.size_of_type(type_string).unwrap_or(8);
        if ![1, 2, 4, 8].contains(&size_bytes) {
            return Err(self.broken(format!("size of {type_name}::{name} ({type_string})"), size_bytes as u64, 8));
        }
        Ok(Field { offset, size_bytes })
    }

    fn offset(&self, type_name: &str, names: &[&str]) -> Result<u64, HotspotError> {
        self.entry(type_name, names).map(|(_, offset, _)| offset)
    }

    fn static_address(&self, type_name: &str, name: &str) -> Result<u64, HotspotError> {
        self.0
            .field(type_name, name)
            .filter(|f| f.is_static && f.address != 0)
            .map(|f| f.address)
            .ok_or_else(|| missing(format!("static {type_name}::{name}")))
    }

    fn size(&self, type_name: &str) -> Result<u64, HotspotError> {
        let size = self.0.type_size(type_name).ok_or_else(|| missing(format!("sizeof({type_name})")))?;
        if size > MAX_OBJECT_SIZE_BYTES {
            return Err(self.broken(format!("sizeof({type_name})"), size, MAX_OBJECT_SIZE_BYTES));
        }
        Ok(size)
    }
}

impl Layout {
    pub fn new(vm: &VmStructs, reader: &impl MemoryReader) -> Result<Self, HotspotError> {
        let l = Lookup(vm, RefCell::new(None));
        // Every field is looked up before any error is returned: a bound broken anywhere
        // is the error, whatever else is missing.
        let (methods, code, scopes) = (method_layout(&l), code_layout(&l), scopes_layout(&l));
        let flags = ["JVMFlag", "Flag"].iter().find_map(|t| flags_layout(&l, t).ok());
        if let Some(broken) = l.1.take() {
            return Err(broken);
        }
        let version = read_version(&l, reader)?;
        let missing =
            [code.as_ref().err(), scopes.as_ref().err()].into_iter().flatten().map(|e| e.to_string()).collect();
        Ok(Self {
            version,
            encoding: version.stream_encoding(),
            methods: methods?,
            code: code.ok(),
            scopes: scopes.ok(),
            flags,
            missing,
            interpreter_frame: interpreter_frame(vm),
            stub_entry_fields: stub_entry_fields(vm),
        })
    }
}

fn read_version(l: &Lookup, reader: &impl MemoryReader) -> Result<JvmVersion, HotspotError> {
    let mut v = [0u32; 4];
    for (slot, name) in
        v.iter_mut().zip(["_vm_major_version", "_vm_minor_version", "_vm_security_version", "_vm_build_number"])
    {
        *slot = reader.read_u32(l.static_address("Abstract_VM_Version", name)?)?;
    }
    Ok(JvmVersion { major: v[0], minor: v[1], security: v[2], build: v[3] })
}

fn method_layout(l: &Lookup) -> Result<MethodLayout, HotspotError> {
    let has_linenumber_table_flag =
        ["ConstMethodFlags::_misc_has_linenumber_table", "ConstMethod::_has_linenumber_table"]
            .iter()
            .find_map(|n| l.0.int_constant(n))
            .unwrap_or(1) as u64;
    let symbol_length = match l.field("Symbol", &["_length"]) {
        Ok(f) => f,
        // JDK 12 to 15 packed the length into the upper half of `_length_and_refcount`.
        Err(_) => {
            let packed = l.field("Symbol", &["_length_and_refcount"])?;
            Field { offset: packed.offset + 2, size_bytes: 2 }
        }
    };
    Ok(MethodLayout {
        method_const_method: l.offset("Method", &["_constMethod"])?,
        const_method_size: l.size("ConstMethod")?,
        const_method_constants: l.offset("ConstMethod", &["_constants"])?,
        const_method_code_size: l.field("ConstMethod", &["_code_size"])?,
        const_method_name_index: l.field("ConstMethod", &["_name_index"])?,
        const_method_signature_index: l.field("ConstMethod", &["_signature_index"])?,
        const_method_idnum: l.field("ConstMethod", &["_method_idnum"])?,
        const_method_flags: l.field("ConstMethod", &["_flags._flags", "_flags"])?,
        has_linenumber_table_flag,
        constant_pool_size: l.size("ConstantPool")?,
        constant_pool_holder: l.offset("ConstantPool", &["_pool_holder"])?,
        constant_pool_length: l.field("ConstantPool", &["_length"])?,
        klass_name: l.offset("Klass", &["_name"])?,
        instance_klass_methods: l.offset("InstanceKlass", &["_methods"])?,
        instance_klass_constants: l.offset("InstanceKlass", &["_constants"]).ok(),
        // `Array<T>::_length` is the same int at the start of every instantiation; the
        // tables list it for some of them only.
        array_length: ["Array<Method*>", "Array<int>", "Array<Klass*>"]
            .iter()
            .find_map(|t| l.offset(t, &["_length"]).ok())
            .ok_or_else(|| missing("Array<T>::_length".into()))?,
        method_array_data: l.offset("Array<Method*>", &["_data"])?,
        symbol_length,
        symbol_body: l.offset("Symbol", &["_body"])?,
    })
}

fn code_layout(l: &Lookup) -> Result<CodeLayout, HotspotError> {
    let blob_code_start = match l.field("CodeBlob", &["_code_begin"]) {
        Ok(f) => CodeStart::Pointer(f.offset),
        Err(_) => CodeStart::Offset(l.field("CodeBlob", &["_code_offset"])?),
    };
    let header = l.offset("HeapBlock", &["_header"])?;
    let block_field = |name| l.field("HeapBlock::Header", &[name]).map(|f| Field { offset: header + f.offset, ..f });
    Ok(CodeLayout {
        code_cache_heaps: l.static_address("CodeCache", "_heaps")?,
        code_cache_bounds: l
            .static_address("CodeCache", "_low_bound")
            .and_then(|lo| Ok((lo, l.static_address("CodeCache", "_high_bound")?)))
            .ok(),
        growable_array_len: l
            .field("GrowableArrayBase", &["_len"])
            .or_else(|_| l.field("GenericGrowableArray", &["_len"]))?,
        growable_array_data: l.offset("GrowableArray<int>", &["_data"])?,
        code_heap_memory: l.offset("CodeHeap", &["_memory"])?,
        code_heap_segmap: l.offset("CodeHeap", &["_segmap"])?,
        code_heap_log2_segment_size: l.field("CodeHeap", &["_log2_segment_size"])?,
        virtual_space_low: l.offset("VirtualSpace", &["_low"])?,
        virtual_space_high: l.offset("VirtualSpace", &["_high"])?,
        virtual_space_high_boundary: l.offset("VirtualSpace", &["_high_boundary"]).ok(),
        heap_block_size: l.size("HeapBlock")?,
        heap_block_length: block_field("_length")?,
        heap_block_used: block_field("_used")?,
        blob_name: l.offset("CodeBlob", &["_name"])?,
        blob_size: l.field("CodeBlob", &["_size"])?,
        blob_code_start,
        blob_frame_size: l.field("CodeBlob", &["_frame_size"])?,
        blob_frame_complete_offset: l.field("CodeBlob", &["_frame_complete_offset"])?,
        nmethod_method: l.offset("nmethod", &["_method"])?,
        nmethod_compile_id: l.field("nmethod", &["_compile_id"])?,
        interpreter_code: l.static_address("AbstractInterpreter", "_code")?,
        stub_queue_buffer: l.offset("StubQueue", &["_stub_buffer"])?,
        stub_queue_limit: l.field("StubQueue", &["_buffer_limit"])?,
        stub_queue_end: l.field("StubQueue", &["_queue_end"]).ok(),
    })
}

fn scopes_layout(l: &Lookup) -> Result<ScopesLayout, HotspotError> {
    let has = |type_name: &str, name: &str| l.0.field(type_name, name).is_some_and(|f| !f.is_static);
    let debug_info = if has("nmethod", "_immutable_data") {
        let metadata = if has("CodeBlob", "_mutable_data") {
            MetadataAt::Mutable {
                mutable_data: l.offset("CodeBlob", &["_mutable_data"])?,
                mutable_data_size: l.field("CodeBlob", &["_mutable_data_size"])?,
                relocation_size: l.field("CodeBlob", &["_relocation_size"])?,
            }
        } else {
            MetadataAt::DataSection {
                data_offset: l.field("CodeBlob", &["_data_offset"])?,
                metadata_offset: l.field("nmethod", &["_metadata_offset"])?,
                blob_size: l.field("CodeBlob", &["_size"])?,
            }
        };
        DebugInfoAt::Immutable {
            metadata,
            immutable_data: l.offset("nmethod", &["_immutable_data"])?,
            immutable_data_size: l.field("nmethod", &["_immutable_data_size"])?,
            scopes_pcs_offset: l.field("nmethod", &["_scopes_pcs_offset"])?,
            scopes_data_offset: l.field("nmethod", &["_scopes_data_offset"])?,
        }
    } else {
        DebugInfoAt::InBlob {
            metadata_offset: l.field("nmethod", &["_metadata_offset"])?,
            scopes_data_begin: l.offset("nmethod", &["_scopes_data_begin"])?,
            scopes_pcs_offset: l.field("nmethod", &["_scopes_pcs_offset"])?,
            dependencies_offset: l.field("nmethod", &["_dependencies_offset"])?,
        }
    };
    Ok(ScopesLayout {
        debug_info,
        pc_desc_size: l.size("PcDesc")?,
        pc_desc_pc_offset: l.field("PcDesc", &["_pc_offset"])?,
        pc_desc_scope_decode_offset: l.field("PcDesc", &["_scope_decode_offset"])?,
    })
}

fn flags_layout(l: &Lookup, type_name: &str) -> Result<FlagsLayout, HotspotError> {
    let entry_size = l.size(type_name)?;
    if entry_size < 16 {
        return Err(missing(format!("sizeof({type_name})")));
    }
    Ok(FlagsLayout {
        flags: l.static_address(type_name, "flags")?,
        num_flags: l.static_address(type_name, "numFlags")?,
        entry_size,
        name_offset: l.offset(type_name, &["_name"])?,
        addr_offset: l.offset(type_name, &["_addr"])?,
    })
}

/// The name `stub_entry_fields` gives `StubRoutines::_call_stub_return_address`.
pub const CALL_STUB_NAME: &str = "StubRoutines::call_stub";

fn stub_entry_fields(vm: &VmStructs) -> Vec<(String, u64)> {
    let mut fields: Vec<(String, u64)> = vm
        .fields
        .iter()
        .filter(|((ty, _), f)| ty == "StubRoutines" && f.is_static && f.type_string == "address" && f.address != 0)
        .map(|((_, name), f)| {
            // The call stub is known by its return address, the pc a sample sees.
            let name = name.trim_start_matches('_').trim_end_matches("_return_address");
            (format!("StubRoutines::{name}"), f.address)
        })
        .collect();
    fields.sort();
    fields
}

/// x86_64 `frame_x86.hpp`: `interpreter_frame_method_offset = last_sp_offset - 1`, then
/// mirror (JDK 9+), mdp, cache, locals, bcp. Only the first two are exported as constants
/// (JDK 17 and 21 export `frame::interpreter_frame_last_sp_offset = -2`), so the method
/// slot is derived from it and the bcp slot is five words further down.
fn interpreter_frame(vm: &VmStructs) -> InterpreterFrame {
    let last_sp = vm.int_constant("frame::interpreter_frame_last_sp_offset").unwrap_or(-2) as i64;
    let method_slot = vm.int_constant("frame::interpreter_frame_method_offset").map_or(last_sp - 1, i64::from);
    let bcp_slot = vm.int_constant("frame::interpreter_frame_bcp_offset").map_or(method_slot - 5, i64::from);
    let sender_sp_slot = vm.int_constant("frame::interpreter_frame_sender_sp_offset").unwrap_or(-1) as i64;
    InterpreterFrame { sender_sp_slot, method_slot, bcp_slot }
}
