//! Opening files that an unprivileged user can write (a JVM's `/tmp/perf-<pid>.map`),
//! from a profiler running as root: never follow a symlink, read only regular files
//! owned by the expected user, and bound what is read.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::identity::{run_as, Identity};

/// What identifies one version of a file: reload when any of these change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    pub dev: u64,
    pub inode: u64,
    pub size_bytes: u64,
    pub mtime_ns: i128,
}

/// An opened file that passed the checks.
#[derive(Debug)]
pub struct CheckedFile {
    pub file: File,
    pub fingerprint: Fingerprint,
    pub path: PathBuf,
}

/// How long opening one target file may take: a FUSE file system in a container could make
/// `open` hang, and the profiler must not hang with it.
const OPEN_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens `rel` inside `root` (e.g. `/proc/<pid>/root` and `tmp/perf-<nspid>.map`) as `owner`
/// (see [`crate::identity`]). `root` itself is followed (it is a /proc magic link into the
/// target's mount namespace); below it no symlink is followed and `..` cannot leave it. The
/// file must be regular, owned by `owner.uid`, and at most `max_bytes` long.
pub fn open_checked(root: &Path, rel: &Path, owner: Identity, max_bytes: u64) -> Result<CheckedFile> {
    open_as(root, rel, owner, Some(owner.uid), max_bytes)
}

/// As [`open_checked`], for a file of the target's that anyone may own (a JDK's `release`):
/// opened as `reader`, which is what limits it.
pub fn open_readable(root: &Path, rel: &Path, reader: Identity, max_bytes: u64) -> Result<CheckedFile> {
    open_as(root, rel, reader, None, max_bytes)
}

fn open_as(root: &Path, rel: &Path, who: Identity, owner_uid: Option<u32>, max_bytes: u64) -> Result<CheckedFile> {
    let path = root.join(rel);
    let (root_owned, rel_owned) = (root.to_owned(), rel.to_owned());
    let opened = run_as(who, Instant::now() + OPEN_TIMEOUT, move || {
        let root_dir = File::open(&root_owned)?;
        openat_no_symlinks(&root_dir, &rel_owned)
    })
    .map_err(|source| Error::AsTarget { path: path.clone(), source })?;
    let fd = opened.map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => Error::Refused { path: path.clone(), reason: "a symlink is on the path".into() },
        Some(libc::EXDEV) => Error::Refused { path: path.clone(), reason: "path escapes its root".into() },
        _ => Error::io(&path, e),
    })?;
    let file = File::from(fd);
    let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
    let refuse = |reason: String| Error::Refused { path: path.clone(), reason };
    if !meta.file_type().is_file() {
        return Err(refuse("not a regular file".into()));
    }
    if let Some(expected) = owner_uid.filter(|&uid| uid != meta.uid()) {
        return Err(refuse(format!("owned by uid {}, expected {expected}", meta.uid())));
    }
    if meta.size() > max_bytes {
        return Err(Error::TooLarge { path, size_bytes: meta.size(), limit_bytes: max_bytes });
    }
    let fingerprint = Fingerprint {
        dev: meta.dev(),
        inode: meta.ino(),
        size_bytes: meta.size(),
        mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
    };
    Ok(CheckedFile { file, fingerprint, path })
}

/// Reads the whole file, failing if it grew past `max_bytes` since it was checked.
pub fn read_bounded(checked: &mut CheckedFile, max_bytes: u64) -> Result<Vec<u8>> {
    let mut data = Vec::with_capacity(checked.fingerprint.size_bytes as usize);
    (&mut checked.file).take(max_bytes + 1).read_to_end(&mut data).map_err(|e| Error::io(&checked.path, e))?;
    if data.len() as u64 > max_bytes {
        return Err(Error::TooLarge {
            path: checked.path.clone(),
            size_bytes: data.len() as u64,
            limit_bytes: max_bytes,
        });
    }
    Ok(data)
}

