//! The stack stage wired to one sink, the JoularJX result tree, for a library user (a test, a
//! bench, a tool replaying recorded cycles) who wants only that tree: each cycle goes through
//! the stage, which builds the attributed cycle, then the tree reads it. The session wires the
//! same stage to all its sinks (`session/emit.rs`).

use crate::attribution::stacks::profile::{FailedOutput, ProcessProfile};
use crate::attribution::stacks::{StackStage, ThreadStacks};
use crate::model::{CycleReport, JavaUnwinder};
use crate::output::{table, FinishSummary, OutputError, OutputFiles, ResultTree, ResultsConfig, RetiredTree};

pub struct Results {
    stage: StackStage,
    tree: ResultTree,
    top_n: usize,
}

impl Results {
    pub fn new(config: ResultsConfig) -> Result<Self, OutputError> {
        Ok(Self { stage: StackStage::new(config.stack_config()), top_n: config.top_n, tree: ResultTree::new(config)? })
    }

    /// Attributes the cycle, then the tree writes the runtime and evolution files from it. The
    /// report comes back as the stage left it (`methods` filled and, if configured,
    /// `threads[].stacks`), for a caller that prints or checks it.
    pub fn on_cycle(&mut self, report: &mut CycleReport, stacks: &[ThreadStacks]) -> Result<(), OutputError> {
        let cycle = self.stage.on_cycle(std::mem::take(report), stacks);
        let written = self.tree.write_cycle(&cycle);
        *report = cycle.report;
        written
    }

    pub fn set_java_unwinder(&mut self, pid: u32, unwinder: &JavaUnwinder) {
        self.stage.set_java_unwinder(pid, unwinder);
    }

    pub fn add_degraded(&mut self, cause: &str, count: u64) {
        self.stage.add_degraded(cause, count);
    }

    pub fn add_failed_output(&mut self, failed: FailedOutput) {
        self.stage.add_failed_output(failed);
    }

    /// The run so far, one profile per process (ended ones too).
    pub fn profiles(&self) -> Vec<ProcessProfile> {
        self.stage.profiles()
    }

    pub fn set_aside(&mut self, pid: u32) {
        self.stage.set_aside(pid);
    }

    /// Ends a process that has exited: writes its end-of-run files now (when the tree is
    /// written) and frees everything held for it. Unknown pids are ignored.
    pub fn retire(&mut self, pid: u32) -> Result<Option<OutputFiles>, OutputError> {
        match self.stage.retire(pid) {
            Some(retired) => self.tree.retire(&retired),
            None => Ok(None),
        }
    }

    /// Ends a process that has exited: frees everything held for it and returns its end-of-run
    /// files to write (when the tree is written), owned, for another thread. Unknown pids are
    /// ignored.
    pub fn take_retired(&mut self, pid: u32) -> Option<RetiredTree> {
        let retired = self.stage.retire(pid)?;
        self.tree.take_retired(&retired)
    }

    pub fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.stage.pids()
    }

    /// Writes every end-of-run file from the totals so far and returns the top-methods
    /// table. Calling it again rewrites.
    pub fn finish(&self) -> Result<FinishSummary, OutputError> {
        let run = self.stage.run_end();
        Ok(FinishSummary { outputs: self.tree.write_end(&run), table: table(&run, self.top_n) })
    }
}

#[cfg(test)]
pub(crate) mod tests;
