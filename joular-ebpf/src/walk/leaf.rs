//! The steps out of a frame caught where its frame is not (yet, or any more) what its blob
//! says: a compiled leaf in its prologue or epilogue, and a stub leaf that sets up its frame
//! in a way of its own (see the module above).

use core::ffi::c_void;

use aya_ebpf::helpers::{bpf_probe_read_user, generated::bpf_probe_read_user as read_user_into};
use joular_ebpf::{
    epilogue::{
        epilogue_state, EPILOGUE_AT_POP_RBP, EPILOGUE_BEHIND_BYTES, EPILOGUE_NONE, EPILOGUE_RETURN_AT_SP,
        EPILOGUE_WINDOW_BYTES,
    },
    prologue::{
        frame_build_state_in, prologue_state_by, PROLOGUE_ALLOCATED, PROLOGUE_COMPLETE, PROLOGUE_ENTRY,
        PROLOGUE_PUSHED, PROLOGUE_UNKNOWN, PROLOGUE_WINDOW_BYTES,
    },
    JavaFrame, DROP_JAVA_WALK_BAD_RETURN, DROP_JAVA_WALK_PROLOGUE, DROP_JAVA_WALK_READ_FAILED, JAVA_STACK_HOTSPOT,
};

use super::{advance, sized_step, stack_pair, Step, MAX_STUB_FRAME_BYTES};
use crate::codeblob::follows_call;
use crate::maps::WalkState;

/// A compiled leaf interrupted before its frame is complete (`complete_at`, the code's
/// address where it is): stepped by how far its prologue got, which the instruction bytes
/// before `complete_at` say (`joular_ebpf::prologue`); cut when they prove nothing, or the
/// blob is not an nmethod (stubs build their frames in other ways).
#[inline(always)]
pub(super) fn prologue_step(
    state: &mut WalkState,
    frame: JavaFrame,
    complete_at: u64,
    frame_words: u32,
    nmethod: bool,
) -> Step {
    let (pc, sp) = (state.pc, state.sp);
    if !nmethod || frame_words > 1 << 16 {
        return Step::cut(Some(frame), DROP_JAVA_WALK_PROLOGUE);
    }
    let start = complete_at - PROLOGUE_WINDOW_BYTES as u64;
    let into = state.prologue.as_mut_ptr() as *mut c_void;
    // SAFETY: the destination is this CPU's map value, `PROLOGUE_WINDOW_BYTES` long; the
    // source a user-space read that fails cleanly (the bytes before the code are the
    // nmethod's header, in the same blob).
    if unsafe { read_user_into(into, PROLOGUE_WINDOW_BYTES as u32, start as *const c_void) } != 0 {
        return Step::cut(Some(frame), DROP_JAVA_WALK_PROLOGUE);
    }
    let frame_bytes = frame_words * 8;
    match joular_prologue_state(state, u64::from((complete_at - pc) as u32), u64::from(frame_bytes)) as u32 {
        PROLOGUE_ENTRY => return_at(state, frame, sp, state.fp),
        PROLOGUE_PUSHED => match stack_pair(state, sp) {
            Ok([_, 0]) => Step::cut(Some(frame), DROP_JAVA_WALK_BAD_RETURN),
            Ok([saved_fp, ret]) => {
                state.flags |= JAVA_STACK_HOTSPOT;
                advance(state, frame, ret, sp + 16, saved_fp)
            }
            Err(_) => Step::cut(Some(frame), DROP_JAVA_WALK_READ_FAILED),
        },
        PROLOGUE_ALLOCATED => return_at(state, frame, sp + u64::from(frame_bytes) - 8, state.fp),
        PROLOGUE_COMPLETE => sized_step(state, frame, frame_words),
        _ => Step::cut(Some(frame), DROP_JAVA_WALK_PROLOGUE),
    }
}

