//! Per-CPU time accounting and sample aggregation.
//!
//! Time is charged to whatever runs on a CPU between two "accounting points" on that CPU:
//! every sched_switch (where `current` is still the task being switched out) and every
//! sampler tick. The tick matters: a thread alone on a CPU can run for seconds without a
//! switch, and without it the time would land in whichever cycle the switch happens in.
//! With it, a cycle's counters are at most one sampling period stale.
//!
//! Programs on one CPU never interleave (sched_switch runs with interrupts off; the sampler
//! is the timer interrupt), and every per-CPU value is written only by its own CPU, so plain
//! read-modify-write is safe.

use core::ffi::c_void;

use aya_ebpf::{
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_smp_processor_id, bpf_ktime_get_ns,
        bpf_probe_read_kernel, generated,
    },
    programs::{tracing::StackIdContext, PerfEventContext, TracePointContext},
    Global,
};
use joular_ebpf::{
    CpuState, ExitValue, JavaFrame, SampleKey, TargetAnswer, ThreadCpuKey, ThreadCpuValue, ThreadSlot, BUFFERS,
    CONFIG_ACTIVE_BUFFER, CONFIG_ALL_PROCESSES, CONFIG_EXITS_GEN, CONFIG_TARGETS_GEN, CONFIG_TASK_OFFSETS,
    DROP_EXITS_MAP_FULL, DROP_KSTACK_COLLISION, DROP_KSTACK_FAILED, DROP_SAMPLES_MAP_FULL, DROP_THREAD_CPU_MAP_FULL,
    DROP_USTACK_COLLISION, DROP_USTACK_FAILED, NS_PER_START_TICK, SAMPLE_LOG_SLOTS, STACK_ID_OVERFLOW, TARGET_CACHE,
    THREAD_SLOTS,
};

use joular_ebpf::sampler_cost::{SAMPLE_NS_BUCKETS, SAMPLE_NS_BUCKET_NS};

use crate::maps::{
    count_drop, CONFIG, COUNTS_0, COUNTS_1, CPU_STATE, EXITS_0, EXITS_1, JVMS, SAMPLE_LOG, SAMPLE_NS, STACKS_0,
    STACKS_1, STACKS_OVERFLOW_0, STACKS_OVERFLOW_1, TARGETS, THREAD_CPU_0, THREAD_CPU_1, WALKER_SAMPLER,
};
use crate::walk;

pub(crate) const BPF_F_USER_STACK: u64 = 1 << 8;
const BPF_NOEXIST: u64 = 1;
const EFAULT: i32 = 14;
const EEXIST: i32 = 17;
/// Offset of `group_dead` in the sched_process_exit tracepoint record (see its `format`).
const EXIT_GROUP_DEAD_OFFSET: usize = 32;

#[inline(always)]
fn config(index: u32) -> u32 {
    CONFIG.get(index).map_or(0, |v| *v as u32)
}

/// `CONFIG[CONFIG_ACTIVE_BUFFER]`: generation and buffer (the low bit).
#[inline(always)]
pub(crate) fn active_tag() -> u32 {
    config(CONFIG_ACTIVE_BUFFER)
}

/// The buffer a tag names. Each map choice recomputes it from a copy of the tag the verifier
/// has not branched on: a value it already branched on would be marked precise, and every
/// path after the second branch (the whole Java walk) would be verified once per buffer.
#[inline(always)]
pub(crate) fn buffer_of(tag: u32) -> u32 {
    core::hint::black_box(tag) & 1
}

/// Whether `tgid` is profiled. A `TARGETS` lookup costs a switch more than the rest of its
/// accounting, so each CPU keeps recent answers, valid while `CONFIG_TARGETS_GEN` holds the
/// value it had when they were read.
#[inline(always)]
pub(crate) fn targeted(tgid: u32) -> bool {
    if config(CONFIG_ALL_PROCESSES) == 1 {
        return true;
    }
    let Some(state) = CPU_STATE.get_ptr_mut(0) else {
        return TARGETS.get_ptr(tgid).is_some();
    };
    // Read before `TARGETS`: a change is made before its value is stored, so the answer below
    // is never older than the state this value names.
    let generation = CONFIG.get(CONFIG_TARGETS_GEN).copied().unwrap_or(0);
    // SAFETY: per-CPU value, only this CPU writes it.
    let entry = unsafe { &mut (*state).targets[tgid as usize % TARGET_CACHE] };
    if entry.tgid == tgid && entry.generation == generation {
        return entry.targeted != 0;
    }
    let answer = TARGETS.get_ptr(tgid).is_some();
    *entry = TargetAnswer { generation, tgid, targeted: u32::from(answer) };
    answer
}

