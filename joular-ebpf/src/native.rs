//! The native rows of a walked process (`joular_ebpf::unwind`): user space loads each
//! executable file's rows once into `UNWIND_ROWS` and every walked process's table of
//! executable mappings into `UNWIND_PROCS`; the walk finds a native pc's row with the shared
//! lookup (`joular_ebpf::unwind::find_row`: two bounded binary searches, mapping then row),
//! remembered per CPU by pc (`ROW_CACHE`): a Java thread's native frames are the same few
//! libjvm and libc return addresses sample after sample.

use aya_ebpf::{
    bindings::BPF_F_MMAPABLE,
    macros::map,
    maps::{Array, HashMap, PerCpuArray},
};
use joular_ebpf::{
    unwind::{find_row, Lookup, ProcUnwind, RowArray, UnwindRow, MAX_UNWIND_ROWS},
    MAX_JVMS,
};

/// Every loaded file's rows, each file's contiguous and sorted by pc. Memory-mapped by user
/// space, which writes a file's rows with one copy (`rows_mmap`).
#[map]
pub static UNWIND_ROWS: Array<UnwindRow> = Array::with_max_entries(MAX_UNWIND_ROWS, BPF_F_MMAPABLE);

/// Per walked process (tgid): its executable mappings and where their files' rows are.
#[map]
pub static UNWIND_PROCS: HashMap<u32, ProcUnwind> = HashMap::with_max_entries(MAX_JVMS, 0);

/// Bumped by user space after each write of `UNWIND_PROCS` (one entry): a cached row found
/// under an older generation may come from a table since replaced.
#[map]
pub static UNWIND_GENERATION: Array<u64> = Array::with_max_entries(1, 0);

/// Slots of the per-CPU row cache (direct-mapped by hashed pc).
const ROW_CACHE_SLOTS: usize = 256;

/// One remembered lookup: the row for `pc` of process `tgid`, found under `generation`.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct CachedRow {
    pc: u64,
    generation: u64,
    tgid: u32,
    row: UnwindRow,
}

/// A CPU's remembered lookups, all in one map value: a lookup then touches that value's one
/// line, where a slot per array index also read the index's pointer in the map's table of
/// per-CPU values (two cold lines a lookup, eight lookups a sample).
#[repr(C)]
pub struct RowCache {
    slots: [CachedRow; ROW_CACHE_SLOTS],
}

#[map]
pub static ROW_CACHE: PerCpuArray<RowCache> = PerCpuArray::with_max_entries(1, 0);

/// This CPU's cache slot for `pc` (direct-mapped: the top 8 bits of pc * 2^64/phi).
#[inline(always)]
fn cache_slot(pc: u64) -> Option<*mut CachedRow> {
    let slot = (pc.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize & (ROW_CACHE_SLOTS - 1);
    let cache = ROW_CACHE.get_ptr_mut(0)?;
    // SAFETY: this CPU's value; the index is masked to the array.
    Some(unsafe { &raw mut (*cache).slots[slot] })
}

/// The generation `UNWIND_PROCS` is at.
#[inline(always)]
fn generation() -> u64 {
    UNWIND_GENERATION.get(0).copied().unwrap_or(0)
}

/// Reads rows from `UNWIND_ROWS` for the shared lookup.
struct MapRows;

impl RowArray for MapRows {
    #[inline(always)]
    fn row(&self, index: u32) -> Option<UnwindRow> {
        UNWIND_ROWS.get(index).copied()
    }
}

/// The row for `pc` of process `tgid`: the one this CPU last found for it, when found under
/// the current generation, else by the shared binary searches (mapping, then row), cached.
#[inline(always)]
pub fn row_for(tgid: u32, pc: u64) -> Lookup {
    // Read before the table: a table replaced during the search voids what is cached here.
    let generation = generation();
    // Never missing (the slot index is masked to the array). Searching uncached without one
    // would make the compiler emit the whole search twice, which doubled what the verifier
    // walks (417,513 instructions against 230,364).
    let Some(entry) = cache_slot(pc) else {
        return Lookup::NoTable;
    };
    // SAFETY: this CPU's slot; programs on a CPU do not nest into the sampler.
    let entry = unsafe { &mut *entry };
    if entry.pc == pc && entry.tgid == tgid && entry.generation == generation {
        return Lookup::Row(entry.row);
    }
    let Some(table) = UNWIND_PROCS.get_ptr(tgid) else {
        return Lookup::NoTable;
    };
    // SAFETY: a map value, written by user space only as a whole (an update replaces it).
    let found = find_row(unsafe { &*table }, &MapRows, pc);
    if let Lookup::Row(row) = found {
        *entry = CachedRow { pc, generation, tgid, row };
    }
    found
}
