//! nmethod + pc -> the chain of (possibly inlined) Java frames at that pc.
//!
//! An nmethod keeps a metadata array (`Method*`s, indexed from 1 by scopes), the scopes
//! data and the `PcDesc`s, sorted by `_pc_offset` (relative to the code start); where each
//! lives depends on the JDK ([`DebugInfoAt`]): all in the blob (JDK 9 to 22), or scopes
//! and PcDescs in the nmethod's `_immutable_data` and the metadata in its data section
//! (JDK 23, 24) or after the relocations in `CodeBlob::_mutable_data` (JDK 25+). A
//! PcDesc's `_scope_decode_offset` points at the innermost `ScopeDesc` in the scopes data;
//! each scope names its caller's scope until offset 0. A sampled pc lies between two
//! PcDescs: as `PcDescContainer::find_pc_desc` with `approximate`, the first PcDesc at or
//! after the pc describes it.

use super::layout::{DebugInfoAt, MetadataAt, ScopesLayout};
use super::memory::{MemoryReader, ReadError};
use super::stream::{decode_scope_header, Encoding};

/// The metadata, scopes and PcDescs of nmethods fit in this; more means a corrupt read.
const MAX_DEBUG_INFO_BYTES: u64 = 4 << 20;
/// Deeper inlining than C2's `MaxInlineLevel` (15) and C1's.
const MAX_INLINE_DEPTH: usize = 64;

/// One Java frame of a compiled pc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScopeFrame {
    pub method: u64,
    /// -1 at the method entry; `None` when no scope describes the pc.
    pub bci: Option<i32>,
}

/// An nmethod's debug information, read once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NmethodDebugInfo {
    pub method: u64,
    pub code_begin: u64,
    metadata: Vec<u64>,
    scopes: Vec<u8>,
    /// (pc offset, scope decode offset), sorted by pc offset.
    pcs: Vec<(i32, u32)>,
    encoding: Encoding,
}

fn i32_at(bytes: &[u8], offset: u64) -> Option<i32> {
    let o = usize::try_from(offset).ok()?;
    Some(i32::from_le_bytes(bytes.get(o..o + 4)?.try_into().ok()?))
}

impl NmethodDebugInfo {
    /// Reads the debug information of the nmethod at `nmethod` (whose `Method*` and code
    /// start the caller read with the blob). `None`: its offsets are not in the order
    /// HotSpot writes them, or span more than any nmethod has.
    pub fn read(
        reader: &impl MemoryReader,
        l: &ScopesLayout,
        encoding: Encoding,
        nmethod: u64,
        method: u64,
        code_begin: u64,
    ) -> Result<Option<Self>, ReadError> {
        let Some(parts) = read_parts(reader, &l.debug_info, nmethod)? else {
            return Ok(None);
        };
        if l.pc_desc_size == 0 {
            return Ok(None);
        }
        let metadata =
            parts.metadata.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
        let pcs = parts
            .pcs
            .chunks_exact(l.pc_desc_size as usize)
            .filter_map(|d| {
                let pc = i32_at(d, l.pc_desc_pc_offset.offset)?;
                let scope = i32_at(d, l.pc_desc_scope_decode_offset.offset)?;
                Some((pc, scope as u32))
            })
            .collect();
        Ok(Some(Self { method, code_begin, metadata, scopes: parts.scopes, pcs, encoding }))
    }

