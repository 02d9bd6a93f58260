//! Serve mode writes the result tree off the session thread: each cycle's runtime files of every
//! live process, and the end-of-run files of a process as soon as it ends (its "retirement"). On
//! a real disk that is a few files per live process a cycle and some thirty files and directories
//! per ended process; written on the session thread, a busy disk stretched its 1 s cycles to 2 s
//! and more. They are written here instead, on one thread of their own, fed through one bounded
//! queue in the order the session hands them over. The live processes' files wait in one slot,
//! not the queue: a cycle not yet taken by the writer takes in the next one (each process's
//! latest runtime files), so a disk that is behind writes them less often and the cycle never
//! waits; the queue holds one token for that slot. An ended process's tree goes with its last
//! runtime files, after anything queued before. Each job is owned data (rows, the profile, the
//! directory's reference), nothing the session thread still changes. When the queue is full, the
//! cycle waits for what is queued to be written (everything queued is older) and writes the job
//! itself (the caller counts and says so). At the end of the run the queue is drained for a
//! bounded time.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::cycle_files::{CycleFiles, CycleWritten};
use super::joularjx::RunDirRef;
use super::render::{render_process, OutputFiles, RenderSet};
use super::OutputError;
use crate::attribution::stacks::methods::MethodFilter;
use crate::attribution::stacks::profile::ProcessProfile;
use crate::attribution::stacks::ProcessKey;

/// Jobs that may wait to be written: a burst of exits is absorbed, a host whose processes end
/// faster than a disk takes their files for longer is not (each queued tree holds its profile in
/// memory, not a descriptor).
pub const RETIRED_QUEUE_TREES: usize = 256;
/// Longest a full queue makes the cycle wait for what is queued before it writes its job anyway
/// (a writer stuck on a hung disk must not stop the session).
const FULL_QUEUE_WAIT: Duration = Duration::from_secs(10);

/// `degraded` cause: ended processes whose files the session wrote itself, on the cycle, because
/// the writer's queue was full (nothing is lost; those cycles may run long).
pub const RETIRED_TREES_QUEUE_FULL: &str = "ended_process_results_written_inline_queue_full";
/// `degraded` cause: live processes' cycle files the session wrote itself, on the cycle, because
/// the writer's queue was full (counted per process and cycle).
pub const LIVE_FILES_QUEUE_FULL: &str = "live_process_results_written_inline_queue_full";
/// `degraded` cause: live processes' runtime files replaced by a later cycle's before the disk
/// took them (counted per process and cycle; the files hold the latest cycle, later).
pub const LIVE_FILES_SUPERSEDED: &str = "live_process_runtime_files_superseded_unwritten";
/// `degraded` cause: ended processes (and live processes' cycles) whose files were still queued
/// when the run ended.
pub const RETIRED_TREES_UNFINISHED: &str = "ended_process_results_not_written_at_exit";

/// One ended process's files to write: everything the write needs, owned.
#[derive(Debug)]
pub struct RetiredTree {
    pid: u32,
    dir: Arc<RunDirRef>,
    profile: ProcessProfile,
    filter: MethodFilter,
    set: RenderSet,
}

impl RetiredTree {
    pub(super) fn new(
        pid: u32,
        dir: Arc<RunDirRef>,
        profile: ProcessProfile,
        filter: MethodFilter,
        set: RenderSet,
    ) -> Self {
        Self { pid, dir, profile, filter, set }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Writes the files now, on this thread.
    pub fn write(self) -> Result<OutputFiles, OutputError> {
        let dir = self.dir.open()?;
        Ok(render_process(dir.out_dir(), dir.out_dir(), &self.profile, &self.filter, self.set))
    }
}

/// What became of one queued tree.
#[derive(Debug)]
pub struct RetiredWrite {
    pub pid: u32,
    /// The files written (and those that failed), or why none was (the directory is gone, or the
    /// writer panicked on this tree).
    pub result: Result<OutputFiles, String>,
}

/// Whether [`RetiredTreeWriter::submit`] queued the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    Queued,
    /// The queue was full (or the writer gone): the tree was dropped. `first` is true the first
    /// time in the run, for the caller to say it once.
    Refused {
        first: bool,
    },
}

