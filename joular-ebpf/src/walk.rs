//! The user-stack walk for threads of JVMs in `JVMS`: the sampler follows the frame-pointer
//! chain itself, as `bpf_get_stackid(BPF_F_USER_STACK)` does, but records for every frame
//! whose pc is in the template interpreter the `Method*` and bcp read from that frame's
//! slots. User space cannot recover them later: the frame is gone by then, and all
//! interpreted frames share the interpreter's pcs.
//!
//! Each step is one 16-byte read (saved fp, return address); an interpreted frame takes one
//! read of its slot window instead. The walk stops at the thread's first frame (a saved fp
//! of 0), at a frame pointer that is not above the previous one or not aligned (code
//! without frame pointers: `JAVA_STACK_CUT`), at a failed read (cut, counted) or after
//! `MAX_JAVA_FRAMES` (`JAVA_STACK_TRUNCATED`, counted). The stack is stored once per cycle
//! under its 64-bit hash; the sample counts reference the hash.

use aya_ebpf::{
    bindings::pt_regs,
    helpers::{
        bpf_probe_read_kernel, bpf_probe_read_user,
        generated::{bpf_get_current_task_btf, bpf_task_pt_regs},
    },
    programs::PerfEventContext,
};
use joular_ebpf::{
    JavaFrame, JavaStack, JvmConfig, DROP_JAVA_STACK_COLLISION, DROP_JAVA_STACK_MAP_FULL,
    DROP_JAVA_WALK_READ_FAILED, DROP_JAVA_WALK_TRUNCATED, FRAME_CODE, FRAME_INTERPRETED,
    FRAME_KIND_SHIFT, FRAME_NATIVE, FRAME_VALUE_MASK, INTERPRETER_WINDOW_WORDS, JAVA_STACK_CUT,
    JAVA_STACK_TRUNCATED, MAX_JAVA_FRAMES,
};

use crate::account::count_drop;
use crate::maps::{JAVA_SCRATCH, JAVA_STACKS_0, JAVA_STACKS_1};

const BPF_NOEXIST: u64 = 1;
const EEXIST: i32 = 17;
/// Words read for an interpreted frame: the slot window below fp, then saved fp and
/// return address.
const WINDOW_WORDS: usize = INTERPRETER_WINDOW_WORDS as usize + 2;
/// A method's bytecodes are at most 65535 bytes: a live bcp (r13) this close to the one
/// saved in the frame belongs to the same method.
const MAX_BYTECODE_BYTES: u64 = 1 << 16;

/// The user-mode registers the walk starts from.
pub struct UserRegs {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
    /// r13: the template interpreter's live bcp register on x86_64.
    pub bcp: u64,
}

/// Whether the sample interrupted user mode (then it has no kernel stack).
#[inline(always)]
pub fn sampled_user_mode(ctx: &PerfEventContext) -> bool {
    // SAFETY: ctx is the perf_event context; the verifier checks the constant-offset load.
    unsafe { (*ctx.ctx).regs.cs & 3 == 3 }
}

/// The user registers: the sampled ones when the sample hit user mode, else the ones saved
/// on entry to the kernel (`bpf_task_pt_regs`, Linux 5.15+).
#[inline(always)]
pub fn user_regs(ctx: &PerfEventContext, user_mode: bool) -> UserRegs {
    if user_mode {
        // SAFETY: as above.
        let r = unsafe { &(*ctx.ctx).regs };
        return UserRegs {
            pc: r.rip,
            sp: r.rsp,
            fp: r.rbp,
            bcp: r.r13,
        };
    }
    // Copied with helper reads, not loaded through the pointer: the compiler would share
    // the loads with the ctx branch above, and one load cannot serve two pointer types.
    // SAFETY: the helpers return the current task's saved user registers; the reads fail
    // cleanly (then the walk starts from zeros and stops at once).
    unsafe {
        let regs = bpf_task_pt_regs(bpf_get_current_task_btf()) as *const pt_regs;
        // r13, r12, rbp and rip, cs, eflags, rsp are adjacent in pt_regs.
        let low: [u64; 3] =
            bpf_probe_read_kernel(&raw const (*regs).r13 as *const [u64; 3]).unwrap_or([0; 3]);
        let high: [u64; 4] =
            bpf_probe_read_kernel(&raw const (*regs).rip as *const [u64; 4]).unwrap_or([0; 4]);
        UserRegs {
            pc: high[0],
            sp: high[3],
            fp: low[2],
            bcp: low[0],
        }
    }
}

#[inline(always)]
fn slot_index(slot: &i32) -> usize {
    // SAFETY: `slot` is a field of a live map value.
    let slot = unsafe { core::ptr::read_volatile(slot) };
    (INTERPRETER_WINDOW_WORDS + slot) as usize & (INTERPRETER_WINDOW_WORDS as usize - 1)
}

#[inline(always)]
fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

/// Walks the current thread's user stack into the per-CPU scratch stack and stores it in
/// `buffer`'s stack map. Returns its hash, or 0 when it could not be stored (counted).
#[inline(always)]
pub fn walk_and_store(cfg: &JvmConfig, regs: &UserRegs, buffer: u32) -> u64 {
    let Some(out) = JAVA_SCRATCH.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: per-CPU scratch, only this CPU uses it, and programs on a CPU do not nest
    // into the sampler.
    let out = unsafe { &mut *out };
    let hash = walk(cfg, regs, out);
    if hash == 0 || store(hash, out, buffer) {
        hash
    } else {
        0
    }
}

