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
//! under its 64-bit hash; the sample counts reference the hash. Each CPU remembers the
//! hashes it stored lately in this buffer generation, so a stack seen again (a hot loop)
//! costs no lookup in the shared stack map, whose cold cache lines and TLB entries are most
//! of a sample's cost.

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
use crate::maps::{JAVA_SCRATCH, JAVA_STACKS_0, JAVA_STACKS_1, RECENT_STACKS};

const BPF_NOEXIST: u64 = 1;
/// Recently stored stack hashes each CPU remembers (see `RecentStacks`).
pub const RECENT_STACK_SLOTS: usize = 64;

/// Per CPU: (hash, tag) of stacks stored lately, by `hash % RECENT_STACK_SLOTS`.
#[repr(C)]
pub struct RecentStacks {
    pub slots: [[u64; 2]; RECENT_STACK_SLOTS],
}
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
/// the stack map of the buffer `tag` names (`CONFIG_ACTIVE_BUFFER`) under the hash of its
/// frames below the leaf. Returns that hash (0 when the stack could not be stored,
/// counted) and the leaf frame, which the sample's key carries.
#[inline(always)]
pub fn walk_and_store(cfg: &JvmConfig, regs: &UserRegs, tag: u32) -> (u64, JavaFrame) {
    let Some(out) = JAVA_SCRATCH.get_ptr_mut(0) else {
        return (0, JavaFrame::default());
    };
    // SAFETY: per-CPU scratch, only this CPU uses it, and programs on a CPU do not nest
    // into the sampler.
    let out = unsafe { &mut *out };
    let hash = walk(cfg, regs, out);
    let leaf = out.frames[0];
    if hash == 0 || store(hash, out, tag) {
        (hash, leaf)
    } else {
        (0, leaf)
    }
}

/// Where the walk is: the frame to record next and the bound its fp must be above.
struct Cursor {
    pc: u64,
    fp: u64,
    floor: u64,
}

/// What one step found: the frame at the cursor, and whether the walk goes on (`None`) or
/// stops there with these `JAVA_STACK_*` flags.
struct Step {
    frame: JavaFrame,
    stop: Option<u32>,
}

/// Records the frame at the cursor and moves the cursor to its caller. `live_bcp` is r13
/// for the interrupted frame: there it holds the current bcp, while the frame's slot holds
/// the one saved at the last call or safepoint.
#[inline(always)]
fn step(cfg: &JvmConfig, c: &mut Cursor, live_bcp: Option<u64>) -> Step {
    let (pc, fp) = (c.pc, c.fp);
    let fp_ok = fp != 0 && fp & 7 == 0 && fp >= c.floor;
    let mut frame = JavaFrame {
        addr: pc,
        aux: FRAME_NATIVE << FRAME_KIND_SHIFT,
    };
    if pc >= cfg.code_start && pc < cfg.code_end {
        frame.aux = FRAME_CODE << FRAME_KIND_SHIFT;
    }
    if !fp_ok {
        // A saved fp of 0 is the thread's first frame: the natural end.
        let flags = if fp == 0 { 0 } else { JAVA_STACK_CUT };
        return Step {
            frame,
            stop: Some(flags),
        };
    }
    let next: [u64; 2];
    if pc >= cfg.interpreter_start && pc < cfg.interpreter_end {
        let window_bytes = (INTERPRETER_WINDOW_WORDS as u64) * 8;
        // SAFETY: a user-space read that fails cleanly.
        match unsafe { bpf_probe_read_user((fp - window_bytes) as *const [u64; WINDOW_WORDS]) } {
            Ok(w) => {
                let saved_bcp = w[slot_index(&cfg.bcp_slot)];
                let bcp = match live_bcp {
                    Some(r13)
                        if r13.wrapping_sub(saved_bcp).wrapping_add(MAX_BYTECODE_BYTES)
                            < 2 * MAX_BYTECODE_BYTES =>
                    {
                        r13
                    }
                    _ => saved_bcp,
                };
                frame = JavaFrame {
                    addr: w[slot_index(&cfg.method_slot)],
                    aux: (FRAME_INTERPRETED << FRAME_KIND_SHIFT) | (bcp & FRAME_VALUE_MASK),
                };
                next = [w[WINDOW_WORDS - 2], w[WINDOW_WORDS - 1]];
            }
            Err(_) => {
                count_drop(DROP_JAVA_WALK_READ_FAILED);
                return Step {
                    frame,
                    stop: Some(JAVA_STACK_CUT),
                };
            }
        }
    } else {
        // SAFETY: as above.
        match unsafe { bpf_probe_read_user(fp as *const [u64; 2]) } {
            Ok(n) => next = n,
            Err(_) => {
                count_drop(DROP_JAVA_WALK_READ_FAILED);
                return Step {
                    frame,
                    stop: Some(JAVA_STACK_CUT),
                };
            }
        }
    }
    if next[1] == 0 {
        return Step {
            frame,
            stop: Some(0),
        };
    }
    c.floor = fp + 16;
    c.fp = next[0];
    c.pc = next[1];
    Step { frame, stop: None }
}

