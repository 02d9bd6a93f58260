//! Energy sources behind one trait (docs/architecture.md, stage 3): powercap → perf power PMU → MSR → power model,
//! the first that opens wins unless `--energy-source` names one. Each source reports energy
//! per socket since its previous read; wraps and misbehaving counters are settled here
//! ([`wrap`]), in the one read loop the measured sources share ([`domains`]), so attribution
//! only ever sees non-negative joules.

mod cpu_power_table;
pub mod cpufreq;
mod cpuinfo;
mod domains;
mod error;
mod files;
mod msr;
mod perf_pmu;
mod power_model;
mod powercap;
mod select;
mod topology;
mod vm_guest;
mod wrap;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use crate::model::CpuTime;

pub use cpu_power_table::{CpuMatch, CpuPowerTable, COEFFICIENTS_SOURCE};
pub use cpufreq::CpuFreq;
pub use cpuinfo::{parse_cpuinfo, CpuInfo};
pub use error::EnergyError;
pub use msr::MsrSource;
pub use perf_pmu::{PerfCounter, PerfOpener, PerfPmuSource, SyscallOpener};
pub use power_model::{ModelDescription, ModelSource};
pub use powercap::PowercapSource;
pub use select::{open_source, open_source_with};
pub use topology::Topology;
pub use vm_guest::{HostPowercapSource, VmPowerFileSource};
pub use wrap::{CounterDelta, WrappingCounter};

/// Which source measured (or estimated) a cycle's energy. The names are the `source`
/// strings of the JSON report and the values of `--energy-source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum SourceKind {
    Powercap,
    Perf,
    Msr,
    Model,
    /// `--energy-source vm-power-file:PATH`: the VM's watts, written by its host (JoularJX's
    /// VM mode). Named with its path, so not a plain value of the flag.
    #[value(skip)]
    VmPowerFile,
}

impl SourceKind {
    /// The automatic order: measured sources first, cheapest to read first.
    pub const AUTO_ORDER: [SourceKind; 4] = [Self::Powercap, Self::Perf, Self::Msr, Self::Model];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Powercap => "powercap",
            Self::Perf => "perf",
            Self::Msr => "msr",
            Self::Model => "model",
            Self::VmPowerFile => "vm-power-file",
        }
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the user asked for on the command line; every root is configurable so tests run on
/// fake trees.
#[derive(Debug, Clone)]
pub struct EnergyOptions {
    pub sysfs_root: PathBuf,
    pub proc_root: PathBuf,
    pub dev_root: PathBuf,
    /// `--energy-source`: only this source, no fallback.
    pub source: Option<SourceKind>,
    /// `--tdp`: TDP per socket in watts for the model source (E-Surgeon's curve instead of the
    /// coefficient table).
    pub tdp_w: Option<f64>,
    /// `--idle-power`: idle power per socket in watts (model's `P_idle`, and the dynamic view's baseline).
    pub idle_power_w: Option<f64>,
    /// `--dram`: add DRAM energy to each socket's `E_s`.
    pub dram: bool,
    /// `--psys`: also report the platform (psys) counter, where one exists.
    pub psys: bool,
    /// `--powercap-root`: read powercap from the host's export of this VM's energy
    /// (`DIR/<vm-name>`) instead of this machine's sysfs.
    pub powercap_root: Option<PathBuf>,
    /// The path of `--energy-source vm-power-file:PATH`.
    pub vm_power_file: Option<PathBuf>,
}

impl EnergyOptions {
    /// The energy is the whole VM's, measured on its host: the guest is then one socket.
    pub fn measures_whole_vm(&self) -> bool {
        match self.source {
            Some(SourceKind::Powercap) => self.powercap_root.is_some(),
            Some(SourceKind::VmPowerFile) => true,
            _ => false,
        }
    }
}

impl Default for EnergyOptions {
    fn default() -> Self {
        Self {
            sysfs_root: PathBuf::from("/sys"),
            proc_root: PathBuf::from("/proc"),
            dev_root: PathBuf::from("/dev"),
            source: None,
            tdp_w: None,
            idle_power_w: None,
            dram: false,
            psys: false,
            powercap_root: None,
            vm_power_file: None,
        }
    }
}

