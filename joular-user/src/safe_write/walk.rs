//! Resolving an output path one component at a time through directory descriptors, with the
//! rules that let root write below directories other users can write to:
//! - a symlink is followed only when root or the caller owns it: anyone else's could point
//!   anywhere (the classic `/tmp` attack), and `fs.protected_symlinks` is often 0;
//! - an existing component inside a sticky world-writable directory (`/tmp`) must be owned by
//!   root or the caller: anyone could have planted it there;
//! - what is missing is created by us, so it is ours.
//!
//! The start-up checks and the run itself use this same walk, so a path planted after the
//! check is refused at run time for the same reason.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{openat, readlinkat, OFlag};
use nix::sys::stat::{fchmod, fstat, mkdirat, FileStat, Mode, SFlag};

use super::Modes;

/// Most symlinks one walk follows, the kernel's own limit.
const MAX_SYMLINKS: u32 = 40;
/// Times a directory is created again when it vanishes between `mkdirat` and the open.
const MAX_CREATE_ATTEMPTS: u32 = 3;

/// Why a path cannot be used; each names the component at fault.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("{} {reason}", .component.display())]
    Refused { component: PathBuf, reason: String },
    #[error("{} is not a directory", .component.display())]
    NotADirectory { component: PathBuf },
    #[error("{} is a directory", .component.display())]
    IsADirectory { component: PathBuf },
    #[error("directory {} does not exist", .component.display())]
    Missing { component: PathBuf },
    #[error("{}: {source}", .component.display())]
    Io { component: PathBuf, source: io::Error },
}

impl From<PathError> for io::Error {
    fn from(e: PathError) -> Self {
        let kind = match &e {
            PathError::Refused { .. } => io::ErrorKind::PermissionDenied,
            PathError::NotADirectory { .. } => io::ErrorKind::NotADirectory,
            PathError::IsADirectory { .. } => io::ErrorKind::IsADirectory,
            PathError::Missing { .. } => io::ErrorKind::NotFound,
            PathError::Io { source, .. } => source.kind(),
        };
        io::Error::new(kind, e)
    }
}

/// What the last component of a path must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Last {
    Dir,
    File,
}

/// Where a walk ended.
#[derive(Debug)]
pub(crate) struct Walked {
    /// `O_PATH` descriptor of the deepest directory reached: the path itself for [`Last::Dir`]
    /// (when it exists or was created), its parent for [`Last::File`].
    pub dir: OwnedFd,
    /// [`Last::File`]: the file's name in `dir` (it may not exist yet).
    pub name: Option<OsString>,
    /// [`Last::Dir`] without creating: whether the whole path exists.
    pub complete: bool,
}

/// Why a path is walked: to write below it (every rule), or only to read from it (another
/// user's directory in `/tmp` may be read; their symlinks are still not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    Write,
    Read,
}

