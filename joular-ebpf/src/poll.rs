//! HotSpot's safepoint poll in compiled code, as the unwinder meets it in a caller's place.
//!
//! A thread that stops at a loop's safepoint poll (C1 and C2 emit `test %eax, (%reg)` on
//! the thread's polling page; JDK 10+) faults there, and the JVM's signal handler resumes it
//! in the safepoint handler blob (`SafepointBlob`), which stores the faulting pc
//! (`JavaThread::_saved_exception_pc`) in its frame as if that pc had called it. Stepping out
//! of that blob therefore reaches a compiled frame whose "return address" is the poll
//! itself, which follows no call instruction: without this check the walk cut every stack
//! there (`[truncated: bad_return]` under `SafepointBlob`), and the samples of a thread in a
//! safepoint, a handshake or JDK 25's JFR, which walks stacks at the poll, lost their Java
//! callers. The frame at a loop poll is complete, and its PcDesc is at the poll's own pc.

/// Bytes [`is_safepoint_poll`] reads at a pc.
pub const POLL_BYTES: usize = 3;

/// HotSpot's `NativeTstRegMem` REX.B prefix (a polling-page register r8-r15).
const REX_B: u8 = 0x41;
/// `test r/m32, r32`.
const TEST_RM32_R32: u8 = 0x85;

/// Whether the instruction at these bytes is a safepoint poll, as HotSpot's
/// `NativeInstruction::is_safepoint_poll` tells one (x86_64): `test r/m32, %eax` with an
/// optional REX.B prefix. Stricter than HotSpot's check in one way: the operand must be in
/// memory (a poll reads the polling page), so `test %eax, %reg` is not a poll.
#[inline(always)]
pub fn is_safepoint_poll(b: [u8; POLL_BYTES]) -> bool {
    let (opcode, modrm) = if b[0] == REX_B { (b[1], b[2]) } else { (b[0], b[1]) };
    opcode == TEST_RM32_R32 && modrm & 0x38 == 0 && modrm & 0xc0 != 0xc0
}

/// Loop-poll handler blobs: `SharedRuntime::_polling_page_safepoint_handler_blob` and its
/// `_vectors_` twin.
pub const MAX_POLL_ENTRIES: usize = 2;

/// `[start, end)` of a loop-poll handler blob's code where its frame's return address is not
/// stored yet: a thread there was stopped at the poll whose pc is in its `JavaThread` (r15)
/// at `saved_pc_offset`, with the stopped frame's sp as far below as the entry pushed
/// (`push %rbx; push %rbp; mov %rsp,%rbp`, then rbp + 16).
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PollEntry {
    pub start: u64,
    pub end: u64,
    pub saved_pc_offset: u32,
    pub _pad: u32,
}
