//! The native rows of a walked process (`joular_ebpf::unwind`): user space loads each
//! executable file's rows once into `UNWIND_ROWS` and every walked process's table of
//! executable mappings into `UNWIND_PROCS`; the walk finds a native pc's row with the shared
//! lookup (`joular_ebpf::unwind::find_row`: two bounded binary searches, mapping then row),
//! remembered per CPU (`ROW_CACHE`: by frame order in the walk, then by pc): a Java thread's
//! native frames are the same few libjvm and libc return addresses sample after sample.

use aya_ebpf::{
    bindings::BPF_F_MMAPABLE,
    macros::map,
    maps::{Array, HashMap, PerCpuArray},
};
use joular_ebpf::{
    unwind::{find_row, Lookup, ProcUnwind, RowArray, UnwindRow, MAX_UNWIND_ROWS},
    MAX_JVMS,
};

use crate::maps::WALKERS;

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
/// Native frames of a walk the memo holds (a Java thread has some ten below its Java frames).
const MEMO_FRAMES: usize = 16;

/// One remembered lookup: the row for `pc` of process `tgid`, found under `generation`.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct CachedRow {
    pc: u64,
    generation: u64,
    tgid: u32,
    row: UnwindRow,
}

/// The row of one native frame of a walk.
#[repr(C)]
#[derive(Copy, Clone, Default)]
pub struct MemoRow {
    pc: u64,
    row: UnwindRow,
}

/// A CPU's remembered lookups, all in one map value (a slot per array index also read the
/// index's pointer in the map's table of per-CPU values: two cold lines a lookup).
///
/// The memo holds the rows of the last walks' native frames by their order in the walk: a
/// thread sampled again meets the same return addresses in the same order (libjvm's and libc's
/// below its Java frames), and eight of them sit on three cache lines, where the hashed slots
/// are eight lines. Frame `i`'s entry is valid when bit `i` of `memo_valid` is set, for the
/// process and generation of the memo, which a walk of another process or under a newer
/// generation replaces.
#[repr(C)]
pub struct RowCache {
    /// The walk in progress: its process, the generation read at its start, and how many
    /// native frames it has looked up.
    walk_tgid: u32,
    walk_frames: u32,
    walk_generation: u64,
    memo_tgid: u32,
    memo_valid: u32,
    memo_generation: u64,
    memo: [MemoRow; MEMO_FRAMES],
    slots: [CachedRow; ROW_CACHE_SLOTS],
    /// A number written and read back by `MapRows::opaque`: the verifier does not track what
    /// a map value holds.
    opaque: u64,
}

#[map]
pub static ROW_CACHE: PerCpuArray<RowCache> = PerCpuArray::with_max_entries(WALKERS, 0);

/// The generation `UNWIND_PROCS` is at.
#[inline(always)]
fn generation() -> u64 {
    UNWIND_GENERATION.get(0).copied().unwrap_or(0)
}

/// Reads rows from `UNWIND_ROWS` for the shared lookup; hides its indices from the verifier
/// through this CPU's `RowCache::opaque`.
struct MapRows(*mut u64);

impl RowArray for MapRows {
    #[inline(always)]
    fn row(&self, index: u32) -> Option<UnwindRow> {
        UNWIND_ROWS.get(index).copied()
    }

    #[inline(always)]
    fn opaque(&self, index: u64) -> u64 {
        // SAFETY: a field of this CPU's row cache, which only this CPU's walker uses.
        unsafe {
            core::ptr::write_volatile(self.0, index);
            core::ptr::read_volatile(self.0)
        }
    }
}

/// Called at the start of each walk of process `tgid`, before its first `row_for`.
#[inline(always)]
pub fn start_walk(walker: u32, tgid: u32) {
    let Some(cache) = ROW_CACHE.get_ptr_mut(walker) else {
        return;
    };
    // SAFETY: this CPU's value; each walker has its own (see `WALKER_SAMPLER`).
    let cache = unsafe { &mut *cache };
    // Read before any table: a table replaced during the walk voids what it caches.
    let generation = generation();
    cache.walk_tgid = tgid;
    cache.walk_frames = 0;
    cache.walk_generation = generation;
    if cache.memo_tgid != tgid || cache.memo_generation != generation {
        cache.memo_tgid = tgid;
        cache.memo_generation = generation;
        cache.memo_valid = 0;
    }
}

/// The row for `pc`, the next native frame of the walk `start_walk` began: the memo's for
/// this frame when it is the same pc, else the hashed slot's when it holds the pc for this
/// process and generation, else found by the shared binary searches (mapping, then row) and
/// remembered in both.
#[inline(always)]
pub fn row_for(walker: u32, pc: u64) -> Lookup {
    // Never missing (a per-CPU array entry per walker). Searching uncached without it would make
    // the compiler emit the whole search twice, which doubled what the verifier walks.
    let Some(cache) = ROW_CACHE.get_ptr_mut(walker) else {
        return Lookup::NoTable;
    };
    // SAFETY: this CPU's value; each walker has its own (see `WALKER_SAMPLER`).
    let cache = unsafe { &mut *cache };
    let (tgid, generation) = (cache.walk_tgid, cache.walk_generation);
    let frame = cache.walk_frames as usize;
    cache.walk_frames += 1;
    // Past `MEMO_FRAMES`, frames share entries (each holds one pc's row, whichever frame).
    let memo = frame & (MEMO_FRAMES - 1);
    if cache.memo_valid & (1 << memo) != 0 && cache.memo[memo].pc == pc {
        return Lookup::Row(cache.memo[memo].row);
    }
    // The top 8 bits of pc * 2^64/phi.
    let slot = (pc.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize & (ROW_CACHE_SLOTS - 1);
    let entry = &cache.slots[slot];
    let found = if entry.pc == pc && entry.tgid == tgid && entry.generation == generation {
        Lookup::Row(entry.row)
    } else {
        let Some(table) = UNWIND_PROCS.get_ptr(tgid) else {
            return Lookup::NoTable;
        };
        // SAFETY: a map value, written by user space only as a whole (an update replaces it).
        let found = find_row(unsafe { &*table }, &MapRows(&raw mut cache.opaque), pc);
        if let Lookup::Row(row) = found {
            cache.slots[slot] = CachedRow { pc, generation, tgid, row };
        }
        found
    };
    if let Lookup::Row(row) = found {
        cache.memo[memo] = MemoRow { pc, row };
        cache.memo_valid |= 1 << memo;
    }
    found
}
