//! Writing a cycle once its symbols are back: results, metrics, profiles, JSON, the summary,
//! and forgetting what ended. Cycles are drained in order, kept here until the symbol worker
//! answers, and written in the same order; a cycle the worker is too late for is written with
//! its samples on one `[symbols not ready]` frame and counted.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::Context;

use joular_user::attribution::Totals;
use joular_user::collect::ThreadExit;
use joular_user::model::CycleReport;
use joular_user::output::{
    FailedOutput, FinishSummary, Results, RetiredTreeWriter, RetiredWrite, Submitted, ThreadStacks,
    RETIRED_QUEUE_TREES, RETIRED_TREES_QUEUE_FULL, RETIRED_TREES_UNFINISHED,
};
use joular_user::symbols::SymbolStats;

use super::exporter::Exporter;
use super::jsonl::JsonLines;
use super::profiles::ProfileExport;
use super::retire;
use super::summary::Summary;
use super::symbolize::{late_stacks, SymbolReply};

/// Drop cause: well-formed perf-map lines left out to stay within `--max-symbol-mb`.
pub const OVER_BUDGET: &str = "perf_map_entries_over_budget";
/// Drop cause: samples of cycles written before their stacks were symbolized.
pub const UNSYMBOLIZED: &str = "samples_unsymbolized";

/// A drained, attributed cycle waiting for its symbols.
pub struct PendingCycle {
    pub report: CycleReport,
    pub exits: Vec<ThreadExit>,
    pub drained_at: Instant,
}

pub struct Sinks {
    pub results: Results,
    pub exporter: Option<Exporter>,
    pub profiles: Option<ProfileExport>,
    pub json: Option<JsonLines>,
    pub summary: Summary,
    /// Serve mode: forget ended processes (their trees written by this writer, off the cycle);
    /// otherwise (`None`) they are kept for the end, set aside from later processes with the
    /// same PID.
    retired: Option<RetiredTreeWriter>,
    /// Ended processes whose trees the writer refused since the last cycle written: its drops
    /// say so (metrics).
    unreported_retired_refused: u64,
    pending: VecDeque<PendingCycle>,
    /// The symbolizer's counters as of the last reply.
    pub symbol_stats: SymbolStats,
    pub cycles_written_late: u64,
    /// Perf-map lines left out since the last cycle written: its drops say so.
    unreported_not_indexed: u64,
    /// Outputs that failed during the run, each said once.
    failed: Vec<FailedOutput>,
}

impl Sinks {
    pub fn new(
        results: Results,
        exporter: Option<Exporter>,
        profiles: Option<ProfileExport>,
        json: Option<JsonLines>,
        retire: bool,
    ) -> anyhow::Result<Self> {
        let retired = match retire {
            true => Some(RetiredTreeWriter::spawn(RETIRED_QUEUE_TREES).context("starting the result writer thread")?),
            false => None,
        };
        Ok(Sinks {
            results,
            exporter,
            profiles,
            json,
            summary: Summary::default(),
            retired,
            unreported_retired_refused: 0,
            pending: VecDeque::new(),
            symbol_stats: SymbolStats::default(),
            cycles_written_late: 0,
            unreported_not_indexed: 0,
            failed: Vec::new(),
        })
    }

