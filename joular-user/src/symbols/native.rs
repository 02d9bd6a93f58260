//! Native user-space addresses through blazesym (kernel ones: `kernel.rs`). JIT code is
//! resolved by jvm-symbols, which reads HotSpot's `0x` form and applies the safety checks.
//!
//! blazesym never sees a target's file: an address is turned into an offset of the mapped file
//! from `/proc/<pid>/maps`, the file (reached through `map_files`, so the one mapped, whatever its
//! path now names) is copied into a sealed memfd of our own ([`elf_copy`]), and blazesym reads
//! that copy. A target that truncates or rewrites its library cannot fault us (SIGBUS) or change
//! bytes under the parser. One copy per file version, keyed by (dev, inode, size, mtime), serves
//! every process mapping it; it is dropped when no mapping holds it any more. Copies count
//! against `--max-symbol-mb`; a file whose tables do not fit in what is left is not copied and
//! its addresses stay unnamed (counted). A panic inside blazesym marks that file version bad.
//!
//! A stripped library's full symbol table (libc's `start_thread`) is in its separate debug file
//! under `/usr/lib/debug` ([`debug_file`]): copied beside the library's own copy, the same
//! way and within the same budget, and asked first, by virtual address.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};

use super::debug_file::{find_debug_file, DEBUG_ROOT};
use super::elf_copy::{copy_symbol_sections, CopyError, ElfCopy};
use super::native_maps::{find, read_file_mappings, FileMapping, Mapped};
use crate::target_read::stall_guard::{self, GuardedSource, Stall};
use crate::target_read::{on_fuse, ByteSource, MemoryImage};

/// Bad file versions remembered (so each is tried once); past this the memory starts over.
const MAX_BAD_VERSIONS: usize = 4096;
/// Bad files named in the end-of-run line.
const MAX_BAD_EXAMPLES: usize = 8;
/// A mapping whose file could not be read is tried again after this long, not at every stack:
/// a target rewriting its library in a loop costs a few copies a second, not one per sample.
const RETRY_UNAVAILABLE_AFTER: std::time::Duration = std::time::Duration::from_millis(500);
/// A mapping's file is copied at most this often: a target rewriting its library in a loop
/// makes a new version each time, and each costs a copy and a parse of its symbol table.
const RECOPY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);
/// A vDSO is a page or two; anything larger is not one.
const MAX_VDSO_BYTES: u64 = 1 << 20;

/// One version of one mapped file (or one process's vDSO).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum FileKey {
    File { dev: u64, inode: u64, size_bytes: u64, mtime_ns: i128 },
    Vdso { pid: u32, start: u64 },
}

struct Held {
    copy: ElfCopy,
    /// The copy of its separate debug file, if it has one.
    debug: Option<ElfCopy>,
    /// Mappings using this copy.
    holders: u32,
}

/// What an address of a process is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NativeName {
    Named(String),
    /// Its file was read and has no name for it (or it is in no file).
    Unknown,
    /// Its file could not be read now: bad, gone, over the budget. Another version may be.
    Unavailable,
}

/// What native symbolization did and could not do, since the start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NativeStats {
    /// File versions copied, and the bytes the copies hold now (debug files' copies too).
    pub files_copied: u64,
    /// Separate debug files copied.
    pub debug_files: u64,
    pub copy_bytes: u64,
    /// File versions that could not be named, by reason (`not_elf`, `over_budget`,
    /// `unreadable`, `parser_panic`).
    pub files_bad: BTreeMap<String, u64>,
    /// The first few files, as "path: reason" (the first reason of each).
    pub bad_examples: Vec<String>,
}

pub struct NativeResolver {
    user: Symbolizer,
    proc_root: PathBuf,
    debug_root: PathBuf,
    copies: HashMap<FileKey, Held>,
    /// Which copy each (pid, mapping start) uses.
    held_by: HashMap<(u32, u64), FileKey>,
    bad: HashMap<FileKey, &'static str>,
    /// (pid, mapping start) whose file could not be read, and when.
    unavailable_since: HashMap<(u32, u64), std::time::Instant>,
    /// (pid, mapping start) whose file was last copied (or tried), and when.
    copied_at: HashMap<(u32, u64), std::time::Instant>,
    /// (pid, mapping start) whose file is never read again: a read of it blocked past its
    /// deadline, or it is on FUSE.
    refused_mappings: std::collections::HashSet<(u32, u64)>,
    max_copy_bytes: u64,
    stats: NativeStats,
    panic_logged: bool,
    blocked_logged: bool,
}

