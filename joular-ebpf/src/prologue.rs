//! How far a compiled Java method got in building its frame when a sample interrupted it
//! before `CodeBlob::_frame_complete_offset`: read from the instruction bytes that end at that
//! offset, which are HotSpot's C1 or C2 prologue on x86_64. Shared with user space, which
//! tests it on the prologues of real nmethods of JDK 11 to 25.
//!
//! The shapes, with F the blob's frame size in bytes (return address included):
//! - with a stack bang (C1, and C2 methods that call out; `MacroAssembler::verified_entry`,
//!   `C1_MacroAssembler::build_frame`): `mov %eax,-N(%rsp)` (one or more), `push %rbp`,
//!   `mov %rsp,%rbp` (JNI wrappers and `-XX:+PreserveFramePointer` only), `sub $F-16,%rsp`
//!   (none when F is 16);
//! - without (C2 methods that need none): `sub $F-8,%rsp`, `mov %rbp,F-16(%rsp)`, then with
//!   `-XX:+PreserveFramePointer` `mov %rsp,%rbp` and `add $F-16,%rbp` (none when F is 16);
//! - then, where the collector has nmethod entry barriers (JDK 21+; ZGC and Shenandoah
//!   before), the barrier, 4-aligned by up to 3 bytes of `nop`: `cmpl $guard,d8(%r15)` and
//!   `jne` to an out-of-line stub (C2) or `je` over a `call` (C1). The frame is complete there.
//!
//! What comes before the prologue is the nmethod's inline-cache check and class-init
//! barrier, which only compare and jump (the stubs they jump to expect the caller's frame as
//! the call left it): nothing is pushed yet. A prologue of any other shape (an entry patched
//! into a jump when the nmethod was made not entrant, a JDK that builds frames otherwise)
//! proves nothing, and neither does a pc that is not at one of its instruction boundaries:
//! the sampler then cuts the stack, as it does for every frame it cannot check.

/// Bytes read, ending at the frame-complete offset: the longest shapes are 36 (a C1 entry
/// barrier with its padding, `sub` with a 32-bit immediate, `mov %rsp,%rbp`, `push`, one
/// bang) and 42 (C2's barrier with its padding, `add $imm32,%rbp`, `mov %rsp,%rbp`, `mov
/// %rbp,disp32(%rsp)`, `sub $imm32,%rsp`).
pub const PROLOGUE_WINDOW_BYTES: usize = 48;

/// Not a prologue the bytes explain, or a pc between its instructions: cut.
pub const PROLOGUE_UNKNOWN: u32 = 0;
/// Nothing pushed yet: the return address is at sp, rbp is the caller's.
pub const PROLOGUE_ENTRY: u32 = 1;
/// rbp pushed, frame not allocated: rbp's saved value at sp, the return address above it.
pub const PROLOGUE_PUSHED: u32 = 2;
/// Frame allocated, rbp not saved in it yet: the caller's sp is sp + F, the return address
/// just below it, and rbp is still the caller's.
pub const PROLOGUE_ALLOCATED: u32 = 3;
/// The frame is complete (the pc is in the entry barrier): step it as any compiled frame.
pub const PROLOGUE_COMPLETE: u32 = 4;

