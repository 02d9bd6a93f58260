//! The kernel's walked JVM stacks (`joular_ebpf::JavaStack`) as plain frames.

use joular_ebpf::{
    JavaFrame, JavaStack, FRAME_CODE, FRAME_CODE_COMPILE_ID, FRAME_INTERPRETED, FRAME_KIND_SHIFT, FRAME_VALUE_MASK,
    JAVA_STACK_CAUSE_MASK, JAVA_STACK_CAUSE_SHIFT, JAVA_STACK_CUT, JAVA_STACK_HOTSPOT, JAVA_STACK_TRUNCATED,
    MAX_JAVA_FRAMES,
};

use crate::model::{WalkedFrame, WalkedStack};

/// Decodes a stored stack with a sample's own `leaf` (a stored stack is shared by samples
/// that differ only in their leaf; see `JavaStack`).
pub fn decode(raw: &JavaStack, leaf: &JavaFrame) -> WalkedStack {
    let len = (raw.len as usize).clamp(1, MAX_JAVA_FRAMES);
    let frames = std::iter::once(leaf).chain(&raw.frames[1..len]).map(frame).collect();
    WalkedStack {
        frames,
        truncated: raw.flags & JAVA_STACK_TRUNCATED != 0,
        cut: raw.flags & JAVA_STACK_CUT != 0,
        cut_cause: raw.flags >> JAVA_STACK_CAUSE_SHIFT & JAVA_STACK_CAUSE_MASK,
        hotspot: raw.flags & JAVA_STACK_HOTSPOT != 0,
    }
}

/// A frame of a kind this build does not know (a newer kernel object) is kept as a native
/// pc, so it is still shown and counted, never dropped.
fn frame(f: &JavaFrame) -> WalkedFrame {
    let value = f.aux & FRAME_VALUE_MASK;
    match f.aux >> FRAME_KIND_SHIFT {
        FRAME_INTERPRETED => WalkedFrame::Interpreted { method: f.addr, bcp: value },
        FRAME_CODE if value & FRAME_CODE_COMPILE_ID != 0 => {
            WalkedFrame::Compiled { pc: f.addr, compile_id: value as u32 }
        }
        FRAME_CODE => WalkedFrame::Code(f.addr),
        // FRAME_NATIVE, and kinds from a newer kernel object.
        _ => WalkedFrame::Native(f.addr),
    }
}

#[cfg(test)]
mod tests {
    use joular_ebpf::JavaFrame;

    use super::*;

    fn raw(frames: &[(u64, u64)], flags: u32) -> JavaStack {
        let mut s = JavaStack { len: frames.len() as u32, flags, frames: [JavaFrame::default(); MAX_JAVA_FRAMES] };
        for (slot, &(addr, aux)) in s.frames.iter_mut().zip(frames) {
            *slot = JavaFrame { addr, aux };
        }
        s
    }

    #[test]
    fn frames_decode_by_kind_leaf_first_with_the_sample_leaf() {
        let interp = (FRAME_INTERPRETED << FRAME_KIND_SHIFT) | 0x7f00_1234_5678;
        // As stored: the leaf slot holds another sample's leaf.
        let compiled = (FRAME_CODE << FRAME_KIND_SHIFT) | FRAME_CODE_COMPILE_ID | 417;
        let stack = raw(
            &[
                (0x7f00_0000_2000, FRAME_CODE << FRAME_KIND_SHIFT),
                (0x8000_2000, interp),
                (0x7f00_0000_3000, compiled),
                (0x5555_0000_4000, 0),
            ],
            JAVA_STACK_HOTSPOT,
        );
        let leaf = JavaFrame { addr: 0x7f00_0000_1000, aux: FRAME_CODE << FRAME_KIND_SHIFT };
        let got = decode(&stack, &leaf);
        assert_eq!(
            got.frames,
            [
                WalkedFrame::Code(0x7f00_0000_1000),
                WalkedFrame::Interpreted { method: 0x8000_2000, bcp: 0x7f00_1234_5678 },
                WalkedFrame::Compiled { pc: 0x7f00_0000_3000, compile_id: 417 },
                WalkedFrame::Native(0x5555_0000_4000),
            ]
        );
        assert!(!got.truncated && !got.cut && got.hotspot);
    }

    #[test]
    fn flags_and_bounds() {
        let leaf = JavaFrame::default();
        let mut stack = raw(&[(0, 0), (2, 0)], JAVA_STACK_TRUNCATED | JAVA_STACK_CUT);
        let got = decode(&stack, &leaf);
        assert!(got.truncated && got.cut && !got.hotspot);
        // A length past the array (a corrupt or foreign value) is clamped, never a panic;
        // a stack is never shorter than its leaf.
        stack.len = u32::MAX;
        assert_eq!(decode(&stack, &leaf).frames.len(), MAX_JAVA_FRAMES);
        stack.len = 0;
        assert_eq!(decode(&stack, &leaf).frames, [WalkedFrame::Native(0)]);
        // An unknown kind is kept as a pc.
        let unknown = JavaFrame { addr: 0x1234, aux: 9 << FRAME_KIND_SHIFT };
        assert_eq!(decode(&raw(&[(0, 0)], 0), &unknown).frames, [WalkedFrame::Native(0x1234)]);
    }
}
