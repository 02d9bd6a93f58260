//! Which rows each walked process needs: its executable file mappings (and its vDSO), each
//! with the rows of its file, read once per version of a file (dev, inode, size, mtime, ctime) and
//! shared by every process mapping it. The rows of all files together stay under a byte limit
//! (a share of `--max-symbol-mb`); a file past it, or unreadable, has no rows, and its pcs are
//! stepped by frame pointers (counted by the kernel as `native_no_table`). Rows built are kept
//! on disk for the next run when a [`RowCache`] is given (`--unwind-cache`).

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use joular_ebpf::unwind::{UnwindRow, MAX_UNWIND_MAPPINGS};
use jvm_symbols::MAX_MAPS_BYTES;

use super::elf_read::{read_file_rows, Segment};
use super::row_cache::{FileVersion, RowCache};
use crate::target_read::stall_guard::{self, GuardedSource};
use crate::target_read::{on_fuse, ByteSource, MemoryImage};

/// The rows of all files may hold 1/this of `--max-symbol-mb` (libjvm's are some 3 MiB).
pub const SHARE_OF_SYMBOL_BUDGET: u64 = 16;
/// A vDSO is a page or two; anything larger is not one.
const MAX_VDSO_BYTES: u64 = 1 << 20;
/// A process whose executable mappings are listed as before keeps its table for this many
/// refreshes (cycles) before its files are opened and checked again. Checking opens every
/// mapped file (through the guarded file-reading thread: a round trip to it each) and the
/// vDSO's memory, for tables that change when a library is loaded or unloaded, which changes
/// the listing and is seen at once. Checked every cycle it was 17% of the profiler's CPU in a
/// perf profile of one JVM, and a quarter of its system calls (5,422 -> 4,125 in 8 s with
/// this). What only a check sees is a file rewritten in place while mapped (same inode, new
/// mtime): within this many cycles.
pub const RECHECK_EVERY_REFRESHES: u32 = 10;

/// One version of one file. Every process of a kernel maps the same vDSO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKey {
    File(FileVersion),
    Vdso { size_bytes: u64 },
}

/// One file's rows, with an id the kernel maps place them by.
#[derive(Debug, PartialEq, Eq)]
pub struct SharedRows {
    pub id: u64,
    pub rows: Vec<UnwindRow>,
    pub segments: Vec<Segment>,
}

/// One executable mapping of a process: `[start, end)`, process address - file virtual
/// address, and its file's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedRows {
    pub start: u64,
    pub end: u64,
    pub bias: u64,
    pub rows: Arc<SharedRows>,
}

/// Counters for the end-of-run line: files whose rows were built, their bytes and build time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableStats {
    pub files_read: u64,
    /// Of `files_read`, those whose rows came from the on-disk cache.
    pub files_cached: u64,
    pub files_failed: u64,
    /// Rows held now (every file a walked process maps), in bytes.
    pub row_bytes: u64,
    /// Rows built since the start, in bytes, and the time building them took.
    pub built_bytes: u64,
    pub build_us: u64,
    /// Times a process's mapped files were opened and checked (its first refresh, a changed
    /// listing, or every [`RECHECK_EVERY_REFRESHES`]).
    pub mapping_checks: u64,
    /// The largest files built, largest first (at most `LARGEST_FILES`).
    pub largest: Vec<FileBuild>,
}

/// One file's rows as built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileBuild {
    /// The mapped file's name (its path's last part, as the target's maps show it).
    pub name: String,
    pub rows: u64,
    pub bytes: u64,
    pub build_us: u64,
}

/// Files `TableStats::largest` keeps.
const LARGEST_FILES: usize = 8;
/// Bytes of a file's name kept for the summary (a target chooses its files' names).
const MAX_NAME_BYTES: usize = 64;

impl TableStats {
    fn built(&mut self, name: &str, rows: usize, elapsed: std::time::Duration, from_cache: bool) {
        let bytes = (rows * size_of::<UnwindRow>()) as u64;
        let build_us = elapsed.as_micros() as u64;
        self.files_read += 1;
        self.files_cached += u64::from(from_cache);
        self.built_bytes += bytes;
        self.build_us += build_us;
        let name: String = name.chars().filter(|c| !c.is_control()).take(MAX_NAME_BYTES).collect();
        let at = self.largest.partition_point(|f| f.bytes >= bytes);
        if at < LARGEST_FILES {
            self.largest.insert(at, FileBuild { name, rows: rows as u64, bytes, build_us });
            self.largest.truncate(LARGEST_FILES);
        }
    }
}

