//! What a finished run knows about one process: the totals every end-of-run output is
//! rendered from, during the run (`Results::finish`) and later (`joular-ebpf report`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::aggregate::{method_totals, NamedTotal, Scope, StackTotal};
use super::device_run::device_summary;
use super::methods::{is_method_name, shows_jvm, MethodFilter, StackRules};
use super::thread_kind;
pub use super::thread_total::ThreadTotal;
use super::timeline::Timeline;

/// `summary.json`, also the header of the raw profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub pid: u32,
    /// The process's name: its leader's comm when the session read it, else the main thread's
    /// (tid = pid), else the first thread's.
    pub comm: String,
    pub start_epoch_ms: u64,
    pub end_epoch_ms: u64,
    /// Sum of the cycles' lengths (monotonic clock).
    pub duration_s: f64,
    pub cycles: u64,
    /// `--filter` prefixes that define the "app" view.
    pub filters: Vec<String>,
    /// `powercap`, `perf`, `msr` or `model`.
    pub energy_source: String,
    /// True when the energy comes from a model, not a meter.
    pub estimated: bool,
    /// The model, its coefficients and their source, or where a measured counter was read
    /// (`measured on the host`); absent for this machine's own counters.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub energy_detail: String,
    /// Energy attributed to this process (sum of its threads).
    pub energy_uj: f64,
    pub samples: u64,
    /// Machine-wide, summed over sockets and cycles: socket energy, and the part of it that
    /// no monitored task took (idle and other processes).
    pub socket_energy_uj: f64,
    pub unattributed_uj: f64,
    /// Losses per map or cause, summed over cycles (machine-wide, as collected).
    pub drops: BTreeMap<String, u64>,
    pub threads: Vec<ThreadTotal>,
    /// `--native-frames`: graphs and call trees keep every frame.
    #[serde(default)]
    pub native_frames: bool,
    /// Present when the process is a JVM: the energy of its samples without a Java frame,
    /// by thread kind (the JIT compiler's and the collector's share, which JFR does not show).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jvm: Option<JvmShares>,
    /// Present when the sampler walked this JVM's stacks: which unwinder, and how its
    /// stacks came out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub java_unwinder: Option<crate::model::JavaUnwinder>,
    /// This process's energy that no method stands for, per view, by bucket (`(no samples)`,
    /// `[GC]`, `(no app frame)`...) or unnamed frame (`Interpreter`, `[unknown JIT code]`):
    /// what the JoularJX files leave out, so that their rows plus these make `energy_uj`.
    /// (`unattributed_uj` above is the machine's energy no profiled thread took.)
    #[serde(default)]
    pub unattributed: Unattributed,
    /// Losses and degradations other than map drops, summed over the run (energy reads that
    /// failed, socket counters flagged, symbolization misses...).
    #[serde(default)]
    pub degraded: BTreeMap<String, u64>,
    /// Outputs that could not be written (a full disk under `--json`, a result file): the run
    /// and the other outputs went on without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs_failed: Vec<FailedOutput>,
    /// Present when the run was given a carbon intensity: the process's and the machine's
    /// grams of CO₂e, and the intensity and PUE used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carbon: Option<crate::carbon::CarbonSummary>,
    /// Whether the run recorded CPU frequencies (calmness), and where.
    #[serde(default)]
    pub cpu_frequencies: crate::model::FrequencyRecording,
    /// `--devices network,disk`: the process's bytes per thread and call path over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<crate::attribution::devices::DeviceReport>,
    /// `--devices network,disk`: each device's modelled energy per thread and method, and the
    /// total of CPU and devices per method (`device_run.rs` says the shape).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_energy: Option<super::device_run::DeviceEnergySummary>,
}

/// An output that failed: the flag that asked for it, the file, and the error. Its writing
/// stopped there; nothing else did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedOutput {
    pub flag: String,
    pub path: String,
    pub error: String,
}

impl FailedOutput {
    pub fn new(flag: &str, path: &std::path::Path, error: impl std::fmt::Display) -> Self {
        Self { flag: flag.to_owned(), path: path.display().to_string(), error: error.to_string() }
    }
}

