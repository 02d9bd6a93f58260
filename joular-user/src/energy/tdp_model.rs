//! The fallback for machines without RAPL (most VMs): a TDP-based estimate per socket,
//! `P = P_idle + (TDP·0.7 − P_idle) · utilisation` (E-Surgeon eq. 5/7). Everything it
//! produces is an estimate and is labelled so.

use std::path::Path;

use super::cpuinfo::CpuInfo;
use super::error::EnergyError;
use super::{CycleUtilisation, EnergySource, SocketEnergy, SourceKind, Topology};

/// A CPU whose TDP we know: matched as a substring of /proc/cpuinfo's `model name`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KnownCpu {
    pub model: &'static str,
    /// Rated TDP of one package.
    pub tdp_w: f64,
    /// Hardware threads of one package: a VM that sees fewer gets that share of the TDP.
    pub threads: u32,
}

/// Vendors' published TDPs. Small on purpose: `--tdp` is the way to be exact.
pub const KNOWN_CPUS: &[KnownCpu] = &[
    KnownCpu { model: "EPYC 9654", tdp_w: 360.0, threads: 192 },
    KnownCpu { model: "EPYC 7763", tdp_w: 280.0, threads: 128 },
    KnownCpu { model: "EPYC 7742", tdp_w: 225.0, threads: 128 },
    KnownCpu { model: "Xeon(R) Platinum 8380", tdp_w: 270.0, threads: 80 },
    KnownCpu { model: "Xeon(R) Gold 6248", tdp_w: 150.0, threads: 40 },
    KnownCpu { model: "Xeon(R) CPU E5-2686 v4", tdp_w: 145.0, threads: 36 },
    KnownCpu { model: "Core(TM) i7-1185G7", tdp_w: 28.0, threads: 8 },
    KnownCpu { model: "Core(TM) i7-8650U", tdp_w: 15.0, threads: 8 },
];

/// Share of TDP drawn at full load in the model (the paper's 0.7).
const LOAD_FRACTION_OF_TDP: f64 = 0.7;
/// Unknown CPU: a server package draws roughly 3 W of TDP per hardware thread (e.g. 360 W/192,
/// 145 W/36), so a VM is charged for the CPUs it sees, not for a whole package.
const DEFAULT_TDP_PER_CPU_W: f64 = 3.0;
/// Without `--idle-power`: idle power as a share of TDP, on the low side so that utilisation,
/// which we can measure, carries most of the estimate.
const IDLE_FRACTION_OF_TDP: f64 = 0.1;

#[derive(Debug, Clone, PartialEq)]
struct SocketModel {
    socket: u32,
    tdp_w: f64,
    idle_power_w: f64,
}

impl SocketModel {
    fn power_w(&self, utilisation: f64) -> f64 {
        self.idle_power_w + (self.tdp_w * LOAD_FRACTION_OF_TDP - self.idle_power_w) * utilisation.clamp(0.0, 1.0)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TdpModelSource {
    sockets: Vec<SocketModel>,
    /// Where the TDP came from, for the start-up line.
    origin: String,
}

impl TdpModelSource {
    pub fn open(
        proc_root: &Path,
        topo: &Topology,
        tdp_w: Option<f64>,
        idle_power_w: Option<f64>,
    ) -> Result<Self, EnergyError> {
        let model_name = CpuInfo::read(proc_root).ok().and_then(|info| info.model_name);
        Self::new(model_name.as_deref(), topo, tdp_w, idle_power_w)
    }

    /// TDP per socket: `--tdp` as given; else the table, scaled to the CPUs visible on the
    /// socket; else `DEFAULT_TDP_PER_CPU_W` per visible CPU.
    pub fn new(
        model_name: Option<&str>,
        topo: &Topology,
        tdp_w: Option<f64>,
        idle_power_w: Option<f64>,
    ) -> Result<Self, EnergyError> {
        if let Some(tdp_w) = tdp_w.filter(|t| !(t.is_finite() && *t > 0.0)) {
            return Err(EnergyError::InvalidTdp { tdp_w });
        }
        let known = model_name.and_then(|name| KNOWN_CPUS.iter().find(|k| name.contains(k.model)));
        let origin = match (tdp_w, known) {
            (Some(t), _) => format!("--tdp {t} W per socket"),
            (None, Some(k)) => format!("table: {} at {} W per {} CPUs", k.model, k.tdp_w, k.threads),
            (None, None) => format!(
                "unknown CPU {:?}: {DEFAULT_TDP_PER_CPU_W} W per CPU (pass --tdp to set it)",
                model_name.unwrap_or("?")
            ),
        };
        let mut sockets = Vec::with_capacity(topo.socket_count());
        for socket in topo.sockets() {
            let visible = topo.cpus_of(socket).len() as f64;
            let tdp = match (tdp_w, known) {
                (Some(t), _) => t,
                (None, Some(k)) => k.tdp_w * (visible / k.threads as f64).min(1.0),
                (None, None) => DEFAULT_TDP_PER_CPU_W * visible,
            };
            let max_w = tdp * LOAD_FRACTION_OF_TDP;
            let idle = idle_power_w.unwrap_or(tdp * IDLE_FRACTION_OF_TDP);
            if !(idle.is_finite() && idle >= 0.0 && idle < max_w) {
                return Err(EnergyError::InvalidIdlePower { idle_power_w: idle, max_w });
            }
            sockets.push(SocketModel { socket, tdp_w: tdp, idle_power_w: idle });
        }
        Ok(Self { sockets, origin })
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }
}

impl EnergySource for TdpModelSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Model
    }

