//! A perf map as a sorted, non-overlapping index with binary-search lookup, read as a stream
//! and kept compact: 16 bytes per entry (start, size, name id) plus each distinct name once.
//! The file itself is never held whole, nor mapped (a target could truncate it under us).
//!
//! perf-map-agent appends to its file, and a JIT reuses freed code-cache space, so one
//! address can be covered by several entries: the newest (latest in the file) wins. Such a
//! map keeps its entries in file order and a second table of disjoint spans, each pointing
//! at the entry that owns it. HotSpot's own dumps are disjoint and need only the first.
//!
//! Every allocation is paid from a [`Reservation`] first. When it is refused, the index
//! stops growing: it is partial (the first lines of the file that fit), and the lines left
//! out are counted ([`PerfMapIndex::not_indexed`]). A partial snapshot (HotSpot's dumps) still
//! never names an address wrongly; in a partial appended map, a newer entry left out can
//! leave visible the older entry it replaced.

use std::collections::BinaryHeap;
use std::io::{self, Read};
use std::time::Instant;

use crate::name_table::NameTable;
use crate::parser::parse_line;
use crate::pool::{reserve_within, Reservation};

/// Caps what one file may cost; a line over `max_line_bytes` is skipped and counted bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_file_bytes: u64,
    pub max_line_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // A large Spring service dumps ~100k entries (~15 MB); names are rarely over 1 KiB.
        Limits { max_file_bytes: 256 << 20, max_line_bytes: 64 << 10 }
    }
}

/// A symbol found by [`PerfMapIndex::lookup`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbol<'a> {
    pub name: &'a str,
    /// The whole entry's range, as written in the map (not the visible segment).
    pub start: u64,
    pub size: u64,
}

/// An address range and what it resolves to: a name id, or (in `spans` of an overlapping
/// map) the index of the entry that owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u64,
    len: u32,
    target: u32,
}

impl Span {
    fn end(&self) -> u64 {
        self.start + u64::from(self.len)
    }
}

/// Why [`PerfMapIndex::read`] gave up.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("reading took past its deadline")]
    TimedOut,
}

/// Bytes read at a time: the only buffer that does not grow with the file.
const CHUNK_BYTES: usize = 256 << 10;
/// Marks a visited slot while a permutation is applied in place.
const VISITED: u32 = u32::MAX;

#[derive(Debug, Default)]
pub struct PerfMapIndex {
    /// Sorted, disjoint. `target`: a name id, or an index into `owners` when that is not empty.
    spans: Vec<Span>,
    /// Only for maps whose entries overlap: every entry in file order (`target`: name id).
    owners: Vec<Span>,
    /// Radix buckets over the span starts so a lookup binary-searches only a few spans:
    /// `bucket_first[b]` = number of spans starting before `base + (b << bucket_shift)`.
    base: u64,
    bucket_shift: u32,
    bucket_first: Vec<u32>,
    names: NameTable,
    entries: usize,
    bad_lines: u64,
    not_indexed: u64,
    reservation: Reservation,
}

impl PerfMapIndex {
    /// Parses a whole perf map held in memory, without a memory bound. Never fails: bad
    /// lines are counted in [`Self::bad_lines`].
    pub fn parse(data: &[u8], limits: &Limits) -> Self {
        Self::read(&mut &data[..], limits, Reservation::unlimited(), None).expect("reading a slice cannot fail")
    }

