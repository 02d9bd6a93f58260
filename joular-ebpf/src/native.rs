//! The native rows of a walked process (`joular_ebpf::unwind`): user space loads each
//! executable file's rows once into `UNWIND_ROWS` and every walked process's table of
//! executable mappings into `UNWIND_PROCS`; the walk finds a native pc's row with two bounded
//! binary searches (mapping, then row), remembered per CPU by pc (`ROW_CACHE`): a Java
//! thread's native frames are the same few libjvm and libc return addresses sample after sample.

use aya_ebpf::{
    bindings::BPF_F_MMAPABLE,
    macros::map,
    maps::{Array, HashMap, PerCpuArray},
};
use joular_ebpf::{
    unwind::{
        ProcUnwind, UnwindRow, MAX_UNWIND_MAPPINGS, MAX_UNWIND_ROWS, UNWIND_MAPPING_SEARCH_STEPS, UNWIND_NONE,
        UNWIND_ROW_SEARCH_STEPS,
    },
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
const ROW_CACHE_SLOTS: u32 = 256;

/// One remembered lookup: the row for `pc` of process `tgid`, found under `generation`.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct CachedRow {
    pc: u64,
    generation: u64,
    tgid: u32,
    row: UnwindRow,
}

#[map]
pub static ROW_CACHE: PerCpuArray<CachedRow> = PerCpuArray::with_max_entries(ROW_CACHE_SLOTS, 0);

/// What the table says of a pc.
pub enum Lookup {
    /// The row holding the pc (kind `UNWIND_NONE`: a gap or a rule not kept).
    Row(UnwindRow),
    /// The process has no table yet (its rows are being loaded).
    NoTable,
    /// The pc is in none of the process's executable file mappings that have rows (anonymous
    /// code, a file without call-frame information or over the limit, or garbage).
    Unmapped,
}

/// This CPU's cache slot for `pc` (direct-mapped: the top 8 bits of pc * 2^64/phi).
#[inline(always)]
fn cache_slot(pc: u64) -> Option<*mut CachedRow> {
    let slot = (pc.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u32 & (ROW_CACHE_SLOTS - 1);
    ROW_CACHE.get_ptr_mut(slot)
}

/// The generation `UNWIND_PROCS` is at.
#[inline(always)]
fn generation() -> u64 {
    UNWIND_GENERATION.get(0).copied().unwrap_or(0)
}

/// The row this CPU last found for `pc` of process `tgid`, when found under the current
/// generation.
#[inline(always)]
pub fn cached_row(tgid: u32, pc: u64) -> Option<UnwindRow> {
    let entry = cache_slot(pc)?;
    // SAFETY: this CPU's slot; programs on a CPU do not nest into the sampler.
    let entry = unsafe { &*entry };
    (entry.pc == pc && entry.tgid == tgid && entry.generation == generation()).then_some(entry.row)
}

/// The row for `pc` of process `tgid`, by binary search of its mappings then of its file's
/// rows; a row found is cached for `cached_row`.
#[inline(always)]
pub fn find_row(tgid: u32, pc: u64) -> Lookup {
    // Read before the table: a table replaced during the search voids what is cached here.
    let generation = generation();
    let Some(table) = UNWIND_PROCS.get_ptr(tgid) else {
        return Lookup::NoTable;
    };
    // SAFETY: a map value, written by user space only as a whole (an update replaces it).
    let table = unsafe { &*table };
    let count = (table.count as usize).min(MAX_UNWIND_MAPPINGS);
    // The last mapping starting at or below pc.
    let (mut lo, mut hi) = (0usize, count);
    for _ in 0..UNWIND_MAPPING_SEARCH_STEPS {
        if lo >= hi {
            break;
        }
        let mid = (lo + hi) / 2;
        if table.mappings[mid & (MAX_UNWIND_MAPPINGS - 1)].start <= pc {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if lo == 0 {
        return Lookup::Unmapped;
    }
    let m = &table.mappings[(lo - 1) & (MAX_UNWIND_MAPPINGS - 1)];
    if pc >= m.end {
        return Lookup::Unmapped;
    }
    let none = Lookup::Row(UnwindRow { kind: UNWIND_NONE, ..UnwindRow::default() });
    let Ok(rel) = u32::try_from(pc.wrapping_sub(m.bias)) else {
        return none;
    };
    let (first, rows) = (m.first_row, m.row_count);
    // The last row starting at or below rel.
    let (mut lo, mut hi) = (0u32, rows);
    for _ in 0..UNWIND_ROW_SEARCH_STEPS {
        if lo >= hi {
            break;
        }
        let mid = lo + (hi - lo) / 2;
        match UNWIND_ROWS.get(first.wrapping_add(mid)) {
            Some(r) if r.pc <= rel => lo = mid + 1,
            Some(_) => hi = mid,
            None => return none,
        }
    }
    if lo == 0 {
        return none;
    }
    match UNWIND_ROWS.get(first.wrapping_add(lo - 1)) {
        Some(r) => {
            if let Some(entry) = cache_slot(pc) {
                // SAFETY: as in `cached_row`.
                unsafe { *entry = CachedRow { pc, generation, tgid, row: *r } };
            }
            Lookup::Row(*r)
        }
        None => none,
    }
}
