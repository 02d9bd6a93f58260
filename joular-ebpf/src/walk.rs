//! The user-stack walk for threads of JVMs in `JVMS`: the sampler unwinds the stack itself
//! and records for every frame whose pc is in the template interpreter the `Method*` and bcp
//! read from that frame's slots. User space cannot recover them later: the frame is gone by
//! then, and all interpreted frames share the interpreter's pcs.
//!
//! Two unwinders, chosen per JVM by user space (`JvmConfig::unwind`):
//! - frame pointers (`JVM_UNWIND_FP`, JVMs with `-XX:+PreserveFramePointer`): every frame
//!   is one 16-byte read at fp (saved fp, return address); a leaf in the code cache is
//!   looked up as below first, so one caught in its prologue is cut and one in its
//!   epilogue steps by what is left of its frame (rbp is still or again its caller's
//!   there: stepping by it would skip the caller);
//! - HotSpot (`JVM_UNWIND_HOTSPOT`, any other JVM): a pc in a code heap is looked up in
//!   the heap's segment map to find its `CodeBlob`, and the frame is stepped by the blob's
//!   frame size from sp to the caller's sp, with the return address and saved rbp just below
//!   it (how HotSpot's own `frame::sender` does it; the lookup is in `codeblob.rs`).
//!   Interpreted frames step by fp (their caller sp is the one they saved). Stubs without
//!   a frame size: a vtable or itable stub (blob `vtable chunks`) pushes nothing, so its
//!   return address is at sp; an I2C/C2I adapter neither, its return address is at sp
//!   except while it moves it (then found through the registers that hold it, or cut; see
//!   `leaf::adapter_step`); any other stub leaf
//!   steps by rbp when rbp points just above sp (the frame it set up, or the one around a
//!   second frame it nests inside), else by a return address at sp (a stub that pushed no
//!   frame, under a compiled caller whose rbp is a scratch register). A leaf caught in an
//!   epilogue (on `pop rbp`, the return's safepoint poll after it, or `ret`;
//!   `joular_ebpf::epilogue`) steps by what is left of its frame; one caught in a
//!   compiled method's prologue, by how far the prologue got, which its instruction bytes
//!   say (`joular_ebpf::prologue`).
//!
//! Nothing is made up: a pc in the code cache that no live blob holds, a leaf interrupted in
//! a prologue whose bytes prove nothing (its frame is not set up yet) and a return address
//! that no call instruction precedes (a step through garbage) end the walk there, flagged
//! `JAVA_STACK_CUT` and counted by cause; the suspicious frame itself is not kept. Compiled
//! frames carry their nmethod's compile id, which user space checks against the blob it
//! names them from. The `Method*` of an interpreted frame, and an nmethod (compile id and
//! `Method*`) when its blob is read, are reported to user space the first time the walk meets
//! them (`report.rs`), so they are named while the JVM still has them.
//! A per-CPU cache of blob lookups (`joular_ebpf::blob_cache`) spares the segment-map hops,
//! the name read and a known return address's call check of blobs seen before, and for an
//! nmethod the header window too; the nmethod's compile id is read at every frame, and the
//! block's `used` flag at every frame but the one the thread was running in (code a thread
//! runs is live), so a freed or reused blob is never trusted.
//!
//! Saved frame pointers and return addresses are taken from a window of the thread's stack
//! read once for several frames (`stack_pair`); the stack does not change while its
//! thread is interrupted, and the window is forgotten at each walk's start.
//!
//! The walk is one `bpf_loop` (one frame per call, state in a per-CPU map), so the verifier
//! checks the step once rather than once per frame. The step and its largest parts (the
//! native step with its row searches, the blob reader, the prologue decoder) are global
//! functions (`joular_*`), which the verifier checks once each, on their own, rather than at
//! every state their caller reaches them in: verifying the sampler took ~0.8 s of a CPU
//! inside the profiled program's first second (285,000 instructions processed), now ~0.05 s
//! (45,000). It stops at the thread's first frame (a
//! saved fp or return address of 0), at a failed read (cut, counted) or after
//! `MAX_JAVA_FRAMES` (`JAVA_STACK_TRUNCATED`, counted). The stack is stored once per cycle
//! under its 64-bit hash; the sample counts reference the hash. Each CPU remembers the
//! hashes it stored lately in this buffer generation, so a stack seen again (a hot loop)
//! costs no lookup in the shared stack map, whose cold cache lines and TLB entries are most
//! of a sample's cost.

