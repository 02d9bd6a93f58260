//! pc -> the `CodeBlob` that holds it, through the code cache's own index, as
//! `CodeHeap::find_blob` does: each heap (`CodeCache::_heaps`) covers `_memory` in segments
//! of `1 << _log2_segment_size` bytes; its segment map (`_segmap`) has one byte per segment,
//! the distance back to a segment nearer the block start (0 at the start, 0xFF if free).
//! The block starts with a `HeapBlock` header (`_length` in segments, `_used`), then the blob.

use super::layout::{CodeLayout, CodeStart, Field};
use super::memory::{MemoryReader, ReadError};

/// Segment-map value of a free segment.
const FREE_SEGMENT: u8 = 0xff;
/// The largest blob a HotSpot code heap holds: nmethods are at most a few MB (huge methods
/// are not compiled), the interpreter and stub blobs a few hundred KB.
pub const MAX_BLOB_BYTES: u64 = 16 << 20;
/// Segments one segment-map byte can step back (HotSpot stores at most 0xFE).
const SEGMENTS_PER_HOP: u64 = 254;
/// Segment-map bytes read at once while walking back to a block start: a map whose hops are
/// all 1 costs one read per this many hops, not one per hop.
const SEGMAP_WINDOW_BYTES: u64 = 4096;
/// More heaps than HotSpot has (non-nmethods, profiled, non-profiled).
const MAX_HEAPS: u64 = 16;
/// `-XX:ReservedCodeCacheSize` is at most 2 GB: no heap or interpreter spans more.
pub const MAX_CODE_SPAN_BYTES: u64 = 2 << 30;
/// Longest blob name read.
const MAX_NAME_BYTES: usize = 256;

/// A code heap: `[low, high)` is committed, `[low, reserved_high)` reserved. The JIT
/// commits more of the reserved space as it places code (and the segment map with it); a pc
/// there is found through the segment map like any other, and a read beyond what is
/// committed fails as a read of free space does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeHeap {
    pub low: u64,
    pub high: u64,
    /// `VirtualSpace::_high_boundary`; `high` where the tables do not export it or it
    /// cannot be read.
    pub reserved_high: u64,
    pub segmap: u64,
    pub log2_segment_size: u32,
}

impl CodeHeap {
    pub fn contains(&self, pc: u64) -> bool {
        (self.low..self.high).contains(&pc)
    }
}

/// What kind of code a blob holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobKind {
    /// A compiled Java method (`nmethod`, or a `native nmethod` JNI wrapper).
    Nmethod { method: u64, compile_id: u32 },
    /// Any other blob: the interpreter, stubs, adapters, runtime stubs (named by `name`).
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeBlob {
    pub address: u64,
    pub size_bytes: u64,
    pub code_begin: u64,
    /// `CodeBlob::_name`: `nmethod`, `Interpreter`, `StubRoutines (1)`, `I2C/C2I adapters`...
    pub name: String,
    pub kind: BlobKind,
}

pub fn read_heaps(reader: &impl MemoryReader, l: &CodeLayout) -> Result<Vec<CodeHeap>, ReadError> {
    let array = reader.read_u64(l.code_cache_heaps)?;
    let len = l.growable_array_len.read(reader, array)?.min(MAX_HEAPS);
    let data = reader.read_u64(array + l.growable_array_data)?;
    let mut heaps = Vec::new();
    for i in 0..len {
        let heap = reader.read_u64(data + i * 8)?;
        let memory = heap + l.code_heap_memory;
        let log2 = l.code_heap_log2_segment_size.read(reader, heap)? as u32;
        if !(4..=16).contains(&log2) {
            continue;
        }
        let low = reader.read_u64(memory + l.virtual_space_low)?;
        let high = reader.read_u64(memory + l.virtual_space_high)?;
        if low > high || high - low > MAX_CODE_SPAN_BYTES {
            continue;
        }
        let reserved_high = l
            .virtual_space_high_boundary
            .and_then(|offset| reader.read_u64(memory + offset).ok())
            .filter(|&reserved| reserved >= high && reserved - low <= MAX_CODE_SPAN_BYTES)
            .unwrap_or(high);
        heaps.push(CodeHeap {
            low,
            high,
            reserved_high,
            segmap: reader.read_u64(heap + l.code_heap_segmap + l.virtual_space_low)?,
            log2_segment_size: log2,
        });
    }
    Ok(heaps)
}

