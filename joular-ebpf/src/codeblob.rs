//! Code blobs of a HotSpot JVM as the sampler's unwinder sees them: the block that holds a
//! pc, found through the code heap's segment map as `CodeHeap::find_blob` does, its fields
//! read at the offsets user space published (`joular_ebpf::BlobLayout`), and whether a
//! return address follows a call instruction.

use aya_ebpf::helpers::bpf_probe_read_user;
use joular_ebpf::{BLOB_WINDOW_WORDS, MAX_CODE_HEAPS, MAX_SEGMAP_HOPS};

use crate::walk::WalkState;

/// Segment-map value of a free segment.
const FREE_SEGMENT: u8 = 0xff;

/// Whether a call instruction ends right before `ret` (x86_64): `call rel32`,
/// `call *%reg` (with or without REX), `call *disp8(%reg)`, `call *disp32(%reg)`,
/// `call *(%reg)` and `call *disp32(%rip)`.
#[inline(always)]
pub fn follows_call(ret: u64) -> bool {
    // SAFETY: a user-space read that fails cleanly.
    let Ok(b) = (unsafe { bpf_probe_read_user((ret - 8) as *const [u8; 8]) }) else {
        return false;
    };
    b[3] == 0xe8
        || (b[6] == 0xff && (b[7] & 0xf8 == 0xd0 || b[7] & 0xf8 == 0x10))
        || (b[5] == 0xff && b[6] & 0xf8 == 0x50)
        || (b[2] == 0xff && (b[3] & 0xf8 == 0x90 || b[3] == 0x15))
}

/// The start of the used code heap block holding `pc`, its first `BLOB_WINDOW_WORDS`
/// words read into `state.blob`; as `CodeHeap::find_blob`: the segment map gives, per
/// segment, how many segments to go back towards the block start (0 at the start).
#[inline(always)]
pub fn find_block(state: &mut WalkState, pc: u64) -> Option<u64> {
    let cfg = &state.cfg;
    let mut found = None;
    for h in 0..MAX_CODE_HEAPS {
        let heap = &cfg.heaps[h];
        if (h as u32) < cfg.heap_count && pc >= heap.low && pc < heap.high {
            found = Some(*heap);
        }
    }
    let heap = found?;
    let shift = heap.log2_segment_bytes & 31;
    let mut segment = (pc - heap.low) >> shift;
    let mut at_start = false;
    for _ in 0..MAX_SEGMAP_HOPS {
        // SAFETY: a user-space read that fails cleanly.
        let tag = unsafe { bpf_probe_read_user((heap.segmap + segment) as *const u8) }.ok()?;
        if tag == FREE_SEGMENT {
            return None;
        }
        if tag == 0 {
            at_start = true;
            break;
        }
        segment = segment.checked_sub(u64::from(tag))?;
    }
    if !at_start {
        return None;
    }
    let block = heap.low + (segment << shift);
    // SAFETY: as above; the window lies in the heap (a blob is at least that big, and a
    // small stub's window runs into the next block, which is mapped too).
    state.blob = unsafe { bpf_probe_read_user(block as *const [u64; BLOB_WINDOW_WORDS]) }.ok()?;
    Some(block)
}

/// A field of the block read into `state.blob`: `bytes` wide at `offset` (user space
/// checks that each field lies inside one aligned word of the window).
#[inline(always)]
pub fn window_field(state: &WalkState, offset: u32, bytes: u32) -> u64 {
    let word = state.blob[(offset / 8) as usize & (BLOB_WINDOW_WORDS - 1)];
    let value = word >> ((offset & 7) * 8);
    if bytes >= 8 {
        value
    } else {
        value & ((1u64 << (bytes * 8)) - 1)
    }
}