use core::ffi::c_void;

use aya_ebpf::{
    bindings::pt_regs,
    helpers::{
        bpf_probe_read_kernel,
        generated::{bpf_get_current_task_btf, bpf_loop, bpf_probe_read_user as read_user_into, bpf_task_pt_regs},
    },
    programs::PerfEventContext,
};
use joular_ebpf::{
    blob_cache::{BLOB_CACHE_SLOTS, LEAF_ADAPTER, LEAF_BY_FRAME, LEAF_VTABLE_STUB},
    JavaFrame, CONFIG_TARGETS_GEN, DROP_JAVA_WALK_BAD_RETURN, DROP_JAVA_WALK_NO_BLOB, DROP_JAVA_WALK_PROLOGUE,
    DROP_JAVA_WALK_READ_FAILED, DROP_JAVA_WALK_TRUNCATED, FRAME_CODE, FRAME_CODE_COMPILE_ID, FRAME_INTERPRETED,
    FRAME_KIND_SHIFT, FRAME_NATIVE, FRAME_VALUE_MASK, INTERPRETER_WINDOW_WORDS, JAVA_STACK_CUT, JAVA_STACK_HOTSPOT,
    JAVA_STACK_TRUNCATED, JVM_UNWIND_HOTSPOT, MAX_JAVA_FRAMES,
};
use joular_ebpf::{
    unwind::{self, Lookup, NativeRegs, NativeStep, UnwindSource, MAX_FRAME_BYTES},
    CUT_CAUSE_FRAME_POINTER, DROP_NATIVE_NO_TABLE, JAVA_STACK_CAUSE_MASK, JAVA_STACK_CAUSE_SHIFT,
};

use crate::codeblob::{at_safepoint_poll, blob_facts, follows_call, known_nmethod, place};

mod leaf;
use crate::maps::{count_drop, BlobFacts, WalkState, CONFIG, JAVA_SCRATCH, JVMS, STACK_WINDOW_WORDS, WALK_STATE};
use crate::native::{row_for, start_walk};
use crate::report::report_method;
use crate::stack_store::store;
use leaf::{
    adapter_step, epilogue_step, poll_entry_step, prologue_step, pushed_word_step, return_at, stub_fp_step,
    stub_frame_at_fp, stub_return_near_sp,
};

/// Words read for an interpreted frame: the slot window below fp, then saved fp and
/// return address.
const WINDOW_WORDS: usize = INTERPRETER_WINDOW_WORDS as usize + 2;
/// A method's bytecodes are at most 65535 bytes: a live bcp (r13) this close to the one
/// saved in the frame belongs to the same method.
const MAX_BYTECODE_BYTES: u64 = 1 << 16;
/// Most bytes between a stub's sp and the rbp frame it set up (the largest, the vector
/// crypto stubs, spill a few hundred bytes of registers).
const MAX_STUB_FRAME_BYTES: u64 = 1 << 12;
/// Most bytes an interpreted frame's saved caller sp may lie above its fp (its arguments
/// and locals sit in between; a method has at most 255 argument words and 65535 locals).
const MAX_INTERPRETER_EXTENSION_BYTES: u64 = 1 << 20;

/// The user-mode registers the walk starts from.
pub struct UserRegs {
    pub pc: u64,
    pub sp: u64,
    pub fp: u64,
    /// r13: the template interpreter's live bcp register on x86_64.
    pub bcp: u64,
    /// rax and r11: an adapter's return address and its caller's sp while it realigns the
    /// stack (`leaf::adapter_step`).
    pub rax: u64,
    pub r11: u64,
    /// r15: compiled code's `JavaThread*`, whose saved exception pc says where a thread
    /// entering a loop-poll handler blob was stopped (`leaf::poll_entry_step`).
    pub r15: u64,
}

/// Whether the sample interrupted user mode (then it has no kernel stack).
#[inline(always)]
pub fn sampled_user_mode(ctx: &PerfEventContext) -> bool {
    // SAFETY: ctx is the perf_event context; the verifier checks the constant-offset load.
    // Volatile: each caller reads it afresh (see `on_sample`).
    unsafe { core::ptr::read_volatile(&raw const (*ctx.ctx).regs.cs) & 3 == 3 }
}

