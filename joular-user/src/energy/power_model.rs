//! The source for machines without RAPL (most VMs): each socket's power estimated from its
//! measured utilisation `u`, `P = P_idle + (P_full − P_idle) · u · f`. Everything it produces is
//! an estimate and is labelled so, with the model, its coefficients and their source.
//!
//! - By default, Cloud Carbon Footprint's model: `P_idle = n · min_w`, `P_full = n · max_w` for
//!   the `n` vCPUs the socket shows, with the watts per vCPU of the CPU's microarchitecture
//!   (SPECpower-derived, [`CpuPowerTable`]). `--idle-power` replaces `P_idle`.
//! - With `--tdp`, E-Surgeon's (eq. 5/7): `P_full = 0.7 · TDP`, `P_idle = --idle-power` or a tenth
//!   of the TDP.
//! - `f` is the socket's mean current/top cpufreq frequency ([`CpuFreq`]) where cpufreq exists:
//!   the power above idle scaled linearly with frequency (the lower bound of `f · V²`, since the
//!   voltage is unknown); 1 without cpufreq (most VMs).

use std::fmt;
use std::path::Path;

use super::cpu_power_table::{CpuMatch, CpuPowerTable, COEFFICIENTS_SOURCE};
use super::cpufreq::CpuFreq;
use super::cpuinfo::CpuInfo;
use super::error::EnergyError;
use super::{CycleUtilisation, EnergySource, SocketEnergy, SourceKind, Topology};

/// E-Surgeon's share of TDP drawn at full load (the paper's 0.7).
const LOAD_FRACTION_OF_TDP: f64 = 0.7;
/// With `--tdp` and no `--idle-power`: idle power as a share of TDP, on the low side so that
/// utilisation, which we measure, carries most of the estimate.
const IDLE_FRACTION_OF_TDP: f64 = 0.1;

#[derive(Debug, Clone, PartialEq)]
struct SocketModel {
    socket: u32,
    idle_w: f64,
    full_w: f64,
}

impl SocketModel {
    /// Power at utilisation `u` with the dynamic part scaled by `frequency_ratio`.
    fn power_w(&self, u: f64, frequency_ratio: f64) -> f64 {
        self.idle_w + (self.full_w - self.idle_w) * u.clamp(0.0, 1.0) * frequency_ratio.clamp(0.0, 1.0)
    }
}

/// What a modelled figure is: printed at start and written into every output.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelDescription {
    /// `utilisation (Cloud Carbon Footprint)` or `TDP (E-Surgeon eq. 5/7)`.
    pub model: &'static str,
    /// The coefficients used, per socket.
    pub coefficients: String,
    pub source: &'static str,
    /// Whether the dynamic part follows cpufreq.
    pub frequency_scaled: bool,
}

impl fmt::Display for ModelDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let freq = if self.frequency_scaled { "scaled by cpufreq" } else { "no cpufreq, not scaled by frequency" };
        write!(f, "{} model: {}; {freq}; source: {}", self.model, self.coefficients, self.source)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelSource {
    sockets: Vec<SocketModel>,
    frequency: Option<CpuFreq>,
    description: ModelDescription,
}

impl ModelSource {
    /// Matches the CPU of `<proc_root>/cpuinfo` and looks for cpufreq under `sysfs_root`.
    pub fn open(
        sysfs_root: &Path,
        proc_root: &Path,
        topo: &Topology,
        tdp_w: Option<f64>,
        idle_power_w: Option<f64>,
    ) -> Result<Self, EnergyError> {
        let info = CpuInfo::read(proc_root).ok().unwrap_or_default();
        let cpu = CpuPowerTable::builtin().lookup(&info);
        Self::new(&cpu, topo, tdp_w, idle_power_w, CpuFreq::open(sysfs_root, topo))
    }

