//! A pc's row: the process's mapping holding the pc, then the last of its file's rows at or
//! below the pc's file-relative address, each by a binary search with a fixed bound on its
//! steps (the verifier needs one; the bounds cover every table the loader writes).

use super::{
    ProcUnwind, UnwindRow, MAX_UNWIND_MAPPINGS, UNWIND_MAPPING_SEARCH_STEPS, UNWIND_NONE, UNWIND_ROW_SEARCH_STEPS,
};

/// Where the rows a table points into are read from: `UNWIND_ROWS` in the sampler, a slice in
/// user space.
pub trait RowArray {
    /// The row at `index`; `None` past the end.
    fn row(&self, index: u32) -> Option<UnwindRow>;

    /// `index` as it is, but unknown to the sampler's verifier (user space: `index` itself).
    /// Left known, a search's indices are exact constants to the verifier, which then checks
    /// the rest of the step once per mapping the search could end at: most of the sampler's
    /// verification time, paid inside the profiled program's first second.
    #[inline(always)]
    fn opaque(&self, index: u64) -> u64 {
        index
    }
}

impl RowArray for [UnwindRow] {
    #[inline(always)]
    fn row(&self, index: u32) -> Option<UnwindRow> {
        self.get(index as usize).copied()
    }
}

/// What a process's table says of a pc.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The row holding the pc (kind `UNWIND_NONE`: a gap, a rule not kept, or a mapping whose
    /// rows do not reach the pc).
    Row(UnwindRow),
    /// The process has no table yet (its rows are being loaded).
    NoTable,
    /// The pc is in none of the process's executable file mappings that have rows (anonymous
    /// code, a file without call-frame information or over the limit, or garbage).
    Unmapped,
}

/// The row for `pc` in `table`, whose mappings' rows are in `rows`.
#[inline(always)]
pub fn find_row<R: RowArray + ?Sized>(table: &ProcUnwind, rows: &R, pc: u64) -> Lookup {
    let count = (table.count as usize).min(MAX_UNWIND_MAPPINGS);
    // The last mapping starting at or below pc.
    let (mut lo, mut hi) = (0usize, count);
    for _ in 0..UNWIND_MAPPING_SEARCH_STEPS {
        if lo >= hi {
            break;
        }
        let mid = rows.opaque(((lo + hi) / 2) as u64) as usize;
        if table.mappings[mid & (MAX_UNWIND_MAPPINGS - 1)].start <= pc {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let lo = rows.opaque(lo as u64) as usize;
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
    let (first, count) = (m.first_row, m.row_count);
    // The last row starting at or below rel.
    let (mut lo, mut hi) = (0u32, count);
    for _ in 0..UNWIND_ROW_SEARCH_STEPS {
        if lo >= hi {
            break;
        }
        let mid = rows.opaque(u64::from(lo + (hi - lo) / 2)) as u32;
        match rows.row(first.wrapping_add(mid)) {
            Some(r) if r.pc <= rel => lo = mid + 1,
            Some(_) => hi = mid,
            None => return none,
        }
    }
    if lo == 0 {
        return none;
    }
    match rows.row(first.wrapping_add(lo - 1)) {
        Some(r) => Lookup::Row(r),
        None => none,
    }
}
