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
    /// Cycles whose energy could not be read (they count no energy; a counter's next reading
    /// still covers the whole time since the last good one).
    pub failed_reads: u64,
}

impl EnergyStage {
    /// Opens the first working source (or the one asked for) and says which, and why.
    pub fn open(opts: &EnergyOptions) -> anyhow::Result<Self> {
        let topology = Topology::read(&opts.sysfs_root, &opts.proc_root)?;
        let (source, why) = open_source(opts, &topology)?;
        errln!("joular-ebpf: {why}");
        Ok(Self {
            topology,
            source,
            idle: IdleBaseline::new(opts.idle_power_w),
            totals: Totals::default(),
            pending: Vec::new(),
            failed_reads: 0,
        })
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

    /// `read_at_flip` in the middle of a run: a failed read (a sysfs hiccup, a counter file
    /// briefly unreadable) costs that cycle its energy, reported, instead of ending the session.
    pub fn read_at_flip_or_skip(&mut self, duration_ns: u64) {
        if let Err(e) = self.read_at_flip(duration_ns) {
            self.pending.clear();
            self.failed_reads += 1;
            if self.failed_reads == 1 || self.failed_reads.is_power_of_two() {
                errln!(
                    "joular-ebpf: warning: energy not read this cycle ({} cycles so far), counted as 0: {e:#}",
                    self.failed_reads
                );
            }
        }
    }

    /// Splits the cycle's energy and fills the report's sockets, processes and thread energy.
    pub fn attribute(
        &mut self,
        cpus: &[CpuTime],
        threads: &[ThreadCpuTime],
        duration_ns: u64,
        report: &mut CycleReport,
    ) -> Attribution {
        if self.source.estimated() {
            match self.source.read(&CycleUtilisation::new(cpus, &self.topology, duration_ns)) {
                Ok(readings) => self.pending = readings,
                Err(e) => {
                    self.pending.clear();
                    self.failed_reads += 1;
                    errln!("joular-ebpf: warning: energy model failed this cycle, counted as 0: {e:#}");
                }
            }
        }
        self.idle.observe(&self.pending, duration_ns);
        let att = attribute(cpus, threads, &self.topology, &self.pending, duration_ns, &self.idle);
        att.fill_report(report, self.source.kind(), self.source.estimated());
        self.totals.add(&att);
        att
    }
}