    /// Approximate heap bytes this entry holds (for cache budgets).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.metadata.len() * 8
            + self.scopes.len()
            + self.pcs.len() * std::mem::size_of::<(i32, u32)>()
    }

    /// The Java frames at `pc`, innermost (the inlined leaf) first, the nmethod's own
    /// method last. Falls back to the nmethod's method alone when no scope describes it.
    pub fn frames_at(&self, pc: u64) -> Vec<ScopeFrame> {
        let Some(offset) = self.offset_of(pc) else {
            return self.fallback();
        };
        self.frames_of(self.pcs.partition_point(|&(p, _)| p < offset))
    }

    /// The Java frames of the call whose return address is `pc`, when the callee ran outside
    /// the code cache (a leaf runtime call: C2's intrinsics call `SharedRuntime::
    /// montgomery_square`, G1's barriers their runtime entries). HotSpot records no scope for
    /// such a call: the PcDesc at or after its return address describes the next code, which
    /// may be another method's (`BigInteger.equals` for `montgomerySquare`'s call, JDK 17,
    /// -XX:+DebugNonSafepoints). The last PcDesc before the call describes the code that set
    /// up its arguments: the call's own scope. Falls back to [`Self::frames_at`] when no
    /// PcDesc precedes it.
    pub fn frames_before(&self, pc: u64) -> Vec<ScopeFrame> {
        let Some(offset) = self.offset_of(pc) else {
            return self.fallback();
        };
        match self.pcs.partition_point(|&(p, _)| p < offset) {
            0 => self.frames_of(0),
            after => self.frames_of(after - 1),
        }
    }

    fn offset_of(&self, pc: u64) -> Option<i32> {
        pc.checked_sub(self.code_begin).and_then(|o| i32::try_from(o).ok())
    }

    fn fallback(&self) -> Vec<ScopeFrame> {
        vec![ScopeFrame { method: self.method, bci: None }]
    }

    /// The scope chain of the `idx`-th PcDesc.
    fn frames_of(&self, idx: usize) -> Vec<ScopeFrame> {
        let fallback = self.fallback();
        let Some(&(_, decode_offset)) = self.pcs.get(idx) else {
            return fallback;
        };
        let mut frames = Vec::new();
        let mut at = decode_offset;
        while at != 0 && frames.len() < MAX_INLINE_DEPTH {
            let Some(h) = decode_scope_header(&self.scopes, at as usize, self.encoding) else {
                break;
            };
            let method =
                h.method_index.checked_sub(1).and_then(|i| self.metadata.get(i as usize)).copied().unwrap_or(0);
            if method == 0 {
                break;
            }
            frames.push(ScopeFrame { method, bci: Some(h.bci) });
            // Senders are always written before their callees: a pointer that does not go
            // back is corrupt, and would loop.
            if h.sender_decode_offset >= at {
                break;
            }
            at = h.sender_decode_offset;
        }
        if frames.is_empty() {
            fallback
        } else {
            frames
        }
    }

    /// The pcs the debug info describes (code_begin + each PcDesc offset).
    pub fn described_pcs(&self) -> impl Iterator<Item = u64> + '_ {
        self.pcs.iter().filter(|(p, _)| *p >= 0).map(|(p, _)| self.code_begin + *p as u64)
    }
}

/// The three regions of an nmethod's debug information, as read.
struct Parts {
    metadata: Vec<u8>,
    scopes: Vec<u8>,
    pcs: Vec<u8>,
}