impl NativeResolver {
    /// Copies may hold `max_copy_bytes` together.
    pub fn new(proc_root: &Path, max_copy_bytes: u64) -> Self {
        NativeResolver {
            // Names are all we show: no source lines, no inlined-function chains.
            user: Symbolizer::builder().enable_code_info(false).enable_inlined_fns(false).build(),
            proc_root: proc_root.to_owned(),
            debug_root: PathBuf::from(DEBUG_ROOT),
            copies: HashMap::new(),
            held_by: HashMap::new(),
            bad: HashMap::new(),
            unavailable_since: HashMap::new(),
            copied_at: HashMap::new(),
            refused_mappings: std::collections::HashSet::new(),
            max_copy_bytes,
            stats: NativeStats::default(),
            panic_logged: false,
            blocked_logged: false,
        }
    }

    pub fn stats(&self) -> &NativeStats {
        &self.stats
    }

    /// A process has ended: the copies only it held are dropped.
    pub fn process_ended(&mut self, pid: u32) {
        let keys: Vec<FileKey> = self.held_by.iter().filter(|((p, _), _)| *p == pid).map(|(_, &k)| k).collect();
        self.held_by.retain(|(p, _), _| *p != pid);
        self.unavailable_since.retain(|(p, _), _| *p != pid);
        self.copied_at.retain(|(p, _), _| *p != pid);
        self.refused_mappings.retain(|(p, _)| *p != pid);
        for key in keys {
            self.release(key);
        }
    }