/// The running process's start tick (its group leader's `start_boottime`, as /proc shows it),
/// read at the `task_struct` offsets user space found in the kernel's BTF (`CONFIG_TASK_OFFSETS`);
/// 0 when they are unknown or a read fails. Two reads, taken only when a thread takes a slot or
/// a slot is checked again after a process ended (see `charge_thread`).
#[inline(always)]
pub(crate) fn process_start_ticks() -> u32 {
    let offsets = CONFIG.get(CONFIG_TASK_OFFSETS).copied().unwrap_or(0);
    if offsets == 0 {
        return 0;
    }
    // SAFETY: returns the current task's address; nothing is dereferenced here.
    let task = unsafe { generated::bpf_get_current_task() };
    // SAFETY: `bpf_probe_read_kernel` checks the address; a failed read gives 0.
    let leader: u64 = unsafe { bpf_probe_read_kernel((task + (offsets >> 32)) as *const u64) }.unwrap_or(0);
    if leader == 0 {
        return 0;
    }
    // SAFETY: as above.
    let start_ns: u64 = unsafe { bpf_probe_read_kernel((leader + (offsets & 0xffff_ffff)) as *const u64) }.unwrap_or(0);
    (start_ns / NS_PER_START_TICK) as u32
}

/// Whether the task `pid_tgid` is profiled (never the idle task).
#[inline(always)]
fn is_target(pid_tgid: u64) -> bool {
    pid_tgid as u32 != 0 && targeted((pid_tgid >> 32) as u32)
}

/// Charges the time since this CPU's last accounting point to the task running now, in the
/// buffer `tag` names (`target`: `is_target` of it, which the caller may need too). Returns
/// its process's start tick when it charged a target (the slot knows it).
#[inline(always)]
fn account(now_ns: u64, pid_tgid: u64, cpu: u32, tag: u32, target: bool) -> Option<u32> {
    let state = CPU_STATE.get_ptr_mut(0)?;
    // SAFETY: per-CPU value, only this CPU writes it.
    let state = unsafe { &mut *state };
    let last_ns = core::mem::replace(&mut state.last_ns, now_ns);
    if last_ns == 0 || now_ns <= last_ns {
        return None;
    }
    let delta_ns = now_ns - last_ns;
    let buffer = buffer_of(tag) as usize;
    let times = &mut state.times[buffer];
    if times.tag != tag {
        // Last written in an older cycle of this buffer, which user space has drained.
        times.tag = tag;
        // Volatile: two adjacent zero stores would become a `memset` byte loop (joular_ebpf::words).
        // SAFETY: fields of a valid map value.
        unsafe {
            core::ptr::write_volatile(&mut times.busy_ns, 0);
            core::ptr::write_volatile(&mut times.idle_ns, 0);
        }
        for slot in &mut state.threads[buffer] {
            slot.pid_tgid = 0;
        }
    }
    if pid_tgid as u32 == 0 {
        times.idle_ns += delta_ns;
    } else {
        times.busy_ns += delta_ns;
    }
    if !target {
        return None;
    }
    // Read only for targets: after a process ends, each slot is checked again when it next runs.
    let exits_gen = CONFIG.get(CONFIG_EXITS_GEN).copied().unwrap_or(0);
    if state.exits_seen != exits_gen {
        state.exits_seen = exits_gen;
        state.unchecked = [u32::MAX; BUFFERS as usize];
    }
    Some(charge_thread(state, pid_tgid, cpu, buffer_of(tag), delta_ns))
}