const PUSH_RBP: u8 = 0x55;
/// `sub $imm8,%rsp` and `sub $imm32,%rsp` (REX.W 83 /5 ib, REX.W 81 /5 id).
const SUB_RSP_IMM8: [u8; 3] = [0x48, 0x83, 0xec];
const SUB_RSP_IMM32: [u8; 3] = [0x48, 0x81, 0xec];
/// `add $imm8,%rbp` and `add $imm32,%rbp` (REX.W 83 /0 ib, REX.W 81 /0 id).
const ADD_RBP_IMM8: [u8; 3] = [0x48, 0x83, 0xc5];
const ADD_RBP_IMM32: [u8; 3] = [0x48, 0x81, 0xc5];
/// `mov %rsp,%rbp`, in its two encodings (8B /r and 89 /r).
const MOV_RBP_RSP: [[u8; 3]; 2] = [[0x48, 0x8b, 0xec], [0x48, 0x89, 0xe5]];
/// `mov %rbp,disp8(%rsp)` and `mov %rbp,disp32(%rsp)` (REX.W 89 /r with a SIB byte).
const MOV_RBP_TO_RSP_DISP8: [u8; 4] = [0x48, 0x89, 0x6c, 0x24];
const MOV_RBP_TO_RSP_DISP32: [u8; 4] = [0x48, 0x89, 0xac, 0x24];
/// `mov %eax,disp32(%rsp)`: the stack bang.
const BANG: [u8; 3] = [0x89, 0x84, 0x24];
/// `cmpl $imm32,disp8(%r15)`: the entry barrier's compare (8 bytes with its operands).
const CMP_R15_DISP8_IMM32: [u8; 3] = [0x41, 0x81, 0x7f];
const JNE_REL32: [u8; 2] = [0x0f, 0x85];
const JE_REL8: u8 = 0x74;
const CALL_REL32: u8 = 0xe8;
const NOP: u8 = 0x90;

/// The prologue bytes read, addressed by how many bytes before the frame-complete offset
/// each is (`back` 1 is the last byte of the prologue).
///
/// Plain numbers with an out-of-window value no byte equals, rather than `Option`s: fewer
/// branches for the eBPF verifier to follow.
struct Window<'a>(&'a [u8; PROLOGUE_WINDOW_BYTES]);

/// [`Window::at`] out of the window: equal to no byte.
const OUTSIDE: u32 = 0x100;
/// [`Window::u32_ending`] partly out of the window: equal to no 32-bit value.
const OUTSIDE_U32: u64 = 1 << 32;

/// `v`, through memory LLVM may not look into: otherwise it folds `window + (48 - back)` into
/// `window - back + 48`, a pointer minus a number, or re-derives the index from a register
/// other than the one bounds-checked, and the eBPF verifier refuses the read. The index is
/// then checked and used as this one value.
#[inline(always)]
fn opaque(v: u64) -> u64 {
    let mut slot = 0u64;
    // SAFETY: a local of this frame.
    unsafe {
        core::ptr::write_volatile(&mut slot, v);
        core::ptr::read_volatile(&slot)
    }
}

impl Window<'_> {
    /// The byte `back` bytes before the end, or [`OUTSIDE`].
    #[inline(always)]
    fn at(&self, back: u64) -> u32 {
        let i = opaque((PROLOGUE_WINDOW_BYTES as u64).wrapping_sub(back));
        match self.0.get(i as usize) {
            Some(&b) => u32::from(b),
            None => OUTSIDE,
        }
    }

    /// Whether the instruction bytes `bytes` start `back` bytes before the end.
    #[inline(always)]
    fn has<const N: usize>(&self, back: u64, bytes: [u8; N]) -> bool {
        let mut diff = 0u32;
        for (k, b) in bytes.iter().enumerate() {
            diff |= self.at(back.wrapping_sub(k as u64)) ^ u32::from(*b);
        }
        diff == 0
    }

    /// The little-endian 32-bit value in the 4 bytes that end `end` bytes before the end
    /// (an instruction's immediate or displacement), or [`OUTSIDE_U32`].
    #[inline(always)]
    fn u32_ending(&self, end: u64) -> u64 {
        let (mut v, mut outside) = (0u32, 0u32);
        for k in 0..4u32 {
            let b = self.at(end.wrapping_add(1 + u64::from(k)));
            outside |= b;
            v |= (b & 0xff) << (24 - 8 * k);
        }
        if outside & OUTSIDE != 0 {
            OUTSIDE_U32
        } else {
            u64::from(v)
        }
    }
}