    /// One name per address, in input order.
    pub fn user(&mut self, pid: u32, addrs: &[u64]) -> Vec<NativeName> {
        let mut names = vec![NativeName::Unknown; addrs.len()];
        let mappings = match read_file_mappings(&self.proc_root, pid) {
            Ok(m) => m,
            Err(e) => {
                log::debug!("process {pid}: maps not readable: {e}");
                return names;
            }
        };
        // Per mapping (by start), the input slots and file offsets it covers.
        type Wanted<'m> = (&'m FileMapping, Vec<(usize, u64)>);
        let mut by_mapping: BTreeMap<u64, Wanted> = BTreeMap::new();
        for (slot, &addr) in addrs.iter().enumerate() {
            if let Some(m) = find(&mappings, addr) {
                by_mapping.entry(m.start).or_insert((m, Vec::new())).1.push((slot, m.file_offset(addr)));
            }
        }
        for (mapping, wanted) in by_mapping.into_values() {
            let recently_unavailable = self
                .unavailable_since
                .get(&(pid, mapping.start))
                .is_some_and(|t| t.elapsed() < RETRY_UNAVAILABLE_AFTER);
            let key = match recently_unavailable {
                true => None,
                false => self.copy_for(pid, mapping),
            };
            let Some(key) = key else {
                if !recently_unavailable {
                    self.unavailable_since.insert((pid, mapping.start), std::time::Instant::now());
                }
                wanted.iter().for_each(|&(slot, _)| names[slot] = NativeName::Unavailable);
                continue;
            };
            self.unavailable_since.remove(&(pid, mapping.start));
            let offsets: Vec<u64> = wanted.iter().map(|&(_, off)| off).collect();
            match names_in_held(&self.user, &self.copies[&key], &offsets) {
                Ok(resolved) => {
                    for ((slot, _), name) in wanted.into_iter().zip(resolved) {
                        names[slot] = name.map_or(NativeName::Unknown, NativeName::Named);
                    }
                }
                Err(message) => {
                    wanted.iter().for_each(|&(slot, _)| names[slot] = NativeName::Unavailable);
                    self.parser_panicked(pid, mapping, key, &message);
                }
            }
        }
        names
    }

    /// The copy serving `mapping` of `pid`, made if needed; `None` when the file cannot be
    /// named (gone, bad, or over the budget).
    fn copy_for(&mut self, pid: u32, mapping: &FileMapping) -> Option<FileKey> {
        if self.refused_mappings.contains(&(pid, mapping.start)) {
            return None;
        }
        let guard = stall_guard::file_reads();
        let (root, start, end) = (self.proc_root.clone(), mapping.start, mapping.end);
        let opened = match &mapping.what {
            Mapped::File(_) => guard.run(move || open_mapped_file(&root, pid, start, end)),
            Mapped::Vdso => guard.run(move || {
                open_memory(&root, pid).map(|mem| (FileKey::Vdso { pid, start }, mem, None)).map_err(OpenError::Io)
            }),
        };
        let (key, file, size_bytes) = match opened {
            Ok(Ok(o)) => o,
            Ok(Err(OpenError::Io(e))) => {
                // Mostly a process or mapping that ended since its sample.
                log::debug!("process {pid}: {} not opened: {e}", describe(mapping));
                return None;
            }
            Ok(Err(OpenError::Fuse)) => {
                self.refuse_mapping(pid, mapping, "on_fuse", "on a FUSE filesystem, whose reads its daemon may block");
                return None;
            }
            Err(stall) => {
                self.blocked(pid, mapping, &stall);
                return None;
            }
        };
        let previous = self.held_by.insert((pid, mapping.start), key);
        if previous != Some(key) {
            if let Some(held) = self.copies.get_mut(&key) {
                held.holders += 1;
            }
            if let Some(previous) = previous {
                self.release(previous);
            }
        }
        if self.copies.contains_key(&key) {
            return Some(key);
        }
        if self.bad.contains_key(&key) {
            return None;
        }
        let now = std::time::Instant::now();
        if self.copied_at.get(&(pid, mapping.start)).is_some_and(|&t| now.duration_since(t) < RECOPY_AFTER) {
            return None;
        }
        self.copied_at.insert((pid, mapping.start), now);
        let left_bytes = self.max_copy_bytes.saturating_sub(self.stats.copy_bytes);
        let copied = match (&mapping.what, size_bytes) {
            (Mapped::File(_), Some(size)) => {
                copy_symbol_sections(&GuardedSource::new(file, guard.clone()) as &dyn ByteSource, size, left_bytes)
            }
            _ => {
                let len_bytes = (mapping.end - mapping.start).min(MAX_VDSO_BYTES);
                let image = MemoryImage { mem: file, start: mapping.start, len_bytes };
                copy_symbol_sections(&GuardedSource::new(image, guard.clone()), len_bytes, left_bytes)
            }
        };
        match copied {
            Ok(copy) => {
                self.stats.files_copied += 1;
                self.stats.copy_bytes += copy.bytes;
                let debug = self.debug_copy(&copy, mapping);
                self.copies.insert(key, Held { copy, debug, holders: 1 });
                Some(key)
            }
            Err(e) => {
                if let Some(stall) = e.stall() {
                    self.blocked(pid, mapping, stall);
                    return None;
                }
                self.mark_bad(key, mapping, e.kind(), &e.to_string());
                None
            }
        }
    }

    /// The copy of the separate debug file of `copy` (the mapping's file), within what is left
    /// of the budget. The debug directory is root's: its reads need no guard.
    fn debug_copy(&mut self, copy: &ElfCopy, mapping: &FileMapping) -> Option<ElfCopy> {
        let Mapped::File(path) = &mapping.what else { return None };
        let (file, size_bytes) =
            find_debug_file(&self.debug_root, copy.build_id.as_deref(), copy.debuglink.as_ref(), Path::new(path))?;
        let left_bytes = self.max_copy_bytes.saturating_sub(self.stats.copy_bytes);
        let debug = match copy_symbol_sections(&file, size_bytes, left_bytes) {
            Ok(debug) => debug,
            Err(e) => {
                log::debug!("{}: debug file not used: {e}", describe(mapping));
                return None;
            }
        };
        // A build id names one build: a debug file of another one would name wrong.
        if copy.build_id.is_some() && debug.build_id != copy.build_id {
            log::debug!("{}: debug file of another build not used", describe(mapping));
            return None;
        }
        self.stats.debug_files += 1;
        self.stats.copy_bytes += debug.bytes;
        Some(debug)
    }

    /// A read of the mapping's file blocked past its deadline: the mapping is read no more (its
    /// thread is left behind, `stall_guard`), said once, counted.
    fn blocked(&mut self, pid: u32, mapping: &FileMapping, stall: &Stall) {
        if !std::mem::replace(&mut self.blocked_logged, true) {
            log::warn!(
                "process {pid}: reading {} blocked ({stall}); its addresses stay unnamed, and so do those of other files whose reads block",
                describe(mapping)
            );
        }
        let kind = match stall {
            Stall::TimedOut { .. } => "blocked",
            _ => "refused_reads_blocked",
        };
        self.refuse_mapping(pid, mapping, kind, &stall.to_string());
    }

    /// The mapping's file is not read again for this process; counted by `kind`.
    fn refuse_mapping(&mut self, pid: u32, mapping: &FileMapping, kind: &str, reason: &str) {
        self.refused_mappings.insert((pid, mapping.start));
        *self.stats.files_bad.entry(kind.to_owned()).or_default() += 1;
        let example = format!("{}: ", describe(mapping));
        if self.stats.bad_examples.len() < MAX_BAD_EXAMPLES
            && !self.stats.bad_examples.iter().any(|e| e.starts_with(&example))
        {
            self.stats.bad_examples.push(example + reason);
        }
        log::debug!("process {pid}: {} not named: {reason}", describe(mapping));
    }

    /// One mapping no longer uses `key`: a copy nobody holds is dropped.
    fn release(&mut self, key: FileKey) {
        let Some(held) = self.copies.get_mut(&key) else { return };
        held.holders = held.holders.saturating_sub(1);
        if held.holders == 0 {
            let held = self.copies.remove(&key).expect("present");
            for copy in std::iter::once(&held.copy).chain(&held.debug) {
                // blazesym caches by path, and the descriptor number will be reused.
                let _ = self.user.evict(&blazesym::symbolize::evict::Elf::new(copy.path()).into());
                self.stats.copy_bytes -= copy.bytes;
            }
            // Room was made: files refused for lack of it may fit now.
            self.bad.retain(|_, kind| *kind != "over_budget");
        }
    }

    fn mark_bad(&mut self, key: FileKey, mapping: &FileMapping, kind: &'static str, reason: &str) {
        if self.bad.len() >= MAX_BAD_VERSIONS {
            self.bad.clear();
        }
        self.bad.insert(key, kind);
        *self.stats.files_bad.entry(kind.to_owned()).or_default() += 1;
        let example = format!("{}: ", describe(mapping));
        if self.stats.bad_examples.len() < MAX_BAD_EXAMPLES
            && !self.stats.bad_examples.iter().any(|e| e.starts_with(&example))
        {
            self.stats.bad_examples.push(example + reason);
        }
        log::debug!("{}: not named: {reason}", describe(mapping));
    }

    /// blazesym panicked on a copy: that file version is bad from now on.
    fn parser_panicked(&mut self, pid: u32, mapping: &FileMapping, key: FileKey, message: &str) {
        if !std::mem::replace(&mut self.panic_logged, true) {
            log::warn!(
                "process {pid}: naming {} failed (the ELF parser panicked: {message}); its addresses stay unnamed",
                describe(mapping)
            );
        }
        let holders: Vec<(u32, u64)> = self.held_by.iter().filter(|(_, &k)| k == key).map(|(&h, _)| h).collect();
        for h in holders {
            self.held_by.remove(&h);
            self.release(key);
        }
        self.mark_bad(key, mapping, "parser_panic", &format!("the ELF parser panicked: {message}"));
    }
}