/// `prologue_state` of the bytes in `state.prologue`, as a global function: the verifier
/// checks the decoder once, on its own, rather than at every state the step reaches it in.
#[no_mangle]
#[inline(never)]
pub extern "C" fn joular_prologue_state(state: *const WalkState, before_complete: u64, frame_bytes: u64) -> i64 {
    // SAFETY: the caller's per-CPU walk state, handed on (the verifier checks it is memory
    // of the struct's size; a global function must still test it for null).
    let Some(state) = (unsafe { state.as_ref() }) else {
        return i64::from(PROLOGUE_UNKNOWN);
    };
    let (before_complete, frame_bytes) = (before_complete as u32, frame_bytes as u32);
    let build = |end: u32| {
        joular_frame_build_state(state, u64::from(end), u64::from(before_complete), u64::from(frame_bytes)) as u32
    };
    i64::from(prologue_state_by(&state.prologue, before_complete, frame_bytes, build))
}

/// `frame_build_state_in` of the bytes in `state.prologue`, as a global function of its own:
/// `joular_prologue_state` calls it for up to four paddings, and the verifier checks it once.
#[no_mangle]
#[inline(never)]
pub extern "C" fn joular_frame_build_state(
    state: *const WalkState,
    end: u64,
    before_complete: u64,
    frame_bytes: u64,
) -> i64 {
    // SAFETY: as in `joular_prologue_state`.
    let Some(state) = (unsafe { state.as_ref() }) else {
        return i64::from(PROLOGUE_UNKNOWN);
    };
    i64::from(frame_build_state_in(&state.prologue, end as u32, before_complete as u32, frame_bytes as u32))
}

/// Whether rbp points at a frame a stub set up: 8-aligned, at or above sp and within
/// `MAX_STUB_FRAME_BYTES` of it.
#[inline(always)]
pub(super) fn stub_frame_at_fp(state: &WalkState) -> bool {
    let (sp, fp) = (state.sp, state.fp);
    fp & 7 == 0 && fp >= sp && fp - sp < MAX_STUB_FRAME_BYTES
}

/// Steps a stub leaf by the rbp frame it set up. Some stubs set up a second one inside
/// their own (the AVX-512 AES/GCM stubs push rbp again and align the stack below it): when
/// the word above the saved rbp is no return address, the frame that saved rbp is tried.
/// Neither: the walk is cut, as a stub always has a caller.
#[inline(always)]
pub(super) fn stub_fp_step(state: &mut WalkState, frame: JavaFrame) -> Step {
    let fp = state.fp;
    let Ok([saved_fp, ret]) = stack_pair(state, fp) else {
        return Step::cut(Some(frame), DROP_JAVA_WALK_READ_FAILED);
    };
    if ret != 0 && follows_call(ret) {
        return advance(state, frame, ret, fp + 16, saved_fp);
    }
    if saved_fp & 7 == 0 && saved_fp > fp && saved_fp - fp < MAX_STUB_FRAME_BYTES {
        if let Ok([outer_fp, outer_ret]) = stack_pair(state, saved_fp) {
            if outer_ret != 0 && follows_call(outer_ret) {
                return advance(state, frame, outer_ret, saved_fp + 16, outer_fp);
            }
        }
    }
    Step::cut(Some(frame), DROP_JAVA_WALK_BAD_RETURN)
}

/// Steps a stub leaf that set up no rbp frame: its return address is at sp, or one word
/// above when the sample fell between the two instructions of its `enter` (`push rbp` done,
/// `mov rbp, rsp` not yet: AES's one-block stubs are short and called all the time, so ~3% of
/// their samples land there). The word that follows a call is the return address; when
/// neither does, sp is kept as before, and the next step cuts a wrong guess.
#[inline(always)]
pub(super) fn stub_return_near_sp(state: &mut WalkState, frame: JavaFrame) -> Step {
    let sp = state.sp;
    let Ok([at_sp, above]) = stack_pair(state, sp) else {
        return Step::cut(Some(frame), DROP_JAVA_WALK_READ_FAILED);
    };
    if at_sp == 0 || follows_call(at_sp) {
        return return_at(state, frame, sp, state.fp);
    }
    if above != 0 && follows_call(above) {
        state.flags |= JAVA_STACK_HOTSPOT;
        return advance(state, frame, above, sp + 16, at_sp);
    }
    return_at(state, frame, sp, state.fp)
}

