//! Follows a target's process tree: a process forked by a target becomes a target before it
//! runs, so `record -- sh -c "java ..."` profiles the JVM the shell starts.
//!
//! The hook is `task/task_newtask`, the fork tracepoint that carries `clone_flags`:
//! `sched/sched_process_fork` fires for new threads too and its record cannot tell the two apart,
//! and a thread's TID must never enter `TARGETS` (a JVM would fill it with its threads). It fires
//! in `copy_process`, before the child is first woken, with the parent as `current`.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_get_smp_processor_id},
    programs::TracePointContext,
};
use joular_ebpf::{CONFIG_FOLLOW_CHILDREN, CONFIG_TARGETS_GEN, DROP_TARGETS_MAP_FULL};

use crate::maps::{count_drop, CONFIG, CPU_STATE, TARGETS};

const CLONE_THREAD: u64 = 0x0001_0000;
/// Offsets in the task_newtask record (see its `format`; unchanged since it was added in 3.14).
const NEWTASK_PID_OFFSET: usize = 8;
const NEWTASK_CLONE_FLAGS_OFFSET: usize = 32;

pub fn on_new_task(ctx: &TracePointContext) -> Result<u32, u32> {
    if CONFIG.get(CONFIG_FOLLOW_CHILDREN).is_none_or(|f| *f != 1) {
        return Ok(0);
    }
    let clone_flags: u64 = unsafe { ctx.read_at(NEWTASK_CLONE_FLAGS_OFFSET) }.map_err(|_| 0u32)?;
    if clone_flags & CLONE_THREAD != 0 {
        return Ok(0);
    }
    let parent_tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if TARGETS.get_ptr(parent_tgid).is_none() {
        return Ok(0);
    }
    let child: i32 = unsafe { ctx.read_at(NEWTASK_PID_OFFSET) }.map_err(|_| 0u32)?;
    if TARGETS.insert(child as u32, 1u8, 0).is_err() {
        count_drop(DROP_TARGETS_MAP_FULL);
        return Ok(0);
    }
    targets_changed();
    Ok(0)
}

/// A process that ended leaves `TARGETS`, so the map holds live processes only and a recycled
/// PID is not profiled by mistake.
#[inline(always)]
pub fn forget(tgid: u32) {
    if TARGETS.remove(tgid).is_ok() {
        targets_changed();
    }
}

/// Makes the per-CPU caches of `TARGETS` and `JVMS` answers stale: stores a value
/// `CONFIG_TARGETS_GEN` never held. Called after each change to either map.
#[inline(always)]
pub fn targets_changed() {
    store_generation(CONFIG_TARGETS_GEN);
}

/// Stores in `CONFIG[index]` a value no generation ever held: this CPU's change count and the CPU.
#[inline(always)]
pub fn store_generation(index: u32) {
    let Some(state) = CPU_STATE.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: per-CPU value, only this CPU writes it.
    let changes = unsafe {
        (*state).targets_changes += 1;
        (*state).targets_changes
    };
    if let Some(generation) = CONFIG.get_ptr_mut(index) {
        let cpu = unsafe { bpf_get_smp_processor_id() };
        // SAFETY: a plain 8-byte store; other CPUs and user space store theirs the same way.
        unsafe { *generation = changes << 16 | u64::from(cpu) };
    }
}
