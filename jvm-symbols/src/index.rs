//! A perf map as a sorted, non-overlapping index with binary-search lookup.
//!
//! perf-map-agent appends to its file, and a JIT reuses freed code-cache space, so one
//! address can be covered by several entries: the newest (latest in the file) wins. The
//! index stores disjoint segments, each pointing at the entry that owns it.

use std::collections::BinaryHeap;
use std::ops::Range;

use crate::parser::parse_line;

/// Caps what one file may cost; a line over `max_line_bytes` is skipped and counted bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_file_bytes: u64,
    pub max_line_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // A large Spring service dumps ~100k entries (~15 MB); names are rarely over 1 KiB.
        Limits {
            max_file_bytes: 256 << 20,
            max_line_bytes: 64 << 10,
        }
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

#[derive(Debug, Clone)]
struct Entry {
    start: u64,
    end: u64,
    name: Range<u32>,
}

#[derive(Debug, Default)]
pub struct PerfMapIndex {
    /// Segment starts, sorted; kept apart from `seg_ends`/`seg_entries` so the binary
    /// search touches one dense array.
    seg_starts: Vec<u64>,
    seg_ends: Vec<u64>,
    seg_entries: Vec<u32>,
    /// Radix buckets over the segment starts so a lookup binary-searches only a few
    /// segments: `bucket_first[b]` = number of segments starting before
    /// `base + (b << bucket_shift)`.
    base: u64,
    bucket_shift: u32,
    bucket_first: Vec<u32>,
    entries: Vec<Entry>,
    /// All names back to back; entries hold byte ranges into it.
    names: String,
    bad_lines: u64,
}

impl PerfMapIndex {
    /// Parses a whole perf map. Never fails: bad lines are counted in [`Self::bad_lines`].
    pub fn parse(data: &[u8], limits: &Limits) -> Self {
        let mut index = PerfMapIndex {
            // ~60 bytes a HotSpot line: a cheap guess that avoids regrowing.
            entries: Vec::with_capacity(data.len() / 60),
            names: String::with_capacity(data.len() / 2),
            ..Default::default()
        };
        for line in memchr::memchr_iter(b'\n', data)
            .chain(std::iter::once(data.len()))
            .scan(0, |from, to| {
                let line = &data[(*from).min(to)..to];
                *from = to + 1;
                Some(line)
            })
        {
            if line.is_empty() {
                continue;
            }
            if line.len() > limits.max_line_bytes {
                index.bad_lines += 1;
                continue;
            }
            match parse_line(line) {
                Some(parsed) => index.push(parsed.start, parsed.size, parsed.name),
                None => index.bad_lines += 1,
            }
        }
        index.build_segments();
        index.build_buckets();
        index
    }

    fn push(&mut self, start: u64, size: u64, name: &[u8]) {
        let from = self.names.len();
        self.names.push_str(&String::from_utf8_lossy(name));
        // The arena is bounded by `Limits::max_file_bytes`, far below 4 GiB.
        let name = from as u32..self.names.len() as u32;
        self.entries.push(Entry {
            start,
            end: start + size,
            name,
        });
    }

    fn build_segments(&mut self) {
        let mut order: Vec<u32> = (0..self.entries.len() as u32).collect();
        // Stable on start, so equal starts stay in file order.
        order.sort_by_key(|&i| self.entries[i as usize].start);
        let disjoint = order.windows(2).all(|w| {
            self.entries[w[0] as usize].end <= self.entries[w[1] as usize].start
        });
        if disjoint {
            self.seg_starts = order.iter().map(|&i| self.entries[i as usize].start).collect();
            self.seg_ends = order.iter().map(|&i| self.entries[i as usize].end).collect();
            self.seg_entries = order;
        } else {
            self.paint_newest_wins(&order);
        }
    }