/// The start of the used block holding `pc`, or `None` if `pc` is in free space.
pub fn find_block(
    reader: &impl MemoryReader,
    l: &CodeLayout,
    heap: &CodeHeap,
    pc: u64,
) -> Result<Option<u64>, ReadError> {
    if !heap.contains(pc) {
        return Ok(None);
    }
    let mut seg = (pc - heap.low) >> heap.log2_segment_size;
    // No block spans more than the largest blob, whatever the map says.
    let max_hops = ((MAX_BLOB_BYTES >> heap.log2_segment_size) / SEGMENTS_PER_HOP + 1) as usize;
    // The map bytes `[window_start, seg]`, read backwards a window at a time.
    let mut window: Vec<u8> = Vec::new();
    let mut window_start = 0u64;
    for _ in 0..max_hops {
        if window.is_empty() || seg < window_start {
            window_start = seg.saturating_sub(SEGMAP_WINDOW_BYTES - 1);
            let len = (seg - window_start + 1) as usize;
            // Recorded memory (fixtures) holds only the bytes once read: then one at a time.
            window = match reader.read_vec(heap.segmap.wrapping_add(window_start), len) {
                Ok(bytes) => bytes,
                Err(_) => {
                    window_start = seg;
                    vec![reader.read_u8(heap.segmap.wrapping_add(seg))?]
                }
            };
        }
        match window[(seg - window_start) as usize] {
            FREE_SEGMENT => return Ok(None),
            0 => {
                let block = heap.low + (seg << heap.log2_segment_size);
                let used = l.heap_block_used.read(reader, block)? != 0;
                return Ok(used.then_some(block));
            }
            back => match seg.checked_sub(u64::from(back)) {
                Some(s) => seg = s,
                None => return Ok(None),
            },
        }
    }
    Ok(None)
}

/// Bytes from the blob start that hold every header field read here.
fn header_len(l: &CodeLayout) -> u64 {
    let code_start_end = match l.blob_code_start {
        CodeStart::Pointer(off) => off + 8,
        CodeStart::Offset(f) => f.offset + f.size_bytes as u64,
    };
    [
        l.blob_name + 8,
        l.blob_size.offset + l.blob_size.size_bytes as u64,
        code_start_end,
        l.nmethod_method + 8,
        l.nmethod_compile_id.offset + l.nmethod_compile_id.size_bytes as u64,
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
}

/// Reads the blob at `address` (right after its `HeapBlock` header): its header in one read
/// (nmethod-sized, so it may run past a small stub into the next block, which is mapped).
pub fn read_blob(reader: &impl MemoryReader, l: &CodeLayout, address: u64) -> Result<CodeBlob, ReadError> {
    // The layout bounds every offset (`layout::MAX_FIELD_OFFSET_BYTES`): a few KB at most.
    let header = reader.read_vec(address, header_len(l) as usize)?;
    let err = ReadError { addr: address, len: header.len() };
    let ptr = |off: u64| Field { offset: off, size_bytes: 8 }.get(&header).ok_or(err);
    let name = String::from_utf8_lossy(&reader.read_c_string(ptr(l.blob_name)?, MAX_NAME_BYTES)?).into_owned();
    let size_bytes = l.blob_size.get(&header).ok_or(err)?;
    let code_begin = match l.blob_code_start {
        CodeStart::Pointer(off) => ptr(off)?,
        CodeStart::Offset(f) => address.wrapping_add(f.get(&header).ok_or(err)?),
    };
    // JDK 9 to 22 have no kind field; HotSpot itself names every nmethod "nmethod" and JNI
    // wrappers "native nmethod" (async-profiler tells them apart the same way).
    let kind = if name == "nmethod" || name == "native nmethod" {
        BlobKind::Nmethod {
            method: ptr(l.nmethod_method)?,
            compile_id: l.nmethod_compile_id.get(&header).ok_or(err)? as u32,
        }
    } else {
        BlobKind::Other
    };
    Ok(CodeBlob { address, size_bytes, code_begin, name, kind })
}

/// The blob containing `pc`, if any heap holds it.
pub fn find_blob(
    reader: &impl MemoryReader,
    l: &CodeLayout,
    heaps: &[CodeHeap],
    pc: u64,
) -> Result<Option<CodeBlob>, ReadError> {
    let Some(heap) = heaps.iter().find(|h| h.contains(pc)) else {
        return Ok(None);
    };
    let Some(block) = find_block(reader, l, heap, pc)? else {
        return Ok(None);
    };
    let blob = read_blob(reader, l, block + l.heap_block_size)?;
    Ok((pc < blob.address.saturating_add(blob.size_bytes)).then_some(blob))
}

/// Every used block of a heap, in address order (for fixtures and diagnostics; a live JVM
/// changes the heap while this runs, so a concurrent free ends the walk early).
pub fn blocks(reader: &impl MemoryReader, l: &CodeLayout, heap: &CodeHeap, max_blocks: usize) -> Vec<u64> {
    let mut out = Vec::new();
    let mut block = heap.low;
    while block < heap.high && out.len() < max_blocks {
        let Ok(len_segments) = l.heap_block_length.read(reader, block) else {
            break;
        };
        if len_segments == 0 {
            break;
        }
        if l.heap_block_used.read(reader, block).is_ok_and(|u| u != 0) {
            out.push(block);
        }
        match len_segments.checked_shl(heap.log2_segment_size).and_then(|len| block.checked_add(len)) {
            Some(next) if next > block => block = next,
            _ => break,
        }
    }
    out
}

/// `[start, end)` of the whole code cache as reserved (`CodeCache::_low_bound`,
/// `_high_bound`), or the span of the heaps when those are not exported or readable.
pub fn code_cache_bounds(reader: &impl MemoryReader, l: &CodeLayout, heaps: &[CodeHeap]) -> Option<(u64, u64)> {
    let reserved = l.code_cache_bounds.and_then(|(lo, hi)| {
        let (lo, hi) = (reader.read_u64(lo).ok()?, reader.read_u64(hi).ok()?);
        (lo < hi).then_some((lo, hi))
    });
    reserved.or_else(|| {
        let lo = heaps.iter().map(|h| h.low).min()?;
        let hi = heaps.iter().map(|h| h.high).max()?;
        (lo < hi).then_some((lo, hi))
    })
}

/// The template interpreter's code as its `StubQueue` (`AbstractInterpreter::_code`) says now.
/// A pc in its codelets is an interpreted Java frame.
///
/// The buffer is reserved larger than the code and trimmed to it once the code is generated
/// (`StubQueue::deallocate_unused_tail`: `_buffer_limit` becomes `_queue_end`, on JDK 11, 17,
/// 21 and 25); the tail it frees goes to stubs and adapters. So the interpreter ends where its
/// committed codelets end, never at a limit read before the trim: with that limit, a JDK 17
/// started under `record` had its `StubRoutines (2)` and I2C/C2I adapters taken for
/// interpreted frames, their stack slots read as `Method*`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterpreterCode {
    pub start: u64,
    /// `_queue_end`: the codelets committed so far (the limit where not exported).
    pub committed_bytes: u64,
    /// `_buffer_limit`: the buffer, as reserved or as trimmed.
    pub limit_bytes: u64,
}

