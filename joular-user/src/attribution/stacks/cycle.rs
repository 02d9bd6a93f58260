//! What the stack stage hands the sinks each cycle: built once, then only read.

use std::sync::Arc;

use super::methods::StackRules;
use super::thread_kind::ThreadKind;
use crate::device_reports::Device;
use crate::model::{CycleReport, MethodReport, Stack};

/// The energy of one share (a thread, a call path), per device. The CPU's is the socket's
/// package energy (plus DRAM when the run asked for it) split by the energy stage; network
/// and disk join here as fields of their own, so a sink reads each device apart.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Energy {
    pub cpu_uj: f64,
    /// Grams of CO₂e of `cpu_uj` at the cycle's intensity and PUE; 0 when the run was given
    /// no intensity (`AttributedCycle::carbon` is then `None`).
    pub carbon_g: f64,
}

/// The carbon settings of a cycle, when the run was given an intensity.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CycleCarbon {
    /// Grid intensity at the cycle's middle, gCO₂e/kWh.
    pub g_per_kwh: f64,
    pub pue: f64,
    /// Grams per µJ: `g_per_kwh · pue / 3.6e12`.
    pub g_per_uj: f64,
    /// Grams of the machine's energy in the cycle (every socket).
    pub host_g: f64,
}

/// One process's run identity: a PID is reused, a key never (a process set aside or retired
/// and a later one with its PID have two keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcessKey(pub(super) u64);

/// A process with energy or samples in the cycle.
#[derive(Debug, Clone)]
pub struct ProcessCycle {
    pub pid: u32,
    pub key: ProcessKey,
    /// How its stacks read (a JVM once any of its stacks or threads showed HotSpot).
    pub rules: StackRules,
}

/// One call path's share of a thread's cycle (eq. 10): `samples / thread samples` of the
/// thread's energy, or all of it for the `(no samples)` bucket.
#[derive(Debug, Clone)]
pub struct StackShare {
    /// The process-local id of `(stack, kind)`: the same path in the same kind of thread has
    /// the same id for the process's whole run.
    pub id: usize,
    /// The symbolized stack, root first (an empty one is the `(no stack)` bucket).
    pub stack: Stack,
    pub kind: ThreadKind,
    /// The stack shows HotSpot (`methods::shows_jvm`).
    pub shows_jvm: bool,
    /// Its method in the "all" and "app" views, and its app call tree.
    pub all_method: Arc<str>,
    pub app_method: Arc<str>,
    pub app_tree: Arc<str>,
    pub energy: Energy,
    pub samples: u64,
}

/// One thread's cycle, split over its call paths. `stacks` sum to `energy`.
#[derive(Debug, Clone)]
pub struct ThreadCharge {
    pub pid: u32,
    pub tid: u32,
    pub energy: Energy,
    /// Its samples in the cycle (0 when it had energy but no sample).
    pub samples: u64,
    pub stacks: Vec<StackShare>,
}

/// One call path's share of a device's energy in a process's cycle (`--devices`): the joules
/// of its bytes, named by the process's rules as its CPU paths are (thread kinds and the JVM
/// flip included), so a method has one name in every tree.
#[derive(Debug, Clone)]
pub struct DevicePathShare {
    pub tid: u32,
    /// Root first; the `(no stack)` bucket for bytes with no stack.
    pub stack: Stack,
    pub kind: ThreadKind,
    pub all_method: Arc<str>,
    pub app_method: Arc<str>,
    pub app_tree: Arc<str>,
    pub energy_uj: f64,
}

/// One process's call paths on one device in the cycle.
#[derive(Debug, Clone)]
pub struct DeviceCharge {
    pub device: Device,
    pub pid: u32,
    pub paths: Vec<DevicePathShare>,
}

/// One attributed cycle: the energy stage's report (with its per-thread methods, and its
/// stacks when asked for) and every thread's energy over call paths.
#[derive(Debug, Clone, Default)]
pub struct AttributedCycle {
    pub report: CycleReport,
    /// Seconds of run before this cycle, and its length.
    pub offset_s: f64,
    pub duration_s: f64,
    /// Wall clock at the cycle's end.
    pub end_epoch_ms: u64,
    /// Processes charged in the cycle, by pid.
    pub processes: Vec<ProcessCycle>,
    /// In the order the symbolizer gave the threads, then threads with energy and no sample.
    pub charges: Vec<ThreadCharge>,
    /// With `--devices network,disk`: each process's call paths with device energy, by device
    /// then pid (a process that moved no byte has none).
    pub device_charges: Vec<DeviceCharge>,
    /// Present when the run was given a carbon intensity.
    pub carbon: Option<CycleCarbon>,
}

impl AttributedCycle {
    /// A cycle of a report alone, with no stack (a cycle the stage has not seen).
    pub fn of_report(report: CycleReport) -> Self {
        Self { duration_s: report.end_ns.saturating_sub(report.start_ns) as f64 / 1e9, report, ..Self::default() }
    }

    /// Energy per thread and method ("all" view), highest first within a thread.
    pub fn methods(&self) -> &[MethodReport] {
        &self.report.methods
    }

    pub fn process(&self, pid: u32) -> Option<&ProcessCycle> {
        self.processes.binary_search_by_key(&pid, |p| p.pid).ok().map(|i| &self.processes[i])
    }
}
