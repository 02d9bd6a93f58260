//! Code of a walked JVM met for the first time, sent to user space as it is met (`NEW_CODE`,
//! see `joular_ebpf::CodeReport`): an nmethod's compile id with its `Method*`, an interpreted
//! frame's `Method*`, a pc in a stub. User space names them within milliseconds, while the JVM still has them;
//! by the end of the cycle the nmethod may be freed or the JVM gone.
//!
//! A report is sent once: `REPORTED` (an LRU map) holds what was sent, and each CPU keeps
//! fingerprints of what it sent or found sent lately (`WalkState::reported`), so a frame whose
//! code was met moments before costs a compare, not a map lookup. The ring buffer wakes no one
//! (`BPF_RB_NO_WAKEUP`): user space reads it on its own schedule. A report the full ring cannot
//! take is forgotten again (sent when next met) and counted. The report is built in the walk
//! state, and sent by a function of its own (a BPF subprogram), so the walk step's stack does
//! not hold it.

use core::ffi::c_void;

use aya_ebpf::{bindings::BPF_RB_NO_WAKEUP, helpers::generated::bpf_probe_read_user};
use joular_ebpf::{CodeReport, DROP_CODE_REPORT_LOST, REPORT_METHOD, REPORT_NMETHOD, REPORT_STUB};

use crate::maps::{count_drop, WalkState, NEW_CODE, REPORTED, REPORTED_SLOTS};

const BPF_NOEXIST: u64 = 1;

/// Reports the `Method*` of an interpreted frame of the JVM walked now, unless sent before.
#[inline(always)]
pub fn report_method(state: &mut WalkState, method: u64) {
    state.report.method = method;
    state.report.kind = REPORT_METHOD;
    state.report.compile_id = 0;
    send(state);
}

/// Reports `pc`, in a blob of the JVM walked now that is no nmethod, unless sent before.
#[inline(always)]
pub fn report_stub(state: &mut WalkState, pc: u64) {
    state.report.method = pc;
    state.report.kind = REPORT_STUB;
    state.report.compile_id = 0;
    send(state);
}

/// Reports the nmethod `compile_id` of the JVM walked now with the `Method*` read at
/// `method_at` (its `_method` field), unless sent before.
#[inline(always)]
pub fn report_nmethod(state: &mut WalkState, method_at: u64, compile_id: u32) {
    state.report.method = 0;
    // SAFETY: the destination is this CPU's map value, 8 bytes; the source a user-space
    // address, read with a read that fails cleanly (the method stays 0: nothing is sent).
    unsafe { bpf_probe_read_user(&raw mut state.report.method as *mut c_void, 8, method_at as *const c_void) };
    state.report.kind = REPORT_NMETHOD;
    state.report.compile_id = compile_id;
    send(state);
}

/// Sends `state.report` (its method, kind and compile id set) unless it was sent before.
#[inline(never)]
fn send(state: &mut WalkState) {
    let r = &mut state.report;
    if r.method == 0 {
        return;
    }
    r.jvm = state.cfg.interpreter_start;
    r.tgid = state.tgid;
    r._pad = 0;
    let fingerprint =
        fingerprint(r.jvm ^ u64::from(r.tgid), r.method, u64::from(r.kind) << 32 | u64::from(r.compile_id));
    let slot = fingerprint as usize & (REPORTED_SLOTS - 1);
    if state.reported[slot] == fingerprint {
        return;
    }
    let report = &state.report;
    // Present already: sent by another CPU, or by this one before its slot was reused.
    if REPORTED.insert(report, 0, BPF_NOEXIST).is_ok()
        && NEW_CODE.output::<CodeReport>(report, BPF_RB_NO_WAKEUP as u64).is_err()
    {
        let _ = REPORTED.remove(report);
        count_drop(DROP_CODE_REPORT_LOST);
        return;
    }
    state.reported[slot] = fingerprint;
}

#[inline(always)]
fn fingerprint(a: u64, b: u64, c: u64) -> u64 {
    let mix = |h: u64, v: u64| (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31);
    mix(mix(mix(0x243f_6a88_85a3_08d3, a), b), c) | 1
}
