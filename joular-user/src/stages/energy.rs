//! The energy stage of a cycle: read each socket's energy at the flip and split it over threads
//! and processes (attribution), into the cycle's report. The source and the topology are passed
//! in, so a test or a bench drives it with a fake meter.

use crate::attribution::{attribute, Attribution, IdleBaseline};
use crate::energy::{open_source, CycleUtilisation, EnergyError, EnergyOptions, EnergySource, SocketEnergy, Topology};
use crate::model::{CpuTime, CycleReport, ThreadCpuTime};

pub struct EnergyStage {
    topology: Topology,
    source: Box<dyn EnergySource>,
    idle: IdleBaseline,
    pending: Vec<SocketEnergy>,
    /// Cycles whose energy could not be read (they count no energy; a counter's next reading
    /// still covers the whole time since the last good one).
    pub failed_reads: u64,
}

impl EnergyStage {
    /// `idle_power_w`: `--idle-power`, else the lowest socket power seen so far.
    pub fn new(topology: Topology, source: Box<dyn EnergySource>, idle_power_w: Option<f64>) -> Self {
        Self { topology, source, idle: IdleBaseline::new(idle_power_w), pending: Vec::new(), failed_reads: 0 }
    }

    /// Opens the first working source (or the one asked for); returns the stage and why that
    /// source.
    pub fn open(opts: &EnergyOptions) -> Result<(Self, String), EnergyError> {
        let mut topology = Topology::read(&opts.sysfs_root, &opts.proc_root)?;
        if opts.measures_whole_vm() {
            topology = topology.as_one_socket();
        }
        let (source, why) = open_source(opts, &topology)?;
        Ok((Self::new(topology, source, opts.idle_power_w), why))
    }

    pub fn source_label(&self) -> &'static str {
        self.source.kind().as_str()
    }

    pub fn estimated(&self) -> bool {
        self.source.estimated()
    }

    /// The model, its coefficients and their source, or where a measured counter is read.
    pub fn detail(&self) -> String {
        self.source.detail()
    }

    /// Reads measured counters; call right after the buffer flip so energy and CPU time
    /// describe the same instants. The model needs the cycle's utilisation, known only after
    /// the drain, so it is read in `attribute` (it has no timing to align).
    pub fn read_at_flip(&mut self, duration_ns: u64) -> Result<(), EnergyError> {
        if !self.source.estimated() {
            self.pending = self.source.read(&CycleUtilisation::new(&[], &self.topology, duration_ns))?;
        }
        Ok(())
    }

    /// `read_at_flip` in the middle of a run: a failed read (a sysfs hiccup, a counter file
    /// briefly unreadable) costs that cycle its energy, counted in `failed_reads` and returned
    /// for the session to report, instead of ending the session.
    pub fn read_at_flip_or_skip(&mut self, duration_ns: u64) -> Option<EnergyError> {
        let e = self.read_at_flip(duration_ns).err()?;
        self.pending.clear();
        self.failed_reads += 1;
        Some(e)
    }

    /// Splits the cycle's energy and fills the report's sockets, processes and thread energy.
    /// The model's read failing costs the cycle its energy: the error is returned beside.
    pub fn attribute(
        &mut self,
        cpus: &[CpuTime],
        threads: &[ThreadCpuTime],
        duration_ns: u64,
        report: &mut CycleReport,
    ) -> (Attribution, Option<EnergyError>) {
        let mut failed = None;
        if self.source.estimated() {
            match self.source.read(&CycleUtilisation::new(cpus, &self.topology, duration_ns)) {
                Ok(readings) => self.pending = readings,
                Err(e) => {
                    self.pending.clear();
                    self.failed_reads += 1;
                    failed = Some(e);
                }
            }
        }
        self.idle.observe(&self.pending, duration_ns);
        let att = attribute(cpus, threads, &self.topology, &self.pending, duration_ns, &self.idle);
        att.fill_report(report, self.source.kind(), self.source.estimated());
        (att, failed)
    }
}