/// `openat2(RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS)`; O_NONBLOCK so a FIFO planted in
/// place of the file cannot block the open (and reads of what passed stay non-blocking).
fn openat_no_symlinks(dir: &File, rel: &Path) -> io::Result<OwnedFd> {
    openat_in_root(dir, rel, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
}

/// `openat2` of `rel` below `root_dir` with `flags`: no symlink (nor /proc magic link) is
/// followed anywhere on the path, and `..` cannot climb out of `root_dir`.
pub(crate) fn openat_in_root(root_dir: &File, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    let c_rel = CString::new(rel.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: open_how is plain integers; all-zero is its documented default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: valid dirfd, NUL-terminated path, and `how` lives across the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root_dir.as_raw_fd(),
            c_rel.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn me() -> Identity {
        Identity::user(nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw())
    }

    #[test]
    fn reads_an_owned_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tmp")).unwrap();
        std::fs::write(dir.path().join("tmp/perf-1.map"), b"0x1 0x2 a\n").unwrap();
        let mut f = open_checked(dir.path(), Path::new("tmp/perf-1.map"), me(), 1024).unwrap();
        assert_eq!(f.fingerprint.size_bytes, 10);
        assert_eq!(read_bounded(&mut f, 1024).unwrap(), b"0x1 0x2 a\n");
    }

    #[test]
    fn refuses_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret"), b"0x1 0x2 a\n").unwrap();
        symlink(dir.path().join("secret"), dir.path().join("perf-1.map")).unwrap();
        let err = open_checked(dir.path(), Path::new("perf-1.map"), me(), 1024).unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err}");
    }

    #[test]
    fn refuses_a_symlinked_directory_and_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("perf-1.map"), b"0x1 0x2 a\n").unwrap();
        symlink(outside.path(), dir.path().join("tmp")).unwrap();
        let err = open_checked(dir.path(), Path::new("tmp/perf-1.map"), me(), 1024).unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err}");
        // `..` is clamped to the root, so the file outside is simply not found.
        let escape = Path::new("../").join(outside.path().file_name().unwrap()).join("perf-1.map");
        assert!(open_checked(dir.path(), &escape, me(), 1024).is_err());
    }

    #[test]
    fn refuses_wrong_owner_non_regular_and_too_large() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("perf-1.map");
        std::fs::write(&file, vec![b'x'; 2048]).unwrap();
        let err = open_checked(dir.path(), Path::new("perf-1.map"), me(), 1024).unwrap_err();
        assert!(matches!(err, Error::TooLarge { size_bytes: 2048, .. }), "{err}");
        nix::unistd::mkfifo(&dir.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = open_checked(dir.path(), Path::new("fifo"), me(), 1024).unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err}");
    }

    #[test]
    fn opens_as_the_target_user_and_checks_the_owner() {
        use std::os::unix::fs::PermissionsExt;
        let nobody = Identity::user(65534, 65534);
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("public"), b"x").unwrap();
        std::fs::set_permissions(dir.path().join("public"), std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(dir.path().join("private"), b"x").unwrap();
        std::fs::set_permissions(dir.path().join("private"), std::fs::Permissions::from_mode(0o600)).unwrap();
        // Only root can become another user: a run that is not root fails here rather than
        // pass untested.
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test opens files as another user: run it as root (`cargo xtask test`)"
        );
        // Readable by nobody, but not nobody's: refused as a perf map, fine as a `release`.
        let err = open_checked(dir.path(), Path::new("public"), nobody, 16).unwrap_err();
        assert!(matches!(err, Error::Refused { .. }), "{err}");
        assert!(open_readable(dir.path(), Path::new("public"), nobody, 16).is_ok());
        // Root's private file stays closed to a job running as nobody: the kernel says no.
        let err = open_readable(dir.path(), Path::new("private"), nobody, 16).unwrap_err();
        assert!(matches!(&err, Error::Io { source, .. } if source.kind() == io::ErrorKind::PermissionDenied), "{err}");
    }
}
