//! Private copies of what names a target's ELF file: its headers and its symbol table with its
//! strings, read (never mapped) into a sealed memfd of our own. The target may truncate or
//! rewrite its file at any time; a map of it would turn that into SIGBUS in the profiler, or
//! into data changing under blazesym's parser. A copy cannot change once made: bytes the
//! target took away while it was read are zeros, which parse as an ELF file with fewer names.
//!
//! Only the sections that carry names are copied, at their own offsets (the rest of the memfd
//! is a hole), so a library's copy costs its symbol tables, not its code.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;

use object::elf::{self, FileHeader64, ProgramHeader64, SectionHeader64, Sym64};
use object::{pod, LittleEndian as LE};

use crate::target_read::stall_guard::Stall;
use crate::target_read::{ByteSource, CHUNK_BYTES};
const ELF64_HEADER_BYTES: u64 = size_of::<FileHeader64<LE>>() as u64;
const ELF64_PHDR_BYTES: u64 = size_of::<ProgramHeader64<LE>>() as u64;
const ELF64_SHDR_BYTES: u64 = size_of::<SectionHeader64<LE>>() as u64;
const ELF64_SYM_BYTES: u64 = size_of::<Sym64<LE>>() as u64;

#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("not a 64-bit little-endian ELF file ({0})")]
    NotElf(&'static str),
    #[error(
        "its symbol tables need {needed_bytes} bytes, over the {limit_bytes} bytes left for copies (--max-symbol-mb)"
    )]
    OverBudget { needed_bytes: u64, limit_bytes: u64 },
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl CopyError {
    /// The deadline a read of the source ran past (`stall_guard`), if that is what failed.
    pub fn stall(&self) -> Option<&Stall> {
        match self {
            CopyError::Io(e) => e.get_ref().and_then(|inner| inner.downcast_ref::<Stall>()),
            _ => None,
        }
    }

    /// A short, stable name for counters (`summary.json`).
    pub fn kind(&self) -> &'static str {
        match self {
            CopyError::NotElf(_) => "not_elf",
            CopyError::OverBudget { .. } => "over_budget",
            CopyError::Io(_) => "unreadable",
        }
    }
}

/// A sealed memfd holding the name-carrying bytes of one file, at their offsets.
#[derive(Debug)]
pub struct ElfCopy {
    file: File,
    /// Bytes actually copied (what the copy costs; holes cost nothing).
    pub bytes: u64,
    /// What leads to the file's separate debug file (`debug_file`), read from the copy.
    pub build_id: Option<Vec<u8>>,
    pub debuglink: Option<DebugLink>,
    /// The file's loaded segments: a mapped file offset's virtual address (a debug file's
    /// program headers keep the addresses but not the offsets).
    loads: Vec<Load>,
}

/// A `.gnu_debuglink` section: the debug file's name and the CRC-32 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugLink {
    pub name: Vec<u8>,
    pub crc: u32,
}

/// One `PT_LOAD` segment: `file_bytes` at file `offset` are loaded at `vaddr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Load {
    offset: u64,
    vaddr: u64,
    file_bytes: u64,
}

/// Longest build id taken (GNU's are 20 bytes; other linkers' up to 32).
const MAX_BUILD_ID_BYTES: usize = 64;
/// Most bytes of one note section or of `.gnu_debuglink` read back from a copy.
const MAX_NOTE_SECTION_BYTES: u64 = 64 << 10;
/// Most bytes of the section-name table read (a library's is a few hundred bytes).
const MAX_SECTION_NAMES_BYTES: u64 = 1 << 20;

impl ElfCopy {
    /// A path blazesym can open: our own descriptor, which nobody else can change.
    pub fn path(&self) -> std::path::PathBuf {
        format!("/proc/self/fd/{}", self.file.as_raw_fd()).into()
    }

    /// The virtual address a file offset is loaded at, when a loaded segment holds it.
    pub fn vaddr_of(&self, offset: u64) -> Option<u64> {
        let load = self.loads.iter().find(|l| offset >= l.offset && offset - l.offset < l.file_bytes)?;
        Some(load.vaddr.wrapping_add(offset - load.offset))
    }
}

/// Where a copy's sections of interest are (all within the copied ranges).
struct Layout {
    ranges: Vec<std::ops::Range<u64>>,
    notes: Vec<std::ops::Range<u64>>,
    debuglink: Option<std::ops::Range<u64>>,
    loads: Vec<Load>,
}

