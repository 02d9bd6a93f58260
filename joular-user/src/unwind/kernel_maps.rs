//! The unwind rows in the kernel: each file's rows once in `UNWIND_ROWS` (placed first-fit in
//! the array, written through its memory mapping (`rows_mmap`), freed when no walked process
//! maps the file any more) and each walked process's
//! mapping table in `UNWIND_PROCS`. A file that does not fit is left out of the tables: its
//! pcs are stepped by frame pointers, as before (counted by the kernel as `native_no_table`).
//! Every table write bumps `UNWIND_GENERATION`, which voids the rows the sampler cached.

use std::collections::{HashMap, HashSet};

use aya::maps::{Array, HashMap as BpfHashMap, MapData, MapError};
use joular_ebpf::unwind::{ProcUnwind, UnwindMapping, MAX_UNWIND_MAPPINGS};

use super::rows_mmap::RowsMmap;
use super::tables::MappedRows;

/// The kernel's table of one process (its `UNWIND_PROCS` value): each mapping whose file's rows
/// `place` put in the row array (first row, rows; `None`: left out), at most
/// `MAX_UNWIND_MAPPINGS`, sorted by start; and the ids of the files it uses.
pub fn process_entry<E>(
    table: &[MappedRows],
    mut place: impl FnMut(&MappedRows) -> Result<Option<(u32, u32)>, E>,
) -> Result<(ProcUnwind, HashSet<u64>), E> {
    let mut value = ProcUnwind::default();
    let mut used = HashSet::new();
    for m in table {
        let Some((first_row, row_count)) = place(m)? else { continue };
        if (value.count as usize) >= MAX_UNWIND_MAPPINGS {
            break;
        }
        value.mappings[value.count as usize] =
            UnwindMapping { start: m.start, end: m.end, bias: m.bias, first_row, row_count };
        value.count += 1;
        used.insert(m.rows.id);
    }
    value.mappings[..value.count as usize].sort_by_key(|m| m.start);
    Ok((value, used))
}

pub struct UnwindMaps {
    rows: RowsMmap,
    procs: BpfHashMap<MapData, u32, ProcUnwind>,
    generation_map: Array<MapData, u64>,
    generation: u64,
    /// File id -> (first row, rows).
    placed: HashMap<u64, (u32, u32)>,
    /// The file ids each process's table uses.
    users: HashMap<u32, HashSet<u64>>,
    /// Free ranges of `rows`, (first, len), sorted and merged.
    free: Vec<(u32, u32)>,
    /// Files that did not fit.
    pub files_left_out: u64,
}

impl UnwindMaps {
    pub fn new(
        rows: RowsMmap,
        procs: BpfHashMap<MapData, u32, ProcUnwind>,
        generation_map: Array<MapData, u64>,
    ) -> Self {
        let capacity = rows.capacity();
        UnwindMaps {
            rows,
            procs,
            generation_map,
            generation: 0,
            placed: HashMap::new(),
            users: HashMap::new(),
            free: vec![(0, capacity)],
            files_left_out: 0,
        }
    }

    /// `pid`'s table from now on (its files' rows written first, so the kernel never sees a
    /// table naming rows not yet there).
    pub fn set_process(&mut self, pid: u32, table: &[MappedRows]) -> Result<(), MapError> {
        let (value, used) = process_entry(table, |m| self.place(m))?;
        self.procs.insert(pid, value, 0)?;
        self.bump_generation()?;
        self.users.insert(pid, used);
        self.release_unused();
        Ok(())
    }

    pub fn forget_process(&mut self, pid: u32) {
        let _ = self.procs.remove(&pid);
        // A reused pid must not find the rows cached for the process it had.
        let _ = self.bump_generation();
        if self.users.remove(&pid).is_some() {
            self.release_unused();
        }
    }

    /// Written after the table it voids the cache for: a row the sampler caches under the
    /// old generation while the table changes is never found again.
    fn bump_generation(&mut self) -> Result<(), MapError> {
        self.generation += 1;
        self.generation_map.set(0, self.generation, 0)
    }

    /// Where the mapping's file's rows are, written now if they were not yet; `None` when
    /// they do not fit.
    fn place(&mut self, m: &MappedRows) -> Result<Option<(u32, u32)>, MapError> {
        if let Some(&at) = self.placed.get(&m.rows.id) {
            return Ok(Some(at));
        }
        let Ok(len) = u32::try_from(m.rows.rows.len()) else { return Ok(None) };
        let Some(slot) = self.free.iter().position(|&(_, free)| free >= len) else {
            self.files_left_out += 1;
            return Ok(None);
        };
        let (first, free) = self.free[slot];
        if free == len {
            self.free.remove(slot);
        } else {
            self.free[slot] = (first + len, free - len);
        }
        let started = std::time::Instant::now();
        if !self.rows.write(first, &m.rows.rows) {
            // Never: the free ranges are within the array (`write` checks all the same).
            self.files_left_out += 1;
            return Ok(None);
        }
        log::debug!("unwind rows: {len} rows of a file written in {} us", started.elapsed().as_micros());
        self.placed.insert(m.rows.id, (first, len));
        Ok(Some((first, len)))
    }

    fn release_unused(&mut self) {
        let used: HashSet<u64> = self.users.values().flatten().copied().collect();
        let gone: Vec<u64> = self.placed.keys().filter(|id| !used.contains(id)).copied().collect();
        for id in gone {
            if let Some(range) = self.placed.remove(&id) {
                self.free.push(range);
            }
        }
        self.free.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(self.free.len());
        for (first, len) in self.free.drain(..) {
            match merged.last_mut() {
                Some(last) if last.0 + last.1 == first => last.1 += len,
                _ => merged.push((first, len)),
            }
        }
        self.free = merged;
    }
}