    /// Reads a perf map from `reader`, paying every allocation from `reservation`. Bad lines
    /// are counted, lines past what the reservation allows are counted as not indexed.
    pub fn read(
        reader: &mut impl Read,
        limits: &Limits,
        reservation: Reservation,
        deadline: Option<Instant>,
    ) -> Result<Self, ReadError> {
        let mut builder = Builder::new(limits, reservation);
        let mut chunk = vec![0u8; CHUNK_BYTES];
        let mut carry: Vec<u8> = Vec::new();
        // A line longer than the limit is dropped while it streams past, then counted once.
        let mut overlong = false;
        loop {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(ReadError::TimedOut);
            }
            let n = match reader.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            let mut rest = &chunk[..n];
            while let Some(at) = memchr::memchr(b'\n', rest) {
                let piece = &rest[..at];
                rest = &rest[at + 1..];
                if overlong {
                    builder.bad_lines += 1;
                    overlong = false;
                } else if carry.is_empty() {
                    builder.line(piece);
                } else if carry.len() + piece.len() > limits.max_line_bytes {
                    builder.bad_lines += 1;
                    carry.clear();
                } else {
                    carry.extend_from_slice(piece);
                    builder.line(&carry);
                    carry.clear();
                }
            }
            if !overlong {
                if carry.len() + rest.len() > limits.max_line_bytes {
                    overlong = true;
                    carry = Vec::new();
                } else {
                    carry.extend_from_slice(rest);
                }
            }
        }
        if overlong {
            builder.bad_lines += 1;
        } else if !carry.is_empty() {
            builder.line(&carry);
        }
        Ok(builder.build())
    }

    pub fn lookup(&self, addr: u64) -> Option<Symbol<'_>> {
        let after = if self.bucket_first.is_empty() {
            self.spans.partition_point(|s| s.start <= addr)
        } else {
            let bucket = (addr.checked_sub(self.base)? >> self.bucket_shift) as usize;
            // Spans starting at or before `addr` number between the bucket's two bounds.
            // `bucket + 1` overflows only past every bucket (an entry at 0, `addr` = u64::MAX).
            match bucket.checked_add(1).and_then(|next| self.bucket_first.get(next)) {
                Some(&hi) => {
                    let lo = self.bucket_first[bucket] as usize;
                    lo + self.spans[lo..hi as usize].partition_point(|s| s.start <= addr)
                }
                None => self.spans.len(),
            }
        };
        let span = self.spans[after.checked_sub(1)?];
        if addr >= span.end() {
            return None;
        }
        let entry = if self.owners.is_empty() { span } else { self.owners[span.target as usize] };
        Some(Symbol { name: self.names.get(entry.target), start: entry.start, size: u64::from(entry.len) })
    }

    /// Entries indexed (including those fully hidden by newer ones).
    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    pub fn bad_lines(&self) -> u64 {
        self.bad_lines
    }

    /// Well-formed lines left out because the memory allowed was spent.
    pub fn not_indexed(&self) -> u64 {
        self.not_indexed
    }

    pub fn distinct_names(&self) -> usize {
        self.names.len()
    }

    /// Heap bytes this index holds (what its reservation pays for).
    pub fn bytes(&self) -> u64 {
        span_bytes(self.spans.capacity() + self.owners.capacity())
            + (self.bucket_first.capacity() * 4) as u64
            + self.names.bytes()
    }

    /// The cap the index was read under: a partial index may be worth reading again when
    /// more memory is allowed.
    pub fn cap_bytes(&self) -> u64 {
        self.reservation.cap_bytes()
    }

    /// The most memory the index held while it was read (sort and hash tables included):
    /// for a partial index, what it was allowed.
    pub fn peak_bytes(&self) -> u64 {
        self.reservation.peak_bytes()
    }
}

fn span_bytes(spans: usize) -> u64 {
    (spans * std::mem::size_of::<Span>()) as u64
}

/// The index while its file is read: entries in file order.
struct Builder {
    entries: Vec<Span>,
    names: NameTable,
    res: Reservation,
    max_line_bytes: usize,
    bad_lines: u64,
    not_indexed: u64,
    /// The reservation refused: later lines are only counted.
    full: bool,
    /// Entries so far are in address order and disjoint (HotSpot's dumps nearly always are).
    in_order: bool,
    last_end: u64,
}