/// Copies the headers and the symbol, string and note sections of `src` (`size_bytes` long when
/// it was opened), refusing when they need more than `max_bytes`.
pub fn copy_symbol_sections(src: &dyn ByteSource, size_bytes: u64, max_bytes: u64) -> Result<ElfCopy, CopyError> {
    let Layout { ranges, notes, debuglink, loads } = symbol_ranges(src, size_bytes)?;
    let needed_bytes: u64 = ranges.iter().map(|r| r.end - r.start).sum();
    if needed_bytes > max_bytes {
        return Err(CopyError::OverBudget { needed_bytes, limit_bytes: max_bytes });
    }
    let copy = memfd()?;
    copy.set_len(ranges.last().map_or(0, |r| r.end))?;
    let mut buf = vec![0u8; CHUNK_BYTES.min(needed_bytes as usize)];
    let mut bytes = 0;
    for range in &ranges {
        let mut at = range.start;
        while at < range.end {
            let want = (range.end - at).min(buf.len() as u64) as usize;
            let got = read_at_most(src, &mut buf[..want], at)?;
            if got == 0 {
                // The file shrank since it was opened: the rest stays zeros.
                break;
            }
            copy.write_all_at(&buf[..got], at)?;
            at += got as u64;
            bytes += got as u64;
        }
    }
    seal(&copy)?;
    // Read back from the sealed copy: the bytes parsed are the bytes named from.
    let build_id = notes.iter().find_map(|r| build_id_in(&read_range(&copy, r).ok()?));
    let debuglink = match debuglink {
        Some(r) => parse_debuglink(&read_range(&copy, &r)?),
        None => None,
    };
    Ok(ElfCopy { file: copy, bytes, build_id, debuglink, loads })
}

/// The bytes of `range` of a copy, at most `MAX_NOTE_SECTION_BYTES`.
fn read_range(copy: &File, range: &std::ops::Range<u64>) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; (range.end - range.start).min(MAX_NOTE_SECTION_BYTES) as usize];
    let got = read_at_most(copy, &mut buf, range.start)?;
    buf.truncate(got);
    Ok(buf)
}

/// The GNU build id in a note section's bytes.
fn build_id_in(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut notes = object::read::elf::NoteIterator::<FileHeader64<LE>>::new(LE, 4, bytes).ok()?;
    while let Ok(Some(note)) = notes.next() {
        let desc = note.desc();
        if note.name() == elf::ELF_NOTE_GNU
            && note.n_type(LE) == elf::NT_GNU_BUILD_ID
            && !desc.is_empty()
            && desc.len() <= MAX_BUILD_ID_BYTES
        {
            return Some(desc.to_vec());
        }
    }
    None
}

/// `.gnu_debuglink`: a NUL-terminated file name, padding to 4 bytes, a little-endian CRC-32.
fn parse_debuglink(bytes: &[u8]) -> Option<DebugLink> {
    let len = bytes.iter().position(|&b| b == 0)?;
    let at = (len + 1).next_multiple_of(4);
    let crc = u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
    (len > 0).then(|| DebugLink { name: bytes[..len].to_vec(), crc })
}

