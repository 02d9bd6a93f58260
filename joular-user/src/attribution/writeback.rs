//! The writeback ledger: a written byte costs the disk energy when the device writes it, not
//! when the process dirties the page cache. Each call path's written bytes wait here, oldest
//! first, with the device of the file they went to, and each cycle's sectors written by a disk
//! cover the bytes on that disk in that order: the bytes a cycle covers are what the disk's
//! energy is split by (with the bytes read in it). Pure, no I/O.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::devices::{path_key, PathKey};
use crate::device_reports::DevNum;
use crate::model::FrameReport;

/// Bytes older than this were never written to a modelled device (a file on tmpfs, deleted
/// or rewritten before writeback): the kernel writes dirty pages back within
/// `dirty_expire_centisecs` (30 s by default) plus a writeback interval.
pub const MAX_AGE_NS: u64 = 120_000_000_000;
/// Entries kept at most; past it the oldest go (each is one path's writes of one cycle).
pub const MAX_ENTRIES: usize = 1 << 16;

/// A call path's identity: its thread and frames.
#[derive(Debug, Clone, PartialEq)]
pub struct WritePath {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub frames: Vec<FrameReport>,
}

pub(crate) fn key_of(p: &WritePath) -> PathKey {
    path_key(p.pid, p.tid, &p.frames)
}

/// One path's writes of one cycle: the path, the device of the file (`None`: not given), the
/// bytes still waiting, when they were written.
type Entry = (Arc<WritePath>, Option<DevNum>, u64, u64);

#[derive(Debug, Default)]
pub struct WritebackLedger {
    entries: VecDeque<Entry>,
    interned: HashMap<PathKey, Arc<WritePath>>,
    /// Bytes dropped unwritten (too old, or past `MAX_ENTRIES`).
    pub expired_bytes: u64,
}

impl WritebackLedger {
    /// Bytes written at `at_ns` on `path` to a file on `dev`, waiting for writeback.
    pub fn push(&mut self, path: WritePath, dev: Option<DevNum>, bytes: u64, at_ns: u64) {
        if bytes == 0 {
            return;
        }
        let path = self.interned.entry(key_of(&path)).or_insert_with(|| Arc::new(path)).clone();
        self.entries.push_back((path, dev, bytes, at_ns));
        while self.entries.len() > MAX_ENTRIES {
            let (_, _, b, _) = self.entries.pop_front().expect("not empty");
            self.expired_bytes += b;
        }
    }

    /// Paths remembered (at most one per entry, after a `cover`).
    pub fn paths_held(&self) -> usize {
        self.interned.len()
    }

