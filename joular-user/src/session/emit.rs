//! Writing a cycle once its symbols are back: results, metrics, profiles, JSON, the summary,
//! and forgetting what ended. Cycles are drained in order, kept here until the symbol worker
//! answers, and written in the same order; a cycle the worker is too late for is written with
//! its samples on one `[symbols not ready]` frame and counted.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use joular_user::attribution::device_split::{ClassReading, DeviceSplitter};
use joular_user::attribution::devices::{cycle_report as device_report, DevicePath};
use joular_user::attribution::stacks::{StackStage, ThreadStacks};
use joular_user::collect::ThreadExit;
use joular_user::model::CycleReport;
use joular_user::output::{
    table, BackgroundWrites, FailedOutput, FinishSummary, RetiredWrite, Sink, LIVE_FILES_QUEUE_FULL,
    LIVE_FILES_SUPERSEDED, RETIRED_TREES_QUEUE_FULL, RETIRED_TREES_UNFINISHED,
};
use joular_user::stages::symbolize::late_stacks;
use joular_user::symbols::SymbolStats;

use super::retire;
use super::summary::Summary;
use super::symbolize::SymbolReply;

/// Drop cause: well-formed perf-map lines left out to stay within `--max-symbol-mb`.
pub const OVER_BUDGET: &str = "perf_map_entries_over_budget";
/// Drop cause: samples of cycles written before their stacks were symbolized.
pub const UNSYMBOLIZED: &str = "samples_unsymbolized";

/// A drained, attributed cycle waiting for its symbols.
pub struct PendingCycle {
    pub report: CycleReport,
    pub exits: Vec<ThreadExit>,
    pub drained_at: Instant,
    /// The device models' joules per unit at the cycle's end (`--devices network,disk`),
    /// split by the cycle's bytes once they are named.
    pub device_readings: Vec<ClassReading>,
}

pub struct Sinks {
    /// Splits each cycle's thread energy over stacks and methods, and keeps the run's totals.
    pub stage: StackStage,
    /// Every output, each only reading the attributed cycle (result tree, metrics, periodic
    /// profiles, JSON): their order changes no output.
    outputs: Vec<Box<dyn Sink>>,
    pub summary: Summary,
    /// Serve mode: forget ended processes (write their trees now); otherwise they are kept
    /// for the end, set aside from later processes with the same PID.
    pub retire: bool,
    pending: VecDeque<PendingCycle>,
    /// The symbolizer's counters as of the last reply.
    pub symbol_stats: SymbolStats,
    pub cycles_written_late: u64,
    /// Perf-map lines left out since the last cycle written: its drops say so.
    unreported_not_indexed: u64,
    /// Ended processes whose files a sink's writer refused since the last cycle written: its
    /// drops say so (metrics).
    unreported_retired_refused: u64,
    /// Live processes' cycle files a sink's writer refused since the last cycle written.
    unreported_cycles_refused: u64,
    /// Live processes' runtime files superseded unwritten since the last cycle written.
    unreported_superseded: u64,
    /// Outputs that failed during the run, each said once.
    failed: Vec<FailedOutput>,
    /// Byte counters run (`--devices`): each cycle report carries their bytes.
    pub devices: bool,
    /// Splits the device models' joules by bytes, cycle by cycle in order (its writeback
    /// ledger spans cycles).
    splitter: DeviceSplitter,
}

impl Sinks {
    pub fn new(stage: StackStage, outputs: Vec<Box<dyn Sink>>, retire: bool) -> Self {
        Sinks {
            stage,
            outputs,
            summary: Summary::default(),
            retire,
            pending: VecDeque::new(),
            symbol_stats: SymbolStats::default(),
            cycles_written_late: 0,
            unreported_not_indexed: 0,
            unreported_retired_refused: 0,
            unreported_cycles_refused: 0,
            unreported_superseded: 0,
            failed: Vec::new(),
            devices: false,
            splitter: DeviceSplitter::default(),
        }
    }