impl Builder {
    fn new(limits: &Limits, res: Reservation) -> Self {
        Builder {
            entries: Vec::new(),
            names: NameTable::default(),
            res,
            max_line_bytes: limits.max_line_bytes,
            bad_lines: 0,
            not_indexed: 0,
            full: false,
            in_order: true,
            last_end: 0,
        }
    }

    fn line(&mut self, line: &[u8]) {
        if line.is_empty() {
            return;
        }
        // A blob of 4 GiB or more is no JIT code: such a line is bad.
        let parsed = (line.len() <= self.max_line_bytes)
            .then(|| parse_line(line))
            .flatten()
            .and_then(|p| Some((p.start, u32::try_from(p.size).ok()?, p.name)));
        let Some((start, len, name)) = parsed else {
            self.bad_lines += 1;
            return;
        };
        if self.full {
            self.not_indexed += 1;
            return;
        }
        let Some(target) =
            self.names.intern(name, &mut self.res).filter(|_| reserve_within(&mut self.entries, 1, &mut self.res))
        else {
            self.full = true;
            self.not_indexed += 1;
            return;
        };
        let span = Span { start, len, target };
        self.in_order &= self.entries.is_empty() || start >= self.last_end;
        self.last_end = span.end();
        self.entries.push(span);
    }

    fn build(mut self) -> PerfMapIndex {
        self.names.finish();
        let (spans, owners, unreached) =
            if self.in_order { (std::mem::take(&mut self.entries), Vec::new(), 0) } else { self.sort_or_paint() };
        let mut index = PerfMapIndex {
            entries: if owners.is_empty() { spans.len() } else { owners.len() - unreached },
            spans,
            owners,
            names: std::mem::take(&mut self.names),
            bad_lines: self.bad_lines,
            not_indexed: self.not_indexed + unreached as u64,
            ..Default::default()
        };
        index.spans.shrink_to_fit();
        index.owners.shrink_to_fit();
        build_buckets(&mut index, &mut self.res);
        self.res.shrink_to(index.bytes());
        index.reservation = std::mem::take(&mut self.res);
        index
    }

    /// Entries out of file order: sort them by address (a permutation, 4 bytes an entry
    /// while it lives). If they also overlap, paint the newest over the older ones. Returns
    /// the spans, the entries they point into (only when painted), and how many entries
    /// painting did not reach.
    fn sort_or_paint(&mut self) -> (Vec<Span>, Vec<Span>, usize) {
        self.entries.shrink_to_fit();
        self.pay_or_trim(4);
        let entries = &self.entries;
        let mut order: Vec<u32> = (0..entries.len() as u32).collect();
        // The index in the key keeps file order among equal starts without a stable sort's buffer.
        order.sort_unstable_by_key(|&i| (entries[i as usize].start, i));
        let disjoint = order.windows(2).all(|w| entries[w[0] as usize].end() <= entries[w[1] as usize].start);
        if disjoint {
            let mut sorted = std::mem::take(&mut self.entries);
            permute_in_place(&mut sorted, &mut order);
            drop(order);
            self.res.shrink_to(span_bytes(sorted.capacity()) + self.names.bytes());
            return (sorted, Vec::new(), 0);
        }
        drop(order);
        self.res.shrink_to(self.held_now());
        // Painting: two permutations and a flag per entry.
        self.pay_or_trim(9);
        let owners = std::mem::take(&mut self.entries);
        let (spans, unreached) = paint_newest_wins(&owners, &mut self.res);
        (spans, owners, unreached)
    }

    fn held_now(&self) -> u64 {
        span_bytes(self.entries.capacity()) + self.names.bytes()
    }

    /// Pays `per_entry` bytes for every entry, dropping the newest entries until it can.
    fn pay_or_trim(&mut self, per_entry: u64) {
        while !self.entries.is_empty() && !self.res.grow(per_entry * self.entries.len() as u64) {
            let keep = self.entries.len() * 7 / 8;
            self.not_indexed += (self.entries.len() - keep) as u64;
            self.entries.truncate(keep);
            self.entries.shrink_to_fit();
            self.res.shrink_to(self.held_now());
        }
    }
}