fn read_parts(reader: &impl MemoryReader, at: &DebugInfoAt, nmethod: u64) -> Result<Option<Parts>, ReadError> {
    match at {
        DebugInfoAt::InBlob { metadata_offset, scopes_data_begin, scopes_pcs_offset, dependencies_offset } => {
            let metadata_off = metadata_offset.read(reader, nmethod)?;
            let pcs_off = scopes_pcs_offset.read(reader, nmethod)?;
            let deps_off = dependencies_offset.read(reader, nmethod)?;
            let scopes_off = reader.read_u64(nmethod + scopes_data_begin)?.wrapping_sub(nmethod);
            let ordered = metadata_off <= scopes_off && scopes_off <= pcs_off && pcs_off <= deps_off;
            if !ordered || deps_off - metadata_off > MAX_DEBUG_INFO_BYTES {
                return Ok(None);
            }
            let region = reader.read_vec(nmethod.wrapping_add(metadata_off), (deps_off - metadata_off) as usize)?;
            let rel = |off: u64| (off - metadata_off) as usize;
            Ok(Some(Parts {
                metadata: region[..rel(scopes_off)].to_vec(),
                scopes: region[rel(scopes_off)..rel(pcs_off)].to_vec(),
                pcs: region[rel(pcs_off)..].to_vec(),
            }))
        }
        DebugInfoAt::Immutable {
            metadata,
            immutable_data,
            immutable_data_size,
            scopes_pcs_offset,
            scopes_data_offset,
        } => {
            let Some((metadata_at, metadata_len)) = metadata_region(reader, metadata, nmethod)? else {
                return Ok(None);
            };
            let data = reader.read_u64(nmethod + immutable_data)?;
            let size = immutable_data_size.read(reader, nmethod)?;
            let pcs_off = scopes_pcs_offset.read(reader, nmethod)?;
            let scopes_off = scopes_data_offset.read(reader, nmethod)?;
            // The scopes data runs to the speculations (not exported) or the buffer's end;
            // decoding stops at each scope's own end, so the tail is never misread.
            if !(pcs_off <= scopes_off && scopes_off <= size) || size > MAX_DEBUG_INFO_BYTES || data == 0 {
                return Ok(None);
            }
            let region = reader.read_vec(data.wrapping_add(pcs_off), (size - pcs_off) as usize)?;
            let split = (scopes_off - pcs_off) as usize;
            Ok(Some(Parts {
                metadata: reader.read_vec(metadata_at, metadata_len as usize)?,
                scopes: region[split..].to_vec(),
                pcs: region[..split].to_vec(),
            }))
        }
    }
}