/// What to copy, sorted and merged: the ELF header, program and section headers, and the
/// sections that name code, each clipped to the file. The headers are read here, each with one
/// bounded read, and parsed by `object` from those bytes: nothing the file says is read or
/// allocated before it is checked against the file's size.
fn symbol_ranges(src: &dyn ByteSource, size_bytes: u64) -> Result<Layout, CopyError> {
    let mut header_bytes = [0u8; ELF64_HEADER_BYTES as usize];
    if read_at_most(src, &mut header_bytes, 0)? < header_bytes.len() {
        return Err(CopyError::NotElf("shorter than an ELF header"));
    }
    let (header, _) =
        pod::from_bytes::<FileHeader64<LE>>(&header_bytes).map_err(|_| CopyError::NotElf("no ELF header"))?;
    if header.e_ident.magic != elf::ELFMAG {
        return Err(CopyError::NotElf("no ELF magic"));
    }
    if header.e_ident.class != elf::ELFCLASS64 || header.e_ident.data != elf::ELFDATA2LSB {
        return Err(CopyError::NotElf("not 64-bit little-endian"));
    }
    let (phoff, shoff) = (header.e_phoff.get(LE), header.e_shoff.get(LE));
    let (phnum, shnum) = (u64::from(header.e_phnum.get(LE)), u64::from(header.e_shnum.get(LE)));
    let (phentsize, shentsize) = (u64::from(header.e_phentsize.get(LE)), u64::from(header.e_shentsize.get(LE)));
    if (phnum > 0 && phentsize != ELF64_PHDR_BYTES) || (shnum > 0 && shentsize != ELF64_SHDR_BYTES) {
        return Err(CopyError::NotElf("unexpected header entry sizes"));
    }
    let within = |start: u64, len: u64| start.checked_add(len).filter(|&end| end <= size_bytes).map(|end| start..end);
    let phdrs = within(phoff, phnum * ELF64_PHDR_BYTES).ok_or(CopyError::NotElf("program headers outside the file"))?;
    let shdrs = within(shoff, shnum * ELF64_SHDR_BYTES).ok_or(CopyError::NotElf("section headers outside the file"))?;
    // At most 65,535 headers of 64 bytes (e_shnum is 16 bits; the extended count of section 0
    // is not followed): 4 MiB.
    let mut table = vec![0u8; (shdrs.end - shdrs.start) as usize];
    if read_at_most(src, &mut table, shdrs.start)? < table.len() {
        return Err(CopyError::NotElf("section headers cut short"));
    }
    let sections: &[SectionHeader64<LE>] =
        pod::slice_from_all_bytes(&table).map_err(|_| CopyError::NotElf("section headers cut short"))?;
    let loads = loads(src, phdrs.clone())?;
    // `.symtab` names everything `.dynsym` does: the dynamic table is the fallback of files
    // stripped of the full one.
    // A symbol table of 24-byte entries whose strings are a string table; anything else (a
    // rewritten file's garbage) would only cost a parse that names nothing.
    let valid = |s: &SectionHeader64<LE>| {
        let size = s.sh_size.get(LE);
        size > 0
            && s.sh_entsize.get(LE) == ELF64_SYM_BYTES
            && size.is_multiple_of(ELF64_SYM_BYTES)
            && sections.get(s.sh_link.get(LE) as usize).is_some_and(|l| l.sh_type.get(LE) == elf::SHT_STRTAB)
    };
    let has = |sh_type: u32| sections.iter().any(|s| s.sh_type.get(LE) == sh_type && valid(s));
    let symbols = match has(elf::SHT_SYMTAB) {
        true => elf::SHT_SYMTAB,
        false if has(elf::SHT_DYNSYM) => elf::SHT_DYNSYM,
        false => return Err(CopyError::NotElf("no symbol table")),
    };
    let shstrndx = usize::from(header.e_shstrndx.get(LE));
    let clipped = |s: &SectionHeader64<LE>| {
        let offset = s.sh_offset.get(LE);
        (s.sh_type.get(LE) != elf::SHT_NOBITS && offset < size_bytes)
            .then(|| offset..offset.saturating_add(s.sh_size.get(LE)).min(size_bytes))
    };
    let section_names = match sections.get(shstrndx).and_then(clipped) {
        Some(r) => {
            let mut names = vec![0u8; (r.end - r.start).min(MAX_SECTION_NAMES_BYTES) as usize];
            let got = read_at_most(src, &mut names, r.start)?;
            names.truncate(got);
            names
        }
        None => Vec::new(),
    };
    let is_debuglink = |s: &SectionHeader64<LE>| {
        let at = s.sh_name.get(LE) as usize;
        section_names.get(at..).is_some_and(|n| n.starts_with(b".gnu_debuglink\0"))
    };
    let mut wanted: Vec<&SectionHeader64<LE>> = Vec::new();
    let (mut notes, mut debuglink) = (Vec::new(), None);
    for (index, s) in sections.iter().enumerate() {
        let sh_type = s.sh_type.get(LE);
        if sh_type == symbols && valid(s) {
            wanted.extend(sections.get(s.sh_link.get(LE) as usize));
            wanted.push(s);
        } else if sh_type == elf::SHT_NOTE {
            notes.extend(clipped(s));
            wanted.push(s);
        } else if index == shstrndx {
            wanted.push(s);
        } else if debuglink.is_none() && is_debuglink(s) {
            debuglink = clipped(s);
            wanted.push(s);
        }
    }
    let mut ranges = vec![0..ELF64_HEADER_BYTES, phdrs, shdrs];
    ranges.extend(wanted.into_iter().filter_map(clipped));
    Ok(Layout { ranges: merge(ranges), notes, debuglink, loads })
}

