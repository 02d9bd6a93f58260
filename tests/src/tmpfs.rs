//! A tmpfs mounted on a directory of its own for one test, unmounted when dropped: for tests
//! whose files would otherwise meet the shared disk's own costs (on these machines' ext4,
//! creating files right after many were deleted waits on the journal: 44,000 symlinks took
//! 0.7 s in one run and 25 s in the next).

use std::path::Path;
use std::process::Command;

pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs with `options` (`mount -o`: `size=1g,mode=0700`, ...) on a new directory
    /// under /tmp. The tmpfs's root takes the mode the options give (tmpfs's default: 1777).
    pub fn mount(options: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status =
            Command::new("mount").args(["-t", "tmpfs", "-o", options, "tmpfs"]).arg(dir.path()).status().unwrap();
        assert!(status.success(), "mount -t tmpfs -o {options} on {}: {status}", dir.path().display());
        Tmpfs { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Bytes an unprivileged writer can still write.
    pub fn available_bytes(&self) -> u64 {
        let path = std::ffi::CString::new(self.path().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path and a zeroed statvfs the call fills.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &mut st) }, 0);
        st.f_bavail as u64 * st.f_frsize as u64
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}
