//! The bytes of a target's ELF file that unwinding needs, read (never mapped: the target may
//! rewrite or truncate its file at any time) into a buffer of our own: the headers, the
//! section name table, `.eh_frame` and `.debug_frame`. The buffer is as long as the file and
//! zero elsewhere (pages never written cost nothing), so `object` parses it as the file; bytes
//! the target took away while they were read are zeros.

use std::io;

use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, SectionHeader};
use object::{Object, ObjectSection, SectionKind};

use crate::target_read::ByteSource;
use crate::unwind::leaf_gaps::{self, ExecSection};
use crate::unwind::rows::{compact, extract_spans, CfiSections, RowsError, Span};
use joular_ebpf::unwind::UnwindRow;

/// Most bytes of headers read before the sections are known (65,535 section headers).
const MAX_HEADER_BYTES: u64 = 4 << 20;
/// Most bytes of gaps between FDEs decoded in one file (JDK 11-25's libjvm: 1.3-30 KiB,
/// libc: 1.7 KiB); a file with more gets no leaf rows.
const MAX_GAP_SCAN_BYTES: u64 = 4 << 20;
/// Gaps closer than this are read in one read, up to `READ_CHUNK_BYTES`.
const READ_JOIN_BYTES: u64 = 4 << 10;
const READ_CHUNK_BYTES: u64 = 1 << 20;

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
    // Section sizes are the file's word: their sum may not wrap.
    let needed_bytes = wanted.iter().fold(0u64, |sum, r| sum.saturating_add(r.1));
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
    let mut spans = extract_spans(&cfi)?;
    let segments = file
        .elf_program_headers()
        .iter()
        .filter(|p| p.p_type(e) == object::elf::PT_LOAD)
        .map(|p| Segment { offset: p.p_offset(e), file_bytes: p.p_filesz(e), vaddr: p.p_vaddr(e) })
        .collect();
    // Executable sections, with where their bytes are in the file.
    let code: Vec<(ExecSection, u64)> = file
        .sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .filter_map(|s| Some((ExecSection { address: s.address(), bytes: s.size() }, s.file_range()?.0)))
        .collect();
    drop(file);
    // The code's bytes are read after the CFI's: failing to read them costs the leaf rows only.
    match leaf_spans(src, &mut image, &spans, &code) {
        Ok(leaves) => spans.extend(leaves),
        Err(e) => log::debug!("code between FDEs unreadable, no leaf rows: {e}"),
    }
    Ok(FileRows { rows: compact(spans)?, segments })
}

/// Rows for the gaps between FDEs that hold frameless leaf code ([`leaf_gaps`]): the gaps'
/// bytes are read into `image` (nearby gaps in one read), then decoded.
fn leaf_spans(
    src: &dyn ByteSource,
    image: &mut [u8],
    sorted_spans: &[Span],
    code: &[(ExecSection, u64)],
) -> io::Result<Vec<Span>> {
    let sections: Vec<ExecSection> = code.iter().map(|c| c.0).collect();
    let ranges: Vec<(u64, u64)> = sorted_spans.iter().map(|s| (s.0, s.1)).collect();
    // Each gap with its file offset.
    let located: Vec<(u64, u64, u64)> = leaf_gaps::gaps(&ranges, &sections)
        .into_iter()
        .filter_map(|(start, end)| {
            // A target's file may claim any addresses and offsets: no sum may wrap.
            let (section, offset) =
                code.iter().find(|(s, _)| start >= s.address && end <= s.address.saturating_add(s.bytes))?;
            let at = offset.checked_add(start - section.address)?;
            at.checked_add(end - start).map(|_| (start, end, at))
        })
        .collect();
    if located.iter().map(|g| g.1 - g.0).sum::<u64>() > MAX_GAP_SCAN_BYTES {
        return Ok(Vec::new());
    }
    // Reads of at most READ_CHUNK_BYTES, each covering every gap that starts within it; the
    // bytes between two gaps are read too when that saves a read.
    let mut read_from = None::<(u64, u64)>;
    for &(start, end, offset) in &located {
        let gap_end = offset + (end - start);
        read_from = match read_from {
            Some((from, to))
                if (from..=to.saturating_add(READ_JOIN_BYTES)).contains(&offset)
                    && gap_end - from <= READ_CHUNK_BYTES =>
            {
                Some((from, gap_end.max(to)))
            }
            Some((from, to)) => {
                fill(src, image, from, to - from)?;
                Some((offset, gap_end))
            }
            None => Some((offset, gap_end)),
        };
    }
    if let Some((from, to)) = read_from {
        fill(src, image, from, to - from)?;
    }
    let row = leaf_gaps::leaf_row();
    Ok(located
        .into_iter()
        .filter(|&(start, end, offset)| {
            let range = usize::try_from(offset).ok().zip(usize::try_from(end - start).ok());
            let bytes = range.and_then(|(o, n)| image.get(o..o.checked_add(n)?));
            bytes.is_some_and(|b| leaf_gaps::keeps_return_address_at_rsp(b, start))
        })
        .map(|(start, end, _)| (start, end, row))
        .collect())
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