/// An ended process's files the writer could not take: its last runtime files, if they were
/// still pending, to write before its tree.
pub struct RefusedTree {
    pub files: Option<CycleFiles>,
    pub tree: RetiredTree,
    /// The run's first refusal, to say once.
    pub first: bool,
}

/// What the writer wrote since it was last asked.
#[derive(Debug, Default)]
pub struct Outcomes {
    pub retired: Vec<RetiredWrite>,
    pub cycles: Vec<CycleWritten>,
}

/// The end of the writer: what it wrote since the last [`RetiredTreeWriter::written`], and the
/// number of jobs still queued or being written when the wait ran out.
#[derive(Debug)]
pub struct RetiredWriterEnd {
    pub written: Outcomes,
    pub unfinished: u64,
}

enum Job {
    /// Write what the live processes' slot holds.
    Cycle,
    /// An ended process's last runtime files (if still unwritten), then its tree.
    Retired(Box<(Option<CycleFiles>, RetiredTree)>),
}

enum Done {
    Cycle(CycleWritten),
    Retired(Option<CycleWritten>, RetiredWrite),
}

/// The live processes' files not yet taken by the writer.
#[derive(Default)]
struct LiveSlot {
    files: Option<CycleFiles>,
    /// A `Job::Cycle` for this slot is in the queue.
    queued: bool,
}

/// The writer thread and its two channels: jobs in (bounded), outcomes back.
pub struct RetiredTreeWriter {
    queue: Option<SyncSender<Job>>,
    done: Receiver<Done>,
    live: Arc<Mutex<LiveSlot>>,
    /// Set when the end's wait runs out: the thread takes no more jobs.
    stop: Arc<AtomicBool>,
    submitted: u64,
    finished: u64,
    refused: u64,
    cycles_refused: u64,
    superseded: u64,
    /// The thread ended (it stops only at the end, or if the process is torn down).
    gone: bool,
    /// Outcomes received while the session waited for the queue, for the next `written`.
    received: Outcomes,
}

/// Writes `files`, or says why not: one cycle that breaks a writer costs its files, not the
/// writer.
fn write_cycle(files: &CycleFiles) -> CycleWritten {
    catch_unwind(AssertUnwindSafe(|| files.write())).unwrap_or_else(|_| {
        log::warn!("the result writer panicked on a cycle's runtime files; they are not written");
        CycleWritten::default()
    })
}

fn write_tree(tree: RetiredTree) -> RetiredWrite {
    let pid = tree.pid();
    let result = match catch_unwind(AssertUnwindSafe(|| tree.write())) {
        Ok(Ok(files)) => Ok(files),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the writer panicked on this process's files".to_owned()),
    };
    RetiredWrite { pid, result }
}

fn lock(live: &Mutex<LiveSlot>) -> std::sync::MutexGuard<'_, LiveSlot> {
    live.lock().unwrap_or_else(|e| e.into_inner())
}

impl RetiredTreeWriter {
    pub fn spawn(capacity: usize) -> std::io::Result<Self> {
        let (queue, jobs) = mpsc::sync_channel::<Job>(capacity);
        let (report, done) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let live = Arc::new(Mutex::new(LiveSlot::default()));
        let (stopped, slot) = (Arc::clone(&stop), Arc::clone(&live));
        thread::Builder::new().name("result-writer".into()).spawn(move || {
            for job in jobs {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                let outcome = match job {
                    Job::Cycle => {
                        let files = {
                            let mut slot = lock(&slot);
                            slot.queued = false;
                            slot.files.take()
                        };
                        Done::Cycle(files.as_ref().map(write_cycle).unwrap_or_default())
                    }
                    Job::Retired(job) => {
                        let (files, tree) = *job;
                        Done::Retired(files.as_ref().map(write_cycle), write_tree(tree))
                    }
                };
                if report.send(outcome).is_err() {
                    break;
                }
            }
        })?;
        Ok(Self {
            queue: Some(queue),
            done,
            live,
            stop,
            submitted: 0,
            finished: 0,
            refused: 0,
            cycles_refused: 0,
            superseded: 0,
            gone: false,
            received: Outcomes::default(),
        })
    }

