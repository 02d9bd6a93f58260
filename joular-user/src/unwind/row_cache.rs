//! Unwind rows kept on disk between runs (`--unwind-cache`), so a JVM profiled again does
//! not pay libjvm's rows again: building them is most of the profiler's start-up CPU after
//! the verifier (~40-100 ms for libjvm's 190,000 rows on this project's CI machine), taken
//! from the target when its threads fill the CPUs. Reading them back is one 1.5-MiB read.
//!
//! - A file's rows are found by the file's version as `stat` gives it: device, inode, size,
//!   mtime and ctime. A user can set a file's size and mtime but not its ctime, so a file of
//!   theirs cannot later pass for another's, even if the other reuses its inode.
//! - The directory must be ours (owner = our euid) and writable by no one else; otherwise the
//!   cache is not used (rows are built as without it). It is written through
//!   [`crate::safe_write::OutDir`]: no symlink followed, whole files renamed into place.
//! - What is read back is checked before use (length, header, rows sorted), so a torn or
//!   damaged entry is rebuilt, never loaded. Rows are only a walk's rules: the sampler bounds
//!   every step whatever they say.
//! - Bounded: past [`MAX_CACHE_BYTES`] every other entry is removed.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::path::Path;

use joular_ebpf::unwind::UnwindRow;

use super::elf_read::{FileRows, Segment};
use crate::safe_write::{Modes, OutDir};

/// Bump when [`super::rows`] or [`super::leaf_gaps`] build different rows from the same file:
/// entries of another version are never read (their names differ) and go when the cache is
/// next pruned.
pub const ROWS_VERSION: u32 = 2;
/// All entries together (libjvm's are ~1.5 MiB, libc's ~0.2 MiB).
pub const MAX_CACHE_BYTES: u64 = 64 << 20;
/// One entry (4 Mi rows of 8 bytes): more than any library has (libjvm: 190,000).
const MAX_ENTRY_BYTES: u64 = 32 << 20;
const MAX_SEGMENTS: usize = 64;
const MAGIC: &[u8; 8] = b"JOULROWS";
const HEADER_BYTES: usize = 8 + 4 * 4;
const ROW_BYTES: usize = 8;
const SEGMENT_BYTES: usize = 24;
const SUFFIX: &str = ".rows";

