//! A perf-map file kept in memory and reloaded only when (dev, inode, size, mtime) change.
//!
//! Reading a map can be slow (a 200 MB map, a stalled file system), so it is split in two:
//! [`MapSource::load`] opens and reads, on whatever thread the caller chooses, under a memory
//! [`Reservation`] and a time limit; [`PerfMapFile::install`] swaps the result in where the
//! lookups happen. [`PerfMapFile::refresh`] does both in one call.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::index::{Limits, PerfMapIndex, ReadError};
use crate::pool::Reservation;
use crate::safe_open::{open_checked, Fingerprint};

/// Where a JVM's map is and how it may be read: cheap to clone onto a worker thread.
#[derive(Debug, Clone)]
pub struct MapSource {
    root: PathBuf,
    rel: PathBuf,
    owner: Identity,
    limits: Limits,
}

/// A freshly read version of a map.
#[derive(Debug)]
pub struct LoadedMap {
    pub index: PerfMapIndex,
    pub fingerprint: Fingerprint,
}

impl MapSource {
    /// Opens the map as its owner and, unless it is still the version `known`, reads it into a
    /// new index paid from `reservation`. `Ok(None)`: unchanged. Gives up after `timeout`.
    pub fn load(
        &self,
        known: Option<Fingerprint>,
        reservation: Reservation,
        timeout: Option<Duration>,
    ) -> Result<Option<LoadedMap>> {
        let started = Instant::now();
        let max_bytes = self.limits.max_file_bytes;
        let mut checked = open_checked(&self.root, &self.rel, self.owner, max_bytes)?;
        if known == Some(checked.fingerprint) {
            return Ok(None);
        }
        // One byte more than allowed tells a file that grew past the limit since it was checked.
        let mut bounded = (&mut checked.file).take(max_bytes + 1);
        let index =
            PerfMapIndex::read(&mut bounded, &self.limits, reservation, timeout.map(|t| started + t)).map_err(|e| {
                match e {
                    ReadError::Io(e) => Error::io(&checked.path, e),
                    ReadError::TimedOut => Error::ReadTimeout {
                        path: checked.path.clone(),
                        timeout_ms: started.elapsed().as_millis() as u64,
                    },
                }
            })?;
        if bounded.limit() == 0 {
            return Err(Error::TooLarge {
                path: checked.path.clone(),
                size_bytes: max_bytes + 1,
                limit_bytes: max_bytes,
            });
        }
        Ok(Some(LoadedMap { index, fingerprint: checked.fingerprint }))
    }

    pub fn path(&self) -> PathBuf {
        self.root.join(&self.rel)
    }
}

#[derive(Debug)]
pub struct PerfMapFile {
    source: MapSource,
    fingerprint: Option<Fingerprint>,
    index: PerfMapIndex,
}

impl PerfMapFile {
    /// The file `rel` under `root`, which must be owned by `owner.uid` and is opened as
    /// `owner` (see [`crate::run_as`]). Nothing is read until [`Self::refresh`].
    pub fn new(root: impl Into<PathBuf>, rel: impl Into<PathBuf>, owner: Identity, limits: Limits) -> Self {
        PerfMapFile {
            source: MapSource { root: root.into(), rel: rel.into(), owner, limits },
            fingerprint: None,
            index: PerfMapIndex::default(),
        }
    }

    /// HotSpot's map of a JVM as seen from the host: `/proc/<pid>/root/tmp/perf-<nspid>.map`.
    pub fn for_jvm(proc_dir: &Path, nspid: u32, owner: Identity, limits: Limits) -> Self {
        Self::new(proc_dir.join("root"), format!("tmp/perf-{nspid}.map"), owner, limits)
    }

