//! Writing results as root into directories other users may write to (a `/tmp` working
//! directory, a shared directory, a user's home): every directory and file is created through
//! a directory descriptor, never by path, so a planted symlink or a directory swapped during
//! the run cannot send a write anywhere else.
//!
//! - [`OutDir`] is an open directory. Paths given by the user are walked component by
//!   component ([`walk`]): only symlinks owned by root or the caller are followed, and an
//!   existing component in a sticky world-writable directory must be owned by root or the
//!   caller. Below that, nothing is followed: `O_NOFOLLOW` everywhere, subdirectories are
//!   created with `mkdirat` and opened with `O_DIRECTORY|O_NOFOLLOW`.
//! - A directory written to all run long but not held open (a host run sees thousands of
//!   processes, each with its own) is reopened by name through its parent's descriptor when
//!   written to, and must still be the directory that was created ([`OutDir::reopen_subdir`]).
//! - Whole files are written to a fresh temporary file (`O_CREAT|O_EXCL|O_NOFOLLOW`) and
//!   renamed over their name inside the same directory ([`AtomicFile`]): an existing file,
//!   symlink or hard link at that name is replaced, never opened, and a reader never sees half
//!   a file.
//! - Appends (`evolution/`) open with `O_NOFOLLOW` and write only to a regular file of the
//!   caller's with a single link, so a hard link to someone else's file is refused.
//! - Modes: 0600 files and 0700 directories as root (as `perf` does: results name every
//!   process profiled), the umask's 0666/0777 otherwise; `--output-mode` sets them exactly.

mod walk;

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fchmod, fstatat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

pub use walk::PathError;
use walk::{check_name, file_type, make_dir, open_path, walk, Last, Purpose};

/// Permissions of what is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modes {
    file: u32,
    /// Set exactly (past the umask): `--output-mode`.
    exact: bool,
}

impl Modes {
    /// 0600/0700 when running as root: results name every process profiled, its threads and
    /// methods, which other users need not see (perf writes `perf.data` 0600 for the same
    /// reason). Otherwise 0666/0777 less the umask, as any tool.
    pub fn for_caller() -> Self {
        let file = if nix::unistd::geteuid().is_root() { 0o600 } else { 0o666 };
        Self { file, exact: false }
    }

    /// `--output-mode`: files get exactly `file_mode`, directories the same with `x` wherever
    /// `r` is (0644 gives 0755 directories, 0640 gives 0750).
    pub fn exact(file_mode: u32) -> Self {
        Self { file: file_mode & 0o777, exact: true }
    }

    /// [`Modes::exact`] when a mode was given, else [`Modes::for_caller`].
    pub fn from_flag(output_mode: Option<u32>) -> Self {
        output_mode.map_or_else(Self::for_caller, Self::exact)
    }

    pub fn file_mode(self) -> u32 {
        self.file
    }

    pub fn dir_mode(self) -> u32 {
        self.file | ((self.file & 0o444) >> 2)
    }

    pub fn is_exact(self) -> bool {
        self.exact
    }
}

/// Parses `--output-mode`: octal (`0644`, `644`, `0o644`), permission bits only, and the owner
/// must keep read and write (files are rewritten and appended to during the run).
pub fn parse_output_mode(text: &str) -> Result<u32, String> {
    let digits = text.strip_prefix("0o").unwrap_or(text);
    let mode = u32::from_str_radix(digits, 8).map_err(|_| format!("{text:?} is not an octal mode such as 0644"))?;
    if mode > 0o777 {
        return Err(format!("{text} has bits beyond 0777 (no setuid, setgid or sticky bits on results)"));
    }
    if mode & 0o600 != 0o600 {
        return Err(format!("{text} must let the owner read and write (at least 0600)"));
    }
    Ok(mode)
}

/// Start-up check of a directory flag (`--output`, `--profile-dir`), run before anything is
/// loaded: the message names the flag, the component at fault, why, and what to do.
pub fn check_dir(flag: &str, path: &Path) -> Result<(), String> {
    let fix = format!("remove it, or choose another {flag} in a directory of your own");
    check_dir_or(flag, path, &fix)
}

/// [`check_dir`] with the advice given when the path is refused.
pub fn check_dir_or(what: &str, path: &Path, fix: &str) -> Result<(), String> {
    walk(path, Last::Dir, None, Purpose::Write).map(drop).map_err(|e| message(what, path, &e, fix))
}

