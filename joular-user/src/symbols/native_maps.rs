//! The mappings of `/proc/<pid>/maps` that native code can run from, with what it takes to
//! turn an address into an offset of the mapped file. (`jvm_symbols::parse_maps` reads the same
//! file for what a JVM needs: libjvm and anonymous code.)

use std::io::Read;
use std::path::Path;

use jvm_symbols::MAX_MAPS_BYTES;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMapping {
    pub start: u64,
    pub end: u64,
    /// Offset in the file of `start`.
    pub offset: u64,
    pub what: Mapped,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapped {
    /// A file (its path as the process saw it, for messages only: it is reached through
    /// `map_files`).
    File(String),
    /// The kernel's vDSO image, read from the process's memory.
    Vdso,
}

impl FileMapping {
    /// Offset in the file (or image) of `addr`, which the mapping contains.
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr - self.start + self.offset
    }
}

/// `pid`'s mappings that are files or the vDSO, sorted by start (the kernel writes them so).
pub fn read_file_mappings(proc_root: &Path, pid: u32) -> std::io::Result<Vec<FileMapping>> {
    let file = std::fs::File::open(proc_root.join(pid.to_string()).join("maps"))?;
    let mut text = Vec::new();
    file.take(MAX_MAPS_BYTES).read_to_end(&mut text)?;
    Ok(parse(&text))
}

pub fn parse(text: &[u8]) -> Vec<FileMapping> {
    text.split(|&b| b == b'\n').filter_map(|line| parse_line(&String::from_utf8_lossy(line))).collect()
}

fn parse_line(line: &str) -> Option<FileMapping> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let _perms = fields.next()?;
    let offset = fields.next()?;
    let _dev = fields.next()?;
    let inode = fields.next()?;
    let path = fields.next().map(str::trim_start).unwrap_or_default();
    let what = match path {
        "[vdso]" => Mapped::Vdso,
        // Anonymous memory, `[heap]`, `[stack]`, `[anon:...]`, `[vsyscall]` (no image to read).
        _ if inode == "0" || path.is_empty() || path.starts_with('[') => return None,
        _ => Mapped::File(path.to_owned()),
    };
    let (start, end) = (u64::from_str_radix(start, 16).ok()?, u64::from_str_radix(end, 16).ok()?);
    (start < end).then_some(FileMapping { start, end, offset: u64::from_str_radix(offset, 16).ok()?, what })
}

/// The mapping holding `addr`, if any.
pub fn find(mappings: &[FileMapping], addr: u64) -> Option<&FileMapping> {
    let i = mappings.partition_point(|m| m.start <= addr).checked_sub(1)?;
    mappings.get(i).filter(|m| addr < m.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &[u8] = b"\
55d0c0a00000-55d0c0a01000 r--p 00000000 fe:00 123 /usr/bin/spin\n\
55d0c0a01000-55d0c0a02000 r-xp 00001000 fe:00 123 /usr/bin/spin\n\
55d0c1000000-55d0c1021000 rw-p 00000000 00:00 0                          [heap]\n\
7f0000000000-7f0000010000 r-xp 00032000 fe:00 456                        /tmp/lib with spaces.so (deleted)\n\
7f0000020000-7f0000030000 rwxp 00000000 00:00 0 \n\
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]\n\
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n\
garbage line\n";

    #[test]
    fn files_and_the_vdso_are_kept_with_their_offsets() {
        let m = parse(MAPS);
        assert_eq!(m.len(), 4, "{m:?}");
        assert_eq!(m[1].file_offset(0x55d0c0a01010), 0x1010);
        assert_eq!(m[2].what, Mapped::File("/tmp/lib with spaces.so (deleted)".into()));
        assert_eq!(m[2].file_offset(0x7f0000000100), 0x32100);
        assert_eq!(m[3].what, Mapped::Vdso);
        assert_eq!(find(&m, 0x55d0c0a01fff).map(|m| m.offset), Some(0x1000));
        assert_eq!(find(&m, 0x55d0c0a02000), None, "end is exclusive");
        assert_eq!(find(&m, 0x1000), None);
        assert_eq!(find(&m, 0x7f0000020000), None, "anonymous code is not ours");
    }
}
