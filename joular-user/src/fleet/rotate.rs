//! Rotation of the per-interval profile files of serve mode (`--profile-dir`), which a
//! continuous-profiling backend (Pyroscope, Parca) ingests: names, atomic placement, retention.
//! What goes into a file is the writer's business (`output`).

use std::fs;
use std::path::{Path, PathBuf};

use super::FleetError;
use crate::safe_write::{Modes, OutDir};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProfileFormat {
    /// gzip-compressed pprof protobuf.
    Pprof,
    /// Folded stacks (`root;...;leaf value`).
    Folded,
}

impl ProfileFormat {
    const ALL: [ProfileFormat; 2] = [ProfileFormat::Pprof, ProfileFormat::Folded];

    pub fn extension(self) -> &'static str {
        match self {
            ProfileFormat::Pprof => "pprof.gz",
            ProfileFormat::Folded => "folded",
        }
    }
}

/// What is kept in the directory, oldest removed first. The file just written is always kept, even
/// alone over `max_bytes`, since it is the one a backend has not ingested yet.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// Newest files kept per format (one per interval).
    pub keep_intervals: usize,
    /// Bytes all of this host's profile files may take together.
    pub max_bytes: u64,
}

/// Names files `<dir>/<end_epoch_ms>-<host>.pprof.gz` / `.folded` and removes old ones. Only files of
/// that form and of this host are ever removed, so a directory shared by hosts (or holding anything
/// else) is safe. The directory is held open from the start ([`OutDir`]): files are created, renamed
/// and removed in it by name, never through a path another user could redirect.
#[derive(Debug)]
pub struct ProfileRotator {
    dir: OutDir,
    host: String,
    retention: Retention,
}

struct ProfileFile {
    name: std::ffi::OsString,
    epoch_ms: u64,
    format: ProfileFormat,
    bytes: u64,
}

impl ProfileRotator {
    /// Creates `dir` if needed. `host` is made file-name safe (anything but `[A-Za-z0-9._]` becomes `_`,
    /// so the `-` after the time stays the only separator).
    pub fn new(dir: impl Into<PathBuf>, host: &str, retention: Retention, modes: Modes) -> Result<Self, FleetError> {
        let path = dir.into();
        let dir = OutDir::create_all(&path, modes).map_err(|source| FleetError::ProfileDir { path, source })?;
        let host: String =
            host.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' { c } else { '_' }).collect();
        let host = if host.is_empty() { "unknown".to_owned() } else { host };
        Ok(Self { dir, host, retention })
    }

    fn name_for(&self, end_epoch_ms: u64, format: ProfileFormat) -> String {
        format!("{end_epoch_ms}-{}.{}", self.host, format.extension())
    }

    pub fn path_for(&self, end_epoch_ms: u64, format: ProfileFormat) -> PathBuf {
        self.dir.join(self.name_for(end_epoch_ms, format))
    }

    /// Writes one interval's profile, then applies the retention. `write` gets the directory and the
    /// file name, and writes it whole through [`OutDir::replace`] (a hidden temporary file renamed
    /// into place, so a backend watching the directory never reads half a file). Returns the final
    /// path.
    pub fn write<E>(
        &self,
        end_epoch_ms: u64,
        format: ProfileFormat,
        write: impl FnOnce(&OutDir, &str) -> Result<(), E>,
    ) -> Result<PathBuf, FleetError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let name = self.name_for(end_epoch_ms, format);
        let path = self.dir.join(&name);
        if let Err(e) = write(&self.dir, &name) {
            return Err(FleetError::ProfileWrite { path, source: e.into() });
        }
        self.prune(&name)?;
        Ok(path)
    }

    fn prune(&self, just_written: &str) -> Result<(), FleetError> {
        let dir_error = |source| FleetError::ProfileDir { path: self.dir.path().to_owned(), source };
        let mut files = Vec::new();
        for entry in self.dir.entries().map_err(dir_error)? {
            let Some((epoch_ms, format)) = self.parse_name(&entry.name.to_string_lossy()) else {
                continue;
            };
            if entry.is_file {
                files.push(ProfileFile { name: entry.name, epoch_ms, format, bytes: entry.size_bytes });
            }
        }
        files.sort_by(|a, b| b.epoch_ms.cmp(&a.epoch_ms).then_with(|| a.name.cmp(&b.name)));

        let mut kept_bytes = 0u64;
        let mut kept_per_format = [0usize; 2];
        let mut over_budget = false;
        for file in files {
            let slot = ProfileFormat::ALL.iter().position(|f| *f == file.format).unwrap_or(0);
            let fits = kept_bytes.saturating_add(file.bytes) <= self.retention.max_bytes;
            // Once one file exceeds the byte budget every older one goes too: oldest first.
            over_budget |= !fits;
            let keep =
                file.name == just_written || (!over_budget && kept_per_format[slot] < self.retention.keep_intervals);
            if keep {
                kept_bytes = kept_bytes.saturating_add(file.bytes);
                kept_per_format[slot] += 1;
            } else {
                self.dir.remove(&file.name).map_err(dir_error)?;
            }
        }
        Ok(())
    }

    /// `(epoch_ms, format)` of a file this rotator wrote (same host), `None` for anything else.
    fn parse_name(&self, name: &str) -> Option<(u64, ProfileFormat)> {
        ProfileFormat::ALL.into_iter().find_map(|format| {
            let stem = name.strip_suffix(format.extension())?.strip_suffix('.')?;
            let (epoch, host) = stem.split_once('-')?;
            let digits = !epoch.is_empty() && epoch.bytes().all(|b| b.is_ascii_digit());
            if !digits || host != self.host {
                return None;
            }
            Some((epoch.parse().ok()?, format))
        })
    }
}