/// Why a mapping's file was not opened.
enum OpenError {
    Io(std::io::Error),
    /// On FUSE: refused before anything is read.
    Fuse,
}

/// The file behind the mapping `start`-`end` of `pid`, through `map_files`: the inode that is
/// mapped, whatever its path names now. A regular file only, not on FUSE. Runs on a guarded
/// thread (the open itself may block on FUSE).
fn open_mapped_file(
    proc_root: &Path,
    pid: u32,
    start: u64,
    end: u64,
) -> Result<(FileKey, File, Option<u64>), OpenError> {
    let link = proc_root.join(pid.to_string()).join("map_files").join(format!("{start:x}-{end:x}"));
    // O_NONBLOCK: a FIFO or device there cannot block the open.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(link)
        .map_err(OpenError::Io)?;
    let meta = file.metadata().map_err(OpenError::Io)?;
    if !meta.file_type().is_file() {
        return Err(OpenError::Io(std::io::Error::other("not a regular file")));
    }
    if on_fuse(&file).map_err(OpenError::Io)? {
        return Err(OpenError::Fuse);
    }
    let mtime_ns = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
    let key = FileKey::File { dev: meta.dev(), inode: meta.ino(), size_bytes: meta.size(), mtime_ns };
    Ok((key, file, Some(meta.size())))
}