/// Adds `delta_ns` to the thread's slot, one of the pair its tid selects. A thread without
/// one takes an empty slot of the pair, or the less charged one after moving that thread's
/// time to `THREAD_CPU_*`: the few threads a CPU switches between keep their slots (two that
/// share a pair too), and a switch among them costs no hash map operation. A slot marked
/// `unchecked` (a process ended since its start tick was read) is checked again: if its PID now
/// names another process, the dead thread's time goes to `THREAD_CPU_*` and the new thread takes
/// the slot. Returns the thread's process start tick.
///
/// Written with one `flush_thread`: each inlined copy multiplies the paths the verifier walks
/// in the sampler, which inlines this too.
#[inline(always)]
fn charge_thread(state: &mut CpuState, pid_tgid: u64, cpu: u32, buffer: u32, delta_ns: u64) -> u32 {
    let pair = pid_tgid as usize % (THREAD_SLOTS / 2) * 2;
    let b = buffer as usize;
    let (first, second) = (&state.threads[b][pair], &state.threads[b][pair + 1]);
    let (i, hit) = if first.pid_tgid == pid_tgid {
        (pair, true)
    } else if second.pid_tgid == pid_tgid {
        (pair + 1, true)
    } else if first.pid_tgid == 0 || (second.pid_tgid != 0 && first.on_cpu_ns <= second.on_cpu_ns) {
        (pair, false)
    } else {
        (pair + 1, false)
    };
    let bit = 1u32 << i;
    let unchecked = state.unchecked[b] & bit != 0;
    state.unchecked[b] &= !bit;
    let slot = &mut state.threads[b][i];
    let start_ticks = if hit && !unchecked { slot.start_ticks } else { process_start_ticks() };
    let same = hit && start_ticks == slot.start_ticks;
    let kept_ns = if same { u64::from(slot.on_cpu_ns) + delta_ns } else { delta_ns };
    // What leaves the slot: another thread's (or a dead process's) time before the slot changes
    // hands, or the thread's own before it would pass 32 bits (4.3 s: a long or late cycle).
    let flushed_ns = if !same {
        u64::from(slot.on_cpu_ns)
    } else if kept_ns > u64::from(u32::MAX) {
        kept_ns
    } else {
        0
    };
    if slot.pid_tgid != 0 && flushed_ns != 0 {
        flush_thread(slot, cpu, buffer, flushed_ns);
    }
    if !same {
        slot.pid_tgid = pid_tgid;
        slot.start_ticks = start_ticks;
        // SAFETY: writes 16 bytes into the slot's `comm` (zeroed if it fails).
        unsafe { generated::bpf_get_current_comm(slot.comm.as_mut_ptr() as *mut c_void, 16) };
    }
    // A new slot's first slice fits: the sampler (at least 1 Hz) is an accounting point for a
    // thread that runs.
    slot.on_cpu_ns = if same && flushed_ns != 0 { 0 } else { kept_ns.min(u64::from(u32::MAX)) as u32 };
    start_ticks
}

/// Adds `on_cpu_ns` of a slot's thread to its `THREAD_CPU_*` entry for this CPU.
#[inline(always)]
fn flush_thread(slot: &ThreadSlot, cpu: u32, buffer: u32, on_cpu_ns: u64) {
    let key = ThreadCpuKey { tid: slot.pid_tgid as u32, cpu, start_ticks: slot.start_ticks, _pad: 0 };
    let map = if buffer == 0 { &THREAD_CPU_0 } else { &THREAD_CPU_1 };
    if let Some(v) = map.get_ptr_mut(key) {
        // SAFETY: the key holds this CPU, so only this CPU writes the entry.
        unsafe { (*v).on_cpu_ns += on_cpu_ns };
        return;
    }
    let value = ThreadCpuValue { on_cpu_ns, tgid: (slot.pid_tgid >> 32) as u32, _pad: 0, comm: slot.comm };
    if map.insert(key, value, BPF_NOEXIST).is_err() {
        count_drop(DROP_THREAD_CPU_MAP_FULL);
    }
}

#[inline(always)]
pub fn on_switch() {
    let pid_tgid = bpf_get_current_pid_tgid();
    let cpu = unsafe { bpf_get_smp_processor_id() };
    account(unsafe { bpf_ktime_get_ns() }, pid_tgid, cpu, active_tag(), is_target(pid_tgid));
}

#[inline(always)]
fn stack_id(result: Result<i64, i32>, collision: u32, failed: u32) -> i32 {
    match result {
        Ok(id) => id as i32,
        // No stack of that kind (a user-mode sample has no kernel stack, a kernel thread no
        // user stack): not a loss.
        Err(e) if e == -EFAULT => -1,
        Err(e) if e == -EEXIST => {
            count_drop(collision);
            -2
        }
        Err(_) => {
            count_drop(failed);
            -3
        }
    }
}