/// `v[i] = old v[order[i]]`, following the permutation's cycles; `order` is used up.
fn permute_in_place(v: &mut [Span], order: &mut [u32]) {
    for i in 0..v.len() {
        if order[i] == VISITED {
            continue;
        }
        let first = v[i];
        let mut at = i;
        loop {
            let from = order[at] as usize;
            order[at] = VISITED;
            if from == i {
                v[at] = first;
                break;
            }
            v[at] = v[from];
            at = from;
        }
    }
}

/// Sweeps the boundaries left to right, keeping the live entries in a max-heap on their file
/// position: the top is the newest entry covering the current point. Each visible stretch
/// becomes a span pointing at its owner. Stops early if the reservation refuses room for more
/// spans, and says how many entries it did not reach.
fn paint_newest_wins(entries: &[Span], res: &mut Reservation) -> (Vec<Span>, usize) {
    let mut by_start: Vec<u32> = (0..entries.len() as u32).collect();
    by_start.sort_unstable_by_key(|&i| (entries[i as usize].start, i));
    let mut by_end = by_start.clone();
    by_end.sort_unstable_by_key(|&i| entries[i as usize].end());
    let mut ended = vec![false; entries.len()];
    let mut live: BinaryHeap<u32> = BinaryHeap::new();
    let mut spans: Vec<Span> = Vec::new();
    let (mut s, mut e) = (0, 0);
    while e < by_end.len() {
        let point = match by_start.get(s) {
            Some(&i) => entries[i as usize].start.min(entries[by_end[e] as usize].end()),
            None => entries[by_end[e] as usize].end(),
        };
        while e < by_end.len() && entries[by_end[e] as usize].end() == point {
            ended[by_end[e] as usize] = true;
            e += 1;
        }
        while s < by_start.len() && entries[by_start[s] as usize].start == point {
            live.push(by_start[s]);
            s += 1;
        }
        while live.peek().is_some_and(|&top| ended[top as usize]) {
            live.pop();
        }
        let next = match (by_start.get(s), by_end.get(e)) {
            (Some(&a), Some(&b)) => entries[a as usize].start.min(entries[b as usize].end()),
            (None, Some(&b)) => entries[b as usize].end(),
            _ => break,
        };
        if let Some(&owner) = live.peek() {
            // A visible stretch lies inside its owner, so its length fits the owner's u32.
            let len = (next - point) as u32;
            match spans.last_mut() {
                Some(last) if last.target == owner && last.end() == point => last.len += len,
                _ => {
                    if !reserve_within(&mut spans, 1, res) {
                        return (spans, by_start.len() - s);
                    }
                    spans.push(Span { start: point, len, target: owner });
                }
            }
        }
    }
    (spans, 0)
}

/// About one bucket per two spans: each lookup then binary-searches a handful of starts.
/// Without room for the buckets, lookups search all spans.
fn build_buckets(index: &mut PerfMapIndex, res: &mut Reservation) {
    let (Some(first), Some(last)) = (index.spans.first(), index.spans.last()) else {
        return;
    };
    let (first, span) = (first.start, last.start - first.start);
    let target = (index.spans.len() as u64 / 2).max(1).next_power_of_two();
    let shift = (64 - (span / target).leading_zeros()).min(63);
    // Bounds for every bucket a span starts in, and the one after the last.
    let bounds = (span >> shift) + 2;
    if !reserve_within(&mut index.bucket_first, bounds as usize, res) {
        return;
    }
    index.base = first;
    index.bucket_shift = shift;
    let mut at = 0usize;
    for b in 0..bounds {
        // u128: the last boundary may lie past the end of the address space.
        let boundary = u128::from(first) + (u128::from(b) << shift);
        while at < index.spans.len() && u128::from(index.spans[at].start) < boundary {
            at += 1;
        }
        index.bucket_first.push(at as u32);
    }
}

#[cfg(test)]
mod tests;