/// The `PT_LOAD` entries of the program headers at `phdrs` (checked to be within the file).
fn loads(src: &dyn ByteSource, phdrs: std::ops::Range<u64>) -> Result<Vec<Load>, CopyError> {
    // At most 65,535 headers of 56 bytes: 3.5 MiB.
    let mut table = vec![0u8; (phdrs.end - phdrs.start) as usize];
    if read_at_most(src, &mut table, phdrs.start)? < table.len() {
        return Err(CopyError::NotElf("program headers cut short"));
    }
    let headers: &[ProgramHeader64<LE>] =
        pod::slice_from_all_bytes(&table).map_err(|_| CopyError::NotElf("program headers cut short"))?;
    Ok(headers
        .iter()
        .filter(|p| p.p_type.get(LE) == elf::PT_LOAD)
        .map(|p| Load { offset: p.p_offset.get(LE), vaddr: p.p_vaddr.get(LE), file_bytes: p.p_filesz.get(LE) })
        .collect())
}

/// Sorted, non-empty, non-overlapping.
fn merge(mut ranges: Vec<std::ops::Range<u64>>) -> Vec<std::ops::Range<u64>> {
    ranges.retain(|r| r.start < r.end);
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<std::ops::Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_at_most(src: &dyn ByteSource, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match src.read_bytes_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

fn memfd() -> io::Result<File> {
    // SAFETY: a constant NUL-terminated name; the returned descriptor is owned by the File.
    let fd = unsafe { libc::memfd_create(c"joular-elf-copy".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Nothing, not even this process, can change the copy's size or bytes from now on.
fn seal(copy: &File) -> io::Result<()> {
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
    // SAFETY: fcntl on a descriptor we own.
    if unsafe { libc::fcntl(copy.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_executable() -> File {
        File::open(std::env::current_exe().unwrap()).unwrap()
    }

    #[test]
    fn only_headers_and_name_sections_are_copied() {
        let src = own_executable();
        let size = src.metadata().unwrap().len();
        let copy = copy_symbol_sections(&src, size, u64::MAX).unwrap();
        assert!(copy.bytes > 0 && copy.bytes < size, "{} of {size}", copy.bytes);
        let copied = std::fs::read(copy.path()).unwrap();
        let original = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(copied[..64], original[..64], "the ELF header is copied");
        assert!(copied.len() as u64 <= size);
    }

    #[test]
    fn a_copy_is_sealed() {
        let src = own_executable();
        let copy = copy_symbol_sections(&src, src.metadata().unwrap().len(), u64::MAX).unwrap();
        let reopened = std::fs::OpenOptions::new().write(true).open(copy.path()).unwrap();
        assert!(reopened.set_len(0).is_err(), "shrinking a sealed copy fails");
        assert!(reopened.write_at(b"x", 0).is_err(), "writing a sealed copy fails");
    }

    #[test]
    fn over_budget_and_not_elf_are_refused() {
        let src = own_executable();
        let size = src.metadata().unwrap().len();
        assert!(matches!(copy_symbol_sections(&src, size, 1000), Err(CopyError::OverBudget { .. })));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("text");
        std::fs::write(&path, vec![b'a'; 4096]).unwrap();
        let err = copy_symbol_sections(&File::open(&path).unwrap(), 4096, u64::MAX).unwrap_err();
        assert_eq!(err.kind(), "not_elf");
        std::fs::write(&path, b"").unwrap();
        assert_eq!(copy_symbol_sections(&File::open(&path).unwrap(), 0, u64::MAX).unwrap_err().kind(), "not_elf");
    }

    #[test]
    fn a_file_that_shrinks_while_copied_leaves_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lib.so");
        std::fs::copy(std::env::current_exe().unwrap(), &path).unwrap();
        let src = File::open(&path).unwrap();
        let size = src.metadata().unwrap().len();
        let ranges = symbol_ranges(&src, size).unwrap().ranges;
        // Cut the file inside its last copied range, after its headers were read.
        let cut = ranges.last().unwrap().start + 1;
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(cut).unwrap();
        let copy = copy_symbol_sections(&src, size, u64::MAX);
        // The section headers may be what was cut: then nothing is copied; else zeros remain.
        if let Ok(copy) = copy {
            let copied = std::fs::read(copy.path()).unwrap();
            assert!(copied[cut as usize..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn ranges_merge() {
        assert_eq!(merge(vec![5..9, 0..2, 1..3, 9..9, 8..12]), vec![0..3, 5..12]);
    }
}