/// A stack id from `bpf_get_stackid` in the stack maps of the buffer `tag` names (`flags`:
/// user or kernel): `STACKS_*`, or `STACKS_OVERFLOW_*` (the id then has `STACK_ID_OVERFLOW`)
/// when the stack's bucket in the first holds another stack.
#[inline(always)]
pub(crate) fn get_stack_id<C: StackIdContext>(ctx: &C, tag: u32, flags: u64) -> i32 {
    let stacks = if buffer_of(tag) == 0 { &STACKS_0 } else { &STACKS_1 };
    let result = match ctx.get_stackid(stacks, flags) {
        Err(e) if e == -EEXIST => {
            let overflow = if buffer_of(tag) == 0 { &STACKS_OVERFLOW_0 } else { &STACKS_OVERFLOW_1 };
            ctx.get_stackid(overflow, flags).map(|id| id | i64::from(STACK_ID_OVERFLOW))
        }
        result => result,
    };
    if flags & BPF_F_USER_STACK != 0 {
        stack_id(result, DROP_USTACK_COLLISION, DROP_USTACK_FAILED)
    } else {
        stack_id(result, DROP_KSTACK_COLLISION, DROP_KSTACK_FAILED)
    }
}

/// `WALK_JVMS`: walk the user stacks of JVMs in `JVMS` (see walk.rs) instead of using
/// `bpf_get_stackid` for them.
pub fn on_sample<const WALK_JVMS: bool>(ctx: &PerfEventContext) -> Result<u32, u32> {
    let now_ns = unsafe { bpf_ktime_get_ns() };
    let pid_tgid = bpf_get_current_pid_tgid();
    let cpu = unsafe { bpf_get_smp_processor_id() };
    let tag = active_tag();
    let target = is_target(pid_tgid);
    let start_ticks = account(now_ns, pid_tgid, cpu, tag, target);
    if !target {
        return Ok(0);
    }
    // The slot's start tick costs nothing; only the CPU's first accounting point reads it.
    let start_ticks = start_ticks.unwrap_or_else(process_start_ticks);
    let tid = pid_tgid as u32;
    let tgid = (pid_tgid >> 32) as u32;
    // One helper call (a 16-byte copy), and the key 16 bytes longer to hash. Read before the
    // walk (after it, the verifier would check the call once per path the walk leaves), and
    // with no branch on its result, which would double the paths through the walk.
    // Not zeroed first (a 16-byte `memset` byte loop, joular_ebpf::words): the helper writes all 16
    // bytes, the name padded with zeros, or zeros if it fails.
    let mut comm = core::mem::MaybeUninit::<[u8; 16]>::uninit();
    // SAFETY: as above, `comm` is whole once the helper returns.
    let comm = unsafe {
        generated::bpf_get_current_comm(comm.as_mut_ptr() as *mut c_void, 16);
        comm.assume_init()
    };
    // JVM threads: the sampler walks the user stack itself (see walk.rs).
    let jvm = WALK_JVMS && walk::load_jvm(WALKER_SAMPLER, tgid);
    let (user_stack_id, java_stack_hash, java_leaf) = if jvm {
        let regs = walk::user_regs(ctx, walk::sampled_user_mode(ctx));
        match walk::walk_and_store(WALKER_SAMPLER, tgid, &regs, tag) {
            (0, _) => (-3, 0, JavaFrame::default()),
            (hash, leaf) => (-1, hash, leaf),
        }
    } else {
        (get_stack_id(ctx, tag, BPF_F_USER_STACK), 0, JavaFrame::default())
    };
    // A sample that interrupted user mode has no kernel stack: skip the helper. Taken after
    // the walk, with the mode read again, so that nothing the verifier tells apart (a map
    // choice, a known stack id) is live across the walk and it checks the walk once.
    let kernel_stack_id = if walk::sampled_user_mode(ctx) { -1 } else { get_stack_id(ctx, tag, 0) };
    let key =
        SampleKey { tgid, tid, cpu, user_stack_id, kernel_stack_id, start_ticks, java_stack_hash, java_leaf, comm };
    if log_sample(&key, tag) {
        time_sample(now_ns);
        return Ok(0);
    }
    let counts = if buffer_of(tag) == 0 { &COUNTS_0 } else { &COUNTS_1 };
    if let Some(n) = counts.get_ptr_mut(key) {
        // SAFETY: the key holds this CPU, so only this CPU writes the entry.
        unsafe { *n += 1 };
    } else if counts.insert(key, 1u64, BPF_NOEXIST).is_err() {
        count_drop(DROP_SAMPLES_MAP_FULL);
    }
    time_sample(now_ns);
    Ok(0)
}