/// An I2C or C2I adapter leaf (`LEAF_ADAPTER`): the caller's return address is at sp, and
/// is either an interpreter address (the interpreted caller of an I2C adapter pushed it
/// itself, so no call precedes it) or follows a call (the compiled caller of a C2I
/// adapter). Anything else at sp is an instant in which the adapter moves its return
/// address; the sampled leaf is then stepped by the registers that hold it
/// (`moved_return_step`). Anything else is cut, counted, rather than stepped by rbp, which
/// is the caller's and would skip it.
#[inline(always)]
pub(super) fn adapter_step(state: &mut WalkState, frame: JavaFrame, leaf: bool) -> Step {
    let sp = state.sp;
    // SAFETY: a user-space read that fails cleanly.
    match unsafe { bpf_probe_read_user(sp as *const u64) } {
        Ok(ret) if caller_return(state, ret) => {
            state.flags |= JAVA_STACK_HOTSPOT;
            advance(state, frame, ret, sp + 8, state.fp)
        }
        Ok(_) if leaf => moved_return_step(state, frame),
        Ok(_) => Step::cut(Some(frame), DROP_JAVA_WALK_BAD_RETURN),
        Err(_) => Step::cut(Some(frame), DROP_JAVA_WALK_READ_FAILED),
    }
}

/// A return address a caller of compiled code or of an adapter can have: into the
/// interpreter, or after a call.
#[inline(always)]
fn caller_return(state: &WalkState, ret: u64) -> bool {
    ret != 0 && (state.cfg.in_interpreter(ret) || follows_call(ret))
}

/// An adapter leaf sampled while its return address is not at sp. HotSpot's x86_64
/// adapters (`sharedRuntime_x86_64.cpp`) then hold it in rax, and in another register the
/// address of the slot their caller's call left it in:
/// - the I2C adapter keeps the slot in r11 (`mov %rsp,%r11`) while it realigns sp
///   (`and $-16,%rsp`) and pushes the address again; up to JDK 21 it reads the address
///   (`mov (%rsp),%rax`), JDK 25 pops it, so sp is then just above the slot;
/// - the C2I adapter pops it (r13 = sp, the slot at r13 - 8) before it makes room for the
///   interpreter's arguments, and keeps the slot in r13 around its call into the VM to
///   patch a compiled caller (`patch_callers_callsite`), below a realigned sp.
///
/// Stepped only when rax is a return address an adapter's caller can have and the slot,
/// from 8 bytes below sp to `MAX_STUB_FRAME_BYTES` above it, still holds it: two registers
/// and the stack agree. Otherwise cut, counted (in the C2I's `pop_CPU_state`, rax comes
/// back last). Before this step, the I2C's `and` and `push` cut 0-2 of 20-40 adapter
/// samples in most runs, and a third to a half of them in some (22 of 59 in one CI run, 51
/// of 104 in one run here, JDK 25), for no reason found (not the slot's alignment: the
/// test's fixture calls at both).
#[inline(always)]
fn moved_return_step(state: &mut WalkState, frame: JavaFrame) -> Step {
    let ret = state.leaf_rax;
    if !caller_return(state, ret) {
        return Step::cut(Some(frame), DROP_JAVA_WALK_BAD_RETURN);
    }
    let r13 = state.live_bcp;
    let slot = if slot_holds(state, state.leaf_r11, ret) {
        state.leaf_r11
    } else if slot_holds(state, r13, ret) {
        r13
    } else if slot_holds(state, r13.wrapping_sub(8), ret) {
        r13.wrapping_sub(8)
    } else {
        return Step::cut(Some(frame), DROP_JAVA_WALK_BAD_RETURN);
    };
    state.flags |= JAVA_STACK_HOTSPOT;
    advance(state, frame, ret, slot + 8, state.fp)
}

/// Whether `slot` holds `ret` and lies at most `MAX_STUB_FRAME_BYTES` above sp, or just
/// below it (the slot a `pop` has just left).
#[inline(always)]
fn slot_holds(state: &WalkState, slot: u64, ret: u64) -> bool {
    if slot.wrapping_add(8).wrapping_sub(state.sp) > MAX_STUB_FRAME_BYTES + 8 {
        return false;
    }
    // SAFETY: a user-space read that fails cleanly.
    matches!(unsafe { bpf_probe_read_user(slot as *const u64) }, Ok(v) if v == ret)
}