/// Walks `path` (relative to the current directory when not absolute). With `create`, missing
/// directories are made with its modes ([`Last::Dir`] only); without, the walk stops at the
/// first missing one. For [`Last::File`] every directory must exist and the file may not.
pub(crate) fn walk(path: &Path, last: Last, create: Option<Modes>, purpose: Purpose) -> Result<Walked, PathError> {
    let io_at = |component: &Path| {
        let component = component.to_owned();
        move |source: io::Error| PathError::Io { component, source }
    };
    let path = std::path::absolute(path).map_err(io_at(path))?;
    let caller = nix::unistd::geteuid().as_raw();
    let mut todo: VecDeque<OsString> = components(&path);
    let mut cur = open_root()?;
    let mut shown = PathBuf::from("/");
    let mut symlinks = 0;
    // Creations of the current component in a row (it vanished after each).
    let mut attempts = 0;
    while let Some(name) = todo.pop_front() {
        let is_last = todo.is_empty();
        if name == ".." {
            cur = open_path(&cur, OsStr::new(".."), OFlag::O_DIRECTORY).map_err(io_at(&shown))?;
            shown.pop();
            continue;
        }
        let here = shown.join(&name);
        let parent = stat(&cur).map_err(io_at(&shown))?;
        let fd = match open_path(&cur, &name, OFlag::O_NOFOLLOW) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => match (last, create) {
                (Last::File, _) if is_last => {
                    return Ok(Walked { dir: cur, name: Some(name), complete: true });
                }
                (Last::File, _) => return Err(PathError::Missing { component: here }),
                (Last::Dir, None) => return Ok(Walked { dir: cur, name: None, complete: false }),
                (Last::Dir, Some(modes)) => {
                    attempts += 1;
                    if attempts > MAX_CREATE_ATTEMPTS {
                        return Err(PathError::Refused {
                            component: here,
                            reason: "keeps vanishing while it is created".into(),
                        });
                    }
                    make_dir(&cur, &name, modes).map_err(io_at(&here))?;
                    // Opened, and checked like any other component, on the next turn.
                    todo.push_front(name);
                    continue;
                }
            },
            Err(e) => return Err(PathError::Io { component: here, source: e }),
        };
        attempts = 0;
        let st = stat(&fd).map_err(io_at(&here))?;
        let trusted = st.st_uid == 0 || st.st_uid == caller;
        if file_type(&st) == SFlag::S_IFLNK && !trusted {
            return Err(PathError::Refused {
                component: here,
                reason: format!("is a symlink owned by uid {} (only root's and your own are followed)", st.st_uid),
            });
        }
        if purpose == Purpose::Write && sticky_world_writable(&parent) && !trusted {
            return Err(PathError::Refused {
                component: here,
                reason: format!(
                    "is owned by uid {}, and sits in the sticky world-writable directory {} where anyone may plant it",
                    st.st_uid,
                    shown.display()
                ),
            });
        }
        match file_type(&st) {
            SFlag::S_IFLNK => {
                symlinks += 1;
                if symlinks > MAX_SYMLINKS {
                    return Err(PathError::Refused {
                        component: here,
                        reason: "has too many levels of symlinks".into(),
                    });
                }
                // Read through the descriptor that was checked: the link cannot be swapped now.
                let target = PathBuf::from(
                    readlinkat(Some(fd.as_raw_fd()), "")
                        .map_err(|e| PathError::Io { component: here, source: e.into() })?,
                );
                if target.is_absolute() {
                    cur = open_root()?;
                    shown = PathBuf::from("/");
                }
                for c in components(&target).into_iter().rev() {
                    todo.push_front(c);
                }
            }
            SFlag::S_IFDIR => {
                cur = fd;
                shown = here;
            }
            _ if is_last && last == Last::File => {
                return Ok(Walked { dir: cur, name: Some(name), complete: true });
            }
            _ => return Err(PathError::NotADirectory { component: here }),
        }
    }
    match last {
        Last::Dir => Ok(Walked { dir: cur, name: None, complete: true }),
        Last::File => Err(PathError::IsADirectory { component: shown }),
    }
}

/// The components to walk from `/`: names and `..` (`.` means nothing here).
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

fn open_root() -> Result<OwnedFd, PathError> {
    let fd = nix::fcntl::open("/", OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| PathError::Io { component: "/".into(), source: e.into() })?;
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `O_PATH` descriptor of `name` in `dir`: enough to stat it, read a symlink or use it as the
/// directory of `*at` calls, without read permission on it.
pub(crate) fn open_path(dir: &OwnedFd, name: &OsStr, extra: OFlag) -> io::Result<OwnedFd> {
    let fd = openat(Some(dir.as_raw_fd()), name, OFlag::O_PATH | OFlag::O_CLOEXEC | extra, Mode::empty())?;
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn stat(fd: &OwnedFd) -> io::Result<FileStat> {
    Ok(fstat(fd.as_raw_fd())?)
}

pub(crate) fn file_type(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}

fn sticky_world_writable(st: &FileStat) -> bool {
    let mode = st.st_mode;
    mode & libc::S_ISVTX != 0 && mode & libc::S_IWOTH != 0
}

/// `mkdirat` with the modes' directory mode; an existing entry is left for the caller to
/// open and check. An exact mode (`--output-mode`) is set past the umask, on the directory
/// itself (opened without following anything), never through its name.
pub(crate) fn make_dir(dir: &OwnedFd, name: &OsStr, modes: Modes) -> io::Result<()> {
    match mkdirat(Some(dir.as_raw_fd()), name, Mode::from_bits_truncate(modes.dir_mode())) {
        Ok(()) => {}
        Err(nix::errno::Errno::EEXIST) => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    if modes.is_exact() {
        let fd = openat(
            Some(dir.as_raw_fd()),
            name,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        // SAFETY: the kernel just returned this descriptor and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        fchmod(fd.as_raw_fd(), Mode::from_bits_truncate(modes.dir_mode()))?;
    }
    Ok(())
}

/// A single path component (no `/`, not `.` or `..`), as names inside our own tree must be.
pub(crate) fn check_name(name: &str) -> io::Result<()> {
    let bad = name.is_empty()
        || name == "."
        || name == ".."
        || name.as_bytes().contains(&b'/')
        || name.as_bytes().contains(&0);
    if bad {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{:?} is not a file name", OsStr::from_bytes(name.as_bytes())),
        ));
    }
    Ok(())
}
