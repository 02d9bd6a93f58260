//! The kernel's walked JVM stacks (`joular_ebpf::JavaStack`) as plain frames.

use joular_ebpf::{
    JavaStack, FRAME_CODE, FRAME_INTERPRETED, FRAME_KIND_SHIFT, FRAME_VALUE_MASK,
    JAVA_STACK_CUT, JAVA_STACK_TRUNCATED, MAX_JAVA_FRAMES,
};

use crate::model::{WalkedFrame, WalkedStack};

/// Decodes a stored stack. A frame of a kind this build does not know (a newer kernel
/// object) is kept as a native pc, so it is still shown and counted, never dropped.
pub fn decode(raw: &JavaStack) -> WalkedStack {
    let len = (raw.len as usize).min(MAX_JAVA_FRAMES);
    let frames = raw.frames[..len]
        .iter()
        .map(|f| {
            let value = f.aux & FRAME_VALUE_MASK;
            match f.aux >> FRAME_KIND_SHIFT {
                FRAME_INTERPRETED => WalkedFrame::Interpreted { method: f.addr, bcp: value },
                FRAME_CODE => WalkedFrame::Code(f.addr),
                // FRAME_NATIVE, and kinds from a newer kernel object.
                _ => WalkedFrame::Native(f.addr),
            }
        })
        .collect();
    WalkedStack {
        frames,
        truncated: raw.flags & JAVA_STACK_TRUNCATED != 0,
        cut: raw.flags & JAVA_STACK_CUT != 0,
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
    fn frames_decode_by_kind_leaf_first() {
        let interp = (FRAME_INTERPRETED << FRAME_KIND_SHIFT) | 0x7f00_1234_5678;
        let stack = raw(
            &[(0x7f00_0000_1000, FRAME_CODE << FRAME_KIND_SHIFT), (0x8000_2000, interp), (0x5555_0000_4000, 0)],
            0,
        );
        let got = decode(&stack);
        assert_eq!(
            got.frames,
            [
                WalkedFrame::Code(0x7f00_0000_1000),
                WalkedFrame::Interpreted { method: 0x8000_2000, bcp: 0x7f00_1234_5678 },
                WalkedFrame::Native(0x5555_0000_4000),
            ]
        );
        assert!(!got.truncated && !got.cut);
    }

    #[test]
    fn flags_and_bounds() {
        let mut stack = raw(&[(1, 0), (2, 0)], JAVA_STACK_TRUNCATED | JAVA_STACK_CUT);
        let got = decode(&stack);
        assert!(got.truncated && got.cut);
        // A length past the array (a corrupt or foreign value) is clamped, never a panic.
        stack.len = u32::MAX;
        assert_eq!(decode(&stack).frames.len(), MAX_JAVA_FRAMES);
        // An unknown kind is kept as a pc.
        let unknown = raw(&[(0x1234, 9 << FRAME_KIND_SHIFT)], 0);
        assert_eq!(decode(&unknown).frames, [WalkedFrame::Native(0x1234)]);
    }
}