/// A leaf interrupted in its epilogue, after its frame was torn down (the frame size no
/// longer applies): on the `ret` or past `pop %rbp` (return address at sp), or on `pop rbp`
/// (saved rbp at sp, then the return address), as the bytes around the pc say
/// (`joular_ebpf::epilogue`). `None`: not an epilogue.
#[inline(always)]
pub(super) fn epilogue_step(state: &mut WalkState, frame: JavaFrame) -> Option<Step> {
    let (pc, sp, fp) = (state.pc, state.sp, state.fp);
    let from = pc - EPILOGUE_BEHIND_BYTES as u64;
    let into = state.epilogue.as_mut_ptr() as *mut c_void;
    // SAFETY: the destination is this CPU's map value, `EPILOGUE_WINDOW_BYTES` long; the
    // source a user-space read that fails cleanly.
    if unsafe { read_user_into(into, EPILOGUE_WINDOW_BYTES as u32, from as *const c_void) } != 0 {
        return None;
    }
    match joular_epilogue_state(state) as u32 {
        EPILOGUE_RETURN_AT_SP => Some(return_at(state, frame, sp, fp)),
        EPILOGUE_AT_POP_RBP => {
            // SAFETY: a user-space read that fails cleanly.
            let saved_fp = unsafe { bpf_probe_read_user(sp as *const u64) }.ok()?;
            Some(return_at(state, frame, sp + 8, saved_fp))
        }
        _ => None,
    }
}

/// `epilogue_state` of the bytes in `state.epilogue`, as a global function: the verifier
/// checks the decoder once, rather than at every state the step reaches it in (the sampler:
/// 27,997 instructions processed with it inlined, 27,409 as a function; Linux 6.18).
#[no_mangle]
#[inline(never)]
pub extern "C" fn joular_epilogue_state(state: *const WalkState) -> i64 {
    // SAFETY: as in `joular_prologue_state`.
    let Some(state) = (unsafe { state.as_ref() }) else {
        return i64::from(EPILOGUE_NONE);
    };
    i64::from(epilogue_state(&state.epilogue))
}

/// Steps to the return address at `at` (the caller's sp is just above it), with `fp` as
/// the caller's frame pointer.
#[inline(always)]
pub(super) fn return_at(state: &mut WalkState, frame: JavaFrame, at: u64, fp: u64) -> Step {
    // SAFETY: a user-space read that fails cleanly.
    match unsafe { bpf_probe_read_user(at as *const u64) } {
        Ok(0) => Step::cut(Some(frame), DROP_JAVA_WALK_BAD_RETURN),
        Ok(ret) => {
            state.flags |= JAVA_STACK_HOTSPOT;
            advance(state, frame, ret, at + 8, fp)
        }
        Err(_) => Step::cut(Some(frame), DROP_JAVA_WALK_READ_FAILED),
    }
}

/// A compiled leaf in its body whose frame-base word cannot be its caller's return address
/// (none is outside the code cache, where every caller of compiled code is: compiled code,
/// the interpreter or the call stub) while the word above it can: stepped by that word.
/// A few of C2's intrinsics push a word in the body of the code they are inlined into and
/// pop it before its end: `MacroAssembler::char_array_compress` (`StringUTF16.compress`, which
/// every `new String(char[])` runs on JDK 11 to 21) keeps the length there across its loops,
/// so sp is a word below the frame's base. H2's `BigDecimal(String)` spent ~1.2% of its
/// samples there (JDK 17), every one cut at its caller until this step. `None`: the plain
/// step by frame size (`sized_step`), whose next step cuts a wrong return as before. The
/// test is a range check on a word the plain step reads anyway (from the same stack
/// window), so the common case costs no read.
#[inline(always)]
pub(super) fn pushed_word_step(state: &mut WalkState, frame: JavaFrame, frame_words: u32) -> Option<Step> {
    if frame_words == 0 || frame_words > 1 << 16 {
        return None;
    }
    let caller_sp = state.sp + u64::from(frame_words) * 8;
    let [_, ret] = stack_pair(state, caller_sp - 16).ok()?;
    if ret >= state.cfg.code_start && ret < state.cfg.code_end {
        return None;
    }
    let [pushed_fp, pushed_ret] = stack_pair(state, caller_sp - 8).ok()?;
    if !caller_return(state, pushed_ret) {
        return None;
    }
    state.flags |= JAVA_STACK_HOTSPOT;
    Some(advance(state, frame, pushed_ret, caller_sp + 8, pushed_fp))
}

