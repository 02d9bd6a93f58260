//! Types shared between the eBPF programs and user space. Every type is `#[repr(C)]` with
//! explicit padding so both sides agree on the layout byte for byte.
#![no_std]

/// Maps come in two copies (buffer 0 and 1). The kernel writes the buffer named by
/// `CONFIG[CONFIG_ACTIVE_BUFFER]`; user space flips it at a cycle's end and drains the other
/// one while the next cycle fills, so a drain always sees a complete cycle.
pub const BUFFERS: u32 = 2;

/// Indexes into the `CONFIG` array map.
pub const CONFIG_ACTIVE_BUFFER: u32 = 0;
/// 1 = profile every process (host mode), 0 = only TGIDs in `TARGETS`.
pub const CONFIG_ALL_PROCESSES: u32 = 1;
/// 1 = a process forked by a target becomes a target (`record`, `--follow-children`).
pub const CONFIG_FOLLOW_CHILDREN: u32 = 2;
pub const CONFIG_LEN: u32 = 3;

/// Most CPUs the per-CPU time arrays hold (index = buffer * MAX_CPUS + cpu).
pub const MAX_CPUS: u32 = 1024;
/// Sample-count hash map entries per buffer.
pub const MAX_SAMPLE_KEYS: u32 = 32 * 1024;
/// Stack-trace map entries per buffer.
pub const MAX_STACKS: u32 = 32 * 1024;
/// On-CPU (tid, cpu) entries per buffer.
pub const MAX_THREAD_CPU: u32 = 32 * 1024;
pub const MAX_TARGETS: u32 = 4096;
/// Frames the kernel keeps per stack (the kernel's own limit is 127).
pub const MAX_STACK_DEPTH: usize = 127;

/// Causes of loss, as indexes into the per-CPU `DROPS` array. Each is a count of events lost
/// (or degraded) since load; user space reports per-cycle deltas under `DROP_NAMES`.
pub const DROP_SAMPLES_MAP_FULL: u32 = 0;
pub const DROP_USTACK_COLLISION: u32 = 1;
pub const DROP_USTACK_FAILED: u32 = 2;
pub const DROP_KSTACK_COLLISION: u32 = 3;
pub const DROP_KSTACK_FAILED: u32 = 4;
pub const DROP_THREAD_CPU_MAP_FULL: u32 = 5;
pub const DROP_EXITS_MAP_FULL: u32 = 6;
/// A child of a target that could not be followed (`TARGETS` full).
pub const DROP_TARGETS_MAP_FULL: u32 = 7;
pub const DROP_KINDS: u32 = 8;
pub const DROP_NAMES: [&str; DROP_KINDS as usize] = [
    "samples_map_full",
    "user_stack_collision",
    "user_stack_failed",
    "kernel_stack_collision",
    "kernel_stack_failed",
    "thread_cpu_map_full",
    "exits_map_full",
    "targets_map_full",
];

/// Key of the in-kernel sample aggregation: one count per distinct
/// (thread, cpu, user stack, kernel stack). A stack id below 0 means "no stack".
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SampleKey {
    pub tgid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub user_stack_id: i32,
    pub kernel_stack_id: i32,
}

/// Key of the on-CPU accounting map.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ThreadCpuKey {
    pub tid: u32,
    pub cpu: u32,
}

/// On-CPU time of one thread on one CPU in one buffer. `comm` is captured when the entry is
/// made, so threads that exit before user space reads /proc still have a name.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct ThreadCpuValue {
    pub on_cpu_ns: u64,
    pub tgid: u32,
    pub _pad: u32,
    pub comm: [u8; 16],
}

/// One CPU's time in one buffer. Only that CPU writes it (scheduler and sampler programs run
/// with interrupts off or in the timer interrupt on their own CPU), so plain adds suffice.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default)]
pub struct CpuTimeValue {
    pub busy_ns: u64,
    pub idle_ns: u64,
}

/// Per-CPU scheduler state: when the running task's slice was last accounted.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default)]
pub struct CpuState {
    pub last_ns: u64,
}

/// A thread that exited, recorded by sched_process_exit so user space can name it and knows
/// to forget it.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct ExitValue {
    pub tgid: u32,
    /// 1 when the whole process ended with this thread.
    pub group_dead: u32,
    pub exit_ns: u64,
    pub comm: [u8; 16],
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all of these are #[repr(C)] plain data with no padding holes left implicit.
    unsafe impl aya::Pod for super::SampleKey {}
    unsafe impl aya::Pod for super::ThreadCpuKey {}
    unsafe impl aya::Pod for super::ThreadCpuValue {}
    unsafe impl aya::Pod for super::CpuTimeValue {}
    unsafe impl aya::Pod for super::CpuState {}
    unsafe impl aya::Pod for super::ExitValue {}
}
