//! Whether a target's file sits on FUSE, whose daemon (which may be the target's) serves every
//! read and may never answer.

use std::fs::File;

/// `statfs` type of a FUSE filesystem: its daemon, which may be the target's, serves every read.
const FUSE_SUPER_MAGIC: libc::c_long = 0x6573_5546;

/// Whether `file` is on a FUSE filesystem.
pub fn on_fuse(file: &File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain C struct, all zeroes valid.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs writes only the struct given; the descriptor is open for the call.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut fs) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fs.f_type == FUSE_SUPER_MAGIC)
}