impl std::fmt::Display for FailedOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.flag, self.path, self.error)
    }
}

/// See `RunSummary::unattributed`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Unattributed {
    pub all: BTreeMap<String, Share>,
    /// Present with `--filter`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub app: BTreeMap<String, Share>,
}

/// A JVM's energy that no Java method stands for, by the kind of thread that spent it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JvmShares {
    pub jit_compiler: Share,
    pub gc: Share,
    /// The JVM's other threads (VM Thread, Service Thread, signal and reference handling...).
    pub jvm_other: Share,
    /// Application threads' samples with no Java frame.
    pub native: Share,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Share {
    pub energy_uj: f64,
    /// Of the process's energy.
    pub percent: f64,
    pub samples: u64,
}

impl Share {
    fn of(total: &NamedTotal, process_uj: f64) -> Self {
        Share {
            energy_uj: total.energy_uj,
            percent: if process_uj > 0.0 { 100.0 * total.energy_uj / process_uj } else { 0.0 },
            samples: total.samples,
        }
    }
}

/// The totals that are not methods, by name.
fn unattributed(totals: &[NamedTotal], process_uj: f64) -> BTreeMap<String, Share> {
    totals.iter().filter(|t| !is_method_name(&t.name)).map(|t| (t.name.to_string(), Share::of(t, process_uj))).collect()
}

impl JvmShares {
    /// From the "all" view's method totals of a process whose energy is `process_uj`.
    pub fn from_totals(totals: &[NamedTotal], process_uj: f64) -> Self {
        let share = |name: &str| {
            totals.iter().find(|t| &*t.name == name).map_or_else(Share::default, |t| Share::of(t, process_uj))
        };
        Self {
            jit_compiler: share(thread_kind::JIT_COMPILER),
            gc: share(thread_kind::GC),
            jvm_other: share(thread_kind::JVM_OTHER),
            native: share(thread_kind::NATIVE),
        }
    }
}

impl RunSummary {
    pub fn power_w(&self, energy_uj: f64) -> f64 {
        if self.duration_s > 0.0 {
            energy_uj / 1e6 / self.duration_s
        } else {
            0.0
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessProfile {
    pub summary: RunSummary,
    pub stacks: Vec<StackTotal>,
    /// `--devices network,disk`: each device's totals per thread and call path (empty with
    /// `--devices cpu`, and in a raw profile read back: its summary keeps `device_energy`).
    pub devices: Vec<super::device_run::DeviceProfile>,
    /// Energy over time (empty in raw profiles written before it existed).
    pub timeline: Timeline,
}

impl ProcessProfile {
    /// How this process's stacks read: a JVM when the run found it one, or when its stacks
    /// show HotSpot (a raw profile written before the run knew).
    pub fn rules(&self) -> StackRules {
        StackRules {
            jvm: self.summary.jvm.is_some()
                || self.stacks.iter().any(|s| s.thread.is_jvm_internal() || shows_jvm(&s.stack)),
            native_frames: self.summary.native_frames,
        }
    }

    /// Recomputes what the summary derives from the stacks: the JVM shares and the
    /// unattributed energy of both views (the "app" view of `summary.filters`).
    pub fn complete(&mut self) {
        let rules = self.rules();
        let process_uj = self.summary.energy_uj;
        let all = method_totals(&self.stacks, Scope::All, rules);
        self.summary.jvm = rules.jvm.then(|| JvmShares::from_totals(&all, process_uj));
        let filter = MethodFilter::new(self.summary.filters.iter().cloned());
        self.summary.unattributed = Unattributed {
            all: unattributed(&all, process_uj),
            app: if filter.is_empty() {
                BTreeMap::new()
            } else {
                let app = method_totals(&self.stacks, Scope::App(&filter), rules);
                unattributed(&app, process_uj)
            },
        };
        if !self.devices.is_empty() {
            self.summary.device_energy = device_summary(&self.stacks, &self.devices, &filter, rules);
        }
    }
}
