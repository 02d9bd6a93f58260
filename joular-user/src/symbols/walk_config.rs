//! What the kernel's HotSpot unwinder needs of one JVM (`joular_ebpf::JvmConfig`), from
//! its HotSpot tables: code heaps with their segment maps, and where a code blob keeps its
//! size, frame size, frame-complete offset, code start (a pointer up to JDK 22, an offset
//! from the blob from JDK 23), name, compile id and `Method*`. Nothing is hard-coded per JDK; a layout the kernel's fixed read window cannot serve is refused with
//! the reason, and that JVM is walked by frame pointers only.

use joular_ebpf::{BlobLayout, CodeHeapConfig, PollEntry, BLOB_WINDOW_WORDS, MAX_CODE_HEAPS, MAX_POLL_ENTRIES};
use jvm_symbols::hotspot::codecache::CodeHeap;
use jvm_symbols::hotspot::layout::{CodeLayout, CodeStart, Field};
use jvm_symbols::hotspot::poll_blobs::PollEntryWindow;

/// Why a JVM's compiled frames cannot be unwound without frame pointers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// Its code-cache tables are not the ones the readers know.
    NoCodeLayout,
    /// No code heap read yet, or more than the kernel holds.
    Heaps,
    /// A blob field outside the kernel's read window, or straddling a word.
    BlobLayout,
}

impl Unavailable {
    pub fn reason(self) -> &'static str {
        match self {
            Unavailable::NoCodeLayout => "its code-cache tables are not readable",
            Unavailable::Heaps => "its code heaps are not readable",
            Unavailable::BlobLayout => "its code blobs have a layout the unwinder cannot read",
        }
    }
}

/// The heaps, as the kernel takes them, and how many there are.
pub fn heaps(heaps: &[CodeHeap]) -> Result<([CodeHeapConfig; MAX_CODE_HEAPS], u32), Unavailable> {
    if heaps.is_empty() || heaps.len() > MAX_CODE_HEAPS {
        return Err(Unavailable::Heaps);
    }
    let mut out = [CodeHeapConfig::default(); MAX_CODE_HEAPS];
    for (slot, h) in out.iter_mut().zip(heaps) {
        if h.low >= h.high || h.segmap == 0 || !(4..=16).contains(&h.log2_segment_size) {
            return Err(Unavailable::Heaps);
        }
        // The whole reserved heap: code the JIT places in memory it commits later is found
        // at once, not after user space reads the heaps again.
        *slot = CodeHeapConfig {
            low: h.low,
            high: h.reserved_high,
            segmap: h.segmap,
            log2_segment_bytes: h.log2_segment_size,
            _pad: 0,
        };
    }
    Ok((out, heaps.len() as u32))
}

/// The loop-poll handler blobs' entry windows, as the kernel takes them (the first
/// `MAX_POLL_ENTRIES`; the JVM has two).
pub fn poll_entries(windows: &[PollEntryWindow]) -> [PollEntry; MAX_POLL_ENTRIES] {
    let mut out = [PollEntry::default(); MAX_POLL_ENTRIES];
    for (slot, w) in out.iter_mut().zip(windows) {
        *slot = PollEntry { start: w.start, end: w.end, saved_pc_offset: w.saved_pc_offset, _pad: 0 };
    }
    out
}