/// Where a JDK 23+ nmethod's metadata array is, and its length in bytes.
fn metadata_region(reader: &impl MemoryReader, at: &MetadataAt, nmethod: u64) -> Result<Option<(u64, u64)>, ReadError> {
    let (start, end) = match at {
        MetadataAt::DataSection { data_offset, metadata_offset, blob_size } => {
            let start = data_offset.read(reader, nmethod)? + metadata_offset.read(reader, nmethod)?;
            (nmethod.wrapping_add(start), nmethod.wrapping_add(blob_size.read(reader, nmethod)?))
        }
        MetadataAt::Mutable { mutable_data, mutable_data_size, relocation_size } => {
            let data = reader.read_u64(nmethod + mutable_data)?;
            let size = mutable_data_size.read(reader, nmethod)?;
            (data.wrapping_add(relocation_size.read(reader, nmethod)?), data.wrapping_add(size))
        }
    };
    let ok = start <= end && end - start <= MAX_DEBUG_INFO_BYTES;
    Ok(ok.then(|| (start, (end - start) & !7)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotspot::layout::Field;
    use crate::hotspot::memory::SegmentsMemory;
    use crate::hotspot::stream::tests::encode_uint;

    fn f4(offset: u64) -> Field {
        Field { offset, size_bytes: 4 }
    }

    /// A hand-built nmethod: outer (metadata 1) inlines inner (metadata 2) at pc offset 0x40.
    fn build(encoding: Encoding) -> (SegmentsMemory, ScopesLayout, u64) {
        let l = ScopesLayout {
            debug_info: DebugInfoAt::InBlob {
                metadata_offset: f4(0),
                scopes_data_begin: 8,
                scopes_pcs_offset: f4(16),
                dependencies_offset: f4(20),
            },
            pc_desc_size: 16,
            pc_desc_pc_offset: f4(0),
            pc_desc_scope_decode_offset: f4(4),
        };
        let nm = 0x10_0000u64;
        let (outer, inner) = (0xAAAA_0000u64, 0xBBBB_0000u64);
        let metadata_off = 0x100u64;
        let mut scopes = vec![0u8]; // offset 0 is the null scope
        let outer_at = scopes.len() as u32;
        for v in [0, 1, 12 + 1] {
            encode_uint(v, encoding, &mut scopes); // sender none, method 1, bci 12
        }
        let inner_at = scopes.len() as u32;
        for v in [outer_at, 2, 3 + 1] {
            encode_uint(v, encoding, &mut scopes); // sender outer, method 2, bci 3
        }
        let scopes_off = metadata_off + 16;
        let pcs_off = scopes_off + scopes.len() as u64;
        let mut pcs = Vec::new();
        for (pc, scope) in [(-1i32, 0u32), (0x20, outer_at), (0x40, inner_at)] {
            pcs.extend_from_slice(&pc.to_le_bytes());
            pcs.extend_from_slice(&scope.to_le_bytes());
            pcs.extend_from_slice(&[0; 8]);
        }
        let deps_off = pcs_off + pcs.len() as u64;
        let mut mem = SegmentsMemory::new();
        let mut header = Vec::new();
        header.extend_from_slice(&(metadata_off as u32).to_le_bytes());
        header.extend_from_slice(&[0; 4]);
        header.extend_from_slice(&(nm + scopes_off).to_le_bytes());
        header.extend_from_slice(&(pcs_off as u32).to_le_bytes());
        header.extend_from_slice(&(deps_off as u32).to_le_bytes());
        mem.insert(nm, &header);
        let mut region = Vec::new();
        region.extend_from_slice(&outer.to_le_bytes());
        region.extend_from_slice(&inner.to_le_bytes());
        region.extend_from_slice(&scopes);
        region.extend_from_slice(&pcs);
        mem.insert(nm + metadata_off, &region);
        (mem, l, nm)
    }

    #[test]
    fn inlined_chain_is_innermost_first_in_both_encodings() {
        for enc in [Encoding::Classic, Encoding::Unsigned5] {
            let (mem, l, nm) = build(enc);
            let code = 0x20_0000;
            let info = NmethodDebugInfo::read(&mem, &l, enc, nm, 0xAAAA_0000, code).unwrap().unwrap();
            let outer = ScopeFrame { method: 0xAAAA_0000, bci: Some(12) };
            let inner = ScopeFrame { method: 0xBBBB_0000, bci: Some(3) };
            assert_eq!(info.frames_at(code + 0x20), [outer]);
            assert_eq!(info.frames_at(code + 0x21), [inner, outer], "next PcDesc describes it");
            assert_eq!(info.frames_at(code + 0x40), [inner, outer]);
            assert_eq!(info.frames_at(code + 0x10), [outer]);
            let entry_only = [ScopeFrame { method: 0xAAAA_0000, bci: None }];
            assert_eq!(info.frames_at(code + 0x41), entry_only, "past the last PcDesc");
            assert_eq!(info.frames_at(code - 1), entry_only);
            assert_eq!(info.described_pcs().collect::<Vec<_>>(), [code + 0x20, code + 0x40]);
        }
    }

    #[test]
    fn a_leaf_call_takes_the_scope_recorded_before_its_return_address() {
        for enc in [Encoding::Classic, Encoding::Unsigned5] {
            let (mem, l, nm) = build(enc);
            let code = 0x20_0000;
            let info = NmethodDebugInfo::read(&mem, &l, enc, nm, 0xAAAA_0000, code).unwrap().unwrap();
            let outer = ScopeFrame { method: 0xAAAA_0000, bci: Some(12) };
            let inner = ScopeFrame { method: 0xBBBB_0000, bci: Some(3) };
            // Returning to 0x40 (the PcDesc there is the code after the call, here `inner`):
            // the call is described by the PcDesc before it.
            assert_eq!(info.frames_before(code + 0x40), [outer]);
            assert_eq!(info.frames_before(code + 0x30), [outer]);
            assert_eq!(info.frames_before(code + 0x41), [inner, outer]);
            // Only the entry PcDesc (offset -1, no scope) precedes: the nmethod's method alone,
            // never the code after the call.
            let entry_only = [ScopeFrame { method: 0xAAAA_0000, bci: None }];
            assert_eq!(info.frames_before(code + 0x20), entry_only);
            assert_eq!(info.frames_before(code - 1), entry_only);
        }
    }

    #[test]
    fn an_unordered_layout_is_refused() {
        let (mut mem, l, nm) = build(Encoding::Classic);
        mem.insert(nm + 16, &0x10u32.to_le_bytes()); // pcs before metadata
        assert_eq!(NmethodDebugInfo::read(&mem, &l, Encoding::Classic, nm, 1, 0), Ok(None));
    }
}