/// A leaf in a loop-poll handler blob (`JvmConfig::poll_entries`;
/// `jvm_symbols::hotspot::poll_blobs`), where its frame size does not say where it returns.
/// `code_begin`: the frame's blob's; `leaf`: the sampled frame (whose r15 the sampler has), not
/// one a signal interrupted. `None`: another blob, or a pc its frame size steps.
/// - Before the blob stored its return address, the frame the poll stopped is the blob's
///   caller, at the pc the thread saved (`JavaThread::_saved_exception_pc`, through r15) and
///   the sp the blob entered with, which the entry's pushes so far say: none at its first
///   instruction (also where a thread is caught in `rt_sigreturn`, resumed there), `%rbx`
///   then `%rbp` pushed at the next two, and rbp + 16 once `mov %rsp,%rbp` ran.
/// - After that store, rbp is the blob's frame base until its last `pop %rbp`, which leaves
///   only its `ret` (or the jump that forwards an exception): stepped by rbp, since the restore
///   moves sp back up and the frame size from sp would miss; by the return address at sp on
///   the `ret`.
///
/// The pc found is checked as any return address (the next step cuts one that is no
/// safepoint poll and follows no call).
#[inline(always)]
pub(super) fn poll_entry_step(state: &mut WalkState, frame: JavaFrame, code_begin: u64, leaf: bool) -> Option<Step> {
    let (pc, sp, fp) = (state.pc, state.sp, state.fp);
    let entries = &state.cfg.poll_entries;
    let entry = if code_begin != 0 && code_begin == entries[0].start {
        entries[0]
    } else if code_begin != 0 && code_begin == entries[1].start {
        entries[1]
    } else {
        return None;
    };
    if pc >= entry.end {
        // SAFETY: a user-space read that fails cleanly.
        if unsafe { bpf_probe_read_user(pc as *const u8) } == Ok(RET) {
            return Some(return_at(state, frame, sp, fp));
        }
        let frame_base = fp & 7 == 0 && fp > sp && fp - sp <= MAX_STUB_FRAME_BYTES;
        let Ok([saved_fp, ret]) = stack_pair(state, fp) else { return None };
        // rbp is no frame base of this blob (past its last `pop %rbp`): the plain steps.
        if !frame_base || ret == 0 {
            return None;
        }
        state.flags |= JAVA_STACK_HOTSPOT;
        return Some(advance(state, frame, ret, fp + 16, saved_fp));
    }
    if !leaf {
        return None;
    }
    // SAFETY (all reads below): user-space reads that fail cleanly.
    let stopped = match pc - entry.start {
        0 => Ok((sp, fp)),
        1 => Ok((sp + 8, fp)),
        2 => unsafe { bpf_probe_read_user(sp as *const u64) }.map(|saved_fp| (sp + 16, saved_fp)),
        // Inside `mov %rsp,%rbp`: no pc stops there.
        3 | 4 => return Some(Step::cut(Some(frame), DROP_JAVA_WALK_BAD_RETURN)),
        _ if fp < sp || fp - sp > MAX_STUB_FRAME_BYTES => {
            return Some(Step::cut(Some(frame), DROP_JAVA_WALK_BAD_RETURN))
        }
        _ => unsafe { bpf_probe_read_user(fp as *const u64) }.map(|saved_fp| (fp + 16, saved_fp)),
    };
    let saved_pc = state.leaf_r15.wrapping_add(u64::from(entry.saved_pc_offset));
    let stopped_pc = unsafe { bpf_probe_read_user(saved_pc as *const u64) };
    let (Ok((stopped_sp, stopped_fp)), Ok(stopped_pc)) = (stopped, stopped_pc) else {
        return Some(Step::cut(Some(frame), DROP_JAVA_WALK_READ_FAILED));
    };
    if stopped_pc == 0 {
        return Some(Step::cut(Some(frame), DROP_JAVA_WALK_BAD_RETURN));
    }
    state.flags |= JAVA_STACK_HOTSPOT;
    Some(advance(state, frame, stopped_pc, stopped_sp, stopped_fp))
}

/// `ret`.
const RET: u8 = 0xc3;