/// How far the prologue got at a pc `before_complete` bytes before the frame-complete
/// offset (at least 1), from `code`, the `PROLOGUE_WINDOW_BYTES` bytes that end at that
/// offset, for a blob of `frame_bytes` (its frame size): one of the `PROLOGUE_*` states.
/// A function of its own in the eBPF program (few samples are in a prologue, and its
/// stack frame would not fit in the walk step's).
#[inline(never)]
pub fn prologue_state(code: &[u8; PROLOGUE_WINDOW_BYTES], before_complete: u32, frame_bytes: u32) -> u32 {
    prologue_state_by(code, before_complete, frame_bytes, |end| {
        frame_build_state_in(code, end, before_complete, frame_bytes)
    })
}

/// [`prologue_state`], with `build(end)` for [`frame_build_state_in`] of the same arguments:
/// the eBPF program makes that a global function, which the verifier checks once rather than
/// once per padding this tries (inlined four times, the decoder cost it 11,300 instructions
/// processed; split, 4,200 on Linux 6.18).
#[inline(always)]
pub fn prologue_state_by(
    code: &[u8; PROLOGUE_WINDOW_BYTES],
    before_complete: u32,
    frame_bytes: u32,
    build: impl Fn(u32) -> u32,
) -> u32 {
    let w = Window(code);
    if frame_bytes < 16 || before_complete == 0 {
        return PROLOGUE_UNKNOWN;
    }
    let barrier = barrier_bytes(&w);
    // The barrier's `cmp` is 4-aligned by a nop of up to 3 bytes before it.
    for padding in 0..4u32 {
        let end = barrier + padding;
        let back = u64::from(end);
        let is_padding = match padding {
            0 => true,
            1 => w.has(back, [NOP]),
            2 => w.has(back, [0x66, NOP]),
            _ => w.has(back, [0x0f, 0x1f, 0x00]) || w.has(back, [0x66, 0x66, NOP]),
        };
        if (barrier > 0 || padding == 0) && is_padding {
            let state = build(end);
            if state != PROLOGUE_UNKNOWN {
                return state;
            }
        }
    }
    PROLOGUE_UNKNOWN
}

/// The state at `before_complete` when the frame is built by instructions that end `end`
/// bytes before the frame-complete offset of `code` (what follows them is the entry barrier);
/// `PROLOGUE_UNKNOWN` for a frame under 16 bytes, or an `end` out of the window (every byte
/// read would be, and the bound keeps the eBPF verifier's view of each read in the window).
#[inline(always)]
pub fn frame_build_state_in(
    code: &[u8; PROLOGUE_WINDOW_BYTES],
    end: u32,
    before_complete: u32,
    frame_bytes: u32,
) -> u32 {
    if frame_bytes < 16 || end > PROLOGUE_WINDOW_BYTES as u32 {
        return PROLOGUE_UNKNOWN;
    }
    frame_build_state(&Window(code), end, before_complete, frame_bytes)
}

/// The bytes of `mov %rsp,%rbp` and `add $F-16,%rbp` (-XX:+PreserveFramePointer, C2 without
/// a bang) that end `end` bytes before the frame-complete offset, and of the `add` alone;
/// (0, 0) when they are not there. `saved_at`: F-16.
#[inline(always)]
fn preserved_fp_bytes(w: &Window, end: u64, saved_at: u32) -> (u64, u64) {
    let add_len = if saved_at == 0 {
        0
    } else if saved_at < 128 && w.has(end + 4, ADD_RBP_IMM8) && w.at(end + 1) == saved_at {
        4
    } else if w.has(end + 7, ADD_RBP_IMM32) && w.u32_ending(end) == u64::from(saved_at) {
        7
    } else {
        return (0, 0);
    };
    let mov = end + add_len + 3;
    if w.has(mov, MOV_RBP_RSP[0]) || w.has(mov, MOV_RBP_RSP[1]) {
        (add_len + 3, add_len)
    } else {
        (0, 0)
    }
}

