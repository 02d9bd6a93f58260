//! `frequencies.csv` in the results directory: every CPU's frequency at each cycle's end, the
//! trace `joular-ebpf calmness` compares. A sink like the others: it only reads the cycle's
//! `cpu_frequencies`, filled by the session where the machine has cpufreq.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use super::sink::{Sink, SinkError};
use crate::attribution::stacks::profile::FailedOutput;
use crate::attribution::stacks::AttributedCycle;
use crate::calmness::{cycle_rows, FrequencyCycle, FREQUENCIES_FILE, FREQUENCIES_HEADER};
use crate::safe_write::OutDir;

pub struct FrequencySink {
    file: File,
    path: PathBuf,
}

impl FrequencySink {
    /// Starts `frequencies.csv` anew in `dir` (a run writing to the same `--output` replaces it).
    pub fn create(dir: &OutDir) -> std::io::Result<Self> {
        let mut file = dir.create_stream(FREQUENCIES_FILE.as_ref())?;
        writeln!(file, "{FREQUENCIES_HEADER}")?;
        Ok(Self { file, path: dir.join(FREQUENCIES_FILE) })
    }
}

impl Sink for FrequencySink {
    /// On an error the output stops (the rows so far stay whole).
    fn on_cycle(&mut self, cycle: &AttributedCycle) -> Result<(), SinkError> {
        let report = &cycle.report;
        if report.cpu_frequencies.is_empty() {
            return Ok(());
        }
        let duration_ms = report.end_ns.saturating_sub(report.start_ns) / 1_000_000;
        let rows = cycle_rows(&FrequencyCycle {
            cycle: report.cycle,
            start_epoch_ms: cycle.end_epoch_ms.saturating_sub(duration_ms),
            end_epoch_ms: cycle.end_epoch_ms,
            cpus: report.cpu_frequencies.clone(),
        });
        self.file.write_all(rows.as_bytes()).map_err(|e| SinkError {
            failed: FailedOutput::new("--output", &self.path, e),
            outcome: "CPU frequencies no longer recorded, the run goes on",
            stopped: true,
        })
    }
}