    /// Reloads the map if the file changed, here and now, with no memory bound. `Ok(true)`
    /// when a new version was loaded. On error the previous index stays in use.
    pub fn refresh(&mut self) -> Result<bool> {
        match self.source.load(self.fingerprint, Reservation::unlimited(), None)? {
            Some(loaded) => {
                self.install(loaded);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    pub fn source(&self) -> &MapSource {
        &self.source
    }

    /// The version loaded last, if any.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        self.fingerprint
    }

    pub fn install(&mut self, loaded: LoadedMap) {
        self.index = loaded.index;
        self.fingerprint = Some(loaded.fingerprint);
    }

    /// Drops the index (its memory goes back to its pool); the next load reads the file again.
    pub fn forget(&mut self) {
        self.index = PerfMapIndex::default();
        self.fingerprint = None;
    }

    pub fn index(&self) -> &PerfMapIndex {
        &self.index
    }

    pub fn path(&self) -> PathBuf {
        self.source.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    #[test]
    fn reloads_only_when_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        std::fs::create_dir(dir.path().join("root/tmp")).unwrap();
        let map = dir.path().join("root/tmp/perf-7.map");
        std::fs::write(&map, "0x100 0x10 void a.B.c()\n").unwrap();
        let me = Identity::user(nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
        let mut file = PerfMapFile::for_jvm(dir.path(), 7, me, Limits::default());
        assert!(file.refresh().unwrap());
        assert!(!file.refresh().unwrap());
        assert_eq!(file.index().lookup(0x105).unwrap().name, "void a.B.c()");

        // Same size, new content: only the mtime tells.
        std::fs::write(&map, "0x100 0x10 void a.B.d()\n").unwrap();
        let later = SystemTime::now() + Duration::from_secs(5);
        std::fs::File::options().write(true).open(&map).unwrap().set_modified(later).unwrap();
        assert!(file.refresh().unwrap());
        assert_eq!(file.index().lookup(0x105).unwrap().name, "void a.B.d()");

        // A replaced file (new inode) is reloaded too; a failed refresh keeps the old index.
        std::fs::remove_file(&map).unwrap();
        assert!(file.refresh().is_err());
        assert_eq!(file.index().lookup(0x105).unwrap().name, "void a.B.d()");
        std::fs::write(&map, "0x200 0x10 void a.B.e()\n").unwrap();
        assert!(file.refresh().unwrap());
        assert_eq!(file.index().lookup(0x205).unwrap().name, "void a.B.e()");
    }

    #[test]
    fn a_load_is_paid_from_its_pool_and_gives_the_memory_back() {
        use crate::pool::MemoryPool;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("root/tmp")).unwrap();
        let text: String =
            (0..20_000u64).map(|i| format!("{:#x} 0x40 void com.acme.K.m{i}()\n", 0x10_0000 + i * 0x40)).collect();
        std::fs::write(dir.path().join("root/tmp/perf-7.map"), &text).unwrap();
        let me = Identity::user(nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
        let mut file = PerfMapFile::for_jvm(dir.path(), 7, me, Limits::default());
        let pool = MemoryPool::new(200_000);
        let loaded = file.source().load(None, Reservation::new(Arc::clone(&pool), u64::MAX), None).unwrap().unwrap();
        let index = &loaded.index;
        assert!(index.len() > 1000 && index.not_indexed() > 0, "{} indexed, {} not", index.len(), index.not_indexed());
        assert_eq!(index.len() as u64 + index.not_indexed(), 20_000);
        assert_eq!(pool.used_bytes(), index.bytes(), "the pool pays exactly what the index holds");
        assert_eq!(loaded.fingerprint.size_bytes, text.len() as u64);
        file.install(loaded);
        assert!(file.source().load(file.fingerprint(), Reservation::capped(1), None).unwrap().is_none(), "unchanged");
        file.forget();
        assert_eq!(pool.used_bytes(), 0, "a forgotten index gives its memory back");
        assert!(file.index().is_empty());
        assert!(file.refresh().unwrap(), "forgotten: read again");
        assert_eq!(file.index().len(), 20_000);
        let late = file.source().load(None, Reservation::unlimited(), Some(Duration::ZERO)).unwrap_err();
        assert!(matches!(late, Error::ReadTimeout { .. }), "{late}");
    }
}
