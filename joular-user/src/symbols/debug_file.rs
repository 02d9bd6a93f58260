//! Separate debug files (Debian's `libc6-dbg` and `*-dbgsym`): the full symbol table of a
//! stripped library, under the root-owned debug directory (`/usr/lib/debug`).
//!
//! The target chooses its file, so what leads from it to a debug file is bounded and never
//! followed as a path: a build id is a handful of bytes we spell in hex ourselves
//! (`.build-id/xx/yyyy.debug`); a `.gnu_debuglink` name is taken only as one plain file name,
//! looked up beside the mapped file's directory inside the debug directory, and only when the
//! file found has the CRC-32 the link names. Either file must be a regular file owned by root:
//! nothing a user can write is read.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use super::elf_copy::DebugLink;

/// Where Debian (and every distribution) installs separate debug files.
pub const DEBUG_ROOT: &str = "/usr/lib/debug";
/// A debug file larger than this is not read for its CRC (libjvm's is some 200 MiB; whole-file
/// CRCs are only for `.gnu_debuglink`, whose files are rarely that large).
const MAX_CRC_BYTES: u64 = 1 << 30;
/// Longest `.gnu_debuglink` name taken (a file name: `NAME_MAX`).
const MAX_LINK_NAME_BYTES: usize = 255;
/// The mapped file's directory is taken at most this deep.
const MAX_DIR_COMPONENTS: usize = 16;

/// `<root>/.build-id/xx/yyyy.debug` for a build id of at least 2 bytes.
pub fn build_id_path(root: &Path, build_id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = build_id.split_first()?;
    if rest.is_empty() {
        return None;
    }
    let rest: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    Some(root.join(".build-id").join(format!("{first:02x}")).join(format!("{rest}.debug")))
}

/// `<root>/<directory of mapped_path>/<link name>`, when the mapped path is absolute with
/// plain components only and the link is one plain file name.
pub fn debuglink_path(root: &Path, mapped_path: &Path, link: &DebugLink) -> Option<PathBuf> {
    let name = std::str::from_utf8(&link.name).ok()?;
    let plain = |c: &str| !c.is_empty() && c != "." && c != ".." && !c.contains('/');
    if name.len() > MAX_LINK_NAME_BYTES || !plain(name) {
        return None;
    }
    let dir = mapped_path.parent()?;
    let mut out = root.to_owned();
    let mut components = dir.components();
    if components.next() != Some(Component::RootDir) {
        return None;
    }
    for (i, c) in components.enumerate() {
        match c {
            Component::Normal(part) if i < MAX_DIR_COMPONENTS && part.to_str().is_some_and(plain) => out.push(part),
            _ => return None,
        }
    }
    Some(out.join(name))
}

/// The debug file at `path`, with its size: a regular file owned by root.
pub fn open_debug_file(path: &Path) -> io::Result<(File, u64)> {
    // O_NONBLOCK: a FIFO there cannot block the open (it is refused below).
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    if meta.uid() != 0 {
        return Err(io::Error::other("not owned by root"));
    }
    Ok((file, meta.size()))
}

/// Whether the file's bytes have the CRC-32 a `.gnu_debuglink` names.
pub fn crc_matches(file: &File, size_bytes: u64, crc: u32) -> io::Result<bool> {
    if size_bytes > MAX_CRC_BYTES {
        return Ok(false);
    }
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < size_bytes {
        let n = file.read_at(&mut buf, at)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        at += n as u64;
    }
    Ok(hasher.finalize() == crc)
}

/// The debug file of a library with this build id or debug link, mapped from `mapped_path`,
/// with its size: by build id first (what Debian installs), then by debug link.
pub fn find_debug_file(
    root: &Path,
    build_id: Option<&[u8]>,
    link: Option<&DebugLink>,
    mapped_path: &Path,
) -> Option<(File, u64)> {
    if let Some(found) = build_id.and_then(|id| build_id_path(root, id)).and_then(|p| open_debug_file(&p).ok()) {
        return Some(found);
    }
    let link = link?;
    let (file, size_bytes) = open_debug_file(&debuglink_path(root, mapped_path, link)?).ok()?;
    crc_matches(&file, size_bytes, link.crc).ok()?.then_some((file, size_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_id_is_spelled_in_hex_under_the_root() {
        let root = Path::new("/usr/lib/debug");
        let path = build_id_path(root, &[0x93, 0xac, 0x61, 0x0f]).unwrap();
        assert_eq!(path, Path::new("/usr/lib/debug/.build-id/93/ac610f.debug"));
        assert_eq!(build_id_path(root, &[0x93]), None);
        assert_eq!(build_id_path(root, &[]), None);
    }

    #[test]
    fn a_debuglink_is_one_plain_name_beside_a_plain_directory() {
        let root = Path::new("/usr/lib/debug");
        let link = |name: &[u8]| DebugLink { name: name.to_vec(), crc: 0 };
        let lib = Path::new("/usr/lib/x86_64-linux-gnu/libz.so.1");
        assert_eq!(
            debuglink_path(root, lib, &link(b"libz.so.1.debug")),
            Some(PathBuf::from("/usr/lib/debug/usr/lib/x86_64-linux-gnu/libz.so.1.debug"))
        );
        for bad in [&b"../../etc/shadow"[..], b"a/b", b"..", b".", b"", &[b'a'; 256], b"\xff"] {
            assert_eq!(debuglink_path(root, lib, &link(bad)), None, "{bad:?}");
        }
        for dir in ["relative/libz.so", "/usr/../etc/libz.so", "libz.so"] {
            assert_eq!(debuglink_path(root, Path::new(dir), &link(b"x.debug")), None, "{dir}");
        }
        // A "." inside a path names the same directory (`Path` drops it).
        let at = |dir: &str| debuglink_path(root, Path::new(dir), &link(b"x.debug"));
        assert_eq!(at("/usr/./lib/libz.so"), Some(PathBuf::from("/usr/lib/debug/usr/lib/x.debug")));
        assert_eq!(at("/libz.so"), Some(PathBuf::from("/usr/lib/debug/x.debug")));
    }

    #[test]
    fn only_a_root_owned_regular_file_with_the_named_crc_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lib.debug");
        std::fs::write(&path, b"123456789").unwrap();
        // The CRC-32 check value of "123456789".
        assert!(crc_matches(&File::open(&path).unwrap(), 9, 0xcbf4_3926).unwrap());
        assert!(!crc_matches(&File::open(&path).unwrap(), 9, 0xcbf4_3927).unwrap());
        assert!(open_debug_file(dir.path()).is_err(), "a directory");
        // SAFETY: no arguments, no memory.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(open_debug_file(&path).unwrap().1, 9, "root's own file");
            std::os::unix::fs::chown(&path, Some(1000), None).unwrap();
        }
        assert!(open_debug_file(&path).is_err(), "owned by a user");
    }
}