/// The walk itself: the interrupted frame first, then its callers. Returns the hash of the
/// frames below the leaf (0 only when `cfg` is unusable).
#[inline(always)]
fn walk(cfg: &JvmConfig, regs: &UserRegs, out: &mut JavaStack) -> u64 {
    let method_word = (INTERPRETER_WINDOW_WORDS + cfg.method_slot) as u32;
    let bcp_word = (INTERPRETER_WINDOW_WORDS + cfg.bcp_slot) as u32;
    if method_word >= INTERPRETER_WINDOW_WORDS as u32 || bcp_word >= INTERPRETER_WINDOW_WORDS as u32
    {
        return 0;
    }
    let mut cursor = Cursor {
        pc: regs.pc,
        fp: regs.fp,
        floor: regs.sp,
    };
    let top = step(cfg, &mut cursor, Some(regs.bcp));
    out.frames[0] = top.frame;
    let mut hash: u64 = 0x6a09_e667_f3bc_c909;
    let mut len: u32 = 1;
    let mut flags = JAVA_STACK_TRUNCATED;
    if let Some(stop) = top.stop {
        flags = stop;
    } else {
        for i in 1..MAX_JAVA_FRAMES {
            let s = step(cfg, &mut cursor, None);
            out.frames[i] = s.frame;
            len = i as u32 + 1;
            hash = mix(mix(hash, s.frame.addr), s.frame.aux);
            if let Some(stop) = s.stop {
                flags = stop;
                break;
            }
        }
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
/// another length or first caller under the same hash is a collision (counted, not stored).
#[inline(always)]
fn store(hash: u64, stack: &JavaStack, tag: u32) -> bool {
    let Some(recent) = RECENT_STACKS.get_ptr_mut(0) else {
        return false;
    };
    // SAFETY: per-CPU, only this CPU's sampler uses it.
    let slot = unsafe { &mut (*recent).slots[hash as usize & (RECENT_STACK_SLOTS - 1)] };
    // The tag changes at every flip: an entry of this tag was stored in this very buffer,
    // which user space drains only after flipping away from it.
    if slot[0] == hash && slot[1] == u64::from(tag) {
        return true;
    }
    let stored = store_in_map(hash, stack, tag & 1);
    if stored {
        *slot = [hash, u64::from(tag)];
    }
    stored
}

#[inline(always)]
fn store_in_map(hash: u64, stack: &JavaStack, buffer: u32) -> bool {
    let map = if buffer == 0 {
        &JAVA_STACKS_0
    } else {
        &JAVA_STACKS_1
    };
    if let Some(old) = map.get_ptr(hash) {
        // SAFETY: a map value; another CPU may overwrite nothing (entries are insert-only
        // within a cycle), so the read is consistent.
        let same = unsafe {
            (*old).len == stack.len && (stack.len < 2 || (*old).frames[1] == stack.frames[1])
        };
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
