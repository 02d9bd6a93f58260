//! The JoularJX result tree: one `<pid>-<start_epoch_ms>` directory per process, its runtime
//! and evolution files rewritten each cycle, and every end-of-run file (totals, folded stacks,
//! flame graphs, pprof, `summary.json`, the raw profile, `report.html`) when the process is
//! retired or the run ends.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::cycle_files::{cycle_files, CycleFiles, CycleWritten};
use super::joularjx::{HeldRunDirs, RunDirRef, HELD_RUN_DIRS};
use super::render::{render_process, OutputFiles, RenderSet};
use super::retired_writer::{Outcomes, RefusedTree, RetiredTree, RetiredTreeWriter};
use super::sink::{BackgroundWrites, Sink, SinkError};
use super::OutputError;
use crate::attribution::stacks::methods::MethodFilter;
use crate::attribution::stacks::{AttributedCycle, ProcessKey, Retired, RunEnd, StackConfig};
use crate::safe_write::{Modes, OutDir};

#[derive(Debug, Clone)]
pub struct ResultsConfig {
    /// The `joularjx-result` directory; one `<pid>-<start_epoch_ms>` directory per process
    /// goes inside it.
    pub results_root: PathBuf,
    /// Write that tree. Off, the stage still fills each cycle's `methods` and stacks (JSON,
    /// metrics) and the end table, but no file is touched (serve mode without `--results`).
    pub write_files: bool,
    /// `--filter` prefixes of the "app" view.
    pub filter: MethodFilter,
    pub start_epoch_ms: u64,
    /// Energy source label (`powercap`, `perf`, `msr`, `model`) and whether it is a model.
    pub energy_source: String,
    pub estimated: bool,
    /// See `StackConfig::energy_detail`.
    pub energy_detail: String,
    /// See `StackConfig::carbon`.
    pub carbon: Option<crate::carbon::Carbon>,
    /// Fill `threads[].stacks` of each cycle report: costly with many stacks, so only
    /// worth it when the report is printed (`--json`).
    pub report_stacks: bool,
    /// Append per-method rows to `evolution/` each cycle.
    pub evolution: bool,
    /// Rewrite `runtime/calltrees` each cycle (JoularJX `save-call-trees-runtime-data`):
    /// one row per distinct stack of the cycle, several MB a second on a busy JVM.
    pub runtime_call_trees: bool,
    /// Rows of the end-of-run table.
    pub top_n: usize,
    /// `--native-frames`: graphs and call trees keep every frame.
    pub native_frames: bool,
    /// Also write `report.html` for each process (`--html`, `serve --results`).
    pub html: bool,
    /// Permissions of the files and directories written.
    pub modes: Modes,
    /// See `StackConfig::cpu_frequencies`.
    pub cpu_frequencies: crate::model::FrequencyRecording,
}

/// Without a result tree, a process's run totals only feed the end table; past this many
/// distinct stacks they start over, so a JVM running for weeks holds bounded memory.
const MAX_STACKS_WITHOUT_FILES: usize = 1 << 16;

impl ResultsConfig {
    /// The stack stage's part of the configuration.
    pub fn stack_config(&self) -> StackConfig {
        StackConfig {
            filter: self.filter.clone(),
            native_frames: self.native_frames,
            report_stacks: self.report_stacks,
            start_epoch_ms: self.start_epoch_ms,
            energy_source: self.energy_source.clone(),
            estimated: self.estimated,
            energy_detail: self.energy_detail.clone(),
            carbon: self.carbon.clone(),
            max_stacks: (!self.write_files).then_some(MAX_STACKS_WITHOUT_FILES),
            cpu_frequencies: self.cpu_frequencies.clone(),
        }
    }
}

pub struct ResultTree {
    config: ResultsConfig,
    /// The results root, held open from the start (`None` when no file is written): the one
    /// descriptor every process's directory is reopened from.
    root: Option<Arc<OutDir>>,
    /// Run directories whose descriptor stays open between writes (the most recent few).
    held_dirs: Arc<HeldRunDirs>,
    /// Each process's directory, opened for each write (a descriptor held per process runs out
    /// on a busy host); `None` once it could not be reopened. Shared with the jobs queued for
    /// the writer.
    dirs: HashMap<ProcessKey, Option<Arc<RunDirRef>>>,
    /// Serve mode: live processes' cycle files and ended processes' files are written by this
    /// thread, off the cycle (tens of exits a second, or a busy disk, stretched 1 s cycles to 2 s
    /// when written inline).
    pub(super) writer: Option<RetiredTreeWriter>,
    /// Refusals of the writer and failed files not yet reported.
    background: BackgroundWrites,
}