    pub fn hold(&mut self, cycle: PendingCycle) {
        self.pending.push_back(cycle);
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Writes the cycle the reply is for (with the ones before it, if the worker skipped
    /// them, which it does only for cycles already written).
    pub fn on_reply(&mut self, reply: SymbolReply) -> anyhow::Result<()> {
        self.unreported_not_indexed += reply
            .stats
            .perf_map_entries_not_indexed_total
            .saturating_sub(self.symbol_stats.perf_map_entries_not_indexed_total);
        self.symbol_stats = reply.stats;
        for (pid, unwinder) in &self.symbol_stats.unwinders {
            self.stage.set_java_unwinder(*pid, unwinder);
        }
        while let Some(front) = self.pending.front() {
            if front.report.cycle > reply.cycle {
                break;
            }
            let cycle = self.pending.pop_front().expect("front exists");
            if cycle.report.cycle < reply.cycle {
                self.write_late(cycle)?;
                continue;
            }
            self.write(cycle, &reply.stacks, &reply.device_paths)?;
            break;
        }
        Ok(())
    }

    /// Writes without their symbols the cycles drained more than `max_wait` ago. Returns the
    /// last cycle so written, for the worker to skip.
    pub fn write_overdue(&mut self, max_wait: Duration) -> anyhow::Result<Option<u64>> {
        let mut last = None;
        while self.pending.front().is_some_and(|c| c.drained_at.elapsed() > max_wait) {
            let cycle = self.pending.pop_front().expect("front exists");
            last = Some(cycle.report.cycle);
            self.write_late(cycle)?;
        }
        Ok(last)
    }

    /// Writes every cycle still waiting, without its symbols (the worker is gone or too slow
    /// at shutdown).
    pub fn write_all_late(&mut self) -> anyhow::Result<()> {
        while let Some(cycle) = self.pending.pop_front() {
            self.write_late(cycle)?;
        }
        Ok(())
    }

    fn write_late(&mut self, mut cycle: PendingCycle) -> anyhow::Result<()> {
        let threads: Vec<(u32, u32, u64)> = cycle.report.threads.iter().map(|t| (t.pid, t.tid, t.samples)).collect();
        let samples: u64 = threads.iter().map(|t| t.2).sum();
        if samples > 0 {
            *cycle.report.drops.entry(UNSYMBOLIZED.into()).or_default() += samples;
        }
        self.cycles_written_late += 1;
        // A late cycle's byte counts are unnamed: its `devices` report is empty and its device
        // energy all unattributed (its report says it is late).
        self.write(cycle, &late_stacks(&threads), &[])
    }

    fn write(
        &mut self,
        mut cycle: PendingCycle,
        stacks: &[ThreadStacks],
        devices: &[DevicePath],
    ) -> anyhow::Result<()> {
        if self.devices {
            cycle.report.devices = Some(device_report(devices, &cycle.report.threads));
        }
        let end_ns = cycle.report.end_ns;
        for reading in &cycle.device_readings {
            let energy = self.splitter.split(reading, cycle.report.devices.as_ref(), end_ns);
            cycle.report.device_energy.push(energy);
        }
        if self.unreported_not_indexed > 0 {
            *cycle.report.drops.entry(OVER_BUDGET.into()).or_default() +=
                std::mem::take(&mut self.unreported_not_indexed);
        }
        if self.unreported_retired_refused > 0 {
            *cycle.report.drops.entry(RETIRED_TREES_QUEUE_FULL.into()).or_default() +=
                std::mem::take(&mut self.unreported_retired_refused);
        }
        if self.unreported_cycles_refused > 0 {
            *cycle.report.drops.entry(LIVE_FILES_QUEUE_FULL.into()).or_default() +=
                std::mem::take(&mut self.unreported_cycles_refused);
        }
        if self.unreported_superseded > 0 {
            *cycle.report.drops.entry(LIVE_FILES_SUPERSEDED.into()).or_default() +=
                std::mem::take(&mut self.unreported_superseded);
        }
        let attributed = self.stage.on_cycle(cycle.report, stacks);
        let mut errors = Vec::new();
        self.outputs.retain_mut(|sink| match sink.on_cycle(&attributed) {
            Ok(()) => true,
            Err(e) => {
                let stopped = e.stopped;
                errors.push(e);
                !stopped
            }
        });
        for e in errors {
            self.fail(e.failed, e.outcome);
        }
        self.summary.add(&attributed);
        let ended = retire::ended(&cycle.exits);
        if !self.retire {
            // Kept for the end, but apart: a later process with the PID is another process.
            for &pid in &ended.pids {
                self.stage.set_aside(pid);
                self.summary.set_aside(pid);
            }
            return Ok(());
        }
        for &pid in &ended.pids {
            let Some(retired) = self.stage.retire(pid) else { continue };
            let mut failed = Vec::new();
            for sink in &mut self.outputs {
                // A daemon goes on when one process's files cannot be written (disk full).
                match sink.on_retire(&retired) {
                    Ok(Some(files)) => {
                        log::info!("results of ended process {pid}: {}", files.dir.display());
                        failed.extend(files.failed);
                    }
                    Ok(None) => {}
                    Err(e) => errln!(
                        "joular-ebpf: warning: results of ended process {pid} not written: {}: {}",
                        e.failed.path,
                        e.failed.error
                    ),
                }
            }
            for f in failed {
                self.fail(f, "the other files were written");
            }
        }
        let background: Vec<BackgroundWrites> = self.outputs.iter_mut().map(|s| s.background_writes()).collect();
        for writes in background {
            self.on_background(writes, None);
        }
        self.summary.forget(&ended);
        Ok(())
    }

    /// The end of the run: every sink's end-of-run files, from the stage's run totals, and the
    /// top-methods table.
    pub fn finish(&mut self, top_n: usize) -> FinishSummary {
        let run = self.stage.run_end();
        let outputs = self.outputs.iter_mut().flat_map(|sink| sink.finish(&run)).collect();
        FinishSummary { outputs, table: table(&run, top_n) }
    }

    /// The end of the run: the files of ended processes still queued are written, waiting at
    /// most `within`; those left are counted in `degraded` and said.
    pub fn finish_background(&mut self, within: Duration) {
        let ends: Vec<BackgroundWrites> = self.outputs.iter_mut().map(|s| s.finish_background(within)).collect();
        for writes in ends {
            self.on_background(writes, Some(within));
        }
    }

    /// Logs the ended processes' files a sink wrote off the cycle, and says (once) and counts
    /// those it could not: a daemon goes on when one process's files cannot be written.
    fn on_background(&mut self, writes: BackgroundWrites, at_end: Option<Duration>) {
        if let Some(pid) = writes.first_refused {
            errln!(
                "joular-ebpf: warning: processes end faster than their results are written in the background: the files of ended process {pid} (and of others, counted in summary.json degraded {RETIRED_TREES_QUEUE_FULL}) are written during the cycle, which may run long"
            );
        }
        if writes.refused > 0 {
            self.stage.add_degraded(RETIRED_TREES_QUEUE_FULL, writes.refused);
            self.unreported_retired_refused += writes.refused;
        }
        if writes.first_cycle_refused {
            errln!(
                "joular-ebpf: warning: the disk is behind on the live processes' result files: a cycle's files are written during the cycle, which may run long (counted in summary.json degraded {LIVE_FILES_QUEUE_FULL})"
            );
        }
        if writes.cycles_refused > 0 {
            self.stage.add_degraded(LIVE_FILES_QUEUE_FULL, writes.cycles_refused);
            self.unreported_cycles_refused += writes.cycles_refused;
        }
        if writes.superseded > 0 {
            self.stage.add_degraded(LIVE_FILES_SUPERSEDED, writes.superseded);
            self.unreported_superseded += writes.superseded;
        }
        for failed in writes.failed {
            self.fail(failed, "the run goes on");
        }
        for RetiredWrite { pid, result } in writes.written {
            match result {
                Ok(files) => {
                    log::info!("results of ended process {pid}: {}", files.dir.display());
                    for failed in files.failed {
                        self.fail(failed, "the other files were written");
                    }
                }
                Err(e) => errln!("joular-ebpf: warning: results of ended process {pid} not written: {e}"),
            }
        }
        if writes.unfinished > 0 {
            let within = at_end.unwrap_or_default();
            errln!(
                "joular-ebpf: warning: {} queued result write(s) (ended processes' files, live processes' cycle files) were not done within {within:?} of the end",
                writes.unfinished
            );
            self.stage.add_degraded(RETIRED_TREES_UNFINISHED, writes.unfinished);
        }
    }

    /// Says once that an output failed (a warning naming the flag and the file), and keeps it
    /// for the end of the run and `summary.json`.
    fn fail(&mut self, failed: FailedOutput, outcome: &str) {
        if self.failed.iter().any(|f| f.flag == failed.flag && f.path == failed.path) {
            return;
        }
        errln!("joular-ebpf: warning: {failed}; {outcome}");
        self.stage.add_failed_output(failed.clone());
        self.failed.push(failed);
    }

    /// The end of the run: every output that failed, this run's and the end-of-run files'.
    pub fn print_failed(&self, finished: &FinishSummary) {
        let end = finished.outputs.iter().flat_map(|o| &o.failed);
        let failed: Vec<&FailedOutput> = self.failed.iter().chain(end).collect();
        if failed.is_empty() {
            return;
        }
        errln!("joular-ebpf: warning: {} output(s) could not be written (the others were):", failed.len());
        for f in failed {
            errln!("  {f}");
        }
    }
}