    /// Sweeps the boundaries left to right, keeping the live entries in a max-heap on
    /// their file position: the top is the newest entry covering the current point.
    fn paint_newest_wins(&mut self, by_start: &[u32]) {
        let entries = &self.entries;
        let mut by_end = by_start.to_vec();
        by_end.sort_unstable_by_key(|&i| entries[i as usize].end);
        let mut ended = vec![false; entries.len()];
        let mut live: BinaryHeap<u32> = BinaryHeap::new();
        let (mut s, mut e) = (0, 0);
        while e < by_end.len() {
            let point = match by_start.get(s) {
                Some(&i) => entries[i as usize].start.min(entries[by_end[e] as usize].end),
                None => entries[by_end[e] as usize].end,
            };
            while e < by_end.len() && entries[by_end[e] as usize].end == point {
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
                (Some(&a), Some(&b)) => entries[a as usize].start.min(entries[b as usize].end),
                (None, Some(&b)) => entries[b as usize].end,
                _ => break,
            };
            if let Some(&owner) = live.peek() {
                let extends = self.seg_entries.last() == Some(&owner)
                    && self.seg_ends.last() == Some(&point);
                if extends {
                    *self.seg_ends.last_mut().expect("segment present") = next;
                } else {
                    self.seg_starts.push(point);
                    self.seg_ends.push(next);
                    self.seg_entries.push(owner);
                }
            }
        }
    }

    /// About one bucket per segment: each lookup then touches a handful of starts.
    fn build_buckets(&mut self) {
        let (Some(&first), Some(&last)) = (self.seg_starts.first(), self.seg_starts.last()) else {
            return;
        };
        let span = last - first;
        let target = self.seg_starts.len().next_power_of_two() as u64;
        self.base = first;
        self.bucket_shift = 64 - (span / target).leading_zeros();
        let buckets = (span >> self.bucket_shift) + 1;
        self.bucket_first = Vec::with_capacity(buckets as usize + 1);
        let mut seg = 0usize;
        for b in 0..=buckets {
            // u128: the last boundary may lie past the end of the address space.
            let boundary = u128::from(first) + (u128::from(b) << self.bucket_shift);
            while seg < self.seg_starts.len() && u128::from(self.seg_starts[seg]) < boundary {
                seg += 1;
            }
            self.bucket_first.push(seg as u32);
        }
    }

