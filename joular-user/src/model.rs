//! The data that flows between stages, one way:
//! collect (raw kernel counters) → attribution (joules) → symbols (frames) → outputs.
//!
//! Every stage consumes and produces these types only, so each stage is testable on
//! fixtures. `CycleReport` is also the `--json` line: its field names are a public
//! contract (`cycle`, `start_ns`, `end_ns`, `threads`, `cpus`, `drops`, `sockets`,
//! `processes`, `methods`); add fields freely, never rename.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use crate::device_reports::{DeviceEnergy, DeviceReport};
pub use crate::frames::{FrameKind, FrameReport};

/// On-CPU time of one thread on one CPU during one cycle, from scheduler accounting
/// (eBPF sched_switch) or, on the procfs path, from jiffies converted to ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadCpuTime {
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub on_cpu_ns: u64,
}

/// One CPU's whole cycle: `busy_ns + idle_ns` is the cycle's length on that CPU (`t_cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CpuTime {
    pub cpu: u32,
    pub busy_ns: u64,
    pub idle_ns: u64,
}

impl CpuTime {
    pub fn total_ns(&self) -> u64 {
        self.busy_ns + self.idle_ns
    }
}

/// Sample count of one (thread, user stack, kernel stack) in one cycle. Stack ids are
/// the kernel's StackTrace map ids (negative = no stack / failed); `user`/`kernel` hold
/// the raw instruction pointers, leaf first, as the kernel returns them. For threads of
/// JVMs the sampler walks the user stack itself: then `walked` holds it and `user` is empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSample {
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub user: Arc<[u64]>,
    pub kernel: Arc<[u64]>,
    pub count: u64,
    pub walked: Option<Arc<WalkedStack>>,
}

/// One frame of a user stack the sampler walked in a JVM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WalkedFrame {
    /// A pc outside the JVM's code cache (libjvm, libc, JNI code).
    Native(u64),
    /// A pc in the code cache: compiled Java code or a stub.
    Code(u64),
    /// A pc in an nmethod whose compile id the unwinder read: named only while the code at
    /// that pc still has it (freed and reused code is never misnamed).
    Compiled { pc: u64, compile_id: u32 },
    /// An interpreted Java frame: the `Method*` and bytecode pointer read from its slots.
    Interpreted { method: u64, bcp: u64 },
}

/// Which unwinder walked a JVM's stacks, and how often it got through (`summary.json`
/// `java_unwinder`, the end-of-run lines).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JavaUnwinder {
    /// `hotspot`: compiled frames stepped by their code blob's frame size (a JVM without
    /// `-XX:+PreserveFramePointer`); `frame_pointers`: every frame by its frame pointer.
    pub unwinder: String,
    /// Why a JVM without frame pointers is not unwound by the HotSpot unwinder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Walked stacks (per thread, CPU and cycle) in which the HotSpot unwinder stepped a
    /// compiled frame, the others, and those of both that stopped before the thread's
    /// first frame.
    pub stacks_hotspot: u64,
    pub stacks_frame_pointers: u64,
    pub stacks_cut: u64,
    /// `-XX:+DebugNonSafepoints`, from the JVM's flag table (absent: unreadable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_non_safepoints: Option<bool>,
    /// Without it: the share of the JVM's walked Java samples whose leaf is compiled code,
    /// whose pc no debug record describes exactly (charged to the nearest safepoint's
    /// scope, so a method inlined there is charged to its caller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inlining_approximate_share: Option<f64>,
}

/// A user stack walked by the sampler, leaf first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct WalkedStack {
    pub frames: Vec<WalkedFrame>,
    /// Deeper than the walk's frame limit: the outermost frames are missing.
    pub truncated: bool,
    /// The walk stopped before the thread's first frame (a read failed, or code without
    /// frame pointers).
    pub cut: bool,
    /// Why it was cut: the kernel's `DROP_*` counted for it, `CUT_CAUSE_FRAME_POINTER`, or 0
    /// (a kernel object that does not say).
    pub cut_cause: u32,
    /// The HotSpot unwinder stepped a compiled frame by its frame size (the JVM runs
    /// without frame pointers in JIT code).
    pub hotspot: bool,
}

/// How the root frame of a cut stack starts (`[truncated: <cause>]`, `symbols::truncation`).
pub const TRUNCATED_ROOT_PREFIX: &str = "[truncated: ";

/// One symbolized frame. `name` is the full name (`void com.acme.Foo.bar(int)` for Java,
/// the demangled symbol otherwise); `short` is what method tables and flame graphs show
/// (`com.acme.Foo.bar`; same as `name` for non-Java frames).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Frame {
    pub name: Arc<str>,
    pub short: Arc<str>,
    pub kind: FrameKind,
    /// Source line, for Java frames whose bytecode index is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The full name as the JVM spelled it, where `name` differs: `name` leaves out what
    /// changes between runs of the same program (a hidden class's address, a lambda's or
    /// proxy's counter), JSON keeps it here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_name: Option<Arc<str>>,
}

impl Frame {
    /// A frame whose name is the JVM's own (no `raw_name`).
    pub fn new(kind: FrameKind, name: impl Into<Arc<str>>, short: impl Into<Arc<str>>, line: Option<u32>) -> Self {
        Frame { name: name.into(), short: short.into(), kind, line, raw_name: None }
    }
}

/// A frame as reports carry it (`--json`, `summary.json`, profiles).
impl From<&Frame> for FrameReport {
    fn from(f: &Frame) -> Self {
        FrameReport {
            name: f.name.to_string(),
            kind: f.kind,
            line: f.line,
            raw_name: f.raw_name.as_deref().map(str::to_owned),
        }
    }
}