fn open_memory(proc_root: &Path, pid: u32) -> std::io::Result<File> {
    File::open(proc_root.join(pid.to_string()).join("mem"))
}

/// Names file offsets of a file: from its debug file's copy where that names them (it has the
/// symbols the file was stripped of), else from the file's own copy.
fn names_in_held(symbolizer: &Symbolizer, held: &Held, offsets: &[u64]) -> Result<Vec<Option<String>>, String> {
    let mut names = names_in_copy(symbolizer, &held.copy, Input::FileOffset(offsets))?;
    let Some(debug) = &held.debug else { return Ok(names) };
    // A debug file keeps the addresses of the file's segments but not their offsets.
    let (slots, vaddrs): (Vec<usize>, Vec<u64>) =
        offsets.iter().enumerate().filter_map(|(i, &o)| Some((i, held.copy.vaddr_of(o)?))).unzip();
    let better = names_in_copy(symbolizer, debug, Input::VirtOffset(&vaddrs))?;
    for (slot, name) in slots.into_iter().zip(better) {
        if name.is_some() {
            names[slot] = name;
        }
    }
    Ok(names)
}

/// Names addresses of a copy; a panic inside blazesym is caught and returned as its message.
fn names_in_copy(symbolizer: &Symbolizer, copy: &ElfCopy, input: Input<&[u64]>) -> Result<Vec<Option<String>>, String> {
    let mut elf = Elf::new(copy.path());
    // blazesym would look for debug files through paths the copy names: our own lookup
    // (`debug_file`) does, bounded.
    elf.debug_syms = false;
    let source = Source::Elf(elf);
    catch_unwind(AssertUnwindSafe(|| resolve(symbolizer, &source, input))).map_err(|payload| panic_message(&*payload))
}

#[derive(Debug, thiserror::Error)]
pub enum NameError {
    #[error("{0}")]
    Copy(#[from] CopyError),
    #[error("the ELF parser panicked: {0}")]
    Panicked(String),
}

/// Names `offsets` of the ELF file `src` (`size_bytes` long) as a mapped file's are named: through
/// a private copy of at most `max_copy_bytes`, with the parser's panics caught. The whole native
/// path from a file's bytes to names, for the fuzzers.
pub fn names_at_file_offsets(
    src: &File,
    size_bytes: u64,
    max_copy_bytes: u64,
    offsets: &[u64],
) -> Result<(Vec<Option<String>>, u64), NameError> {
    let copy = copy_symbol_sections(src, size_bytes, max_copy_bytes)?;
    let symbolizer = Symbolizer::builder().enable_code_info(false).enable_inlined_fns(false).build();
    let names = names_in_copy(&symbolizer, &copy, Input::FileOffset(offsets)).map_err(NameError::Panicked)?;
    Ok((names, copy.bytes))
}

fn describe(m: &FileMapping) -> String {
    match &m.what {
        // A path is the target's: its control characters are not written as they are.
        Mapped::File(path) => path.escape_debug().to_string(),
        Mapped::Vdso => "[vdso]".to_owned(),
    }
}

/// The text a panic was raised with.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

pub(super) fn resolve(symbolizer: &Symbolizer, source: &Source, input: Input<&[u64]>) -> Vec<Option<String>> {
    let count = match input {
        Input::AbsAddr(a) | Input::VirtOffset(a) | Input::FileOffset(a) => a.len(),
    };
    match symbolizer.symbolize(source, input) {
        Ok(symbols) => symbols
            .into_iter()
            .map(|s| match s {
                Symbolized::Sym(sym) => Some(sym.name.into_owned()),
                Symbolized::Unknown(_) => None,
            })
            .collect(),
        Err(e) => {
            log::debug!("blazesym {source:?}: {e}");
            vec![None; count]
        }
    }
}

#[cfg(test)]
mod tests;