    pub fn lookup(&self, addr: u64) -> Option<Symbol<'_>> {
        let offset = addr.checked_sub(self.base)?;
        let bucket = (offset >> self.bucket_shift) as usize;
        // Segments starting at or before `addr` number between the bucket's two bounds.
        // `bucket + 1` overflows only past every bucket (an entry at 0, `addr` = u64::MAX).
        let after = match bucket.checked_add(1).and_then(|next| self.bucket_first.get(next)) {
            Some(&hi) => {
                let lo = self.bucket_first[bucket] as usize;
                lo + self.seg_starts[lo..hi as usize].partition_point(|&start| start <= addr)
            }
            None => self.seg_starts.len(),
        };
        let seg = after.checked_sub(1)?;
        if addr >= self.seg_ends[seg] {
            return None;
        }
        let entry = &self.entries[self.seg_entries[seg] as usize];
        Some(Symbol {
            name: &self.names[entry.name.start as usize..entry.name.end as usize],
            start: entry.start,
            size: entry.end - entry.start,
        })
    }

    /// Entries parsed (including those fully hidden by newer ones).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn bad_lines(&self) -> u64 {
        self.bad_lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(text: &str) -> PerfMapIndex {
        PerfMapIndex::parse(text.as_bytes(), &Limits::default())
    }

    fn name_at(index: &PerfMapIndex, addr: u64) -> Option<&str> {
        index.lookup(addr).map(|s| s.name)
    }

    #[test]
    fn lookup_respects_bounds() {
        let idx = index("0x100 0x10 a\n0x200 0x10 b\n");
        assert_eq!(name_at(&idx, 0xff), None);
        assert_eq!(name_at(&idx, 0x100), Some("a"));
        assert_eq!(name_at(&idx, 0x10f), Some("a"));
        assert_eq!(name_at(&idx, 0x110), None);
        assert_eq!(name_at(&idx, 0x205), Some("b"));
        assert_eq!(name_at(&idx, 0x210), None);
        assert_eq!(idx.lookup(0x205).unwrap().start, 0x200);
    }

    #[test]
    fn the_highest_address_is_looked_up_without_overflow() {
        // Found by the perf_map fuzz target: one entry at address 0 (no bucket shift), then
        // a lookup of u64::MAX indexed past the buckets.
        let idx = index("0x0 0x10 zero\n");
        assert_eq!(name_at(&idx, u64::MAX), None);
        assert_eq!(name_at(&idx, 0xf), Some("zero"));
        assert_eq!(name_at(&index(""), u64::MAX), None);
    }

    #[test]
    fn lookup_over_a_sparse_address_space() {
        let idx = index("10 10 low\n7f0000000000 100 mid\n7f0000000100 100 mid2\nffffffffffff0000 100 top\n");
        assert_eq!(name_at(&idx, 0x1f), Some("low"));
        assert_eq!(name_at(&idx, 0x20), None);
        assert_eq!(name_at(&idx, 0x7f00000000ff), Some("mid"));
        assert_eq!(name_at(&idx, 0x7f0000000100), Some("mid2"));
        assert_eq!(name_at(&idx, 0x7f0000000200), None);
        assert_eq!(name_at(&idx, 0xffffffffffff00ff), Some("top"));
        assert_eq!(name_at(&idx, u64::MAX), None);
        assert_eq!(name_at(&idx, 0xf), None);
        assert_eq!(name_at(&PerfMapIndex::default(), 0x10), None);
    }

    #[test]
    fn newest_entry_wins_on_overlap() {
        // old covers 0x100..0x200; new covers 0x140..0x160; newer still at 0x1f0..0x220.
        let idx = index("0x100 0x100 old\n0x140 0x20 new\n0x1f0 0x30 newest\n");
        assert_eq!(name_at(&idx, 0x13f), Some("old"));
        assert_eq!(name_at(&idx, 0x140), Some("new"));
        assert_eq!(name_at(&idx, 0x15f), Some("new"));
        assert_eq!(name_at(&idx, 0x160), Some("old"));
        assert_eq!(name_at(&idx, 0x1ef), Some("old"));
        assert_eq!(name_at(&idx, 0x1f0), Some("newest"));
        assert_eq!(name_at(&idx, 0x21f), Some("newest"));
        assert_eq!(name_at(&idx, 0x220), None);
        // The symbol keeps its own range even where only part of it is visible.
        assert_eq!(idx.lookup(0x170).unwrap().size, 0x100);
    }

    #[test]
    fn older_entry_does_not_hide_newer_one() {
        let idx = index("0x140 0x20 new-first\n0x100 0x100 big-later\n");
        assert_eq!(name_at(&idx, 0x150), Some("big-later"));
        let idx = index("0x100 0x10 dup\n0x100 0x10 dup-newer\n");
        assert_eq!(name_at(&idx, 0x100), Some("dup-newer"));
    }

    #[test]
    fn bad_and_huge_lines_are_counted_not_fatal() {
        let huge = format!("0x300 0x10 {}", "x".repeat(100_000));
        let text = format!("garbage\n0x100 0x10 a\n{huge}\n\n0xZZ 1 b\n0x200 0x10 c\n");
        let idx = index(&text);
        assert_eq!(idx.bad_lines(), 3);
        assert_eq!(idx.len(), 2);
        assert_eq!(name_at(&idx, 0x300), None);
        assert_eq!(name_at(&idx, 0x200), Some("c"));
    }

    #[test]
    fn invalid_utf8_is_replaced_not_dropped() {
        let idx = PerfMapIndex::parse(b"0x100 0x10 bad\xffname\n", &Limits::default());
        assert_eq!(name_at(&idx, 0x100), Some("bad\u{fffd}name"));
    }

    /// Brute force over random overlapping maps: the index must agree with
    /// "the last entry in file order that covers the address".
    #[test]
    fn painting_matches_brute_force() {
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut rand = move |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        for _ in 0..200 {
            let n = 1 + rand(12);
            let ranges: Vec<(u64, u64)> = (0..n).map(|_| (rand(64), 1 + rand(24))).collect();
            let text: String = ranges
                .iter()
                .enumerate()
                .map(|(i, (s, z))| format!("{s:x} {z:x} e{i}\n"))
                .collect();
            let idx = index(&text);
            for addr in 0..100 {
                let expected = ranges
                    .iter()
                    .enumerate()
                    .rev()
                    .find(|(_, (s, z))| (*s..s + z).contains(&addr))
                    .map(|(i, _)| format!("e{i}"));
                assert_eq!(name_at(&idx, addr).map(str::to_owned), expected, "{text} at {addr}");
            }
        }
    }
}