    fn estimated(&self) -> bool {
        true
    }

    fn read(&mut self, util: &CycleUtilisation) -> Result<Vec<SocketEnergy>, EnergyError> {
        // W · ns = nJ; /1000 = µJ.
        let duration_ns = util.duration_ns as f64;
        Ok(self
            .sockets
            .iter()
            .map(|s| SocketEnergy {
                socket: s.socket,
                energy_uj: s.power_w(util.of_socket(s.socket)) * duration_ns / 1e3,
                ..Default::default()
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CpuTime;

    fn cycle(topo: &Topology, busy: &[(u32, u64)], duration_ns: u64) -> CycleUtilisation {
        let cpus: Vec<_> = busy.iter().map(|&(cpu, b)| CpuTime { cpu, busy_ns: b, idle_ns: duration_ns - b }).collect();
        CycleUtilisation::new(&cpus, topo, duration_ns)
    }

    #[test]
    fn power_follows_the_formula_per_socket() {
        let topo = Topology::from_pairs([(0, 0), (1, 1)]);
        let (tdp, idle) = (100.0, 10.0);
        let mut model = TdpModelSource::new(None, &topo, Some(tdp), Some(idle)).unwrap();
        let util = cycle(&topo, &[(0, 250_000_000), (1, 1_000_000_000)], 1_000_000_000);
        let read = model.read(&util).unwrap();
        let expect = |u: f64| (idle + (tdp * 0.7 - idle) * u) * 1e6;
        assert!((read[0].energy_uj - expect(0.25)).abs() < 1e-6, "{read:?}");
        assert!((read[1].energy_uj - expect(1.0)).abs() < 1e-6, "{read:?}");
        assert!(model.estimated());
    }

    #[test]
    fn table_tdp_is_scaled_to_the_visible_cpus() {
        let topo = Topology::from_pairs([(0, 0), (1, 0)]);
        let model = TdpModelSource::new(Some("AMD EPYC 7763 64-Core Processor"), &topo, None, None).unwrap();
        assert!((model.sockets[0].tdp_w - 280.0 * 2.0 / 128.0).abs() < 1e-9);
        assert!(model.origin().contains("EPYC 7763"));
        let unknown = TdpModelSource::new(Some("Intel(R) Xeon(R) Processor"), &topo, None, None).unwrap();
        assert!((unknown.sockets[0].tdp_w - 2.0 * DEFAULT_TDP_PER_CPU_W).abs() < 1e-9);
        assert!(unknown.origin().contains("--tdp"));
    }

    #[test]
    fn zero_negative_or_nan_tdp_is_refused_with_the_fix() {
        let topo = Topology::from_pairs([(0, 0)]);
        for bad in [0.0, -5.0, f64::NAN] {
            let err = TdpModelSource::new(None, &topo, Some(bad), None).unwrap_err();
            assert!(err.to_string().contains("--tdp"), "{err}");
        }
        let err = TdpModelSource::new(None, &topo, Some(10.0), Some(9.0)).unwrap_err();
        assert!(err.to_string().contains("--idle-power"), "{err}");
    }
}