    /// Queues `tree` (of a process with no runtime files pending); a full queue refuses it
    /// (after what was queued before is written) and it is dropped.
    pub fn submit(&mut self, tree: RetiredTree) -> Submitted {
        match self.queue(Job::Retired(Box::new((None, tree)))) {
            Ok(()) => Submitted::Queued,
            Err(_) => {
                self.refused += 1;
                Submitted::Refused { first: self.refused == 1 }
            }
        }
    }

    /// Queues `tree` after the last runtime files of its process (`key`) not yet written; a full
    /// queue (or a writer gone) hands both back once what was queued before is written (or
    /// [`FULL_QUEUE_WAIT`] passed), with whether this is the run's first refusal, for the caller
    /// to write them itself, in that order.
    pub fn try_submit_retired(&mut self, key: ProcessKey, tree: RetiredTree) -> Result<(), Box<RefusedTree>> {
        let files = lock(&self.live).files.as_mut().and_then(|f| f.take_process(key));
        match self.queue(Job::Retired(Box::new((files, tree)))) {
            Ok(()) => Ok(()),
            Err(Job::Retired(job)) => {
                let (files, tree) = *job;
                self.refused += 1;
                Err(Box::new(RefusedTree { files, tree, first: self.refused == 1 }))
            }
            Err(Job::Cycle) => unreachable!("a tree was queued"),
        }
    }

    /// Hands one cycle's files of the live processes to the writer without waiting: they join
    /// those not yet written (each process's latest kept). When the queue has no room for the
    /// slot's token, everything pending is handed back, once what was queued before is written,
    /// with whether this is the run's first such cycle, for the caller to write itself.
    pub fn try_submit_cycle(&mut self, files: CycleFiles) -> Result<(), Box<(CycleFiles, bool)>> {
        self.collect();
        {
            let mut slot = lock(&self.live);
            match slot.files.as_mut() {
                Some(pending) => self.superseded += pending.merge(files),
                None => slot.files = Some(files),
            }
            if slot.queued && !self.gone {
                return Ok(());
            }
            // Set before the token is sent: the writer clears it when it takes the files.
            slot.queued = true;
        }
        let queued = if self.gone { Err(Job::Cycle) } else { self.queue(Job::Cycle) };
        match queued {
            Ok(()) => Ok(()),
            Err(_) => {
                let files = {
                    let mut slot = lock(&self.live);
                    slot.queued = false;
                    slot.files.take()
                };
                let files = files.expect("the slot was filled above and no writer took it");
                self.cycles_refused += 1;
                Err(Box::new((files, self.cycles_refused == 1)))
            }
        }
    }

    /// Live processes' files replaced by a later cycle's before being written, since the last
    /// call.
    pub fn take_superseded(&mut self) -> u64 {
        std::mem::take(&mut self.superseded)
    }