/// The user registers: the sampled ones when the sample hit user mode, else the ones saved
/// on entry to the kernel (`bpf_task_pt_regs`, Linux 5.15+).
#[inline(always)]
pub fn user_regs(ctx: &PerfEventContext, user_mode: bool) -> UserRegs {
    if user_mode {
        // SAFETY: as above.
        let r = unsafe { &(*ctx.ctx).regs };
        return UserRegs { pc: r.rip, sp: r.rsp, fp: r.rbp, bcp: r.r13, rax: r.rax, r11: r.r11, r15: r.r15 };
    }
    saved_user_regs()
}

/// The user registers the current task saved on entry to the kernel (`bpf_task_pt_regs`,
/// Linux 5.15+): in a system call, where it called the kernel from.
#[inline(always)]
pub fn saved_user_regs() -> UserRegs {
    // Copied with helper reads, not loaded through the pointer: the compiler would share
    // the loads with the ctx branch of `user_regs`, and one load cannot serve two pointer types.
    // SAFETY: the helpers return the current task's saved user registers; the reads fail
    // cleanly (then the walk starts from zeros and stops at once).
    unsafe {
        let regs = bpf_task_pt_regs(bpf_get_current_task_btf()) as *const pt_regs;
        // r15, r14, r13, r12, rbp and rip, cs, eflags, rsp are adjacent in pt_regs.
        let low: [u64; 5] = bpf_probe_read_kernel(&raw const (*regs).r15 as *const [u64; 5]).unwrap_or([0; 5]);
        let high: [u64; 4] = bpf_probe_read_kernel(&raw const (*regs).rip as *const [u64; 4]).unwrap_or([0; 4]);
        // rax and r11 are not read: they serve an adapter leaf only, and the adapters make
        // no system calls (a page fault inside one stays cut, as before). r15 is: a thread
        // resumed at a loop-poll handler blob is sampled in `rt_sigreturn` too, its pt_regs
        // already the blob's entry.
        UserRegs { pc: high[0], sp: high[3], fp: low[4], bcp: low[2], rax: 0, r11: 0, r15: low[0] }
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

/// Whether `tgid` is a JVM in `JVMS`, its config then in this CPU's walk state. The answer
/// is kept with the `CONFIG_TARGETS_GEN` it was read under, which every change to `JVMS`
/// replaces: a thread sampled again (most samples) costs neither the hash lookup nor the
/// config's copy, whose cold cache lines were a tenth of a sample's cost.
#[inline(always)]
pub fn load_jvm(walker: u32, tgid: u32) -> bool {
    let Some(state) = WALK_STATE.get_ptr_mut(walker) else {
        return false;
    };
    // SAFETY: per-CPU value of this walker, only this CPU's walker uses it.
    let state = unsafe { &mut *state };
    // Read before `JVMS`: a change is made before its value is stored, so the answer below
    // is never older than the state this value names.
    let generation = CONFIG.get(CONFIG_TARGETS_GEN).copied().unwrap_or(0);
    if state.cfg_tgid != tgid || state.cfg_generation != generation {
        let jvm = match JVMS.get_ptr(tgid) {
            // SAFETY: a map value, written only by user space (which then changes the
            // generation).
            Some(cfg) => {
                joular_ebpf::words::copy_words(&mut state.cfg, unsafe { &*cfg });
                true
            }
            None => false,
        };
        state.cfg_tgid = tgid;
        state.cfg_generation = generation;
        state.cfg_is_jvm = u32::from(jvm);
    }
    // SAFETY: as above.
    unsafe { core::ptr::read_volatile(&state.cfg_is_jvm) != 0 }
}

/// Walks the current thread's user stack into the per-CPU scratch stack and stores it in
/// the stack map of the buffer `tag` names (`CONFIG_ACTIVE_BUFFER`) under the hash of its
/// frames below the leaf; the JVM's config is the one `load_jvm` just loaded. Returns that
/// hash (0 when the stack could not be stored, counted) and the leaf frame, which the
/// sample's key carries.
#[inline(always)]
pub fn walk_and_store(walker: u32, tgid: u32, regs: &UserRegs, tag: u32) -> (u64, JavaFrame) {
    let (Some(out), Some(state)) = (JAVA_SCRATCH.get_ptr_mut(walker), WALK_STATE.get_ptr_mut(walker)) else {
        return (0, JavaFrame::default());
    };
    // SAFETY: per-CPU scratch of this walker: only this CPU's walker uses it (the sampler
    // may interrupt a byte counter's walk, but walks in its own state).
    let (out, state) = unsafe { (&mut *out, &mut *state) };
    let method_word = (INTERPRETER_WINDOW_WORDS + state.cfg.method_slot) as u32;
    let bcp_word = (INTERPRETER_WINDOW_WORDS + state.cfg.bcp_slot) as u32;
    if method_word >= INTERPRETER_WINDOW_WORDS as u32 || bcp_word >= INTERPRETER_WINDOW_WORDS as u32 {
        return (0, JavaFrame::default());
    }
    state.tgid = tgid;
    state.walker = walker;
    start_walk(walker, tgid);
    state.stack_base = 0;
    state.interrupted_pc = 0;
    state.pc = regs.pc;
    state.sp = regs.sp;
    state.fp = regs.fp;
    state.live_bcp = regs.bcp;
    state.leaf_rax = regs.rax;
    state.leaf_r11 = regs.r11;
    state.leaf_r15 = regs.r15;
    state.hash = 0x6a09_e667_f3bc_c909;
    state.len = 0;
    state.flags = JAVA_STACK_TRUNCATED;
    joular_ebpf::words::zero_words(&mut out.frames[0]);
    let mut walker_ctx = walker;
    // SAFETY: `walk_frame` is a static function of the bpf_loop callback type; it takes
    // its state from the per-CPU maps of the walker the context points to.
    unsafe { bpf_loop(MAX_JAVA_FRAMES as u32, walk_frame as *mut c_void, &raw mut walker_ctx as *mut c_void, 0) };
    let (len, flags) = (state.len.max(1), state.flags);
    if flags & JAVA_STACK_TRUNCATED != 0 {
        count_drop(DROP_JAVA_WALK_TRUNCATED);
    }
    out.len = len;
    out.flags = flags;
    let hash = match mix(state.hash, u64::from(len) | u64::from(flags) << 32) {
        0 => 1,
        h => h,
    };
    let leaf = out.frames[0];
    if store(walker, hash, out, tag) {
        (hash, leaf)
    } else {
        (0, leaf)
    }
}

/// What one step found: the frame at the cursor (`None`: the cursor's pc is not a
/// believable frame and is dropped), and whether the walk goes on (`stop` = `None`) or
/// stops there with these `JAVA_STACK_*` flags.
struct Step {
    frame: Option<JavaFrame>,
    stop: Option<u32>,
}

impl Step {
    #[inline(always)]
    fn stop(frame: Option<JavaFrame>, flags: u32) -> Self {
        Step { frame, stop: Some(flags) }
    }

    /// Stops, counted under `drop`, which the stack also keeps as its cut's cause.
    #[inline(always)]
    fn cut(frame: Option<JavaFrame>, drop: u32) -> Self {
        count_drop(drop);
        Step::stop(frame, JAVA_STACK_CUT | (drop & JAVA_STACK_CAUSE_MASK) << JAVA_STACK_CAUSE_SHIFT)
    }
}

/// One frame per call, as `bpf_loop`'s callback: 0 goes on, 1 ends the loop.
extern "C" fn walk_frame(index: u64, ctx: *mut c_void) -> i64 {
    // SAFETY: `walk_and_store` passes a pointer to the walker on its stack.
    let walker = unsafe { *(ctx as *const u32) };
    // The verifier knows nothing of a global function's result: bounded here, as bpf_loop
    // requires (volatile: the compiler knows the result is 0 or 1 and would drop the bound).
    let result = joular_walk_step(index, u64::from(walker));
    // SAFETY: a local.
    i64::from(unsafe { core::ptr::read_volatile(&raw const result) } != 0)
}

/// The step of `walk_frame`, a global function: the verifier checks it once, on its own, with
/// any index and walker, rather than within the callback at every state the loop reaches.
#[no_mangle]
#[inline(never)]
pub extern "C" fn joular_walk_step(index: u64, walker: u64) -> i64 {
    let walker = walker as u32;
    let (Some(out), Some(state)) = (JAVA_SCRATCH.get_ptr_mut(walker), WALK_STATE.get_ptr_mut(walker)) else {
        return 1;
    };
    // SAFETY: per-CPU maps of this walker, only this CPU's walker uses them.
    let (out, state) = unsafe { (&mut *out, &mut *state) };
    let i = index as usize;
    if i >= MAX_JAVA_FRAMES {
        return 1;
    }
    let s = step(state, i == 0);
    if let Some(frame) = s.frame {
        out.frames[i] = frame;
        state.len = i as u32 + 1;
        if i > 0 {
            state.hash = mix(mix(state.hash, frame.addr), frame.aux);
        }
    }
    match s.stop {
        Some(flags) => {
            state.flags = flags | (state.flags & JAVA_STACK_HOTSPOT);
            1
        }
        None => 0,
    }
}

/// Records the frame at the cursor and moves the cursor to its caller. `leaf`: the
/// interrupted frame, whose pc is not a return address and whose r13 is the live bcp.
#[inline(always)]
fn step(state: &mut WalkState, leaf: bool) -> Step {
    let (pc, sp) = (state.pc, state.sp);
    let cfg = &state.cfg;
    if cfg.in_interpreter(pc) {
        return interpreted_step(state, leaf);
    }
    if !leaf && pc == cfg.call_stub_return && pc != 0 {
        // An entry frame: the call stub, returned into from the first Java frame the VM
        // called. HotSpot knows it by this very address, and the stub keeps an rbp frame;
        // its blob needs no lookup and the address no call check (one of each per sample
        // of every Java thread otherwise).
        let frame = JavaFrame { addr: pc, aux: FRAME_CODE << FRAME_KIND_SHIFT };
        return fp_step(state, frame);
    }
    let in_code = pc >= cfg.code_start && pc < cfg.code_end;
    if !in_code {
        let frame = JavaFrame { addr: pc, aux: FRAME_NATIVE << FRAME_KIND_SHIFT };
        return native_step(state, frame, leaf);
    }
    let mut frame = JavaFrame { addr: pc, aux: FRAME_CODE << FRAME_KIND_SHIFT };
    // Where a thread was, rather than where a call returns to: the sampled leaf, or code a
    // signal interrupted (its pc from the signal frame, `signal_step`). Such a frame may be
    // in its prologue or epilogue, and its pc follows no call.
    let interrupted = leaf || pc == state.interrupted_pc;
    // A return address into compiled code or a stub follows a call instruction (the
    // interpreter pushes its own return addresses, so it is not checked). One the blob
    // cache vouches for is checked below, once the blob is known to be the same nmethod.
    // With frame pointers, the leaf's blob is looked up too (when user space published the
    // heaps): a leaf in its prologue or epilogue has no frame of its own yet (or any more),
    // and stepping by rbp there would skip its caller.
    let hotspot = cfg.unwind == JVM_UNWIND_HOTSPOT;
    let place = if hotspot || interrupted { place(state, pc) } else { None };
    let vouched = match place {
        Some(p) => !interrupted && state.cache.entries[p.slot & (BLOB_CACHE_SLOTS - 1)].checked_return == pc,
        None => false,
    };
    // Nor does a loop's safepoint poll, where the safepoint handler blob returns to
    // (`joular_ebpf::poll`); it is checked only where no call precedes, which is rare.
    if !interrupted && !vouched && !follows_call(pc) && !at_safepoint_poll(pc) {
        return Step::cut(None, DROP_JAVA_WALK_BAD_RETURN);
    }
    if !hotspot && place.is_none() {
        return fp_step(state, frame);
    }
    // The leaf's pc is where the thread was: kept (user space names it or says it is
    // unknown); a caller's pc that no blob holds may be garbage: dropped.
    let Some(place) = place else {
        return Step::cut(interrupted.then_some(frame), DROP_JAVA_WALK_NO_BLOB);
    };
    let slot = place.slot & (BLOB_CACHE_SLOTS - 1);
    let facts = match known_nmethod(state, pc, &place, interrupted) {
        Some(id) => {
            let e = &state.cache.entries[slot];
            BlobFacts {
                code_begin: e.code_begin,
                frame_words: e.frame_words,
                complete: e.frame_complete,
                nmethod: true,
                compile_id: id,
                leaf_rule: LEAF_BY_FRAME,
            }
        }
        None => match blob_facts(state, pc, &place) {
            Ok(facts) => facts,
            Err(drop) => return Step::cut(interrupted.then_some(frame), drop),
        },
    };
    let BlobFacts { code_begin, frame_words, complete, nmethod, compile_id, leaf_rule } = facts;
    // A frame-pointer walk looks up the leaf's blob for its prologue only: its frames are
    // named from their pcs as they always were (a miss there re-reads the code cache).
    if nmethod && hotspot {
        frame.aux |= FRAME_CODE_COMPILE_ID | u64::from(compile_id);
    }
    if vouched
        && !state.cache.entries[slot].return_checked(pc, nmethod, compile_id)
        && !follows_call(pc)
        && !at_safepoint_poll(pc)
    {
        return Step::cut(None, DROP_JAVA_WALK_BAD_RETURN);
    }
    if !interrupted && nmethod {
        state.cache.entries[slot].learn_return(pc, compile_id);
    }
    // `_frame_complete_offset` is -1 for blobs that never set up a frame of their own.
    if interrupted && (complete as i32) > 0 && pc < code_begin + u64::from(complete) {
        return prologue_step(state, frame, code_begin + u64::from(complete), frame_words, nmethod);
    }
    if interrupted {
        // A loop-poll handler blob before it stored its return address, or restoring.
        if let Some(step) = poll_entry_step(state, frame, code_begin, leaf) {
            return step;
        }
        // A vtable or itable stub pushes nothing: its caller's return address is at sp,
        // and rbp is still the caller's (stepping by it would skip the caller).
        if leaf_rule == LEAF_VTABLE_STUB {
            return return_at(state, frame, sp, state.fp);
        }
        // Nor does an adapter, but its return address may also be moving (see the step).
        if leaf_rule == LEAF_ADAPTER {
            return adapter_step(state, frame, leaf);
        }
        if let Some(step) = epilogue_step(state, frame) {
            return step;
        }
        // Other stubs without a frame size (`StubRoutines`, adapters) set up an rbp frame
        // once past their first instructions, and a few never do. Without frame pointers
        // in compiled code, an rbp that points just above sp is this stub's frame; any
        // other rbp (a compiled caller's scratch value) means the stub pushed no frame, so
        // its return address is at sp. A wrong guess returns to where no call precedes,
        // which the next step cuts.
        if hotspot && !nmethod && frame_words == 0 {
            return match stub_frame_at_fp(state) {
                true => stub_fp_step(state, frame),
                false => stub_return_near_sp(state, frame),
            };
        }
        if hotspot && nmethod {
            if let Some(step) = pushed_word_step(state, frame, frame_words) {
                return step;
            }
        }
    }
    sized_step(state, frame, frame_words)
}

/// Steps a frame set up as its blob says: by its frame size from sp to the caller's sp,
/// with the return address and saved rbp just below it (HotSpot's unwinder), or by rbp (a
/// JVM with frame pointers, and stubs without a frame size).
#[inline(always)]
fn sized_step(state: &mut WalkState, frame: JavaFrame, frame_words: u32) -> Step {
    if state.cfg.unwind != JVM_UNWIND_HOTSPOT || frame_words == 0 || frame_words > 1 << 16 {
        // Stubs without a frame size (StubRoutines) set up an rbp frame, and so does all
        // code of a JVM with frame pointers once past its prologue.
        return fp_step(state, frame);
    }
    let caller_sp = state.sp + u64::from(frame_words) * 8;
    match stack_pair(state, caller_sp - 16) {
        // Compiled code always has a caller: a return address of 0 is not the end.
        Ok([_, 0]) => Step::cut(Some(frame), DROP_JAVA_WALK_BAD_RETURN),
        Ok([saved_fp, ret]) => {
            state.flags |= JAVA_STACK_HOTSPOT;
            advance(state, frame, ret, caller_sp, saved_fp)
        }
        Err(_) => Step::cut(Some(frame), DROP_JAVA_WALK_READ_FAILED),
    }
}

/// Moves the cursor to the caller (pc `ret`, sp, fp): a return address of 0 is the
/// thread's first frame, the natural end.
#[inline(always)]
fn advance(state: &mut WalkState, frame: JavaFrame, ret: u64, sp: u64, fp: u64) -> Step {
    if ret == 0 {
        return Step::stop(Some(frame), 0);
    }
    state.pc = ret;
    state.sp = sp;
    state.fp = fp;
    Step { frame: Some(frame), stop: None }
}

/// Steps a native frame by its file's unwind row (`joular_native_step`); the frame is the
/// native pc the cursor was at.
#[inline(always)]
fn native_step(state: &mut WalkState, frame: JavaFrame, leaf: bool) -> Step {
    match joular_native_step(state, u64::from(leaf)) {
        NATIVE_STEP_GOES_ON => Step { frame: Some(frame), stop: None },
        flags => Step::stop(Some(frame), flags as u32),
    }
}

/// `joular_native_step`'s answer when the cursor moved to the caller; any other answer is
/// the stop's `JAVA_STACK_*` flags.
const NATIVE_STEP_GOES_ON: i64 = -1;

/// Moves the cursor from a native frame to its caller by the frame's file's unwind row,
/// with the step the library shares with user space (`joular_ebpf::unwind::native_step`),
/// reading rows through `native.rs` and stack words through the stack window. A pc the table
/// has no rule for, or that is in none of its mappings, is a counted miss and ends the walk; a
/// process whose table is not loaded yet is stepped by frame pointers, as before rows existed
/// (counted too).
///
/// A global function: the verifier checks it once, on its own (the row searches are most of
/// the step's instructions), rather than at every state the HotSpot step reaches it in.
#[no_mangle]
#[inline(never)]
pub extern "C" fn joular_native_step(state: *mut WalkState, leaf: u64) -> i64 {
    // SAFETY: the caller's per-CPU walk state, handed on (the verifier checks it is memory
    // of the struct's size; a global function must still test it for null).
    let Some(state) = (unsafe { state.as_mut() }) else {
        return 0;
    };
    let frame = JavaFrame { addr: state.pc, aux: FRAME_NATIVE << FRAME_KIND_SHIFT };
    let regs = NativeRegs { pc: state.pc, sp: state.sp, fp: state.fp };
    // A frame a signal interrupted is where it was, as the leaf is.
    let where_it_was = leaf != 0 || state.pc == state.interrupted_pc;
    let step = match unwind::native_step(&mut SampledThread(state), regs, where_it_was) {
        NativeStep::Caller { regs, interrupted } => {
            if interrupted {
                state.interrupted_pc = regs.pc;
            }
            advance(state, frame, regs.pc, regs.sp, regs.fp)
        }
        NativeStep::End => Step::stop(Some(frame), 0),
        NativeStep::NoTable => {
            count_drop(DROP_NATIVE_NO_TABLE);
            fp_step(state, frame)
        }
        NativeStep::Cut(drop) => Step::cut(Some(frame), drop),
    };
    match step.stop {
        Some(flags) => i64::from(flags),
        None => NATIVE_STEP_GOES_ON,
    }
}

/// The sampled thread as the shared native step reads it.
struct SampledThread<'a>(&'a mut WalkState);

impl UnwindSource for SampledThread<'_> {
    #[inline(always)]
    fn row_at(&mut self, pc: u64) -> Lookup {
        row_for(self.0.walker, pc)
    }

    #[inline(always)]
    fn stack_words<const N: usize>(&mut self, at: u64) -> Option<[u64; N]> {
        let i = stack_window(self.0, at, N)?;
        let mut words = [0u64; N];
        for (k, word) in words.iter_mut().enumerate() {
            *word = self.0.stack[(i + k) & (STACK_WINDOW_WORDS - 1)];
        }
        Some(words)
    }
}