/// A walked process's last table, the executable mappings it was made from, and the
/// refreshes since its files were last opened and checked.
struct Known {
    table: Vec<MappedRows>,
    listed: Vec<ExecMapping>,
    unchecked: u32,
}

enum Entry {
    Ready(Arc<SharedRows>),
    /// Unreadable, not ELF, no CFI or over the limit: not tried again for this version.
    Failed,
}

pub struct UnwindTables {
    proc_root: PathBuf,
    max_row_bytes: u64,
    files: HashMap<FileKey, Entry>,
    /// Each process's last table, to tell when it changed.
    processes: HashMap<u32, Known>,
    next_id: u64,
    cache: Option<RowCache>,
    pub stats: TableStats,
}

impl UnwindTables {
    pub fn new(proc_root: &Path, max_row_bytes: u64) -> Self {
        UnwindTables {
            proc_root: proc_root.to_owned(),
            max_row_bytes,
            files: HashMap::new(),
            processes: HashMap::new(),
            next_id: 1,
            cache: None,
            stats: TableStats::default(),
        }
    }

    /// Rows are also looked for in, and kept in, `cache`.
    pub fn with_cache(mut self, cache: Option<RowCache>) -> Self {
        self.cache = cache;
        self
    }

    /// `pid`'s table if it changed since the last call (new libraries loaded, some unloaded).
    /// Its maps are read every call; its files are opened only when they list differently or
    /// every [`RECHECK_EVERY_REFRESHES`] calls.
    pub fn refresh(&mut self, pid: u32) -> Option<Vec<MappedRows>> {
        let dir = self.proc_root.join(pid.to_string());
        let mappings = read_executable_mappings(&dir).ok()?;
        if let Some(known) = self.processes.get_mut(&pid) {
            if known.listed == mappings && known.unchecked + 1 < RECHECK_EVERY_REFRESHES {
                known.unchecked += 1;
                return None;
            }
        }
        let table = self.process_table(&dir, &mappings);
        self.stats.mapping_checks += 1;
        if let Some(known) = self.processes.get_mut(&pid).filter(|known| known.table == table) {
            // The same table: nothing to send, nothing to copy.
            known.listed = mappings;
            known.unchecked = 0;
            return None;
        }
        self.processes.insert(pid, Known { table: table.clone(), listed: mappings, unchecked: 0 });
        self.drop_unused();
        Some(table)
    }

    pub fn forget(&mut self, pid: u32) {
        if self.processes.remove(&pid).is_some() {
            self.drop_unused();
        }
    }

    /// Files no process maps any more are dropped (their failures too: a file that comes
    /// back is tried again).
    fn drop_unused(&mut self) {
        let used: std::collections::HashSet<u64> =
            self.processes.values().flat_map(|k| &k.table).map(|m| m.rows.id).collect();
        let before = self.files.len();
        self.files.retain(|_, e| matches!(e, Entry::Ready(r) if used.contains(&r.id)));
        if self.files.len() != before {
            self.stats.row_bytes = self.held_bytes();
        }
    }

    fn held_bytes(&self) -> u64 {
        let rows: usize = self
            .files
            .values()
            .map(|e| match e {
                Entry::Ready(r) => r.rows.len(),
                Entry::Failed => 0,
            })
            .sum();
        (rows * size_of::<UnwindRow>()) as u64
    }

    fn process_table(&mut self, dir: &Path, mappings: &[ExecMapping]) -> Vec<MappedRows> {
        let mut table = Vec::new();
        for m in mappings {
            if table.len() >= MAX_UNWIND_MAPPINGS {
                break;
            }
            let Some((rows, vaddr)) = self.rows_of(dir, m) else { continue };
            table.push(MappedRows { start: m.start, end: m.end, bias: m.start.wrapping_sub(vaddr), rows });
        }
        table
    }