/// A symbolized call stack, ROOT FIRST (thread entry ... leaf), kernel frames after the
/// user frames (a syscall's kernel work sits on top of the user code that made it).
pub type Stack = Arc<[Frame]>;

/// A symbolized stack of one thread in one cycle with its sample count.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadStack {
    pub stack: Stack,
    pub samples: u64,
}

/// Everything one cycle produced, after attribution and symbolization. This is the
/// `--json` line (JSON Lines, one object per cycle).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CycleReport {
    pub cycle: u64,
    /// CLOCK_MONOTONIC (the kernel's `bpf_ktime_get_ns`) at the cycle's start and end.
    pub start_ns: u64,
    pub end_ns: u64,
    /// Wall clock at the cycle's end, ms since the epoch (for evolution files).
    #[serde(default)]
    pub end_epoch_ms: u64,
    pub threads: Vec<ThreadReport>,
    pub cpus: Vec<CpuReport>,
    /// Losses per map or cause in this cycle (`"samples"`, `"stack_collision"`...).
    pub drops: BTreeMap<String, u64>,
    #[serde(default)]
    pub sockets: Vec<SocketReport>,
    #[serde(default)]
    pub processes: Vec<ProcessReport>,
    #[serde(default)]
    pub methods: Vec<MethodReport>,
    /// Each CPU's frequency read at the cycle's end (cpufreq's `scaling_cur_freq`); empty
    /// where the machine exposes none (most VMs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_frequencies: Vec<CpuFrequency>,
    /// `--devices network,disk`: the cycle's bytes per thread and call path (absent with
    /// `--devices cpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<DeviceReport>,
    /// `--devices network,disk`: each device class's modelled energy and its split by bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_energy: Vec<DeviceEnergy>,
}

/// Whether a run recorded every CPU's frequency each cycle (for `joular-ebpf calmness`), as
/// `summary.json` says it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrequencyRecording {
    pub available: bool,
    /// CPUs with a readable `scaling_cur_freq` at the start.
    #[serde(default)]
    pub cpus: usize,
    /// Where the frequencies are, from the process's result directory (`../frequencies.csv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Why there are none, when there are none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// One CPU's frequency at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuFrequency {
    pub cpu: u32,
    pub khz: u64,
}

impl CycleReport {
    /// The sockets' energy (µJ).
    pub fn socket_energy_uj(&self) -> f64 {
        sum_uj(self.sockets.iter().map(|s| s.energy_uj))
    }

    /// The profiled processes' energy (µJ).
    pub fn process_energy_uj(&self) -> f64 {
        sum_uj(self.processes.iter().map(|p| p.energy_uj))
    }
}

/// A sum that starts at +0.0: `f64`'s `sum` of nothing is -0.0, printed as "-0.00 J".
fn sum_uj(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0, |a, b| a + b)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ThreadReport {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub on_cpu_ns: u64,
    pub samples: u64,
    #[serde(default)]
    pub energy_uj: f64,
    #[serde(default)]
    pub power_w: f64,
    /// Jiffies-based on-CPU time from /proc over the same window (`--verbose` cross-check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proc_on_cpu_ns: Option<u64>,
    #[serde(default)]
    pub stacks: Vec<StackReport>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StackReport {
    /// Root first.
    pub frames: Vec<FrameReport>,
    pub samples: u64,
    #[serde(default)]
    pub energy_uj: f64,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct CpuReport {
    pub cpu: u32,
    pub busy_ns: u64,
    #[serde(default)]
    pub idle_ns: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SocketReport {
    pub socket: u32,
    pub energy_uj: f64,
    /// `powercap`, `perf`, `msr` or `model`.
    pub source: String,
    pub estimated: bool,
    pub unattributed_uj: f64,
    #[serde(default)]
    pub power_w: f64,
    /// Energy above the idle baseline (Kepler's "dynamic" view), split like the total.
    #[serde(default)]
    pub dynamic_energy_uj: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_energy_uj: Option<f64>,
    /// Set when the counter misbehaved (went backwards with no wrap range): the cycle's
    /// energy for this socket is then 0, never negative.
    #[serde(default)]
    pub flagged: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProcessReport {
    pub pid: u32,
    #[serde(default)]
    pub comm: String,
    pub energy_uj: f64,
    #[serde(default)]
    pub power_w: f64,
    #[serde(default)]
    pub on_cpu_ns: u64,
    /// Host mode: the executable, cgroup path and container id (from /proc/<pid>/cgroup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exe: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MethodReport {
    pub pid: u32,
    pub tid: u32,
    pub method: String,
    pub energy_uj: f64,
    pub samples: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_without_processes_has_zero_energy_not_minus_zero() {
        let empty = CycleReport::default();
        // "-0.00 J" in the cycle line: a sum of no processes must be +0.0.
        assert!(empty.process_energy_uj().is_sign_positive());
        assert!(empty.socket_energy_uj().is_sign_positive());
        assert_eq!(format!("{:.2}", empty.process_energy_uj() / 1e6), "0.00");
        let report = CycleReport {
            sockets: vec![SocketReport { energy_uj: 3.0, ..SocketReport::default() }; 2],
            processes: vec![ProcessReport { energy_uj: 1.5, ..ProcessReport::default() }],
            ..CycleReport::default()
        };
        assert_eq!((report.socket_energy_uj(), report.process_energy_uj()), (6.0, 1.5));
    }
}