/// Blob field offsets from the heap block start; each `bytes` wide field must sit in one
/// aligned word of the kernel's window.
pub fn blob_layout(code: Option<&CodeLayout>) -> Result<BlobLayout, Unavailable> {
    let code = code.ok_or(Unavailable::NoCodeLayout)?;
    let (code_begin, code_begin_bytes) = match code.blob_code_start {
        CodeStart::Pointer(offset) => (offset, 8),
        CodeStart::Offset(f) => (f.offset, 4),
    };
    let frame_complete_bytes = code.blob_frame_complete_offset.size_bytes;
    let blob = code.heap_block_size;
    let in_window = |offset: u64, bytes: usize, want: usize| -> Result<u32, Unavailable> {
        let end = offset + bytes as u64;
        let fits = bytes == want && end <= (BLOB_WINDOW_WORDS * 8) as u64 && offset / 8 == (end - 1) / 8;
        fits.then_some(offset as u32).ok_or(Unavailable::BlobLayout)
    };
    let field = |f: Field, want: usize| in_window(blob + f.offset, f.size_bytes, want);
    let pointer = |offset: u64| in_window(blob + offset, 8, 8);
    let compile_id = code.nmethod_compile_id;
    if compile_id.size_bytes != 4 || compile_id.offset % 4 != 0 || code.nmethod_method % 8 != 0 {
        return Err(Unavailable::BlobLayout);
    }
    Ok(BlobLayout {
        used: in_window(code.heap_block_used.offset, code.heap_block_used.size_bytes, 1)?,
        blob: u32::try_from(blob).map_err(|_| Unavailable::BlobLayout)?,
        size: field(code.blob_size, 4)?,
        frame_size: field(code.blob_frame_size, 4)?,
        frame_complete: field(code.blob_frame_complete_offset, if frame_complete_bytes == 2 { 2 } else { 4 })?,
        code_begin: in_window(blob + code_begin, code_begin_bytes, code_begin_bytes)?,
        name: pointer(code.blob_name)?,
        compile_id: u32::try_from(compile_id.offset).map_err(|_| Unavailable::BlobLayout)?,
        method: u32::try_from(code.nmethod_method).map_err(|_| Unavailable::BlobLayout)?,
        code_begin_bytes: code_begin_bytes as u32,
        frame_complete_bytes: frame_complete_bytes as u32,
        _pad: 0,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use jvm_symbols::hotspot::fixture::Manifest;
    use jvm_symbols::hotspot::{HotspotJvm, SegmentsMemory};

    use super::*;

    fn jvm(jdk: u32) -> (SegmentsMemory, Manifest) {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../tests/fixtures/hotspot-{jdk}"));
        let memory = SegmentsMemory::from_bytes(&std::fs::read(dir.join("memory.bin")).unwrap()).unwrap();
        (memory, Manifest::parse(&std::fs::read_to_string(dir.join("manifest.txt")).unwrap()).unwrap())
    }

    /// On the recorded JDK 11, 17, 21 and 25 memory, the published offsets read the same
    /// values as the library's reader, for every recorded nmethod (the `used` byte is in
    /// the heap block header, which the recordings leave out; the live tests cover it).
    #[test]
    fn published_offsets_read_what_the_library_reads() {
        for jdk in [11, 17, 21, 25] {
            let (mem, manifest) = jvm(jdk);
            let j = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
            let l = blob_layout(j.layout().code.as_ref()).unwrap_or_else(|e| panic!("JDK {jdk}: {e:?}"));
            let (hs, n) = heaps(j.code_heaps()).unwrap();
            assert!(n >= 1 && (n as usize) <= MAX_CODE_HEAPS, "JDK {jdk}: {n} heaps");
            let code = j.layout().code.clone().unwrap();
            let mut checked = 0;
            for &nm in &manifest.nmethods {
                let blob = jvm_symbols::hotspot::codecache::read_blob(&mem, &code, nm).unwrap();
                // The recordings start at the blob: its heap block header is not in them.
                let mut window = [0u8; BLOB_WINDOW_WORDS * 8];
                let blob_part = &mut window[l.blob as usize..];
                jvm_symbols::hotspot::MemoryReader::read(&mem, nm, blob_part).unwrap();
                let get = |off: u32, bytes: usize| {
                    let mut v = [0u8; 8];
                    v[..bytes].copy_from_slice(&window[off as usize..off as usize + bytes]);
                    u64::from_le_bytes(v)
                };
                assert_eq!(get(l.size, 4), blob.size_bytes, "JDK {jdk}");
                let block = nm - u64::from(l.blob);
                assert_eq!(joular_ebpf::blob_cache::window_code_begin(&words(&window), &l, block), blob.code_begin);
                let method = jvm_symbols::hotspot::MemoryReader::read_u64(&mem, nm + u64::from(l.method)).unwrap();
                let jvm_symbols::hotspot::codecache::BlobKind::Nmethod { method: nmethod_method, .. } = blob.kind
                else {
                    panic!("JDK {jdk}: {nm:#x} is no nmethod")
                };
                assert_eq!(method, nmethod_method, "JDK {jdk}: the reported Method* is the nmethod's");
                let frame_words = get(l.frame_size, 4);
                assert!((2..4096).contains(&frame_words), "JDK {jdk}: nmethod frame of {frame_words} words");
                let complete = joular_ebpf::blob_cache::window_frame_complete(&words(&window), &l);
                assert!(u64::from(complete) < blob.size_bytes, "JDK {jdk}");
                assert!(
                    hs[..n as usize].iter().any(|h| (h.low..h.high).contains(&nm)),
                    "JDK {jdk}: {nm:#x} in no heap"
                );
                checked += 1;
            }
            assert!(checked > 0, "JDK {jdk}: no nmethod checked");
            let offsets = (l.code_begin_bytes, l.frame_complete_bytes);
            assert_eq!(offsets, if jdk >= 23 { (4, 2) } else { (8, 4) }, "JDK {jdk}");
        }
    }

    fn words(bytes: &[u8; BLOB_WINDOW_WORDS * 8]) -> [u64; BLOB_WINDOW_WORDS] {
        std::array::from_fn(|i| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap()))
    }

    /// The kernel gets each heap's reserved span, so code committed after the heaps were
    /// read is in a heap at once.
    #[test]
    fn heaps_are_published_with_their_reserved_end() {
        let heap = CodeHeap {
            low: 0x7f00_0000_0000,
            high: 0x7f00_0028_0000,
            reserved_high: 0x7f00_0f00_0000,
            segmap: 0x7f10_0000_0000,
            log2_segment_size: 7,
        };
        let (published, n) = heaps(&[heap]).unwrap();
        assert_eq!(n, 1);
        assert_eq!((published[0].low, published[0].high), (heap.low, heap.reserved_high));
        assert_eq!((published[0].segmap, published[0].log2_segment_bytes), (heap.segmap, 7));
    }

    /// A blob that never sets up a frame stores -1: read back as -1 from 2 bytes too.
    #[test]
    fn a_16_bit_frame_complete_offset_is_sign_extended() {
        let (mem, manifest) = jvm(25);
        let j = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
        let l = blob_layout(j.layout().code.as_ref()).unwrap();
        let mut window = [0u64; BLOB_WINDOW_WORDS];
        window[(l.frame_complete / 8) as usize] = 0xffff << ((l.frame_complete % 8) * 8);
        assert_eq!(joular_ebpf::blob_cache::window_frame_complete(&window, &l) as i32, -1);
    }

    #[test]
    fn layouts_the_window_cannot_serve_are_refused() {
        let (mem, manifest) = jvm(17);
        let j = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
        let mut code = j.layout().code.clone().unwrap();
        assert_eq!(blob_layout(None), Err(Unavailable::NoCodeLayout));
        code.blob_frame_size.offset = (BLOB_WINDOW_WORDS * 8) as u64;
        assert_eq!(blob_layout(Some(&code)), Err(Unavailable::BlobLayout));
        code.blob_frame_size.offset = 6; // straddles a word
        assert_eq!(blob_layout(Some(&code)), Err(Unavailable::BlobLayout));
        code.blob_frame_size.offset = 8;
        code.blob_code_start = CodeStart::Offset(Field { offset: 14, size_bytes: 4 }); // straddles a word
        assert_eq!(blob_layout(Some(&code)), Err(Unavailable::BlobLayout));
        assert_eq!(heaps(&[]), Err(Unavailable::Heaps));
    }
}