/// The length of the entry barrier that ends the prologue, or 0 if there is none.
#[inline(always)]
fn barrier_bytes(w: &Window) -> u32 {
    if w.has(14, CMP_R15_DISP8_IMM32) && w.has(6, JNE_REL32) {
        return 14;
    }
    if w.has(15, CMP_R15_DISP8_IMM32) && w.has(7, [JE_REL8]) && w.has(5, [CALL_REL32]) {
        return 15;
    }
    0
}

/// The state at `before_complete` when the frame is built by instructions that end `end`
/// bytes before the frame-complete offset (what follows them is the entry barrier).
#[inline(always)]
fn frame_build_state(w: &Window, end: u32, before_complete: u32, frame_bytes: u32) -> u32 {
    // Offsets in 64 bits, as `Window` takes them.
    let (end, at) = (u64::from(end), u64::from(before_complete));
    // Without a bang: `sub $F-8,%rsp`, then `mov %rbp,F-16(%rsp)`, and with
    // -XX:+PreserveFramePointer `mov %rsp,%rbp` and `add $F-16,%rbp` (none when F is 16)
    // after them: from the end of `mov %rbp,F-16(%rsp)` on, the frame is as its size says.
    let saved_at = frame_bytes - 16;
    let (fp_len, add_len) = preserved_fp_bytes(w, end, saved_at);
    let saved = end + fp_len;
    let mov_len = if saved_at < 128 && w.has(saved + 5, MOV_RBP_TO_RSP_DISP8) && w.at(saved + 1) == saved_at {
        5
    } else if w.has(saved + 8, MOV_RBP_TO_RSP_DISP32) && w.u32_ending(saved) == u64::from(saved_at) {
        8
    } else {
        0
    };
    if mov_len > 0 {
        let mov = saved + mov_len;
        if !(w.has(mov + 7, SUB_RSP_IMM32) && w.u32_ending(mov) == u64::from(frame_bytes - 8)) {
            return PROLOGUE_UNKNOWN;
        }
        return match at {
            a if a > mov => PROLOGUE_ENTRY,
            a if a == mov => PROLOGUE_ALLOCATED,
            // On `mov %rsp,%rbp` or `add $F-16,%rbp`.
            a if fp_len > 0 && (a == saved || (add_len > 0 && a == end + add_len)) => PROLOGUE_COMPLETE,
            a if a <= end => PROLOGUE_COMPLETE,
            _ => PROLOGUE_UNKNOWN,
        };
    }
    // With a bang: `mov %eax,-N(%rsp)`, `push %rbp`, [`mov %rsp,%rbp`], [`sub $F-16,%rsp`].
    let allocated = frame_bytes - 16;
    let sub_len = if allocated == 0 {
        0
    } else if allocated < 128 && w.has(end + 4, SUB_RSP_IMM8) && w.at(end + 1) == allocated {
        4
    } else if w.has(end + 7, SUB_RSP_IMM32) && w.u32_ending(end) == u64::from(allocated) {
        7
    } else {
        return PROLOGUE_UNKNOWN;
    };
    let sub = end + sub_len;
    let mov_len = if w.has(sub + 3, MOV_RBP_RSP[0]) || w.has(sub + 3, MOV_RBP_RSP[1]) { 3 } else { 0 };
    let pushed = sub + mov_len;
    let push = pushed + 1;
    // A negative displacement: the bang touches the stack below sp (OUTSIDE_U32 has bit 31
    // clear).
    let bang_displacement = w.u32_ending(push);
    if !(w.has(push, [PUSH_RBP]) && w.has(push + 7, BANG) && bang_displacement & 0x8000_0000 != 0) {
        return PROLOGUE_UNKNOWN;
    }
    match at {
        a if a >= push => PROLOGUE_ENTRY,
        a if a == pushed || (mov_len > 0 && a == sub) => PROLOGUE_PUSHED,
        a if a <= end => PROLOGUE_COMPLETE,
        _ => PROLOGUE_UNKNOWN,
    }
}