    pub fn new(
        cpu: &CpuMatch,
        topo: &Topology,
        tdp_w: Option<f64>,
        idle_power_w: Option<f64>,
        frequency: Option<CpuFreq>,
    ) -> Result<Self, EnergyError> {
        if let Some(tdp_w) = tdp_w.filter(|t| !(t.is_finite() && *t > 0.0)) {
            return Err(EnergyError::InvalidTdp { tdp_w });
        }
        let mut sockets = Vec::with_capacity(topo.socket_count());
        for socket in topo.sockets() {
            let vcpus = topo.cpus_of(socket).len() as f64;
            let (idle_w, full_w) = match tdp_w {
                Some(tdp) => (idle_power_w.unwrap_or(tdp * IDLE_FRACTION_OF_TDP), tdp * LOAD_FRACTION_OF_TDP),
                None => (idle_power_w.unwrap_or(vcpus * cpu.row.min_w_per_vcpu), vcpus * cpu.row.max_w_per_vcpu),
            };
            if !(idle_w.is_finite() && idle_w >= 0.0 && idle_w < full_w) {
                return Err(EnergyError::InvalidIdlePower { idle_power_w: idle_w, max_w: full_w });
            }
            sockets.push(SocketModel { socket, idle_w, full_w });
        }
        let idle_text = match (idle_power_w, sockets.first()) {
            (Some(w), _) => format!("idle --idle-power {w} W per socket"),
            (None, first) => format!("idle {:.2} W per socket", first.map_or(0.0, |s| s.idle_w)),
        };
        let description = match tdp_w {
            Some(tdp) => ModelDescription {
                model: "TDP (E-Surgeon eq. 5/7)",
                coefficients: format!(
                    "--tdp {tdp} W per socket, {idle_text}, {:.1} W at full load",
                    tdp * LOAD_FRACTION_OF_TDP
                ),
                source: "Noureddine et al., E-Surgeon (--tdp)",
                frequency_scaled: false,
            },
            None => {
                let vcpus: Vec<String> = topo.sockets().map(|s| topo.cpus_of(s).len().to_string()).collect();
                let mut coefficients = format!("{cpu} × {} vCPUs per socket", vcpus.join("/"));
                if idle_power_w.is_some() {
                    coefficients.push_str(&format!(", {idle_text}"));
                }
                ModelDescription {
                    model: "utilisation (Cloud Carbon Footprint)",
                    coefficients,
                    source: COEFFICIENTS_SOURCE,
                    frequency_scaled: false,
                }
            }
        };
        let description = ModelDescription { frequency_scaled: frequency.is_some(), ..description };
        Ok(Self { sockets, frequency, description })
    }

    pub fn description(&self) -> &ModelDescription {
        &self.description
    }
}