/// `--sampler-cost` (`joular_ebpf::sampler_cost::SAMPLER_TIMING_SYMBOL`): set to 1 by the loader to time
/// the samples of profiled threads. A load-time constant, so with 0 the verifier drops
/// `time_sample`'s body as dead code.
#[no_mangle]
static JOULAR_SAMPLER_TIMING: Global<u8> = Global::new(0);

/// Counts a profiled thread's sample in `SAMPLE_NS` by the time since `started_ns` (the
/// sampler's first clock read) when the timing is on: one clock read and one per-CPU
/// increment more a sample, the program's entry and the few instructions after this left out.
#[inline(always)]
fn time_sample(started_ns: u64) {
    if JOULAR_SAMPLER_TIMING.load() == 0 {
        return;
    }
    // SAFETY: a helper without arguments.
    let took_ns = unsafe { bpf_ktime_get_ns() }.wrapping_sub(started_ns);
    let bucket = (took_ns / SAMPLE_NS_BUCKET_NS).min(u64::from(SAMPLE_NS_BUCKETS - 1)) as u32;
    if let Some(n) = SAMPLE_NS.get_ptr_mut(bucket) {
        // SAFETY: a per-CPU slot, written only by this CPU's programs, which never interleave.
        unsafe { *n += 1 };
    }
}

/// Appends a sample to this CPU's log of the buffer `tag` names; false when the log is full
/// (the sample then goes to `COUNTS_*`).
#[inline(always)]
fn log_sample(key: &SampleKey, tag: u32) -> bool {
    let Some(log) = SAMPLE_LOG.get_ptr_mut(buffer_of(tag)) else {
        return false;
    };
    // SAFETY: per-CPU slot, only this CPU's sampler writes it, and user space reads it only
    // after flipping away from its buffer.
    let log = unsafe { &mut *log };
    if log.tag != tag {
        // Written last in an older cycle of this buffer, which user space has drained.
        log.tag = tag;
        log.len = 0;
    }
    let len = log.len as usize;
    if len >= SAMPLE_LOG_SLOTS {
        return false;
    }
    log.keys[len] = *key;
    log.len = len as u32 + 1;
    true
}

pub fn on_exit(ctx: &TracePointContext) -> Result<u32, u32> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    let tgid = (pid_tgid >> 32) as u32;
    if tid == 0 || !targeted(tgid) {
        return Ok(0);
    }
    let now_ns = unsafe { bpf_ktime_get_ns() };
    // Charge the slice up to the exit now, so a thread that dies at a cycle's end is
    // counted in that cycle; its last switch-out adds only the few µs after this.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    let tag = active_tag();
    let start_ticks = account(now_ns, pid_tgid, cpu, tag, true).unwrap_or_else(process_start_ticks);
    let group_dead: u8 = unsafe { ctx.read_at(EXIT_GROUP_DEAD_OFFSET) }.unwrap_or(0);
    let value = ExitValue {
        tgid,
        group_dead: group_dead as u32,
        exit_ns: now_ns,
        comm: bpf_get_current_comm().unwrap_or([0; 16]),
        start_ticks,
        _pad: 0,
    };
    let exits = if buffer_of(tag) == 0 { &EXITS_0 } else { &EXITS_1 };
    if exits.insert(tid, value, 0).is_err() {
        count_drop(DROP_EXITS_MAP_FULL);
    }
    if group_dead != 0 {
        // Before the PID can be reused: every slot is checked again before it adds time.
        crate::follow::store_generation(CONFIG_EXITS_GEN);
        crate::follow::forget(tgid);
        // A recycled PID must not be walked with the old JVM's bounds (nor with the copy
        // a CPU keeps of them: the generation tells it).
        if JVMS.remove(tgid).is_ok() {
            crate::follow::targets_changed();
        }
    }
    aya_log_ebpf::debug!(ctx, "exit tid {} tgid {} group_dead {}", tid, tgid, group_dead);
    Ok(0)
}
