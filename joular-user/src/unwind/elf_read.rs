//! The bytes of a target's ELF file that unwinding needs, read (never mapped: the target may
//! rewrite or truncate its file at any time) into a buffer of our own: the headers, the
//! section name table, `.eh_frame` and `.debug_frame`. The buffer is as long as the file and
//! zero elsewhere (pages never written cost nothing), so `object` parses it as the file; bytes
//! the target took away while they were read are zeros.

use std::io;

use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, SectionHeader};
use object::{Object, ObjectSection};

use crate::target_read::ByteSource;
use crate::unwind::rows::{extract_rows, CfiSections, RowsError};
use joular_ebpf::unwind::UnwindRow;

/// Most bytes of headers read before the sections are known (65,535 section headers).
const MAX_HEADER_BYTES: u64 = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("not a 64-bit little-endian x86_64 ELF file ({0})")]
    NotElf(String),
    #[error("its unwind sections need {needed_bytes} bytes, over the {limit_bytes} bytes left (--max-symbol-mb)")]
    OverBudget { needed_bytes: u64, limit_bytes: u64 },
    #[error("{0}")]
    Rows(#[from] RowsError),
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// A loadable segment: file offsets `[offset, offset + file_bytes)` are at virtual address
/// `vaddr` + (offset - `offset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub offset: u64,
    pub file_bytes: u64,
    pub vaddr: u64,
}

/// One file's unwind rows and where its segments load.
#[derive(Debug, Default)]
pub struct FileRows {
    pub rows: Vec<UnwindRow>,
    pub segments: Vec<Segment>,
}

/// Reads `src` (`size_bytes` long when opened) and extracts its rows, reading at most
/// `max_bytes` of unwind sections.
pub fn read_file_rows(src: &dyn ByteSource, size_bytes: u64, max_bytes: u64) -> Result<FileRows, ReadError> {
    let len = usize::try_from(size_bytes).map_err(|_| ReadError::NotElf("too large".into()))?;
    let mut image = vec![0u8; len];
    // The ELF header, then the program and section headers, then the section names.
    fill(src, &mut image, 0, 64)?;
    let header = *object::elf::FileHeader64::<object::LittleEndian>::parse(&*image)?;
    let e = object::LittleEndian;
    if header.e_machine.get(e) != object::elf::EM_X86_64 {
        return Err(ReadError::NotElf("not x86_64".into()));
    }
    let phdrs = (header.e_phoff.get(e), u64::from(header.e_phnum.get(e)) * 56);
    let shdrs = (header.e_shoff.get(e), u64::from(header.e_shnum.get(e)) * 64);
    for (at, bytes) in [phdrs, shdrs] {
        if bytes > MAX_HEADER_BYTES {
            return Err(ReadError::NotElf("too many headers".into()));
        }
        fill(src, &mut image, at, bytes)?;
    }
    let sections = header_sections(&image)?;
    let shstrndx = usize::from(header.e_shstrndx.get(e));
    if let Some(&(offset, bytes)) = sections.get(shstrndx) {
        fill(src, &mut image, offset, bytes.min(MAX_HEADER_BYTES))?;
    }
    let file = ElfFile64::<object::LittleEndian>::parse(&*image).map_err(|e| ReadError::NotElf(e.to_string()))?;
    let wanted: Vec<(u64, u64)> = file
        .sections()
        .filter(|s| matches!(s.name(), Ok(".eh_frame" | ".debug_frame")))
        .filter_map(|s| s.file_range())
        .collect();
    let needed_bytes: u64 = wanted.iter().map(|r| r.1).sum();
    if needed_bytes > max_bytes {
        return Err(ReadError::OverBudget { needed_bytes, limit_bytes: max_bytes });
    }
    drop(file);
    for (offset, bytes) in wanted {
        fill(src, &mut image, offset, bytes)?;
    }
    let file = ElfFile64::<object::LittleEndian>::parse(&*image).map_err(|e| ReadError::NotElf(e.to_string()))?;
    let section = |name: &str| file.section_by_name(name).filter(|s| s.file_range().is_some());
    let eh_frame = section(".eh_frame").and_then(|s| Some((s.data().ok()?, s.address())));
    let debug_frame = section(".debug_frame").and_then(|s| s.data().ok());
    let cfi = CfiSections {
        eh_frame,
        debug_frame,
        text_address: section(".text").map_or(0, |s| s.address()),
        got_address: section(".got").map_or(0, |s| s.address()),
    };
    let rows = extract_rows(&cfi)?;
    let segments = file
        .elf_program_headers()
        .iter()
        .filter(|p| p.p_type(e) == object::elf::PT_LOAD)
        .map(|p| Segment { offset: p.p_offset(e), file_bytes: p.p_filesz(e), vaddr: p.p_vaddr(e) })
        .collect();
    Ok(FileRows { rows, segments })
}

/// Each section's (offset, bytes) in the file, from the section headers read into `image`
/// (bytes 0 for sections without any).
fn header_sections(image: &[u8]) -> Result<Vec<(u64, u64)>, ReadError> {
    let e = object::LittleEndian;
    let header = object::elf::FileHeader64::<object::LittleEndian>::parse(image)?;
    let shdrs = header.section_headers(e, image)?;
    Ok(shdrs.iter().map(|s| s.file_range(e).unwrap_or((0, 0))).collect())
}

impl From<object::Error> for ReadError {
    fn from(e: object::Error) -> Self {
        ReadError::NotElf(e.to_string())
    }
}

/// Reads `bytes` at `offset` into the same place of `image`, clipped to the image; a file
/// that shrank since it was opened leaves zeros.
fn fill(src: &dyn ByteSource, image: &mut [u8], offset: u64, bytes: u64) -> io::Result<()> {
    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(image.len());
    let end = start.saturating_add(usize::try_from(bytes).unwrap_or(usize::MAX)).min(image.len());
    let mut done = start;
    while done < end {
        match src.read_bytes_at(&mut image[done..end], done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