/// Start-up check of a file flag (`--json`): its directory must exist.
pub fn check_file(flag: &str, path: &Path) -> Result<(), String> {
    let fix = format!("remove it, or choose another {flag} in a directory of your own");
    walk(path, Last::File, None, Purpose::Write).map(drop).map_err(|e| message(flag, path, &e, &fix))
}

fn message(what: &str, path: &Path, e: &PathError, fix: &str) -> String {
    let fix = match e {
        PathError::Refused { .. } => format!(": {fix}"),
        PathError::Missing { .. } => ": create it first".to_owned(),
        _ => String::new(),
    };
    format!("{what} {}: {e}{fix}", path.display())
}

/// Which directory an [`OutDir`] is (device and inode), so that one reopened by name later can
/// be checked to be the same directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirId {
    dev: u64,
    ino: u64,
}

/// An open directory that files are created in. Dropping it closes the descriptor.
#[derive(Debug)]
pub struct OutDir {
    /// `O_PATH` descriptor: enough for every `*at` call, without read permission.
    fd: OwnedFd,
    path: PathBuf,
    modes: Modes,
}

/// One entry of [`OutDir::entries`], as `lstat` sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: OsString,
    /// A regular file (symlinks and everything else are not).
    pub is_file: bool,
    pub size_bytes: u64,
}

impl OutDir {
    /// Opens the directory at `path`, creating what is missing (see the module doc for the
    /// rules on existing components).
    pub fn create_all(path: &Path, modes: Modes) -> io::Result<Self> {
        let walked = walk(path, Last::Dir, Some(modes), Purpose::Write)?;
        Ok(Self { fd: walked.dir, path: path.to_owned(), modes })
    }

    /// Opens an existing directory to write in, with the same rules.
    pub fn open(path: &Path, modes: Modes) -> io::Result<Self> {
        Self::open_for(path, modes, Purpose::Write)
    }

    /// Opens an existing directory to read from (`report`'s input): another user's directory
    /// in a sticky one is fine, a symlink of theirs on the way still is not. What is written
    /// into it later was checked at start-up as a place to write.
    pub fn open_to_read(path: &Path, modes: Modes) -> io::Result<Self> {
        Self::open_for(path, modes, Purpose::Read)
    }

    fn open_for(path: &Path, modes: Modes, purpose: Purpose) -> io::Result<Self> {
        let walked = walk(path, Last::Dir, None, purpose)?;
        if !walked.complete {
            return Err(PathError::Missing { component: path.to_owned() }.into());
        }
        Ok(Self { fd: walked.dir, path: path.to_owned(), modes })
    }

    /// The path it was opened by, for messages: after a rename it is where the directory
    /// was, which is still where it is written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }

    pub fn modes(&self) -> Modes {
        self.modes
    }

    /// Another handle on the same directory.
    pub fn try_clone(&self) -> io::Result<OutDir> {
        Ok(OutDir { fd: self.fd.try_clone()?, path: self.path.clone(), modes: self.modes })
    }

    /// The subdirectory `name`, created if missing; a symlink (or anything but a directory)
    /// there is refused.
    pub fn subdir(&self, name: &str) -> io::Result<OutDir> {
        check_name(name)?;
        make_dir(&self.fd, OsStr::new(name), self.modes)?;
        self.open_subdir(name)
    }

