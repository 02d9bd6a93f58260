//! A JVM's libjvm.so, read for the symbols of its introspection tables. The file is the target's:
//! its open runs on the guarded file-reading thread, and its symbol and string tables (5 MB on
//! JDK 25, not mapped by the JVM, so on a JVM's first run read from disk) are read in chunks
//! of their own deadline each ([`ChunkedRead`]). One job for the whole file once ran past its
//! deadline on a disk throttled to 1 MB/s, and the JVM's Java stacks were then cut at its
//! first compiled method for the whole run.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jvm_symbols::hotspot::{locate_libjvm, open_libjvm, table_symbols_from_elf, HotspotError, TableSymbols};
use object::ReadCache;

use crate::target_read::stall_guard::{self, GuardedSource};
use crate::target_read::ChunkedRead;
use crate::urgency::urgent;

/// All reads of one libjvm.so's tables: its 5 MB at 0.5 MB/s. A target's file served just within
/// each chunk's deadline (a FUSE daemon's) holds the symbols worker no longer than this.
const TABLES_READ_BUDGET: Duration = Duration::from_secs(10);

/// The table symbols of the libjvm.so `pid` maps (under `proc_root`), at their addresses in it.
/// A read the target blocks is [`HotspotError::Blocked`].
pub fn table_symbols(proc_root: &Path, pid: u32) -> Result<TableSymbols, HotspotError> {
    let guard = stall_guard::file_reads();
    let root = proc_root.to_owned();
    let opened = guard.run(move || {
        urgent(|| {
            let (lib, path) = locate_libjvm(&root, pid)?;
            let file = open_libjvm(&path)?;
            let len_bytes = file.metadata().map_err(|source| HotspotError::Io { path: path.clone(), source })?.len();
            Ok::<_, HotspotError>((lib, path, file, len_bytes))
        })
    });
    let (lib, path, file, len_bytes) = opened.map_err(|stall| HotspotError::Blocked(stall.to_string()))??;
    let source = GuardedSource::new(file, Arc::clone(guard));
    let data = ReadCache::new(ChunkedRead::new(source, len_bytes).within(TABLES_READ_BUDGET));
    let symbols = urgent(|| table_symbols_from_elf(&data, lib.start, &path));
    // The ELF parser reports a failed read as a malformed file: the read's own error says more.
    match data.into_inner().take_failure() {
        Some(read) if symbols.is_err() => Err(HotspotError::Blocked(format!("{}: {read}", path.display()))),
        _ => symbols,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JDK17_LIBJVM: &str = "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so";

    /// A fake `/proc/<pid>` whose maps name libjvm.so at `start` and whose `map_files/` entry
    /// reaches the installed JDK 17's.
    fn fake_proc(pid: u32, start: u64) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(pid.to_string());
        std::fs::create_dir_all(dir.join("map_files")).unwrap();
        let end = start + 0x251000;
        let maps = format!("{start:x}-{end:x} r--p 00000000 fe:00 315160 {JDK17_LIBJVM}\n");
        std::fs::write(dir.join("maps"), maps).unwrap();
        std::os::unix::fs::symlink(JDK17_LIBJVM, dir.join("map_files").join(format!("{start:x}-{end:x}"))).unwrap();
        root
    }

    /// Read chunk by chunk through the guard, the symbols are those the library finds reading
    /// the file directly.
    #[test]
    fn the_tables_read_in_guarded_chunks_are_the_librarys_own() {
        let (pid, start) = (4242, 0x7f1b_2460_0000);
        let root = fake_proc(pid, start);
        let chunked = table_symbols(root.path(), pid).expect("the JDK 17 the project needs is installed");
        let (_, direct) = jvm_symbols::hotspot::locate_tables(root.path(), pid).unwrap();
        assert_eq!(chunked.addrs, direct.addrs);
        assert!(chunked.addrs.values().all(|&a| a >= start), "{:?}", chunked.addrs);
    }

    #[test]
    fn a_process_without_libjvm_is_said_to_be_so() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("7")).unwrap();
        std::fs::write(root.path().join("7/maps"), "").unwrap();
        assert!(matches!(table_symbols(root.path(), 7), Err(HotspotError::NoLibjvm { pid: 7 })));
    }
}