/// Steps a frame by its frame pointer: saved fp and return address at fp. A frame pointer
/// of 0 is the thread's first frame; one below sp, unaligned or further above it than any
/// frame is (a heap pointer or a number in rbp: code without frame pointers) is cut.
#[inline(always)]
fn fp_step(state: &mut WalkState, frame: JavaFrame) -> Step {
    let (sp, fp) = (state.sp, state.fp);
    if fp == 0 {
        return Step::stop(Some(frame), 0);
    }
    if fp & 7 != 0 || fp < sp || fp - sp >= MAX_FRAME_BYTES {
        return Step::stop(Some(frame), JAVA_STACK_CUT | CUT_CAUSE_FRAME_POINTER << JAVA_STACK_CAUSE_SHIFT);
    }
    match stack_pair(state, fp) {
        Ok([saved_fp, ret]) => advance(state, frame, ret, fp + 16, saved_fp),
        Err(_) => Step::cut(Some(frame), DROP_JAVA_WALK_READ_FAILED),
    }
}

/// The two stack words at `at` (see `stack_window`).
#[inline(always)]
fn stack_pair(state: &mut WalkState, at: u64) -> Result<[u64; 2], i64> {
    let i = stack_window(state, at, 2).ok_or(-1i64)?;
    let w = &state.stack;
    Ok([w[i & (STACK_WINDOW_WORDS - 1)], w[(i + 1) & (STACK_WINDOW_WORDS - 1)]])
}