    /// A new subdirectory `name` that is ours from the moment it has its name: made and opened
    /// under a random hidden name, then renamed into place. A directory made as `name` and then
    /// opened could be swapped for a symlink between the two steps by anyone who may write
    /// here; renamed away later, ours is still the directory the run writes into. A name
    /// taken meanwhile is opened as [`OutDir::subdir`] does.
    pub fn new_subdir(&self, name: &str) -> io::Result<OutDir> {
        check_name(name)?;
        let at = Some(self.fd.as_raw_fd());
        let mode = Mode::from_bits_truncate(self.modes.dir_mode());
        for _ in 0..8 {
            let tmp = format!(".joular-{}-{:016x}.dir", std::process::id(), random_u64());
            match nix::sys::stat::mkdirat(at, tmp.as_str(), mode) {
                Ok(()) => {}
                Err(nix::errno::Errno::EEXIST) => continue,
                Err(e) => return Err(e.into()),
            }
            // Swapped before it was opened: leave what is there and take another name. Opened
            // for reading, not O_PATH, so that its mode can be set exactly (umask).
            let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
            let Ok(raw) = openat(at, tmp.as_str(), flags, Mode::empty()) else { continue };
            // SAFETY: the kernel just returned this descriptor and nothing else owns it.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            if self.modes.is_exact() {
                fchmod(fd.as_raw_fd(), mode)?;
            }
            let placed = nix::fcntl::renameat2(at, tmp.as_str(), at, name, nix::fcntl::RenameFlags::RENAME_NOREPLACE);
            if placed.is_err() {
                let _ = unlinkat(at, tmp.as_str(), UnlinkatFlags::RemoveDir);
            }
            return match placed {
                Ok(()) => Ok(OutDir { fd, path: self.path.join(name), modes: self.modes }),
                Err(nix::errno::Errno::EEXIST) => self.subdir(name),
                Err(e) => Err(e.into()),
            };
        }
        Err(io::Error::other(format!(
            "{}: another process kept taking the directories made for {name}",
            self.path.display()
        )))
    }

    /// [`OutDir::subdir`] for each component of `rel` in turn (`all/runtime/methods`).
    pub fn create_subdirs(&self, rel: &str) -> io::Result<OutDir> {
        let mut names = rel.split('/').filter(|n| !n.is_empty());
        let first = names.next().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty directory name"))?;
        let mut dir = self.subdir(first)?;
        for name in names {
            dir = dir.subdir(name)?;
        }
        Ok(dir)
    }

    /// An existing directory below this one (`rel` may hold `/`), following no symlink.
    pub fn open_subdir(&self, rel: &str) -> io::Result<OutDir> {
        let mut fd = None;
        let mut so_far = String::new();
        for name in rel.split('/').filter(|n| !n.is_empty()) {
            check_name(name)?;
            if !so_far.is_empty() {
                so_far.push('/');
            }
            so_far.push_str(name);
            let parent = fd.as_ref().unwrap_or(&self.fd);
            fd = Some(
                open_path(parent, OsStr::new(name), OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW)
                    .map_err(|e| self.refusal(&so_far, e))?,
            );
        }
        let fd = fd.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty directory name"))?;
        Ok(OutDir { fd, path: self.path.join(rel), modes: self.modes })
    }

    /// The directory's owner: one found in place in a directory others may write to is only
    /// written into if it is the caller's.
    pub fn owner_uid(&self) -> io::Result<u32> {
        Ok(self.owner_and_mode()?.0)
    }

    /// The directory's owner and mode bits (a cache trusts only a directory of its own).
    pub fn owner_and_mode(&self) -> io::Result<(u32, u32)> {
        let st = walk::stat(&self.fd)?;
        Ok((st.st_uid, st.st_mode))
    }

    /// Which directory this is ([`OutDir::reopen_subdir`]).
    pub fn id(&self) -> io::Result<DirId> {
        let st = walk::stat(&self.fd)?;
        Ok(DirId { dev: st.st_dev, ino: st.st_ino })
    }

    /// The subdirectory `name` opened again ([`OutDir::open_subdir`]), which must still be the
    /// directory `id` was taken from. A host run sees thousands of processes and cannot hold a
    /// descriptor on each one's directory; reopened by name, a directory renamed away and
    /// replaced by another (a symlink is refused anyway) would otherwise receive our files.
    pub fn reopen_subdir(&self, name: &str, id: DirId) -> io::Result<OutDir> {
        let dir = self.open_subdir(name)?;
        if dir.id()? != id {
            let reason = "is no longer the directory created for this run (moved away and replaced): nothing more is written there".into();
            return Err(PathError::Refused { component: dir.path, reason }.into());
        }
        Ok(dir)
    }

    /// Starts writing `name` anew: bytes go to a fresh temporary file of this directory, which
    /// [`AtomicFile::commit`] renames over `name`.
    pub fn replace(&self, name: &str) -> io::Result<AtomicFile<'_>> {
        check_name(name)?;
        let (file, tmp) = self.create_temp()?;
        Ok(AtomicFile { dir: self, file, tmp, name: OsString::from(name), committed: false })
    }

    /// A new, empty file at `name` that is in place at once and written as it goes (`--json`):
    /// whatever was at `name` is replaced, never opened.
    pub fn create_stream(&self, name: &OsStr) -> io::Result<File> {
        let (file, tmp) = self.create_temp()?;
        if let Err(e) = renameat(Some(self.fd.as_raw_fd()), tmp.as_os_str(), Some(self.fd.as_raw_fd()), name) {
            let _ = unlinkat(Some(self.fd.as_raw_fd()), tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
            return Err(e.into());
        }
        Ok(file)
    }

    /// Opens `name` for appending, creating it if missing. An existing `name` must be a regular
    /// file of the caller's with one link: never a symlink, a FIFO, or a hard link to a file
    /// elsewhere.
    pub fn append(&self, name: &str) -> io::Result<File> {
        self.open_own(name, OFlag::O_APPEND)
    }

    /// Writes `bytes` as the whole content of `name`, in place: a file rewritten every cycle
    /// (JoularJX's runtime files) keeps its inode. Replacing it each time, as [`OutDir::replace`]
    /// does, made a new inode per write; on ext4 the churn of recently deleted inodes slows every
    /// later file creation and each rename over a file forces its data to disk. The bytes go
    /// from offset 0 and the file is then cut to their length (never truncated to empty first,
    /// which would also force a flush), so a reader may briefly see a mix of old and new rows,
    /// as with JoularJX, which rewrites these files in place too. An existing `name` must be a
    /// regular file of ours with one link ([`OutDir::append`]'s rule); anything else there is
    /// replaced instead, never written through.
    pub fn overwrite(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let mut file = match self.open_own(name, OFlag::empty()) {
            Ok(file) => file,
            Err(e) if e.get_ref().is_some_and(|inner| inner.is::<PathError>()) => {
                let mut file = self.replace(name)?;
                file.write_all(bytes)?;
                return file.commit();
            }
            Err(e) => return Err(e),
        };
        file.write_all(bytes)?;
        file.set_len(bytes.len() as u64)
    }

    /// Opens `name` to write (`extra`: `O_APPEND` or nothing), creating it if missing; an
    /// existing `name` must be a regular file of the caller's with one link.
    fn open_own(&self, name: &str, extra: OFlag) -> io::Result<File> {
        check_name(name)?;
        let flags = OFlag::O_WRONLY | extra | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let mode = Mode::from_bits_truncate(self.modes.file);
        let file = match openat(Some(self.fd.as_raw_fd()), name, flags | OFlag::O_CREAT | OFlag::O_EXCL, mode) {
            Ok(fd) => {
                let file = owned_file(fd);
                self.set_exact_mode(&file)?;
                return Ok(file);
            }
            Err(nix::errno::Errno::EEXIST) => owned_file(
                openat(Some(self.fd.as_raw_fd()), name, flags, Mode::empty())
                    .map_err(|e| self.refusal(name, e.into()))?,
            ),
            Err(e) => return Err(e.into()),
        };
        let meta = file.metadata()?;
        let caller = nix::unistd::geteuid().as_raw();
        if !meta.file_type().is_file() || meta.uid() != caller || meta.nlink() != 1 {
            return Err(PathError::Refused {
                component: self.path.join(name),
                reason: format!(
                    "is not a regular file of ours with a single link (uid {}, {} links): not writing to it",
                    meta.uid(),
                    meta.nlink()
                ),
            }
            .into());
        }
        Ok(file)
    }

    /// Reads `name`: a regular file, not followed if a symlink, at most `max_bytes`.
    pub fn read(&self, name: &str, max_bytes: u64) -> io::Result<Vec<u8>> {
        check_name(name)?;
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let file = owned_file(
            openat(Some(self.fd.as_raw_fd()), name, flags, Mode::empty()).map_err(|e| self.refusal(name, e.into()))?,
        );
        let meta = file.metadata()?;
        let refuse = |reason: String| io::Error::from(PathError::Refused { component: self.path.join(name), reason });
        if !meta.file_type().is_file() {
            return Err(refuse("is not a regular file".into()));
        }
        if meta.len() > max_bytes {
            return Err(refuse(format!("is {} bytes, over the limit of {max_bytes}", meta.len())));
        }
        let mut data = Vec::with_capacity(meta.len() as usize);
        file.take(max_bytes + 1).read_to_end(&mut data)?;
        if data.len() as u64 > max_bytes {
            return Err(refuse(format!("grew past the limit of {max_bytes} bytes while read")));
        }
        Ok(data)
    }

    /// Whether `name` exists here as a regular file (not following a symlink).
    pub fn has_file(&self, name: &str) -> bool {
        fstatat(Some(self.fd.as_raw_fd()), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|st| file_type(&st) == SFlag::S_IFREG)
    }

    /// The directory's entries (without `.` and `..`), as `lstat` sees them.
    pub fn entries(&self) -> io::Result<Vec<Entry>> {
        let mut dir = nix::dir::Dir::openat(
            Some(self.fd.as_raw_fd()),
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut entries = Vec::new();
        for entry in dir.iter() {
            let entry = entry?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            // Gone since it was listed (another process pruning): skipped.
            let Ok(st) = fstatat(Some(self.fd.as_raw_fd()), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) else {
                continue;
            };
            entries.push(Entry {
                name: name.to_owned(),
                is_file: file_type(&st) == SFlag::S_IFREG,
                size_bytes: st.st_size as u64,
            });
        }
        Ok(entries)
    }

    /// Removes the file `name` (never a directory); a missing one is not an error.
    pub fn remove(&self, name: &OsStr) -> io::Result<()> {
        match unlinkat(Some(self.fd.as_raw_fd()), name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(nix::errno::Errno::ENOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// A fresh file with an unguessable hidden name, created `O_EXCL|O_NOFOLLOW`: nothing
    /// planted can be opened in its place.
    fn create_temp(&self) -> io::Result<(File, OsString)> {
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let mode = Mode::from_bits_truncate(self.modes.file);
        let mut last_error = nix::errno::Errno::EEXIST;
        for _ in 0..8 {
            let tmp = OsString::from(format!(".joular-{}-{:016x}.tmp", std::process::id(), random_u64()));
            match openat(Some(self.fd.as_raw_fd()), tmp.as_os_str(), flags, mode) {
                Ok(fd) => {
                    let file = owned_file(fd);
                    self.set_exact_mode(&file)?;
                    return Ok((file, tmp));
                }
                Err(nix::errno::Errno::EEXIST) => last_error = nix::errno::Errno::EEXIST,
                Err(e) => {
                    last_error = e;
                    break;
                }
            }
        }
        Err(io::Error::from(last_error))
    }

    fn set_exact_mode(&self, file: &File) -> io::Result<()> {
        if self.modes.exact {
            fchmod(file.as_raw_fd(), Mode::from_bits_truncate(self.modes.file))?;
        }
        Ok(())
    }

    /// An open of `name` that failed: a symlink or non-directory where none may be is said
    /// plainly.
    fn refusal(&self, name: &str, e: io::Error) -> io::Error {
        let component = self.path.join(name);
        let last = Path::new(name).file_name().unwrap_or_default();
        let parent = Path::new(name).parent().and_then(|p| self.open_subdir(p.to_str()?).ok());
        let is_symlink = fstatat(
            Some(parent.as_ref().unwrap_or(self).fd.as_raw_fd()),
            last,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .is_ok_and(|st| file_type(&st) == SFlag::S_IFLNK);
        match e.raw_os_error() {
            Some(libc::ELOOP | libc::ENOTDIR) if is_symlink => {
                PathError::Refused { component, reason: "is a symlink (none is followed inside the results)".into() }
                    .into()
            }
            Some(libc::ENOTDIR) => PathError::NotADirectory { component }.into(),
            _ => PathError::Io { component, source: e }.into(),
        }
    }
}

/// A file being written under a temporary name; [`AtomicFile::commit`] puts it in place, and
/// dropping it uncommitted removes it.
#[derive(Debug)]
pub struct AtomicFile<'a> {
    dir: &'a OutDir,
    file: File,
    tmp: OsString,
    name: OsString,
    committed: bool,
}

impl AtomicFile<'_> {
    /// Renames the file over its name (replacing whatever entry is there, never following it).
    pub fn commit(mut self) -> io::Result<()> {
        let fd = Some(self.dir.fd.as_raw_fd());
        renameat(fd, self.tmp.as_os_str(), fd, self.name.as_os_str())?;
        self.committed = true;
        Ok(())
    }
}

impl Write for AtomicFile<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for AtomicFile<'_> {
    fn drop(&mut self) {
        if !self.committed {
            let _ = unlinkat(Some(self.dir.fd.as_raw_fd()), self.tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
    }
}

/// Creates `path` as a new file written as it goes ([`OutDir::create_stream`]); its directory
/// must exist, and is reached with the rules of [`OutDir::create_all`].
pub fn create_stream(path: &Path, modes: Modes) -> io::Result<File> {
    let walked = walk(path, Last::File, None, Purpose::Write)?;
    let name = walked.name.ok_or_else(|| io::Error::from(PathError::IsADirectory { component: path.to_owned() }))?;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    OutDir { fd: walked.dir, path: parent.to_owned(), modes }.create_stream(&name)
}

fn owned_file(fd: std::os::fd::RawFd) -> File {
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    File::from(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Unpredictable enough for temporary names (the std hasher's random keys); `O_EXCL` is what
/// makes them safe.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish()
}

/// An [`OutDir`] on a test's scratch directory.
#[cfg(test)]
pub(crate) fn test_dir(path: &Path) -> OutDir {
    OutDir::create_all(path, Modes::for_caller()).expect("open a scratch directory")
}

#[cfg(test)]
mod tests;