    /// The rows of the mapping's file and the file virtual address of the mapping's start.
    fn rows_of(&mut self, dir: &Path, m: &ExecMapping) -> Option<(Arc<SharedRows>, u64)> {
        let (key, src): (FileKey, Box<dyn ByteSource + '_>);
        let size_bytes;
        if m.vdso {
            size_bytes = (m.end - m.start).min(MAX_VDSO_BYTES);
            let mem = std::fs::File::open(dir.join("mem")).ok()?;
            key = FileKey::Vdso { size_bytes };
            src = Box::new(MemoryImage { mem, start: m.start, len_bytes: size_bytes });
        } else {
            let link = dir.join("map_files").join(format!("{:x}-{:x}", m.start, m.end));
            // The target chooses the file: on FUSE its daemon may never answer, even the open.
            // The open and every read run on the guarded file-reading thread with a deadline,
            // and a file on FUSE is refused before anything is read (as the symbolizer's copy).
            let guard = stall_guard::file_reads();
            let opened = guard.run(move || -> std::io::Result<Option<(std::fs::File, std::fs::Metadata)>> {
                // O_NONBLOCK: a FIFO or device there cannot block the open.
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                    .open(link)?;
                let meta = file.metadata()?;
                if !meta.file_type().is_file() || on_fuse(&file)? {
                    return Ok(None);
                }
                Ok(Some((file, meta)))
            });
            let Ok(Ok(Some((file, meta)))) = opened else { return None };
            let ns = |s: i64, ns: i64| i128::from(s) * 1_000_000_000 + i128::from(ns);
            size_bytes = meta.size();
            key = FileKey::File(FileVersion {
                dev: meta.dev(),
                inode: meta.ino(),
                size_bytes,
                mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
                ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            });
            src = Box::new(GuardedSource::new(file, Arc::clone(guard)));
        }
        let rows = match self.files.get(&key) {
            Some(Entry::Failed) => return None,
            Some(Entry::Ready(rows)) => Arc::clone(rows),
            None => {
                let left = self.max_row_bytes.saturating_sub(self.held_bytes());
                let started = std::time::Instant::now();
                let cache = match (&key, &self.cache) {
                    (FileKey::File(version), Some(cache)) => Some((version, cache)),
                    _ => None,
                };
                let cached = cache.and_then(|(version, cache)| cache.load(version));
                let from_cache = cached.is_some();
                match cached.map_or_else(|| read_file_rows(src.as_ref(), size_bytes, left), Ok) {
                    Ok(f) if !f.rows.is_empty() && (f.rows.len() * size_of::<UnwindRow>()) as u64 <= left => {
                        let name = if m.vdso { "[vdso]" } else { m.path.rsplit('/').next().unwrap_or_default() };
                        self.stats.built(name, f.rows.len(), started.elapsed(), from_cache);
                        if let Some((version, cache)) = cache.filter(|_| !from_cache) {
                            // Losing the cache loses nothing but the next run's time.
                            if let Err(e) = cache.store(version, &f) {
                                log::debug!("unwind rows not kept in {}: {e}", cache.path().display());
                            }
                        }
                        let rows = Arc::new(SharedRows { id: self.next_id, rows: f.rows, segments: f.segments });
                        self.next_id += 1;
                        self.files.insert(key, Entry::Ready(Arc::clone(&rows)));
                        self.stats.row_bytes = self.held_bytes();
                        rows
                    }
                    result => {
                        if let Err(e) = result {
                            log::debug!("no unwind rows for a mapping of {}: {e}", dir.display());
                        }
                        self.stats.files_failed += 1;
                        self.files.insert(key, Entry::Failed);
                        return None;
                    }
                }
            }
        };
        let segment = rows.segments.iter().find(|s| m.offset >= s.offset && m.offset - s.offset < s.file_bytes)?;
        let vaddr = segment.vaddr + (m.offset - segment.offset);
        Some((rows, vaddr))
    }
}

/// An executable mapping of a file or the vDSO, as one line of a maps file lists it.
#[derive(Debug, PartialEq, Eq)]
struct ExecMapping {
    start: u64,
    end: u64,
    offset: u64,
    /// The mapped file's device (as listed, `major:minor` in hex) and inode: the same line
    /// twice is the same file.
    dev: String,
    inode: u64,
    vdso: bool,
    /// The path the maps show (for the summary only: the file is opened by its mapping).
    path: String,
}

/// The executable mappings of `dir/maps` (`dir` a `/proc/<pid>`), read up to its bound.
fn read_executable_mappings(dir: &Path) -> std::io::Result<Vec<ExecMapping>> {
    let mut text = Vec::new();
    std::fs::File::open(dir.join("maps"))?.take(MAX_MAPS_BYTES).read_to_end(&mut text)?;
    Ok(executable_mappings(&text))
}

/// The executable mappings of a `/proc/<pid>/maps` text, as the kernel sorts them.
fn executable_mappings(text: &[u8]) -> Vec<ExecMapping> {
    let mut out = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        let line = String::from_utf8_lossy(line);
        let mut fields = line.splitn(6, ' ');
        let (Some(range), Some(perms), Some(offset), Some(dev), Some(inode)) =
            (fields.next(), fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let path = fields.next().map(str::trim_start).unwrap_or_default();
        let vdso = path == "[vdso]";
        if !perms.contains('x') || (!vdso && (inode == "0" || path.starts_with('['))) {
            continue;
        }
        let Some((start, end)) = range.split_once('-') else { continue };
        let parse = |t: &str| u64::from_str_radix(t, 16).ok();
        if let (Some(start), Some(end), Some(offset)) = (parse(start), parse(end), parse(offset)) {
            if start < end {
                out.push(ExecMapping {
                    start,
                    end,
                    offset,
                    dev: dev.to_owned(),
                    inode: inode.parse().unwrap_or(0),
                    vdso,
                    path: path.to_owned(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_has_rows_for_its_libc_and_vdso() {
        let mut tables = UnwindTables::new(Path::new("/proc"), 256 << 20);
        let table = tables.refresh(std::process::id()).expect("a first table");
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc_start = maps
            .lines()
            .find(|l| l.contains("libc.so.6") && l.split(' ').nth(1).is_some_and(|p| p.contains('x')))
            .map(|l| u64::from_str_radix(l.split('-').next().unwrap(), 16).unwrap())
            .expect("libc mapped");
        let libc = table.iter().find(|m| m.start == libc_start).expect("libc in the table");
        assert!(libc.rows.rows.len() > 1000);
        // A libc function's own address has a row (its first instruction: CFA = rsp + 8).
        let getpid = libc::getpid as *const () as u64;
        let row = crate::unwind::tests::row_of(&libc.rows.rows, getpid - libc.bias);
        assert_eq!((row.kind, row.cfa_offset), (joular_ebpf::unwind::UNWIND_CFA_RSP, 8), "{row:?}");
        assert!(maps.contains("[vdso]") && tables.stats.files_read >= 2, "{:?}", tables.stats);
        // The summary's figures: libc among the largest files, its bytes its rows'.
        let built = tables.stats.largest.iter().find(|f| f.name == "libc.so.6").expect("libc in the largest files");
        assert_eq!(built.bytes, libc.rows.rows.len() as u64 * 8);
        assert!(tables.stats.largest.windows(2).all(|w| w[0].bytes >= w[1].bytes), "{:?}", tables.stats);
        assert!(tables.stats.largest.iter().any(|f| f.name == "[vdso]"), "{:?}", tables.stats);
        assert_eq!(tables.refresh(std::process::id()), None, "unchanged");
    }

    #[test]
    fn files_are_checked_again_when_the_listing_changes_or_every_few_refreshes() {
        use std::os::fd::AsRawFd;
        let mut tables = UnwindTables::new(Path::new("/proc"), 256 << 20);
        let pid = std::process::id();
        tables.refresh(pid).expect("a first table");
        assert_eq!(tables.stats.mapping_checks, 1);
        for _ in 1..RECHECK_EVERY_REFRESHES {
            assert_eq!(tables.refresh(pid), None);
        }
        assert_eq!(tables.stats.mapping_checks, 1, "listed as before: no file opened");
        assert_eq!(tables.refresh(pid), None, "checked again, unchanged");
        assert_eq!(tables.stats.mapping_checks, 2);
        // One more executable mapping of a file: checked at the next refresh, not ten later.
        let exe = std::fs::File::open("/proc/self/exe").unwrap();
        let len = 4096;
        // SAFETY: a new private read-only mapping of a file we opened; nothing uses it but
        // the maps listing, and it is unmapped below.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE,
                exe.as_raw_fd(),
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED);
        let _ = tables.refresh(pid);
        // SAFETY: the mapping made above, of that length.
        unsafe { libc::munmap(addr, len) };
        assert_eq!(tables.stats.mapping_checks, 3, "a changed listing is checked at once");
        // Gone again: checked again.
        let _ = tables.refresh(pid);
        assert_eq!(tables.stats.mapping_checks, 4);
        tables.forget(pid);
        assert!(tables.processes.is_empty());
    }
}