/// Where the `words` stack words at `at` (8-aligned) are in `state.stack`: in the window
/// read at `state.stack_base` when it holds them, else in a window read from `at`; when
/// that read fails (near the top of the thread's stack), the words alone are read into its
/// start and the window is forgotten. `None`: they cannot be read. The stack does not move
/// while its thread is interrupted.
#[inline(always)]
fn stack_window(state: &mut WalkState, at: u64, words: usize) -> Option<usize> {
    if at & 7 != 0 {
        return None;
    }
    let base = state.stack_base;
    if base != 0 && at >= base && at - base <= ((STACK_WINDOW_WORDS - words) * 8) as u64 {
        return Some(((at - base) / 8) as usize);
    }
    state.stack_base = 0;
    let into = state.stack.as_mut_ptr() as *mut c_void;
    // SAFETY: the destination is this CPU's map value, `STACK_WINDOW_WORDS` words long (and
    // `words` is at most that); the source is a user-space address, read with a read that
    // fails cleanly.
    unsafe {
        if read_user_into(into, (STACK_WINDOW_WORDS * 8) as u32, at as *const c_void) == 0 {
            state.stack_base = at;
            return Some(0);
        }
        let bytes = (words.min(STACK_WINDOW_WORDS) * 8) as u32;
        (read_user_into(into, bytes, at as *const c_void) == 0).then_some(0)
    }
}

