//! One error type for every energy source, so selection can print why each was skipped.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// Every variant names the path or value at fault and, where there is one, the fix.
#[derive(Debug, Error)]
pub enum EnergyError {
    #[error("{what} root {path} does not exist: pass {flag} pointing at a mounted {what} (default {default})")]
    MissingRoot { what: &'static str, flag: &'static str, default: &'static str, path: PathBuf },

    #[error("cannot read {path}: {source}{hint}")]
    Read {
        path: PathBuf,
        hint: &'static str,
        #[source]
        source: io::Error,
    },

    #[error("{path}: unexpected content {content:?} ({expected})")]
    Parse { path: PathBuf, content: String, expected: &'static str },

    #[error("no powercap package zone under {path} (no intel-rapl:N with name package-N); RAPL is absent or the intel_rapl_common module is not loaded")]
    NoPowercapZones { path: PathBuf },

    #[error("powercap has no {zone} zone for socket {socket} under {path}")]
    MissingZone { zone: &'static str, socket: u32, path: PathBuf },

    #[error("no perf power PMU at {path} (the kernel exposes none on this machine)")]
    NoPowerPmu { path: PathBuf },

    #[error("perf power PMU at {path} has no {event} event")]
    MissingPmuEvent { path: PathBuf, event: &'static str },

    #[error("perf power PMU cpumask {path} names no CPU of socket {socket}")]
    NoPmuCpu { path: PathBuf, socket: u32 },

    #[error("perf_event_open(type {pmu_type}, config {config:#x}, cpu {cpu}) failed: {source} (needs root or kernel.perf_event_paranoid <= 0)")]
    PerfOpen {
        pmu_type: u32,
        config: u64,
        cpu: u32,
        #[source]
        source: io::Error,
    },

    #[error("{path} is missing: run `modprobe msr` (as root) to expose the MSR device")]
    MsrMissing { path: PathBuf },

    #[error(
        "CPU vendor {vendor:?} from {path} has no known RAPL MSRs (only GenuineIntel, AuthenticAMD, HygonGenuine)"
    )]
    UnknownVendor { vendor: String, path: PathBuf },

    #[error("the MSR source cannot read {domain} on {vendor} CPUs")]
    MsrDomainUnsupported { domain: &'static str, vendor: &'static str },

    #[error("TDP must be a positive number of watts, got {tdp_w}: pass --tdp with the CPU's rated TDP per socket, e.g. --tdp 120")]
    InvalidTdp { tdp_w: f64 },

    #[error("idle power must be zero or more watts and below the model's full-load power ({max_w:.1} W per socket), got {idle_power_w}: fix --idle-power")]
    InvalidIdlePower { idle_power_w: f64, max_w: f64 },

    #[error("no CPU found under {sysfs} nor in {cpuinfo}: check --sysfs-root and --proc-root")]
    NoCpus { sysfs: PathBuf, cpuinfo: PathBuf },

    #[error("no VM energy tree at --powercap-root {path} ({why}): pass the VM's own directory of the host's export, DIR/<vm-name> holding intel-rapl:0/energy_uj, as `joular-ebpf serve --vm-energy-dir DIR` or Scaphandre's qemu exporter writes it")]
    NoHostTree { path: PathBuf, why: String },

    #[error("no VM power file at vm-power-file:{path} ({why}): pass the file the host writes the VM's watts to, e.g. DIR/<vm-name>/power_w of `joular-ebpf serve --vm-energy-dir DIR`")]
    NoVmPowerFile { path: PathBuf, why: String },

    /// A VM's energy from its host cannot be read: there is no other source to fall back to.
    #[error("{flag}: {reason}")]
    VmSourceUnavailable { flag: String, reason: Box<EnergyError> },

    #[error("--energy-source {kind} is not available: {reason}; leave --energy-source out to use the first source that works")]
    Unavailable { kind: super::SourceKind, reason: Box<EnergyError> },
}

/// Hint appended to read errors of privileged counters: since Linux 5.10 (CVE-2020-8694)
/// `energy_uj` and the MSR device are readable by root only.
pub(crate) const ROOT_HINT: &str = " (run as root: energy counters are root-only since Linux 5.10)";

pub(crate) fn read_error(path: impl Into<PathBuf>, source: io::Error, hint: &'static str) -> EnergyError {
    EnergyError::Read { path: path.into(), hint, source }
}
