//! One step out of a native frame by its file's row: the CFA from rsp or rbp, the return
//! address just below it, the caller's rbp where the row says it is saved (or rbp itself,
//! untouched by the frame), the PLT's rule, and a signal trampoline's saved registers.
//!
//! A caller's pc is a return address: its row is the one of the call before it (pc - 1; a
//! call may be a function's last instruction). The leaf's pc, and a pc a signal interrupted,
//! are where the thread was, and are looked up as they are.

use super::{
    Lookup, UnwindRow, SIGNAL_FRAME_RBP_BYTES, SIGNAL_FRAME_RIP_BYTES, SIGNAL_FRAME_RSP_BYTES, UNWIND_CFA_RBP,
    UNWIND_CFA_RSP, UNWIND_END, UNWIND_PLT, UNWIND_SIGNAL,
};
use crate::{DROP_JAVA_WALK_BAD_RETURN, DROP_JAVA_WALK_READ_FAILED, DROP_NATIVE_NO_ROW, DROP_NATIVE_UNMAPPED};

/// Most bytes between a frame's sp and its caller's (Java threads' stacks are 1 MiB by
/// default; no frame of the JVM, of libc or of compiled code comes near).
pub const MAX_FRAME_BYTES: u64 = 1 << 20;

/// What a step reads: the walked process's rows and its thread's stack. The sampler reads them
/// from its maps and a window of the stack; a test from a recorded table and stack.
pub trait UnwindSource {
    /// The row holding `pc` in the walked process's table.
    fn row_at(&mut self, pc: u64) -> Lookup;
    /// The `N` stack words at `at`; `None` when they cannot be read.
    fn stack_words<const N: usize>(&mut self, at: u64) -> Option<[u64; N]>;
}

/// The registers a native step needs.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct NativeRegs {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
}

/// Where a step leads.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NativeStep {
    /// The caller's frame. `interrupted`: a signal interrupted it at `regs.pc`, which is then
    /// where it was, not a return address.
    Caller { regs: NativeRegs, interrupted: bool },
    /// The thread's first frame (its return address is undefined or 0).
    End,
    /// The process has no table yet.
    NoTable,
    /// The walk cannot go on from this frame, counted under this `DROP_*`.
    Cut(u32),
}

/// Steps the native frame at `regs`. `where_it_was`: `regs.pc` is the leaf's or one a signal
/// interrupted, not a return address.
#[inline(always)]
pub fn native_step<S: UnwindSource>(src: &mut S, regs: NativeRegs, where_it_was: bool) -> NativeStep {
    let at = if where_it_was { regs.pc } else { regs.pc.wrapping_sub(1) };
    match src.row_at(at) {
        Lookup::Row(row) => step_by_row(src, row, regs),
        Lookup::NoTable => NativeStep::NoTable,
        Lookup::Unmapped => NativeStep::Cut(DROP_NATIVE_UNMAPPED),
    }
}

#[inline(always)]
fn step_by_row<S: UnwindSource>(src: &mut S, row: UnwindRow, regs: NativeRegs) -> NativeStep {
    let base = match row.kind {
        UNWIND_CFA_RSP | UNWIND_PLT => regs.sp,
        UNWIND_CFA_RBP => regs.fp,
        UNWIND_END => return NativeStep::End,
        UNWIND_SIGNAL => return signal_step(src, regs.sp),
        _ => return NativeStep::Cut(DROP_NATIVE_NO_ROW),
    };
    let mut cfa = base.wrapping_add(row.cfa_offset as i64 as u64);
    if row.kind == UNWIND_PLT && (regs.pc & 15) >= row.rbp_words as u64 {
        // The entry pushed its slot index.
        cfa = cfa.wrapping_add(8);
    }
    // The caller's frame is above this one, and no frame is larger than a thread's stack.
    if cfa & 7 != 0 || cfa <= regs.sp || cfa - regs.sp >= MAX_FRAME_BYTES {
        return NativeStep::Cut(DROP_JAVA_WALK_BAD_RETURN);
    }
    let words = match row.kind {
        UNWIND_PLT => 0,
        _ => row.rbp_words as i64,
    };
    // The saved rbp first: it is below the return address, so the sampler's window read for
    // it holds the return address too (the other order reads the stack twice).
    let fp = match words {
        0 => regs.fp,
        w => match src.stack_words::<1>(cfa.wrapping_add((w * 8) as u64)) {
            Some([v]) => v,
            None => return NativeStep::Cut(DROP_JAVA_WALK_READ_FAILED),
        },
    };
    match src.stack_words::<1>(cfa.wrapping_sub(8)) {
        Some([ret]) => caller(ret, cfa, fp),
        None => NativeStep::Cut(DROP_JAVA_WALK_READ_FAILED),
    }
}

/// The caller at return address `ret`: 0 is the thread's first frame, the natural end.
#[inline(always)]
fn caller(ret: u64, sp: u64, fp: u64) -> NativeStep {
    match ret {
        0 => NativeStep::End,
        pc => NativeStep::Caller { regs: NativeRegs { pc, sp, fp }, interrupted: false },
    }
}

/// Steps out of a signal trampoline (`__restore_rt`) to the frame the signal interrupted: its
/// registers are in the `ucontext_t` at sp. The saved sp may be on another stack
/// (`sigaltstack`): it is not compared with this one.
#[inline(always)]
fn signal_step<S: UnwindSource>(src: &mut S, sp: u64) -> NativeStep {
    const WORDS: usize = ((SIGNAL_FRAME_RIP_BYTES - SIGNAL_FRAME_RBP_BYTES) / 8) as usize + 1;
    const RSP: usize = ((SIGNAL_FRAME_RSP_BYTES - SIGNAL_FRAME_RBP_BYTES) / 8) as usize;
    let Some(saved) = src.stack_words::<WORDS>(sp.wrapping_add(SIGNAL_FRAME_RBP_BYTES)) else {
        return NativeStep::Cut(DROP_JAVA_WALK_READ_FAILED);
    };
    let (fp, sp, pc) = (saved[0], saved[RSP], saved[WORDS - 1]);
    if pc == 0 {
        return NativeStep::Cut(DROP_JAVA_WALK_BAD_RETURN);
    }
    NativeStep::Caller { regs: NativeRegs { pc, sp, fp }, interrupted: true }
}