/// The walk itself; returns the stack's hash (0 only when `cfg` is unusable).
#[inline(always)]
fn walk(cfg: &JvmConfig, regs: &UserRegs, out: &mut JavaStack) -> u64 {
    let method_word = (INTERPRETER_WINDOW_WORDS + cfg.method_slot) as u32;
    let bcp_word = (INTERPRETER_WINDOW_WORDS + cfg.bcp_slot) as u32;
    if method_word >= INTERPRETER_WINDOW_WORDS as u32 || bcp_word >= INTERPRETER_WINDOW_WORDS as u32
    {
        return 0;
    }
    let window_bytes = (INTERPRETER_WINDOW_WORDS as u64) * 8;
    let mut pc = regs.pc;
    let mut fp = regs.fp;
    // Every frame pointer must be above this: the stack pointer, then the previous frame.
    let mut floor = regs.sp;
    let mut hash: u64 = 0x6a09_e667_f3bc_c909;
    let mut len: u32 = 0;
    let mut flags: u32 = JAVA_STACK_TRUNCATED;
    for i in 0..MAX_JAVA_FRAMES {
        let fp_ok = fp != 0 && fp & 7 == 0 && fp >= floor;
        let mut next = [0u64; 2];
        let mut frame = JavaFrame {
            addr: pc,
            aux: FRAME_NATIVE << FRAME_KIND_SHIFT,
        };
        let mut stepped = false;
        if pc >= cfg.code_start && pc < cfg.code_end {
            frame.aux = FRAME_CODE << FRAME_KIND_SHIFT;
        }
        if fp_ok && pc >= cfg.interpreter_start && pc < cfg.interpreter_end {
            // SAFETY: a user-space read that fails cleanly.
            if let Ok(w) =
                unsafe { bpf_probe_read_user((fp - window_bytes) as *const [u64; WINDOW_WORDS]) }
            {
                let saved_bcp = w[slot_index(&cfg.bcp_slot)];
                let mut bcp = saved_bcp;
                // In the frame that was interrupted, r13 holds the live bcp; the slot only
                // the one saved at the last call or safepoint.
                if i == 0
                    && regs
                        .bcp
                        .wrapping_sub(saved_bcp)
                        .wrapping_add(MAX_BYTECODE_BYTES)
                        < 2 * MAX_BYTECODE_BYTES
                {
                    bcp = regs.bcp;
                }
                frame = JavaFrame {
                    addr: w[slot_index(&cfg.method_slot)],
                    aux: (FRAME_INTERPRETED << FRAME_KIND_SHIFT) | (bcp & FRAME_VALUE_MASK),
                };
                next = [w[WINDOW_WORDS - 2], w[WINDOW_WORDS - 1]];
                stepped = true;
            }
        }
        out.frames[i] = frame;
        len = i as u32 + 1;
        hash = mix(mix(hash, frame.addr), frame.aux);
        if !fp_ok {
            // A saved fp of 0 is the thread's first frame: the natural end.
            flags = if fp == 0 { 0 } else { JAVA_STACK_CUT };
            break;
        }
        if !stepped {
            // SAFETY: as above.
            match unsafe { bpf_probe_read_user(fp as *const [u64; 2]) } {
                Ok(n) => next = n,
                Err(_) => {
                    count_drop(DROP_JAVA_WALK_READ_FAILED);
                    flags = JAVA_STACK_CUT;
                    break;
                }
            }
        }
        if next[1] == 0 {
            flags = 0;
            break;
        }
        floor = fp + 16;
        fp = next[0];
        pc = next[1];
    }
    if flags & JAVA_STACK_TRUNCATED != 0 {
        count_drop(DROP_JAVA_WALK_TRUNCATED);
    }
    out.len = len;
    out.flags = flags;
    match mix(hash, u64::from(len) | u64::from(flags) << 32) {
        0 => 1,
        h => h,
    }
}

/// Stores the stack under `hash` unless this cycle already has it. A stored stack of
/// another length or leaf under the same hash is a collision (counted, not stored).
#[inline(always)]
fn store(hash: u64, stack: &JavaStack, buffer: u32) -> bool {
    let map = if buffer == 0 {
        &JAVA_STACKS_0
    } else {
        &JAVA_STACKS_1
    };
    if let Some(old) = map.get_ptr(hash) {
        // SAFETY: a map value; another CPU may overwrite nothing (entries are insert-only
        // within a cycle), so the read is consistent.
        let same = unsafe { (*old).len == stack.len && (*old).frames[0] == stack.frames[0] };
        if !same {
            count_drop(DROP_JAVA_STACK_COLLISION);
        }
        return same;
    }
    match map.insert(hash, stack, BPF_NOEXIST) {
        Ok(()) => true,
        // Another CPU stored the same stack in the meantime.
        Err(e) if e == -EEXIST => true,
        Err(_) => {
            count_drop(DROP_JAVA_STACK_MAP_FULL);
            false
        }
    }
}