    pub fn hold(&mut self, cycle: PendingCycle) {
        self.pending.push_back(cycle);
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Writes the cycle the reply is for (with the ones before it, if the worker skipped
    /// them, which it does only for cycles already written).
    pub fn on_reply(&mut self, reply: SymbolReply, totals: &mut Totals) -> anyhow::Result<()> {
        self.unreported_not_indexed += reply
            .stats
            .perf_map_entries_not_indexed_total
            .saturating_sub(self.symbol_stats.perf_map_entries_not_indexed_total);
        self.symbol_stats = reply.stats;
        for (pid, unwinder) in &self.symbol_stats.unwinders {
            self.results.set_java_unwinder(*pid, unwinder);
        }
        while let Some(front) = self.pending.front() {
            if front.report.cycle > reply.cycle {
                break;
            }
            let cycle = self.pending.pop_front().expect("front exists");
            if cycle.report.cycle < reply.cycle {
                self.write_late(cycle, totals)?;
                continue;
            }
            self.write(cycle, &reply.stacks, totals)?;
            break;
        }
        Ok(())
    }

    /// Writes without their symbols the cycles drained more than `max_wait` ago. Returns the
    /// last cycle so written, for the worker to skip.
    pub fn write_overdue(&mut self, max_wait: Duration, totals: &mut Totals) -> anyhow::Result<Option<u64>> {
        let mut last = None;
        while self.pending.front().is_some_and(|c| c.drained_at.elapsed() > max_wait) {
            let cycle = self.pending.pop_front().expect("front exists");
            last = Some(cycle.report.cycle);
            self.write_late(cycle, totals)?;
        }
        Ok(last)
    }

    /// Writes every cycle still waiting, without its symbols (the worker is gone or too slow
    /// at shutdown).
    pub fn write_all_late(&mut self, totals: &mut Totals) -> anyhow::Result<()> {
        while let Some(cycle) = self.pending.pop_front() {
            self.write_late(cycle, totals)?;
        }
        Ok(())
    }

    fn write_late(&mut self, mut cycle: PendingCycle, totals: &mut Totals) -> anyhow::Result<()> {
        let threads: Vec<(u32, u32, u64)> = cycle.report.threads.iter().map(|t| (t.pid, t.tid, t.samples)).collect();
        let samples: u64 = threads.iter().map(|t| t.2).sum();
        if samples > 0 {
            *cycle.report.drops.entry(UNSYMBOLIZED.into()).or_default() += samples;
        }
        self.cycles_written_late += 1;
        self.write(cycle, &late_stacks(&threads), totals)
    }

    fn write(&mut self, mut cycle: PendingCycle, stacks: &[ThreadStacks], totals: &mut Totals) -> anyhow::Result<()> {
        let report = &mut cycle.report;
        if self.unreported_not_indexed > 0 {
            *report.drops.entry(OVER_BUDGET.into()).or_default() += std::mem::take(&mut self.unreported_not_indexed);
        }
        if self.unreported_retired_refused > 0 {
            *report.drops.entry(RETIRED_TREES_QUEUE_FULL.into()).or_default() +=
                std::mem::take(&mut self.unreported_retired_refused);
        }
        if let Err(e) = self.results.on_cycle(report, stacks) {
            // A result file that cannot be written this cycle (a full disk) may be next cycle.
            self.fail(e.failed("--output"), "the run goes on");
        }
        if let Some(e) = &self.exporter {
            e.on_cycle(report);
        }
        if let Some(p) = self.profiles.as_mut() {
            p.on_cycle(report, stacks);
        }
        if let Some(Err(e)) = self.json.as_mut().map(|j| j.write(report)) {
            let path = self.json.take().expect("written above").path().to_owned();
            self.fail(FailedOutput::new("--json", &path, e), "JSON output stopped, the run goes on");
        }
        self.summary.add(report, stacks);
        let ended = retire::ended(&cycle.exits);
        let Some(writer) = self.retired.as_mut() else {
            // Kept for the end, but apart: a later process with the PID is another process.
            for &pid in &ended.pids {
                self.results.set_aside(pid);
                self.summary.set_aside(pid, totals);
                totals.set_aside(pid);
            }
            return Ok(());
        };
        let mut refused = 0;
        for &pid in &ended.pids {
            let Some(tree) = self.results.take_retired(pid) else { continue };
            if let Submitted::Refused { first } = writer.submit(tree) {
                refused += 1;
                if first {
                    errln!(
                        "joular-ebpf: warning: processes end faster than their results are written: the files of ended process {pid} (and of others, counted in summary.json degraded {RETIRED_TREES_QUEUE_FULL}) are not written"
                    );
                }
            }
        }
        let written = writer.written();
        self.results.add_degraded(RETIRED_TREES_QUEUE_FULL, refused);
        self.unreported_retired_refused += refused;
        self.on_retired_writes(written);
        self.summary.forget(&ended);
        totals.forget_processes(&ended.pids);
        totals.forget_threads(&ended.threads);
        Ok(())
    }

    /// Logs the trees the writer is done with; a daemon goes on when one process's files cannot
    /// be written (disk full).
    fn on_retired_writes(&mut self, written: Vec<RetiredWrite>) {
        for RetiredWrite { pid, result } in written {
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
    }

    /// The end of the run: the trees of ended processes still queued are written, waiting at
    /// most `within`; those left are counted in `degraded` and said.
    pub fn finish_retired(&mut self, within: Duration) {
        let Some(writer) = self.retired.take() else { return };
        let end = writer.finish(within);
        self.on_retired_writes(end.written);
        if end.unfinished > 0 {
            errln!(
                "joular-ebpf: warning: the files of {} ended process(es) were not written within {within:?} of the end",
                end.unfinished
            );
            self.results.add_degraded(RETIRED_TREES_UNFINISHED, end.unfinished);
        }
    }

    /// Says once that an output failed (a warning naming the flag and the file), and keeps it
    /// for the end of the run and `summary.json`.
    fn fail(&mut self, failed: FailedOutput, outcome: &str) {
        if self.failed.iter().any(|f| f.flag == failed.flag && f.path == failed.path) {
            return;
        }
        errln!("joular-ebpf: warning: {failed}; {outcome}");
        self.results.add_failed_output(failed.clone());
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
