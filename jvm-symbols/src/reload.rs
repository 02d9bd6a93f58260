//! A perf-map file kept in memory and reloaded only when (dev, inode, size, mtime) change.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::index::{Limits, PerfMapIndex};
use crate::safe_open::{open_checked, read_bounded, Fingerprint};

#[derive(Debug)]
pub struct PerfMapFile {
    root: PathBuf,
    rel: PathBuf,
    owner_uid: u32,
    limits: Limits,
    fingerprint: Option<Fingerprint>,
    index: PerfMapIndex,
}

impl PerfMapFile {
    /// The file `rel` under `root`, which must be owned by `owner_uid`. Nothing is read
    /// until [`Self::refresh`].
    pub fn new(root: impl Into<PathBuf>, rel: impl Into<PathBuf>, owner_uid: u32, limits: Limits) -> Self {
        PerfMapFile {
            root: root.into(),
            rel: rel.into(),
            owner_uid,
            limits,
            fingerprint: None,
            index: PerfMapIndex::default(),
        }
    }

    /// HotSpot's map of a JVM as seen from the host: `/proc/<pid>/root/tmp/perf-<nspid>.map`.
    pub fn for_jvm(proc_dir: &Path, nspid: u32, owner_uid: u32, limits: Limits) -> Self {
        Self::new(proc_dir.join("root"), format!("tmp/perf-{nspid}.map"), owner_uid, limits)
    }

    /// Reloads the map if the file changed. `Ok(true)` when a new version was loaded.
    /// On error the previous index stays in use.
    pub fn refresh(&mut self) -> Result<bool> {
        let mut checked = open_checked(&self.root, &self.rel, self.owner_uid, self.limits.max_file_bytes)?;
        if self.fingerprint == Some(checked.fingerprint) {
            return Ok(false);
        }
        let data = read_bounded(&mut checked, self.limits.max_file_bytes)?;
        self.index = PerfMapIndex::parse(&data, &self.limits);
        self.fingerprint = Some(checked.fingerprint);
        Ok(true)
    }

    pub fn index(&self) -> &PerfMapIndex {
        &self.index
    }

    pub fn path(&self) -> PathBuf {
        self.root.join(&self.rel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn reloads_only_when_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        std::fs::create_dir(dir.path().join("root/tmp")).unwrap();
        let map = dir.path().join("root/tmp/perf-7.map");
        std::fs::write(&map, "0x100 0x10 void a.B.c()\n").unwrap();
        let uid = nix::unistd::geteuid().as_raw();
        let mut file = PerfMapFile::for_jvm(dir.path(), 7, uid, Limits::default());
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
}