impl ResultTree {
    pub fn new(config: ResultsConfig) -> Result<Self, OutputError> {
        let root = if config.write_files {
            Some(Arc::new(
                OutDir::create_all(&config.results_root, config.modes)
                    .map_err(|e| OutputError::io(&config.results_root, e))?,
            ))
        } else {
            None
        };
        Ok(Self {
            root,
            held_dirs: HeldRunDirs::new(HELD_RUN_DIRS),
            config,
            dirs: HashMap::new(),
            writer: None,
            background: BackgroundWrites::default(),
        })
    }

    /// Ended processes' files are written by `writer`, off the cycle (serve mode).
    pub fn write_retired_in_background(mut self, writer: RetiredTreeWriter) -> Self {
        self.writer = Some(writer);
        self
    }

    fn render_set(&self) -> RenderSet {
        RenderSet { html: self.config.html, ..RenderSet::ALL }
    }

    /// Creates the directory of each process new in the cycle.
    fn create_dirs(&mut self, cycle: &AttributedCycle) -> Result<(), OutputError> {
        let Some(root) = &self.root else { return Ok(()) };
        for p in &cycle.processes {
            if !self.dirs.contains_key(&p.key) {
                let epoch_ms = unused_epoch_ms(root, p.pid, self.config.start_epoch_ms);
                let dir = RunDirRef::create(root, &self.held_dirs, p.pid, epoch_ms)?;
                self.dirs.insert(p.key, Some(Arc::new(dir)));
            }
        }
        Ok(())
    }

    /// The cycle's runtime files and evolution rows of each process in it, to write.
    pub(super) fn cycle_files(&mut self, cycle: &AttributedCycle) -> Result<Option<CycleFiles>, OutputError> {
        self.create_dirs(cycle)?;
        if self.root.is_none() {
            return Ok(None);
        }
        let dirs = &self.dirs;
        let dir_of = |key: ProcessKey| dirs.get(&key).cloned().flatten();
        let (config, filter) = (&self.config, &self.config.filter);
        Ok(Some(cycle_files(cycle, dir_of, filter, config.runtime_call_trees, config.evolution)))
    }

    /// Rewrites the runtime files and appends the evolution rows of each process in the cycle,
    /// now; returns the first file that failed.
    pub fn write_cycle(&mut self, cycle: &AttributedCycle) -> Result<(), OutputError> {
        let Some(files) = self.cycle_files(cycle)? else { return Ok(()) };
        let mut failed = self.on_cycle_written(files.write());
        match failed.is_empty() {
            true => Ok(()),
            false => Err(failed.swap_remove(0)),
        }
    }

    /// Forgets the directories that could not be reopened; returns the files that failed.
    fn on_cycle_written(&mut self, written: CycleWritten) -> Vec<OutputError> {
        for key in written.lost {
            // Still live: its files stop. (An ended one's directory is already forgotten.)
            if let Some(dir) = self.dirs.get_mut(&key) {
                *dir = None;
            }
        }
        written.failed
    }

    /// What the writer wrote: ended processes' outcomes go to the session, cycles' failures
    /// into `writes`.
    fn on_outcomes(&mut self, outcomes: Outcomes, writes: &mut BackgroundWrites) {
        writes.written.extend(outcomes.retired);
        for cycle in outcomes.cycles {
            let failed = self.on_cycle_written(cycle);
            writes.failed.extend(failed.iter().map(|e| e.failed("--output")));
        }
    }

    /// Forgets a retired process's directory and returns its end-of-run files to write, owned
    /// (the directory by name), for whichever thread writes them.
    pub fn take_retired(&mut self, retired: &Retired) -> Option<RetiredTree> {
        let dir = self.dirs.remove(&retired.key)??;
        Some(RetiredTree::new(retired.pid, dir, retired.profile(), self.config.filter.clone(), self.render_set()))
    }

    /// Writes a retired process's end-of-run files now and forgets its directory.
    pub fn retire(&mut self, retired: &Retired) -> Result<Option<OutputFiles>, OutputError> {
        match self.take_retired(retired) {
            Some(tree) => tree.write().map(Some),
            None => Ok(None),
        }
    }

