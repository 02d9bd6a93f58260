//! What every output is to the session: a reader of attributed cycles. A sink never changes
//! what another reads, so the order sinks run in changes no output.

use std::time::Duration;

use super::render::OutputFiles;
use super::retired_writer::RetiredWrite;
use crate::attribution::stacks::profile::FailedOutput;
use crate::attribution::stacks::{AttributedCycle, Retired, RunEnd};

/// An output that could not be written.
#[derive(Debug)]
pub struct SinkError {
    pub failed: FailedOutput,
    /// What became of the output, for the warning (`"the run goes on"`).
    pub outcome: &'static str,
    /// The sink writes nothing more: the session drops it.
    pub stopped: bool,
}

/// What a sink wrote off the cycle thread (serve's result tree writes live processes' cycle files
/// and ended processes' files on a thread of its own), or could not, since it was last asked.
#[derive(Debug, Default)]
pub struct BackgroundWrites {
    pub written: Vec<RetiredWrite>,
    /// Ended processes whose files the sink wrote on the cycle: its queue was full.
    pub refused: u64,
    /// The run's first refused process, to say once.
    pub first_refused: Option<u32>,
    /// Live processes' cycle files the sink wrote on the cycle (per process and cycle): its queue
    /// was full.
    pub cycles_refused: u64,
    /// This includes the run's first such cycle, to say once.
    pub first_cycle_refused: bool,
    /// Live processes' runtime files replaced by a later cycle's before the disk took them.
    pub superseded: u64,
    /// Live processes' cycle files that could not be written (the run goes on).
    pub failed: Vec<FailedOutput>,
    /// At the end: jobs (an ended process's files, a cycle's files) still queued when the wait
    /// ran out.
    pub unfinished: u64,
}

/// The end of the run: the files every sink's `finish` wrote, and the top-methods table to print.
#[derive(Debug, Clone, Default)]
pub struct FinishSummary {
    pub outputs: Vec<OutputFiles>,
    pub table: String,
}

pub trait Sink {
    /// One cycle, attributed and symbolized.
    fn on_cycle(&mut self, cycle: &AttributedCycle) -> Result<(), SinkError>;

    /// A process ended and the stage let it go (serve mode): what the sink writes of it, now.
    fn on_retire(&mut self, _retired: &Retired) -> Result<Option<OutputFiles>, SinkError> {
        Ok(None)
    }

    /// What this sink's background writes did since the last call, without waiting.
    fn background_writes(&mut self) -> BackgroundWrites {
        BackgroundWrites::default()
    }

    /// The end of the run: waits at most `within` for this sink's background writes.
    fn finish_background(&mut self, _within: Duration) -> BackgroundWrites {
        BackgroundWrites::default()
    }

    /// The end of the run: the files written.
    fn finish(&mut self, _run: &RunEnd) -> Vec<OutputFiles> {
        Vec::new()
    }
}