/// Energy of one socket over one cycle (since the previous read).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SocketEnergy {
    pub socket: u32,
    /// `E_s`, the energy attribution splits: package, plus DRAM when `--dram` is on.
    pub energy_uj: f64,
    /// The DRAM part of `energy_uj`, when asked for.
    pub dram_energy_uj: Option<f64>,
    /// The platform (psys) counter, reported on the lowest socket only since it covers the
    /// whole machine; never part of `energy_uj`.
    pub psys_energy_uj: Option<f64>,
    /// A counter went backwards with no wrap range: `energy_uj` is 0 for this cycle.
    pub flagged: bool,
}

/// CPU utilisation per socket over one cycle: all the model source needs to estimate power.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CycleUtilisation {
    /// Wall length of the cycle (what a power turns into energy over).
    pub duration_ns: u64,
    /// `(busy_ns, total_ns)` summed over the socket's CPUs.
    by_socket: BTreeMap<u32, (u64, u64)>,
}

impl CycleUtilisation {
    pub fn new(cpus: &[CpuTime], topo: &Topology, duration_ns: u64) -> Self {
        let mut by_socket: BTreeMap<u32, (u64, u64)> = topo.sockets().map(|s| (s, (0, 0))).collect();
        for cpu in cpus {
            if let Some(slot) = topo.socket_of(cpu.cpu).and_then(|s| by_socket.get_mut(&s)) {
                slot.0 += cpu.busy_ns;
                slot.1 += cpu.total_ns();
            }
        }
        Self { duration_ns, by_socket }
    }

    /// Busy fraction of the socket in [0, 1]; 0 when nothing was measured.
    pub fn of_socket(&self, socket: u32) -> f64 {
        match self.by_socket.get(&socket) {
            Some(&(busy, total)) if total > 0 => (busy as f64 / total as f64).clamp(0.0, 1.0),
            _ => 0.0,
        }
    }
}

/// A source of per-socket energy. `read` returns the energy since the previous read (the
/// first read covers the time since the source opened), one entry per socket, ascending.
pub trait EnergySource: Send {
    fn kind(&self) -> SourceKind;
    /// True for the model: every figure derived from it must be labelled "estimated".
    fn estimated(&self) -> bool;
    /// What the figures are beyond the source's name: the model, its coefficients and their
    /// source; where a measured counter lives when it is not this machine's. Empty for a
    /// plain measured source.
    fn detail(&self) -> String {
        String::new()
    }
    /// `util` feeds the model; measured sources ignore it.
    fn read(&mut self, util: &CycleUtilisation) -> Result<Vec<SocketEnergy>, EnergyError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utilisation_sums_cpus_of_each_socket() {
        let topo = Topology::from_pairs([(0, 0), (1, 0), (2, 1), (3, 1)]);
        let cpus = [
            CpuTime { cpu: 0, busy_ns: 300, idle_ns: 700 },
            CpuTime { cpu: 1, busy_ns: 500, idle_ns: 500 },
            CpuTime { cpu: 2, busy_ns: 1_000, idle_ns: 0 },
            CpuTime { cpu: 9, busy_ns: 1_000, idle_ns: 0 },
        ];
        let util = CycleUtilisation::new(&cpus, &topo, 1_000);
        assert!((util.of_socket(0) - 0.4).abs() < 1e-12);
        // CPU 3 reported nothing: socket 1 is utilised by what was measured (CPU 2 alone).
        assert!((util.of_socket(1) - 1.0).abs() < 1e-12);
        assert_eq!(util.of_socket(7), 0.0);
    }

    #[test]
    fn source_names_match_the_json_contract() {
        let names: Vec<_> = SourceKind::AUTO_ORDER.iter().map(|k| k.to_string()).collect();
        assert_eq!(names, ["powercap", "perf", "msr", "model"]);
    }
}