/// An interpreted frame: `Method*` and bcp from its slots, then a frame-pointer step whose
/// caller sp is the one the frame saved (a compiled caller's frame is measured from it).
#[inline(always)]
fn interpreted_step(state: &mut WalkState, leaf: bool) -> Step {
    let (sp, fp) = (state.sp, state.fp);
    let frame = JavaFrame { addr: state.pc, aux: FRAME_CODE << FRAME_KIND_SHIFT };
    // An interpreted frame always has its rbp frame; a caller's that is not above the
    // callee's sp came from a step through garbage. The leaf may be in the interpreter's
    // own code before the frame is set up (shown as the interpreter, then cut).
    if fp == 0 || fp & 7 != 0 || fp < sp {
        return match leaf {
            true => Step::cut(Some(frame), DROP_JAVA_WALK_PROLOGUE),
            false => Step::cut(None, DROP_JAVA_WALK_BAD_RETURN),
        };
    }
    let window_bytes = (INTERPRETER_WINDOW_WORDS as u64) * 8;
    // From the stack window: the frame usually lies just above the callee's, which the
    // window was last read for.
    let Some(i) = stack_window(state, fp - window_bytes, WINDOW_WORDS) else {
        return Step::cut(Some(frame), DROP_JAVA_WALK_READ_FAILED);
    };
    let w = |k: usize| state.stack[(i + k) & (STACK_WINDOW_WORDS - 1)];
    let cfg = &state.cfg;
    let saved_bcp = w(slot_index(&cfg.bcp_slot));
    let bcp = match leaf {
        true if state.live_bcp.wrapping_sub(saved_bcp).wrapping_add(MAX_BYTECODE_BYTES) < 2 * MAX_BYTECODE_BYTES => {
            state.live_bcp
        }
        _ => saved_bcp,
    };
    let frame = JavaFrame {
        addr: w(slot_index(&cfg.method_slot)),
        aux: (FRAME_INTERPRETED << FRAME_KIND_SHIFT) | (bcp & FRAME_VALUE_MASK),
    };
    let sender_sp = w(slot_index(&cfg.sender_sp_slot));
    let caller_sp =
        if sender_sp >= fp + 16 && sender_sp - fp < MAX_INTERPRETER_EXTENSION_BYTES { sender_sp } else { fp + 16 };
    let (ret, saved_fp) = (w(WINDOW_WORDS - 1), w(WINDOW_WORDS - 2));
    report_method(state, frame.addr);
    advance(state, frame, ret, caller_sp, saved_fp)
}
