//! Where a compiled Java method's epilogue is when a sample interrupts it after its frame was
//! torn down: read from the instruction bytes around the pc. Shared with user space, which
//! tests it on the epilogues of real nmethods of JDK 11 to 25.
//!
//! C1 and C2 end a method alike (`MachEpilogNode::emit`, `LIR_Assembler::return_op`):
//! `add $F-16,%rsp`, `pop %rbp`, the return's safepoint poll, `ret`. The poll reads the
//! thread's polling word after the frame is gone:
//! - JDK 17 and later: `cmp <polling word>(%r15),%rsp` (7 bytes, or 4 with an 8-bit
//!   displacement, as JDK 25's layout has it), then `ja` to the poll's out-of-line stub;
//! - JDK 11: `mov <polling page>(%r15),%r10`, then `test %eax,(%r10)`.
//!
//! Between `pop %rbp` and `ret` the return address is at sp and rbp is the caller's: the
//! frame size no longer applies, and a step by it reads a word of the caller's frame instead,
//! which either fails a later check (H2 on JDK 17 lost ~0.8% of its samples' callers there,
//! `[truncated: native_unmapped]` under a compiled leaf) or, worse, is the caller's own return
//! address and silently skips the caller. A sample lands on the instruction after the poll's
//! load (the `ja`, or JDK 11's `test`) about as often as on the load itself, since the timer
//! interrupt is taken once the load completes.

/// Bytes read before the pc: `pop %rbp` and the longest poll load after it.
pub const EPILOGUE_BEHIND_BYTES: usize = 8;
/// Bytes read in all, starting `EPILOGUE_BEHIND_BYTES` before the pc: the pc's byte and the
/// 15 after it, where the `ret` must be.
pub const EPILOGUE_WINDOW_BYTES: usize = EPILOGUE_BEHIND_BYTES + 16;

/// Not an epilogue after the frame's teardown (or one these bytes do not prove): step the
/// frame by its size.
pub const EPILOGUE_NONE: u32 = 0;
/// On the `ret`, or past `pop %rbp` (or `leave`) and before the `ret`: the return address
/// is at sp and rbp is the caller's.
pub const EPILOGUE_RETURN_AT_SP: u32 = 1;
/// On `pop %rbp`: the saved rbp at sp, the return address above it.
pub const EPILOGUE_AT_POP_RBP: u32 = 2;

const RET: u8 = 0xc3;
const POP_RBP: u8 = 0x5d;
const LEAVE: u8 = 0xc9;
/// The polls' loads, without their displacement: REX, opcode and ModRM of `cmp
/// disp(%r15),%rsp` (REX.WB 3B /r, reg rsp, rm r15) and of `mov disp(%r15),%r10` (REX.WRB 8B /r),
/// with a 32-bit and with an 8-bit displacement.
const CMP_RSP_R15_DISP32: [u8; 3] = [0x49, 0x3b, 0xa7];
const CMP_RSP_R15_DISP8: [u8; 3] = [0x49, 0x3b, 0x67];
const MOV_R10_R15_DISP32: [u8; 3] = [0x4d, 0x8b, 0x97];
const MOV_R10_R15_DISP8: [u8; 3] = [0x4d, 0x8b, 0x57];

/// The state of the epilogue at a pc, from `code`, the [`EPILOGUE_WINDOW_BYTES`] bytes that
/// start [`EPILOGUE_BEHIND_BYTES`] before it: one of the `EPILOGUE_*` states. Only where a
/// `ret` follows within 14 bytes: a 0x5d or 0xc3 byte elsewhere is part of another
/// instruction.
#[inline(always)]
pub fn epilogue_state(code: &[u8; EPILOGUE_WINDOW_BYTES]) -> u32 {
    let at = EPILOGUE_BEHIND_BYTES;
    if code[at] == RET {
        return EPILOGUE_RETURN_AT_SP;
    }
    let mut ret_follows = false;
    for &b in &code[at + 1..at + 15] {
        ret_follows |= b == RET;
    }
    if !ret_follows {
        return EPILOGUE_NONE;
    }
    if code[at] == POP_RBP {
        return EPILOGUE_AT_POP_RBP;
    }
    if code[at - 1] == POP_RBP || code[at - 1] == LEAVE || after_return_poll_load(code) {
        return EPILOGUE_RETURN_AT_SP;
    }
    EPILOGUE_NONE
}

/// Whether the pc follows `pop %rbp` and one of the return polls' loads right after it.
#[inline(always)]
fn after_return_poll_load(code: &[u8; EPILOGUE_WINDOW_BYTES]) -> bool {
    let at = EPILOGUE_BEHIND_BYTES;
    // A 7-byte load (a 32-bit displacement) or a 4-byte one (8-bit).
    let long = code[at - 8] == POP_RBP
        && (starts(code, at - 7, CMP_RSP_R15_DISP32) || starts(code, at - 7, MOV_R10_R15_DISP32));
    let short =
        code[at - 5] == POP_RBP && (starts(code, at - 4, CMP_RSP_R15_DISP8) || starts(code, at - 4, MOV_R10_R15_DISP8));
    long || short
}

#[inline(always)]
fn starts(code: &[u8; EPILOGUE_WINDOW_BYTES], from: usize, bytes: [u8; 3]) -> bool {
    code[from] == bytes[0] && code[from + 1] == bytes[1] && code[from + 2] == bytes[2]
}