impl EnergySource for ModelSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Model
    }

    fn estimated(&self) -> bool {
        true
    }

    fn detail(&self) -> String {
        self.description.to_string()
    }

    fn read(&mut self, util: &CycleUtilisation) -> Result<Vec<SocketEnergy>, EnergyError> {
        // W · ns = nJ; /1000 = µJ.
        let duration_ns = util.duration_ns as f64;
        Ok(self
            .sockets
            .iter()
            .map(|s| {
                let ratio = self.frequency.as_ref().map_or(1.0, |f| f.ratio(s.socket));
                SocketEnergy {
                    socket: s.socket,
                    energy_uj: s.power_w(util.of_socket(s.socket), ratio) * duration_ns / 1e3,
                    ..Default::default()
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::cpufreq::tests::write_cpufreq;
    use crate::energy::cpuinfo::parse_cpuinfo;
    use crate::model::CpuTime;

    const AMD_ZEN3_VM: &str = include_str!("../../tests/data/cpuinfo/amd-epyc-vm.txt");

    fn cycle(topo: &Topology, busy: &[(u32, u64)], duration_ns: u64) -> CycleUtilisation {
        let cpus: Vec<_> = busy.iter().map(|&(cpu, b)| CpuTime { cpu, busy_ns: b, idle_ns: duration_ns - b }).collect();
        CycleUtilisation::new(&cpus, topo, duration_ns)
    }

    fn zen3() -> CpuMatch {
        CpuPowerTable::builtin().lookup(&parse_cpuinfo(AMD_ZEN3_VM))
    }

    /// Watts of one 1-second cycle with every CPU of `topo` at `busy` of the second.
    fn watts(model: &mut ModelSource, topo: &Topology, busy: f64) -> Vec<f64> {
        let per_cpu: Vec<(u32, u64)> =
            topo.sockets().flat_map(|s| topo.cpus_of(s).to_vec()).map(|c| (c, (busy * 1e9) as u64)).collect();
        model.read(&cycle(topo, &per_cpu, 1_000_000_000)).unwrap().iter().map(|s| s.energy_uj / 1e6).collect()
    }

    #[test]
    fn the_ccf_curve_at_0_50_and_100_percent() {
        let topo = Topology::from_pairs([(0, 0), (1, 0)]);
        let mut model = ModelSource::new(&zen3(), &topo, None, None, None).unwrap();
        // Two vCPUs of AMD EPYC 3rd Gen: 0.45 to 2.02 W each.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(watts(&mut model, &topo, 0.0)[0], 2.0 * 0.45));
        assert!(close(watts(&mut model, &topo, 0.5)[0], 2.0 * (0.45 + 0.5 * (2.02 - 0.45))));
        assert!(close(watts(&mut model, &topo, 1.0)[0], 2.0 * 2.02));
        assert!(model.estimated());
    }

    #[test]
    fn the_description_names_model_coefficients_and_source() {
        let topo = Topology::from_pairs([(0, 0), (1, 0)]);
        let model = ModelSource::new(&zen3(), &topo, None, None, None).unwrap();
        let line = model.detail();
        for part in [
            "utilisation (Cloud Carbon Footprint) model",
            "\"AMD EPYC\" → AMD EPYC 3rd Gen (Zen 3), 0.45–2.02 W/vCPU × 2 vCPUs per socket",
            "no cpufreq",
            "source: Cloud Carbon Footprint's SPECpower_ssj2008 coefficients (Apache-2.0",
        ] {
            assert!(line.contains(part), "{part:?} missing from {line}");
        }
    }

    #[test]
    fn tdp_overrides_the_table_with_the_e_surgeon_curve() {
        let topo = Topology::from_pairs([(0, 0), (1, 1)]);
        let (tdp, idle) = (100.0, 10.0);
        let mut model = ModelSource::new(&zen3(), &topo, Some(tdp), Some(idle), None).unwrap();
        let util = cycle(&topo, &[(0, 250_000_000), (1, 1_000_000_000)], 1_000_000_000);
        let read = model.read(&util).unwrap();
        let expect = |u: f64| (idle + (tdp * 0.7 - idle) * u) * 1e6;
        assert!((read[0].energy_uj - expect(0.25)).abs() < 1e-6, "{read:?}");
        assert!((read[1].energy_uj - expect(1.0)).abs() < 1e-6, "{read:?}");
        assert!(model.detail().contains("--tdp 100 W") && model.detail().contains("E-Surgeon"), "{}", model.detail());
    }

    #[test]
    fn idle_power_alone_replaces_the_tables_idle() {
        let topo = Topology::from_pairs([(0, 0), (1, 0)]);
        let mut model = ModelSource::new(&zen3(), &topo, None, Some(1.5), None).unwrap();
        assert!((watts(&mut model, &topo, 0.0)[0] - 1.5).abs() < 1e-9);
        assert!((watts(&mut model, &topo, 1.0)[0] - 2.0 * 2.02).abs() < 1e-9);
        assert!(model.detail().contains("--idle-power 1.5 W"), "{}", model.detail());
        let err = ModelSource::new(&zen3(), &topo, None, Some(5.0), None).unwrap_err();
        assert!(err.to_string().contains("--idle-power"), "{err}");
    }

    #[test]
    fn cpufreq_scales_the_power_above_idle() {
        let dir = tempfile::tempdir().unwrap();
        write_cpufreq(dir.path(), 0, 1_500_000, 3_000_000);
        write_cpufreq(dir.path(), 1, 1_500_000, 3_000_000);
        let topo = Topology::from_pairs([(0, 0), (1, 0)]);
        let mut model = ModelSource::new(&zen3(), &topo, None, None, CpuFreq::open(dir.path(), &topo)).unwrap();
        let half_speed_full_load = watts(&mut model, &topo, 1.0)[0];
        assert!((half_speed_full_load - 2.0 * (0.45 + 0.5 * (2.02 - 0.45))).abs() < 1e-9);
        assert!(model.detail().contains("scaled by cpufreq"), "{}", model.detail());
    }

    #[test]
    fn zero_negative_or_nan_tdp_is_refused_with_the_fix() {
        let topo = Topology::from_pairs([(0, 0)]);
        for bad in [0.0, -5.0, f64::NAN] {
            let err = ModelSource::new(&zen3(), &topo, Some(bad), None, None).unwrap_err();
            assert!(err.to_string().contains("--tdp"), "{err}");
        }
        let err = ModelSource::new(&zen3(), &topo, Some(10.0), Some(9.0), None).unwrap_err();
        assert!(err.to_string().contains("--idle-power"), "{err}");
    }
}