impl InterpreterCode {
    pub fn bounds(&self) -> (u64, u64) {
        (self.start, self.start + self.committed_bytes)
    }

    /// Generated and trimmed to its code: the bounds are final.
    pub fn trimmed(&self) -> bool {
        self.committed_bytes == self.limit_bytes
    }
}

/// Reads [`InterpreterCode`]; an error while the queue is empty (not generated yet) or its
/// sizes are out of bounds.
pub fn interpreter_code(reader: &impl MemoryReader, l: &CodeLayout) -> Result<InterpreterCode, ReadError> {
    let queue = reader.read_u64(l.interpreter_code)?;
    let start = reader.read_u64(queue + l.stub_queue_buffer)?;
    let limit_bytes = l.stub_queue_limit.read(reader, queue)?;
    let committed_bytes = match &l.stub_queue_end {
        Some(end) => end.read(reader, queue)?,
        None => limit_bytes,
    };
    let sane = committed_bytes > 0 && committed_bytes <= limit_bytes && limit_bytes <= MAX_CODE_SPAN_BYTES;
    match start.checked_add(limit_bytes) {
        Some(_) if sane => Ok(InterpreterCode { start, committed_bytes, limit_bytes }),
        _ => Err(ReadError { addr: queue, len: 0 }),
    }
}

/// Entry points of the named `StubRoutines`, sorted by address: (entry, name). Fields still
/// null (stubs this CPU does not get) are left out.
pub fn stub_entries(reader: &impl MemoryReader, fields: &[(String, u64)]) -> Vec<(u64, String)> {
    let mut entries: Vec<(u64, String)> = fields
        .iter()
        .filter_map(|(name, field)| reader.read_u64(*field).ok().filter(|&e| e != 0).map(|e| (e, name.clone())))
        .collect();
    entries.sort();
    entries
}