/// Which version of which file an entry holds (`stat` of the mapped file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileVersion {
    pub dev: u64,
    pub inode: u64,
    pub size_bytes: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl FileVersion {
    fn entry_name(&self) -> String {
        format!(
            "v{ROWS_VERSION}-{:x}-{:x}-{:x}-{:x}-{:x}{SUFFIX}",
            self.dev, self.inode, self.size_bytes, self.mtime_ns, self.ctime_ns
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cannot create or open it: {0}")]
    Open(#[from] io::Error),
    #[error("it belongs to uid {owner}, not to us (uid {us}): its entries could have been written by anyone")]
    NotOurs { owner: u32, us: u32 },
    #[error("others may write to it (mode {mode:o}): its entries could have been written by anyone")]
    OpenToOthers { mode: u32 },
}

pub struct RowCache {
    dir: OutDir,
}

impl RowCache {
    /// Opens `path` (created 0700 if missing) as the cache, if it is ours alone.
    pub fn open(path: &Path) -> Result<Self, CacheError> {
        let dir = OutDir::create_all(path, Modes::exact(0o600))?;
        let (owner, mode) = dir.owner_and_mode()?;
        let us = nix::unistd::geteuid().as_raw();
        if owner != us {
            return Err(CacheError::NotOurs { owner, us });
        }
        if mode & 0o022 != 0 {
            return Err(CacheError::OpenToOthers { mode: mode & 0o7777 });
        }
        Ok(RowCache { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The rows kept for `file`, if there is a sound entry.
    pub fn load(&self, file: &FileVersion) -> Option<FileRows> {
        let bytes = self.dir.read(&file.entry_name(), MAX_ENTRY_BYTES).ok()?;
        let rows = decode(&bytes);
        if rows.is_none() {
            log::debug!("unwind cache entry {} is damaged: rebuilt", file.entry_name());
        }
        rows
    }

    /// Keeps `rows` for `file`, then prunes the cache if it grew past its bound.
    pub fn store(&self, file: &FileVersion, rows: &FileRows) -> io::Result<()> {
        let name = file.entry_name();
        let mut out = self.dir.replace(&name)?;
        out.write_all(&encode(rows))?;
        out.commit()?;
        self.prune(&name)
    }

    /// Past [`MAX_CACHE_BYTES`], every entry but `keep` goes: the cache fills again with what
    /// is profiled now (simpler than ages, and rare: it holds some 40 libjvms).
    fn prune(&self, keep: &str) -> io::Result<()> {
        let entries = self.dir.entries()?;
        let total: u64 = entries.iter().filter(|e| e.is_file).map(|e| e.size_bytes).sum();
        if total <= MAX_CACHE_BYTES {
            return Ok(());
        }
        for e in entries.iter().filter(|e| e.is_file && e.name != OsStr::new(keep)) {
            // Entries, and temporary files a run left when it was killed mid-write.
            let name = e.name.to_string_lossy();
            if name.ends_with(SUFFIX) || name.ends_with(".tmp") {
                self.dir.remove(&e.name)?;
            }
        }
        Ok(())
    }
}

fn encode(f: &FileRows) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + f.rows.len() * ROW_BYTES + f.segments.len() * SEGMENT_BYTES);
    out.extend_from_slice(MAGIC);
    for n in [ROWS_VERSION, f.rows.len() as u32, f.segments.len() as u32, 0] {
        out.extend_from_slice(&n.to_le_bytes());
    }
    for r in &f.rows {
        out.extend_from_slice(&r.pc.to_le_bytes());
        out.extend_from_slice(&r.cfa_offset.to_le_bytes());
        out.extend_from_slice(&r.rbp_words.to_le_bytes());
        out.push(r.kind);
    }
    for s in &f.segments {
        for n in [s.offset, s.file_bytes, s.vaddr] {
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
    out
}

/// The rows of an entry, or `None` unless it is exactly a header and what it announces, with
/// rows in strictly increasing pc order (as [`super::rows::compact`] gives them).
fn decode(bytes: &[u8]) -> Option<FileRows> {
    let (header, body) = bytes.split_at_checked(HEADER_BYTES)?;
    let word = |i: usize| u32::from_le_bytes(header[8 + 4 * i..12 + 4 * i].try_into().unwrap());
    if &header[..8] != MAGIC || word(0) != ROWS_VERSION {
        return None;
    }
    let (rows, segments) = (word(1) as usize, word(2) as usize);
    if rows == 0 || segments > MAX_SEGMENTS || body.len() != rows.checked_mul(ROW_BYTES)? + segments * SEGMENT_BYTES {
        return None;
    }
    let (row_bytes, segment_bytes) = body.split_at(rows * ROW_BYTES);
    let rows: Vec<UnwindRow> = row_bytes
        .chunks_exact(ROW_BYTES)
        .map(|c| UnwindRow {
            pc: u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
            cfa_offset: i16::from_le_bytes([c[4], c[5]]),
            rbp_words: c[6] as i8,
            kind: c[7],
        })
        .collect();
    if !rows.windows(2).all(|w| w[0].pc < w[1].pc) {
        return None;
    }
    let u64_at = |c: &[u8], i: usize| u64::from_le_bytes(c[8 * i..8 * i + 8].try_into().unwrap());
    let segments: Vec<Segment> = segment_bytes
        .chunks_exact(SEGMENT_BYTES)
        .map(|c| Segment { offset: u64_at(c, 0), file_bytes: u64_at(c, 1), vaddr: u64_at(c, 2) })
        .collect();
    Some(FileRows { rows, segments })
}

#[cfg(test)]
mod tests {
    use super::*;
    use joular_ebpf::unwind::{UNWIND_CFA_RBP, UNWIND_CFA_RSP, UNWIND_NONE};

    fn sample() -> FileRows {
        FileRows {
            rows: vec![
                UnwindRow { pc: 0x1000, cfa_offset: 8, rbp_words: 0, kind: UNWIND_CFA_RSP },
                UnwindRow { pc: 0x1004, cfa_offset: 16, rbp_words: -2, kind: UNWIND_CFA_RBP },
                UnwindRow { pc: 0x1040, ..UnwindRow::default() },
            ],
            segments: vec![
                Segment { offset: 0, file_bytes: 0x2000, vaddr: 0 },
                Segment { offset: 0x2000, file_bytes: 0x500, vaddr: 0x3000 },
            ],
        }
    }

    fn version(inode: u64) -> FileVersion {
        FileVersion { dev: 0x803, inode, size_bytes: 4096, mtime_ns: 1_700_000_000_123_456_789, ctime_ns: -5 }
    }

    fn open(dir: &Path) -> RowCache {
        RowCache::open(&dir.join("cache")).expect("a cache in a fresh directory")
    }

    #[test]
    fn rows_stored_come_back_the_same_for_that_version_only() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = open(tmp.path());
        assert!(cache.load(&version(7)).is_none(), "empty at first");
        let rows = sample();
        cache.store(&version(7), &rows).unwrap();
        let back = cache.load(&version(7)).expect("stored");
        assert_eq!((back.rows, back.segments), (rows.rows.clone(), rows.segments.clone()));
        // Any other stat of the file is another version.
        assert!(cache.load(&version(8)).is_none());
        assert!(cache.load(&FileVersion { ctime_ns: 6, ..version(7) }).is_none(), "ctime is part of the key");
        // Reopened (a later run): still there, and the directory is ours alone.
        let again = open(tmp.path());
        assert_eq!(again.load(&version(7)).unwrap().rows, rows.rows);
        let mode = std::fs::metadata(tmp.path().join("cache")).unwrap().permissions();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o700);
    }

    #[test]
    fn a_damaged_entry_is_never_loaded() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = open(tmp.path());
        cache.store(&version(7), &sample()).unwrap();
        let path = tmp.path().join("cache").join(version(7).entry_name());
        let good = std::fs::read(&path).unwrap();
        let mut damaged: Vec<Vec<u8>> = vec![
            good[..good.len() - 1].to_vec(),  // torn
            [&good[..], &[0u8][..]].concat(), // a byte too many
            good[..HEADER_BYTES].to_vec(),    // header alone
            Vec::new(),                       // empty
        ];
        let mut unsorted = good.clone();
        unsorted[HEADER_BYTES + 8..HEADER_BYTES + 12].copy_from_slice(&0x0fffu32.to_le_bytes());
        damaged.push(unsorted);
        let mut other_version = good.clone();
        other_version[8..12].copy_from_slice(&(ROWS_VERSION + 1).to_le_bytes());
        damaged.push(other_version);
        for (i, bytes) in damaged.iter().enumerate() {
            std::fs::write(&path, bytes).unwrap();
            assert!(cache.load(&version(7)).is_none(), "damaged entry {i} loaded");
        }
        std::fs::write(&path, &good).unwrap();
        assert!(cache.load(&version(7)).is_some(), "the sound entry loads");
    }

    #[test]
    fn a_symlinked_entry_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = open(tmp.path());
        let elsewhere = tmp.path().join("planted");
        std::fs::write(&elsewhere, encode(&sample())).unwrap();
        std::os::unix::fs::symlink(&elsewhere, tmp.path().join("cache").join(version(7).entry_name())).unwrap();
        assert!(cache.load(&version(7)).is_none());
        // Storing replaces the link with a file of ours; the link's target is untouched.
        let rows =
            FileRows { rows: vec![UnwindRow { kind: UNWIND_NONE, pc: 9, ..UnwindRow::default() }], segments: vec![] };
        cache.store(&version(7), &rows).unwrap();
        assert_eq!(cache.load(&version(7)).unwrap().rows, rows.rows);
        assert_eq!(std::fs::read(&elsewhere).unwrap(), encode(&sample()));
    }

    #[test]
    fn a_directory_others_may_write_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        let err = RowCache::open(&dir).err().expect("refused");
        assert!(matches!(err, CacheError::OpenToOthers { mode: 0o777 }), "{err}");
    }

    #[test]
    fn past_its_bound_the_cache_keeps_only_the_newest_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = open(tmp.path());
        let big = FileRows {
            rows: (0..(MAX_CACHE_BYTES as usize / ROW_BYTES / 4) as u32)
                .map(|pc| UnwindRow { pc, ..UnwindRow::default() })
                .collect(),
            segments: vec![],
        };
        for inode in 1..=3 {
            cache.store(&version(inode), &big).unwrap();
        }
        assert!((1..=3).all(|i| cache.load(&version(i)).is_some()), "three quarters fit");
        cache.store(&version(4), &big).unwrap();
        let left: Vec<u64> = (1..=4).filter(|&i| cache.load(&version(i)).is_some()).collect();
        assert_eq!(left, vec![4]);
    }
}
