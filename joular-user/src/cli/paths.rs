//! Start-up checks of the paths flags name, beside `safe_write`'s ownership rules: a root the
//! run reads (`--sysfs-root`, `--proc-root`) must be a directory, and a place the run writes in
//! must be on a filesystem that takes files. Each message names the flag and the fix.

use std::path::Path;

use nix::sys::statfs::{statfs, FsType};
use nix::sys::statvfs::{statvfs, FsFlags};

/// Kernel filesystems whose directories take no files: writing results there fails (or, worse,
/// writes a kernel setting), so `--output /proc/sys/kernel` is refused before anything loads.
const NO_FILES: [(FsType, &str); 9] = [
    (nix::sys::statfs::PROC_SUPER_MAGIC, "proc"),
    (nix::sys::statfs::SYSFS_MAGIC, "sysfs"),
    (nix::sys::statfs::CGROUP_SUPER_MAGIC, "cgroup"),
    (nix::sys::statfs::CGROUP2_SUPER_MAGIC, "cgroup2"),
    (nix::sys::statfs::DEBUGFS_MAGIC, "debugfs"),
    (nix::sys::statfs::TRACEFS_MAGIC, "tracefs"),
    (nix::sys::statfs::SECURITYFS_MAGIC, "securityfs"),
    (nix::sys::statfs::BPF_FS_MAGIC, "bpf"),
    (nix::sys::statfs::DEVPTS_SUPER_MAGIC, "devpts"),
];

/// `path` is an existing directory (a root the run reads from).
pub fn check_root(flag: &str, path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!("{flag} {}: not a directory: pass a directory (see --help)", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("{flag} {}: no such directory: pass an existing directory (see --help)", path.display()))
        }
        Err(e) => Err(format!("{flag} {}: {e}", path.display())),
    }
}

/// Files can be created at `path` (a directory to write in, or a file to create): the nearest
/// part of it that exists is on a writable filesystem that takes files, and not under /proc or
/// /sys (whatever is mounted there is the kernel's).
pub fn check_writable_fs(flag: &str, path: &Path) -> Result<(), String> {
    let existing = path
        .ancestors()
        .map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p })
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"));
    let refuse = |why: String| {
        Err(format!(
            "{flag} {}: {why}: choose a directory on a disk (e.g. under /var/tmp or your home)",
            path.display()
        ))
    };
    let resolved =
        existing.canonicalize().map_err(|e| format!("{flag} {}: {}: {e}", path.display(), existing.display()))?;
    if let Some(kernel) = ["/proc", "/sys"].into_iter().find(|k| resolved.starts_with(k)) {
        return refuse(format!("{} is under {kernel}, the kernel's", resolved.display()));
    }
    let fs = statfs(existing).map_err(|e| format!("{flag} {}: {}: {e}", path.display(), existing.display()))?;
    if let Some((_, name)) = NO_FILES.iter().find(|(t, _)| *t == fs.filesystem_type()) {
        return refuse(format!("{} is on the kernel's {name} filesystem, which takes no files", existing.display()));
    }
    let vfs = statvfs(existing).map_err(|e| format!("{flag} {}: {}: {e}", path.display(), existing.display()))?;
    if vfs.flags().contains(FsFlags::ST_RDONLY) {
        return refuse(format!("{} is on a read-only filesystem", existing.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_filesystems_and_read_only_ones_take_no_results() {
        for path in ["/proc/sys/kernel", "/proc/self/new-dir/results", "/sys/kernel", "/sys/fs/cgroup"] {
            let err = check_writable_fs("--output", Path::new(path)).unwrap_err();
            assert!(
                err.starts_with(&format!("--output {path}: "))
                    && err.contains("the kernel's")
                    && err.contains("choose a directory"),
                "{err}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(check_writable_fs("--output", &dir.path().join("not/yet/made")), Ok(()));
        assert_eq!(check_writable_fs("--output", Path::new("relative-results")), Ok(()));
    }

    #[test]
    fn roots_must_be_directories() {
        let err = check_root("--sysfs-root", Path::new("/nonexistent")).unwrap_err();
        assert_eq!(err, "--sysfs-root /nonexistent: no such directory: pass an existing directory (see --help)");
        let file = tempfile::NamedTempFile::new().unwrap();
        let err = check_root("--proc-root", file.path()).unwrap_err();
        assert!(err.contains("not a directory"), "{err}");
        assert_eq!(check_root("--sysfs-root", Path::new("/sys")), Ok(()));
    }
}