    fn queue(&mut self, job: Job) -> Result<(), Job> {
        self.collect();
        let sent = match &self.queue {
            Some(queue) => queue.try_send(job),
            None => Err(TrySendError::Disconnected(job)),
        };
        match sent {
            Ok(()) => {
                self.submitted += 1;
                Ok(())
            }
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                // Written after what is queued: a process's files never go back in time.
                self.wait_written(FULL_QUEUE_WAIT);
                Err(job)
            }
        }
    }

    /// Ended processes' trees refused so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    fn on_done(&mut self, done: Done) {
        self.finished += 1;
        match done {
            Done::Cycle(c) => self.received.cycles.push(c),
            Done::Retired(c, r) => {
                self.received.cycles.extend(c);
                self.received.retired.push(r);
            }
        }
    }

    /// Takes the outcomes that arrived, without waiting.
    fn collect(&mut self) {
        loop {
            match self.done.try_recv() {
                Ok(done) => self.on_done(done),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    self.gone = true;
                    break;
                }
            }
        }
    }

    /// Waits at most `within` for every job queued to be written; false if some are left.
    fn wait_written(&mut self, within: Duration) -> bool {
        let give_up = Instant::now() + within;
        while self.finished < self.submitted {
            match self.done.recv_timeout(give_up.saturating_duration_since(Instant::now())) {
                Ok(done) => self.on_done(done),
                Err(RecvTimeoutError::Disconnected) => return false,
                Err(RecvTimeoutError::Timeout) => return false,
            }
        }
        true
    }

    /// Outcomes of the jobs written since the last call, without waiting.
    pub fn written(&mut self) -> Outcomes {
        self.collect();
        std::mem::take(&mut self.received)
    }

    /// Closes the queue and waits at most `within` for what is in it; what is left then is not
    /// written (the thread stops taking jobs and is left to the process's exit).
    pub fn finish(mut self, within: Duration) -> RetiredWriterEnd {
        self.queue = None;
        if !self.wait_written(within) {
            self.stop.store(true, Ordering::Relaxed);
        }
        RetiredWriterEnd {
            written: std::mem::take(&mut self.received),
            unfinished: self.submitted.saturating_sub(self.finished),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::sink::Sink;
    use super::super::{ResultTree, ResultsConfig};
    use super::*;
    use crate::attribution::stacks::methods::tests::java;
    use crate::attribution::stacks::StackStage;
    use crate::attribution::stacks::ThreadStacks;
    use crate::model::{CycleReport, ThreadReport, ThreadStack};
    use crate::stages::results::tests::config;
    use crate::stages::Results;

    /// One 1 s cycle in which a thread of `pid` ran one Java method.
    fn one_cycle(pid: u32) -> (CycleReport, Vec<ThreadStacks>) {
        let thread =
            ThreadReport { pid, tid: pid, comm: "app".into(), on_cpu_ns: 1000, energy_uj: 1e6, ..Default::default() };
        let report =
            CycleReport { start_ns: 0, end_ns: 1_000_000_000, threads: vec![thread], ..CycleReport::default() };
        let stack = ThreadStack { stack: Arc::from(vec![java("com.acme.App.run")]), samples: 3 };
        (report, vec![(pid, pid, vec![stack])])
    }

    /// A results sink in `root` that saw process `pid` in one cycle.
    fn results_with(root: &std::path::Path, pid: u32) -> Results {
        let mut results = Results::new(config(root)).unwrap();
        let (mut report, stacks) = one_cycle(pid);
        results.on_cycle(&mut report, &stacks).unwrap();
        results
    }

    #[test]
    fn a_queued_tree_is_written_off_the_calling_thread_and_reported_back() {
        let tmp = tempfile::tempdir().unwrap();
        let mut results = results_with(tmp.path(), 42);
        let tree = results.take_retired(42).expect("a tree for the process");
        assert!(results.take_retired(42).is_none(), "taken once");
        let mut writer = RetiredTreeWriter::spawn(4).unwrap();
        assert_eq!(writer.submit(tree), Submitted::Queued);
        let end = writer.finish(Duration::from_secs(10));
        assert_eq!(end.unfinished, 0);
        let [w] = &end.written.retired[..] else { panic!("one outcome: {:?}", end.written.retired) };
        assert_eq!(w.pid, 42);
        let files = w.result.as_ref().expect("written");
        assert!(files.failed.is_empty(), "{:?}", files.failed);
        assert!(files.dir.join("summary.json").is_file(), "summary.json in {}", files.dir.display());
    }

    #[test]
    fn a_full_queue_hands_the_tree_back_and_says_so_once() {
        let tmp = tempfile::tempdir().unwrap();
        let mut results = results_with(tmp.path(), 7);
        let mut writer = RetiredTreeWriter::spawn(1).unwrap();
        // Closed at once, so nothing is ever taken off the queue: the first tree fills it.
        writer.stop.store(true, Ordering::Relaxed);
        let (mut report, stacks) = one_cycle(8);
        results.on_cycle(&mut report, &stacks).unwrap();
        let mut outcomes = Vec::new();
        let started = Instant::now();
        for pid in [7, 8] {
            outcomes.push(writer.submit(results.take_retired(pid).unwrap()));
        }
        let (mut report, stacks) = one_cycle(9);
        results.on_cycle(&mut report, &stacks).unwrap();
        outcomes.push(writer.submit(results.take_retired(9).unwrap()));
        // It waits for what is queued, which a stopped writer never writes: not for long.
        assert!(started.elapsed() < Duration::from_secs(1), "submit waited");
        // The thread may take the first tree off the queue before it sees the flag (then drops
        // it): at most two are queued, and the refusals after the first are not "first".
        let refused: Vec<&Submitted> = outcomes.iter().filter(|s| **s != Submitted::Queued).collect();
        assert!(!refused.is_empty(), "{outcomes:?}");
        assert_eq!(refused[0], &Submitted::Refused { first: true });
        assert!(refused[1..].iter().all(|s| **s == Submitted::Refused { first: false }), "{outcomes:?}");
        assert_eq!(writer.refused(), refused.len() as u64);
    }

    #[test]
    fn the_end_waits_a_bounded_time_and_counts_what_is_left() {
        let tmp = tempfile::tempdir().unwrap();
        let mut results = results_with(tmp.path(), 5);
        let tree = results.take_retired(5).unwrap();
        let mut writer = RetiredTreeWriter::spawn(4).unwrap();
        writer.stop.store(true, Ordering::Relaxed);
        assert_eq!(writer.submit(tree), Submitted::Queued);
        let started = Instant::now();
        let end = writer.finish(Duration::from_millis(200));
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(end.written.retired.is_empty(), "{:?}", end.written.retired);
        assert_eq!(end.unfinished, 1);
    }

    #[test]
    fn a_directory_gone_before_the_write_is_an_outcome_not_a_panic() {
        let tmp = tempfile::tempdir().unwrap();
        let mut results = results_with(tmp.path(), 3);
        let tree = results.take_retired(3).unwrap();
        for entry in std::fs::read_dir(tmp.path()).unwrap() {
            std::fs::remove_dir_all(entry.unwrap().path()).unwrap();
        }
        let mut writer = RetiredTreeWriter::spawn(4).unwrap();
        writer.submit(tree);
        let end = writer.finish(Duration::from_secs(10));
        let [w] = &end.written.retired[..] else { panic!("one outcome: {:?}", end.written.retired) };
        // Reopened by name, it is gone; still held open, its files cannot be created in it.
        assert!(w.result.as_ref().map_or(true, |files| !files.failed.is_empty()), "{w:?}");
    }

    /// A result tree that writes off the cycle, as serve's does, and the stage that feeds it.
    fn serve_tree(root: &std::path::Path, writer: RetiredTreeWriter) -> (ResultTree, StackStage) {
        // As serve's: no evolution rows.
        let config = ResultsConfig { evolution: false, ..config(root) };
        let stage = StackStage::new(config.stack_config());
        (ResultTree::new(config).unwrap().write_retired_in_background(writer), stage)
    }

    fn runtime_file(root: &std::path::Path, pid: u32) -> std::path::PathBuf {
        let run = std::fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("{pid}-")));
        run.expect("a run directory").join(format!("all/runtime/methods/joularJX-{pid}-all-methods-power.csv"))
    }

    #[test]
    fn a_live_process_s_cycle_files_are_written_off_the_cycle_then_its_end_files() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut tree, mut stage) = serve_tree(tmp.path(), RetiredTreeWriter::spawn(16).unwrap());
        for _ in 0..3 {
            let (report, stacks) = one_cycle(11);
            tree.on_cycle(&stage.on_cycle(report, &stacks)).unwrap();
        }
        tree.on_retire(&stage.retire(11).unwrap()).unwrap();
        let writes = tree.finish_background(Duration::from_secs(10));
        assert_eq!((writes.unfinished, writes.cycles_refused, writes.refused), (0, 0, 0));
        assert!(writes.failed.is_empty(), "{:?}", writes.failed);
        let [w] = &writes.written[..] else { panic!("one ended process: {:?}", writes.written) };
        assert!(w.result.as_ref().unwrap().dir.join("summary.json").is_file());
        // 1 J in 1 s: 1 W.
        let runtime = std::fs::read_to_string(runtime_file(tmp.path(), 11)).unwrap();
        assert_eq!(runtime, "com.acme.App.run,1.0000\n");
    }

    #[test]
    fn a_writer_gone_has_the_cycle_write_the_live_processes_files_itself_and_counts_them() {
        let tmp = tempfile::tempdir().unwrap();
        let writer = RetiredTreeWriter::spawn(16).unwrap();
        // Takes one job, drops it and ends.
        writer.stop.store(true, Ordering::Relaxed);
        let (mut tree, mut stage) = serve_tree(tmp.path(), writer);
        let mut writes = Vec::new();
        for cycle in 0..3 {
            let (report, stacks) = one_cycle(12);
            tree.on_cycle(&stage.on_cycle(report, &stacks)).unwrap();
            writes.push(tree.background_writes());
            if cycle == 0 {
                std::thread::sleep(Duration::from_millis(300));
            }
        }
        let refused: Vec<u64> = writes.iter().map(|w| w.cycles_refused).collect();
        assert_eq!(refused, [0, 1, 1], "the cycles after the writer ended are written inline: {writes:?}");
        assert_eq!(writes.iter().filter(|w| w.first_cycle_refused).count(), 1, "said once: {writes:?}");
        let runtime = std::fs::read_to_string(runtime_file(tmp.path(), 12)).unwrap();
        assert_eq!(runtime, "com.acme.App.run,1.0000\n");
    }

    #[test]
    fn a_cycle_not_yet_written_takes_in_the_next_one_and_an_ended_process_s_last_files_go_with_its_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut tree, mut stage) = serve_tree(tmp.path(), RetiredTreeWriter::spawn(16).unwrap());
        let mut writer = tree.writer.take().unwrap();
        let files = |stage: &mut StackStage, tree: &mut ResultTree, pid: u32, energy_uj: f64| {
            let (mut report, stacks) = one_cycle(pid);
            report.threads[0].energy_uj = energy_uj;
            tree.cycle_files(&stage.on_cycle(report, &stacks)).unwrap().unwrap()
        };
        let first = files(&mut stage, &mut tree, 13, 1e6);
        let second = files(&mut stage, &mut tree, 13, 2e6);
        // Both land in the slot before the writer takes them (no token is queued for it here):
        // the second replaces the first.
        {
            let mut slot = lock(&writer.live);
            slot.files = Some(first);
            slot.queued = true;
            writer.superseded += slot.files.as_mut().unwrap().merge(second);
        }
        assert_eq!(writer.take_superseded(), 1);
        let retired = stage.retire(13).unwrap();
        let files = tree.take_retired(&retired).unwrap();
        assert!(writer.try_submit_retired(retired.key, files).is_ok());
        assert!(lock(&writer.live).files.as_ref().is_some_and(|f| f.processes() == 0), "taken with the tree");
        let end = writer.finish(Duration::from_secs(10));
        assert_eq!(end.unfinished, 0);
        assert_eq!(end.written.retired.len(), 1);
        // The latest cycle's power: 2 J in 1 s.
        let runtime = std::fs::read_to_string(runtime_file(tmp.path(), 13)).unwrap();
        assert_eq!(runtime, "com.acme.App.run,2.0000\n");
    }
}
