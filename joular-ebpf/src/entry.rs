//! The programs' entry points: three lines each, the logic lives in the modules they call.

use crate::{account, devices, follow, ksym};
use aya_ebpf::{
    macros::{perf_event, raw_tracepoint, tracepoint},
    programs::{PerfEventContext, RawTracePointContext, TracePointContext},
};

/// cpu-clock sampler, one per online CPU. Walks the user stacks of JVMs in `JVMS` itself
/// (needs `bpf_task_pt_regs`, Linux 5.15+).
#[perf_event]
pub fn joular_sample(ctx: PerfEventContext) -> u32 {
    match account::on_sample::<true>(&ctx) {
        Ok(r) | Err(r) => r,
    }
}

/// The same sampler with `bpf_get_stackid` user stacks for every process, for kernels that
/// refuse the one above.
#[perf_event]
pub fn joular_sample_stackid(ctx: PerfEventContext) -> u32 {
    match account::on_sample::<false>(&ctx) {
        Ok(r) | Err(r) => r,
    }
}

/// Scheduler accounting on the raw tracepoint: as cheap per switch as the BTF-typed one, and
/// user space need not parse the kernel's BTF to attach it.
#[raw_tracepoint(tracepoint = "sched_switch")]
pub fn joular_switch_raw(_ctx: RawTracePointContext) -> u32 {
    account::on_switch();
    0
}

/// The same accounting on the classic tracepoint, for kernels that refuse raw tracepoints.
#[tracepoint]
pub fn joular_switch_tp(_ctx: TracePointContext) -> u32 {
    account::on_switch();
    0
}

/// Names kernel addresses for user space; run with `BPF_PROG_TEST_RUN`, never attached (the
/// tracepoint name is only the section's).
#[raw_tracepoint(tracepoint = "joular_ksym")]
pub fn joular_ksym(ctx: RawTracePointContext) -> u32 {
    ksym::on_request(&ctx)
}

#[tracepoint]
pub fn joular_exit(ctx: TracePointContext) -> u32 {
    match account::on_exit(&ctx) {
        Ok(r) | Err(r) => r,
    }
}

/// Adds the children of targets to `TARGETS` (see `follow.rs`).
#[tracepoint]
pub fn joular_fork(ctx: TracePointContext) -> u32 {
    match follow::on_new_task(&ctx) {
        Ok(r) | Err(r) => r,
    }
}

/// The byte counters of `--devices` (see `devices.rs`): attached only when asked for.
#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn joular_sys_exit(ctx: RawTracePointContext) -> u32 {
    match devices::on_sys_exit(&ctx) {
        Ok(r) | Err(r) => r,
    }
}
