//! What every output is to the session: a reader of attributed cycles. A sink never changes
//! what another reads, so the order sinks run in changes no output.

use super::render::OutputFiles;
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

pub trait Sink {
    /// One cycle, attributed and symbolized.
    fn on_cycle(&mut self, cycle: &AttributedCycle) -> Result<(), SinkError>;

    /// A process ended and the stage let it go (serve mode): what the sink writes of it, now.
    fn on_retire(&mut self, _retired: &Retired) -> Result<Option<OutputFiles>, SinkError> {
        Ok(None)
    }

    /// The end of the run: the files written.
    fn finish(&mut self, _run: &RunEnd) -> Vec<OutputFiles> {
        Vec::new()
    }
}