/// The host name from `<proc_root>/sys/kernel/hostname` (the UTS namespace of the reader: in a pod
/// without `hostNetwork` that is the pod name, so pass the node name instead).
pub fn hostname(proc_root: &Path) -> Option<String> {
    let name = fs::read_to_string(proc_root.join("sys/kernel/hostname")).ok()?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    fn rotator(dir: &Path, keep_intervals: usize, max_bytes: u64) -> ProfileRotator {
        ProfileRotator::new(dir, "node-1.example", Retention { keep_intervals, max_bytes }, Modes::for_caller())
            .unwrap()
    }

    fn write_all(dir: &OutDir, name: &str, bytes: &[u8]) -> io::Result<()> {
        let mut file = dir.replace(name)?;
        io::Write::write_all(&mut file, bytes)?;
        file.commit()
    }

    fn write_bytes(r: &ProfileRotator, epoch_ms: u64, format: ProfileFormat, bytes: usize) -> PathBuf {
        r.write(epoch_ms, format, |d: &OutDir, name: &str| write_all(d, name, &vec![b'x'; bytes])).unwrap()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn names_carry_time_host_and_format_and_the_host_is_made_safe() {
        let dir = tempfile::tempdir().unwrap();
        let r = rotator(&dir.path().join("profiles"), 5, 1 << 20);
        let pprof = write_bytes(&r, 1_700_000_000_123, ProfileFormat::Pprof, 3);
        assert_eq!(pprof, dir.path().join("profiles/1700000000123-node_1.example.pprof.gz"));
        assert_eq!(fs::read(&pprof).unwrap(), b"xxx");
        let folded = r.path_for(42, ProfileFormat::Folded);
        assert_eq!(folded.file_name().unwrap(), "42-node_1.example.folded");
        let odd = ProfileRotator::new(
            dir.path(),
            "a/b c",
            Retention { keep_intervals: 1, max_bytes: 1 },
            Modes::for_caller(),
        )
        .unwrap();
        assert_eq!(odd.path_for(1, ProfileFormat::Pprof).file_name().unwrap(), "1-a_b_c.pprof.gz");
        let empty =
            ProfileRotator::new(dir.path(), "", Retention { keep_intervals: 1, max_bytes: 1 }, Modes::for_caller())
                .unwrap();
        assert_eq!(empty.path_for(1, ProfileFormat::Folded).file_name().unwrap(), "1-unknown.folded");
    }

    #[test]
    fn keeps_the_newest_intervals_of_each_format() {
        let dir = tempfile::tempdir().unwrap();
        let r = rotator(dir.path(), 2, 1 << 20);
        for t in [1000, 2000, 3000, 4000] {
            write_bytes(&r, t, ProfileFormat::Pprof, 10);
            write_bytes(&r, t, ProfileFormat::Folded, 10);
        }
        assert_eq!(
            names(dir.path()),
            [
                "3000-node_1.example.folded",
                "3000-node_1.example.pprof.gz",
                "4000-node_1.example.folded",
                "4000-node_1.example.pprof.gz"
            ]
        );
    }

    #[test]
    fn the_byte_budget_removes_oldest_first_but_never_the_file_just_written() {
        let dir = tempfile::tempdir().unwrap();
        let r = rotator(dir.path(), 100, 250);
        for t in 1..=4 {
            write_bytes(&r, t * 1000, ProfileFormat::Folded, 100);
        }
        assert_eq!(names(dir.path()), ["3000-node_1.example.folded", "4000-node_1.example.folded"]);
        write_bytes(&r, 5000, ProfileFormat::Pprof, 400);
        assert_eq!(names(dir.path()), ["5000-node_1.example.pprof.gz"]);
    }

    #[test]
    fn files_of_other_hosts_and_other_names_are_never_removed() {
        let dir = tempfile::tempdir().unwrap();
        let foreign = ["1-other.pprof.gz", "1-node_1.example.pprof", "x-node_1.example.folded", "notes.txt"];
        for name in foreign {
            fs::write(dir.path().join(name), b"keep").unwrap();
        }
        let r = rotator(dir.path(), 1, 1 << 20);
        write_bytes(&r, 5, ProfileFormat::Folded, 1);
        write_bytes(&r, 6, ProfileFormat::Folded, 1);
        let mut want: Vec<String> = foreign.iter().map(|s| s.to_string()).collect();
        want.push("6-node_1.example.folded".to_owned());
        want.sort();
        assert_eq!(names(dir.path()), want);
    }

    #[test]
    fn a_failing_writer_leaves_no_file_and_reports_the_final_path() {
        let dir = tempfile::tempdir().unwrap();
        let r = rotator(dir.path(), 3, 1 << 20);
        let err = r
            .write(7, ProfileFormat::Pprof, |d: &OutDir, name: &str| {
                let mut file = d.replace(name)?;
                io::Write::write_all(&mut file, b"half")?;
                Err(io::Error::other("disk full"))
            })
            .unwrap_err();
        match err {
            FleetError::ProfileWrite { path, source } => {
                assert_eq!(path, r.path_for(7, ProfileFormat::Pprof));
                assert!(source.to_string().contains("disk full"));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
    }

    #[test]
    fn reads_the_host_name_under_a_proc_root() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(hostname(root.path()), None);
        fs::create_dir_all(root.path().join("sys/kernel")).unwrap();
        fs::write(root.path().join("sys/kernel/hostname"), "worker-7\n").unwrap();
        assert_eq!(hostname(root.path()).as_deref(), Some("worker-7"));
    }
}