    /// Writes every end-of-run file of the run so far; calling it again rewrites them.
    pub fn write_end(&self, run: &RunEnd) -> Vec<OutputFiles> {
        let mut outputs = Vec::with_capacity(run.profiles.len());
        for (key, profile) in run.keys.iter().zip(&run.profiles) {
            let Some(Some(dir)) = self.dirs.get(key) else { continue };
            let dir = match dir.open() {
                Ok(dir) => dir,
                Err(e) => {
                    log::warn!("results of process {}: {e}", profile.summary.pid);
                    continue;
                }
            };
            outputs.push(render_process(dir.out_dir(), dir.out_dir(), profile, &self.config.filter, self.render_set()));
        }
        outputs
    }
}

impl Sink for ResultTree {
    fn on_cycle(&mut self, cycle: &AttributedCycle) -> Result<(), SinkError> {
        // A result file that cannot be written this cycle (a full disk) may be next cycle.
        let failed =
            |e: OutputError| SinkError { failed: e.failed("--output"), outcome: "the run goes on", stopped: false };
        // Evolution rows are appended, never superseded: written in turn, here (serve writes none).
        if self.writer.is_none() || self.config.evolution {
            return self.write_cycle(cycle).map_err(failed);
        }
        let Some(files) = self.cycle_files(cycle).map_err(failed)? else { return Ok(()) };
        let writer = self.writer.as_mut().expect("checked above");
        let Err(refused) = writer.try_submit_cycle(files) else { return Ok(()) };
        let (files, first) = *refused;
        // The writer is behind: these files are written here, on the cycle, after everything
        // queued before them. Nothing is lost; only these cycles may run long.
        self.background.cycles_refused += files.processes();
        self.background.first_cycle_refused |= first;
        let outcomes = writer.written();
        let mut writes = std::mem::take(&mut self.background);
        self.on_outcomes(outcomes, &mut writes);
        let failed = self.on_cycle_written(files.write());
        writes.failed.extend(failed.iter().map(|e| e.failed("--output")));
        self.background = writes;
        Ok(())
    }

    fn on_retire(&mut self, retired: &Retired) -> Result<Option<OutputFiles>, SinkError> {
        let failed = |e: OutputError| SinkError {
            failed: e.failed("--output"),
            outcome: "the process's results were not written",
            stopped: false,
        };
        if self.writer.is_none() {
            return self.retire(retired).map_err(failed);
        }
        let Some(tree) = self.take_retired(retired) else { return Ok(None) };
        let writer = self.writer.as_mut().expect("checked above");
        let Err(refused) = writer.try_submit_retired(retired.key, tree) else { return Ok(None) };
        let RefusedTree { files, tree, first } = *refused;
        self.background.refused += 1;
        if first {
            self.background.first_refused = Some(retired.pid);
        }
        // The writer is behind: this process's files are written here, on the cycle, after
        // everything queued before them, as before there was a writer. Nothing is lost; only
        // these cycles may run long.
        if let Some(files) = files {
            let failed = self.on_cycle_written(files.write());
            self.background.failed.extend(failed.iter().map(|e| e.failed("--output")));
        }
        tree.write().map(Some).map_err(failed)
    }

    fn background_writes(&mut self) -> BackgroundWrites {
        let mut writes = std::mem::take(&mut self.background);
        if let Some(writer) = self.writer.as_mut() {
            writes.superseded += writer.take_superseded();
            let outcomes = writer.written();
            self.on_outcomes(outcomes, &mut writes);
        }
        writes
    }

    fn finish_background(&mut self, within: Duration) -> BackgroundWrites {
        let mut writes = std::mem::take(&mut self.background);
        if let Some(mut writer) = self.writer.take() {
            writes.superseded += writer.take_superseded();
            let end = writer.finish(within);
            self.on_outcomes(end.written, &mut writes);
            writes.unfinished = end.unfinished;
        }
        writes
    }

    fn finish(&mut self, run: &RunEnd) -> Vec<OutputFiles> {
        self.write_end(run)
    }
}

/// The `<pid>-<epochms>` directory name's time: the run's start, or, when a process with this
/// PID already has that directory (it ended and the PID was reused), the first free time from
/// now on: two processes never share a tree.
fn unused_epoch_ms(root: &OutDir, pid: u32, start_epoch_ms: u64) -> u64 {
    let taken = |ms: u64| root.path().join(format!("{pid}-{ms}")).symlink_metadata().is_ok();
    if !taken(start_epoch_ms) {
        return start_epoch_ms;
    }
    let mut ms = now_epoch_ms().max(start_epoch_ms + 1);
    while taken(ms) {
        ms += 1;
    }
    ms
}

fn now_epoch_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
