//! The energy stage of a cycle: read each socket's energy at the flip, split it over threads
//! and processes (attribution), and keep run totals.

use joular_user::attribution::{attribute, Attribution, IdleBaseline, Totals};
use joular_user::energy::{open_source, CycleUtilisation, EnergyOptions, EnergySource, Topology};
use joular_user::model::{CpuTime, CycleReport, ThreadCpuTime};

pub struct EnergyStage {
    topology: Topology,
    source: Box<dyn EnergySource>,
    idle: IdleBaseline,
    pub totals: Totals,
    pending: Vec<joular_user::energy::SocketEnergy>,
}

impl EnergyStage {
    /// Opens the first working source (or the one asked for) and says which, and why.
    pub fn open(opts: &EnergyOptions) -> anyhow::Result<Self> {
        let topology = Topology::read(&opts.sysfs_root, &opts.proc_root)?;
        let (source, why) = open_source(opts, &topology)?;
        eprintln!("joular-ebpf: {why}");
        Ok(Self { topology, source, idle: IdleBaseline::new(opts.idle_power_w), totals: Totals::default(), pending: Vec::new() })
    }

    pub fn source_label(&self) -> &'static str {
        self.source.kind().as_str()
    }

    pub fn estimated(&self) -> bool {
        self.source.estimated()
    }

    /// Reads measured counters; call right after the buffer flip so energy and CPU time
    /// describe the same instants. The model needs the cycle's utilisation, known only after
    /// the drain, so it is read in `attribute` (it has no timing to align).
    pub fn read_at_flip(&mut self, duration_ns: u64) -> anyhow::Result<()> {
        if !self.source.estimated() {
            self.pending = self.source.read(&CycleUtilisation::new(&[], &self.topology, duration_ns))?;
        }
        Ok(())
    }

    /// Splits the cycle's energy and fills the report's sockets, processes and thread energy.
    pub fn attribute(
        &mut self,
        cpus: &[CpuTime],
        threads: &[ThreadCpuTime],
        duration_ns: u64,
        report: &mut CycleReport,
    ) -> anyhow::Result<Attribution> {
        if self.source.estimated() {
            self.pending = self.source.read(&CycleUtilisation::new(cpus, &self.topology, duration_ns))?;
        }
        self.idle.observe(&self.pending, duration_ns);
        let att = attribute(cpus, threads, &self.topology, &self.pending, duration_ns, &self.idle);
        att.fill_report(report, self.source.kind(), self.source.estimated());
        self.totals.add(&att);
        Ok(att)
    }
}