    /// Bytes waiting.
    pub fn pending_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.2).sum()
    }

    /// Covers up to `written_bytes` of the entries whose device `on_disk` holds, oldest first,
    /// after dropping what is older than `MAX_AGE_NS` at `now_ns`. Returns the bytes covered
    /// per path, in ledger order.
    pub fn cover(
        &mut self,
        written_bytes: u64,
        now_ns: u64,
        on_disk: impl Fn(Option<DevNum>) -> bool,
    ) -> Vec<(Arc<WritePath>, u64)> {
        while self.entries.front().is_some_and(|e| now_ns.saturating_sub(e.3) > MAX_AGE_NS) {
            let (_, _, b, _) = self.entries.pop_front().expect("not empty");
            self.expired_bytes += b;
        }
        let mut left = written_bytes;
        let mut covered: Vec<(Arc<WritePath>, u64)> = Vec::new();
        // Interned: one path is one allocation, so its address finds its row.
        let mut row: HashMap<*const WritePath, usize> = HashMap::new();
        for entry in self.entries.iter_mut() {
            if left == 0 {
                break;
            }
            if !on_disk(entry.1) {
                continue;
            }
            let n = entry.2.min(left);
            entry.2 -= n;
            left -= n;
            match row.get(&Arc::as_ptr(&entry.0)) {
                Some(&i) => covered[i].1 += n,
                None => {
                    row.insert(Arc::as_ptr(&entry.0), covered.len());
                    covered.push((entry.0.clone(), n));
                }
            }
        }
        self.entries.retain(|e| e.2 > 0);
        // A path no entry holds any more is forgotten (the map's is then its only reference):
        // a writer that never lets the ledger empty still keeps it bounded by `MAX_ENTRIES`.
        if self.interned.len() > self.entries.len() {
            self.interned.retain(|_, p| Arc::strong_count(p) > 1);
        }
        covered
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FrameKind;

    fn path(tid: u32, name: &str) -> WritePath {
        let frame = FrameReport { name: name.into(), kind: FrameKind::JavaJit, line: None, raw_name: None };
        WritePath { pid: 1, tid, comm: String::new(), frames: vec![frame] }
    }

    #[test]
    fn writeback_covers_the_oldest_bytes_first_across_cycles() {
        let mut l = WritebackLedger::default();
        l.push(path(2, "A.write"), None, 100, 0);
        l.push(path(3, "B.write"), None, 50, 0);
        l.push(path(2, "A.write"), None, 30, 1);
        // The first cycle's 120 written bytes: A's 100, then 20 of B's.
        let c = l.cover(120, 1, |_| true);
        assert_eq!(c.iter().map(|(p, b)| (p.tid, *b)).collect::<Vec<_>>(), [(2, 100), (3, 20)]);
        // The next: B's last 30, then A's 30 (the same path: one row), and 10 bytes uncovered.
        let c = l.cover(70, 2, |_| true);
        assert_eq!(c.iter().map(|(p, b)| (p.tid, *b)).collect::<Vec<_>>(), [(3, 30), (2, 30)]);
        assert_eq!(l.pending_bytes(), 0);
        assert!(l.cover(10, 3, |_| true).is_empty());
    }

    #[test]
    fn old_bytes_expire_and_the_ledger_is_bounded() {
        let mut l = WritebackLedger::default();
        l.push(path(2, "A.write"), None, 100, 0);
        l.push(path(2, "A.write"), None, 7, MAX_AGE_NS);
        let c = l.cover(1000, MAX_AGE_NS + 1, |_| true);
        assert_eq!(c.iter().map(|(_, b)| *b).sum::<u64>(), 7);
        assert_eq!(l.expired_bytes, 100);
        for i in 0..MAX_ENTRIES + 3 {
            l.push(path(2, "A.write"), None, 1, i as u64);
        }
        assert_eq!(l.pending_bytes(), MAX_ENTRIES as u64);
        assert_eq!(l.expired_bytes, 103);
    }

    #[test]
    fn paths_no_entry_holds_are_forgotten_while_the_ledger_never_empties() {
        let mut l = WritebackLedger::default();
        for i in 0..1000u32 {
            // A fresh path each cycle, half of it written back: the ledger never empties.
            l.push(path(2, &format!("M{i}.write")), None, 10, u64::from(i));
            l.cover(5 + if i == 0 { 0 } else { 5 }, u64::from(i), |_| true);
        }
        assert!(l.pending_bytes() > 0);
        assert!(l.paths_held() <= 2, "{} paths held for {} bytes pending", l.paths_held(), l.pending_bytes());
    }

    #[test]
    fn a_disk_covers_only_the_bytes_on_its_devices_and_those_placed_nowhere() {
        let sda1 = DevNum { major: 8, minor: 1 };
        let loop0 = DevNum { major: 7, minor: 0 };
        let mut l = WritebackLedger::default();
        l.push(path(2, "OnLoop.write"), Some(loop0), 100, 0);
        l.push(path(3, "OnSda.write"), Some(sda1), 50, 0);
        l.push(path(4, "Unplaced.write"), None, 30, 0);
        // sda writes 1000 bytes: its own 50, then the 30 placed nowhere; never loop0's.
        let c = l.cover(1000, 1, |d| d.is_none_or(|d| d == sda1));
        assert_eq!(c.iter().map(|(p, b)| (p.tid, *b)).collect::<Vec<_>>(), [(3, 50), (4, 30)]);
        assert_eq!(l.pending_bytes(), 100);
        let c = l.cover(60, 2, |d| d.is_none_or(|d| d == loop0));
        assert_eq!(c.iter().map(|(p, b)| (p.tid, *b)).collect::<Vec<_>>(), [(2, 60)]);
        assert_eq!(l.pending_bytes(), 40);
    }
}
