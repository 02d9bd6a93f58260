//! Serve mode writes the end-of-run files of a process as soon as it ends (its "retirement"). On
//! a real disk that is some thirty files and directories per process; written on the session
//! thread, tens of exits a second stretched its 1 s cycles to 2 s. They are written here instead,
//! on one thread of their own, fed through a bounded queue: when the queue is full the cycle does
//! not wait, and that process's files are not written (the caller counts and says so). Each
//! queued tree is owned data (the profile and its directory by name), nothing the session thread
//! still changes. At the end of the run the queue is drained for a bounded time.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::joularjx::DetachedRunDir;
use super::render::{render_process, OutputFiles, RenderSet};
use super::OutputError;
use crate::attribution::stacks::methods::MethodFilter;
use crate::attribution::stacks::profile::ProcessProfile;

/// Ended processes whose files may wait to be written: a burst of exits is absorbed, a host
/// whose processes end faster than a disk takes their files for longer is not (each queued tree
/// holds its profile in memory, not a descriptor).
pub const RETIRED_QUEUE_TREES: usize = 256;

/// `degraded` cause: ended processes whose files the session wrote itself, on the cycle, because
/// the writer's queue was full (nothing is lost; those cycles may run long).
pub const RETIRED_TREES_QUEUE_FULL: &str = "ended_process_results_written_inline_queue_full";
/// `degraded` cause: ended processes whose files were still queued when the run ended.
pub const RETIRED_TREES_UNFINISHED: &str = "ended_process_results_not_written_at_exit";

/// One ended process's files to write: everything the write needs, owned.
#[derive(Debug)]
pub struct RetiredTree {
    dir: DetachedRunDir,
    profile: ProcessProfile,
    filter: MethodFilter,
    set: RenderSet,
}

impl RetiredTree {
    pub(super) fn new(dir: DetachedRunDir, profile: ProcessProfile, filter: MethodFilter, set: RenderSet) -> Self {
        Self { dir, profile, filter, set }
    }

    pub fn pid(&self) -> u32 {
        self.dir.pid()
    }

    /// Writes the files now, on this thread (the directory is reopened by name).
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

/// The end of the writer: trees written since the last [`RetiredTreeWriter::written`], and the
/// number still queued or being written when the wait ran out.
#[derive(Debug)]
pub struct RetiredWriterEnd {
    pub written: Vec<RetiredWrite>,
    pub unfinished: u64,
}

/// The writer thread and its two channels: trees in (bounded), outcomes back.
pub struct RetiredTreeWriter {
    queue: Option<SyncSender<RetiredTree>>,
    done: Receiver<RetiredWrite>,
    /// Set when the end's wait runs out: the thread takes no more trees.
    stop: Arc<AtomicBool>,
    submitted: u64,
    finished: u64,
    refused: u64,
}

impl RetiredTreeWriter {
    pub fn spawn(capacity: usize) -> std::io::Result<Self> {
        let (queue, trees) = mpsc::sync_channel::<RetiredTree>(capacity);
        let (report, done) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        thread::Builder::new().name("retired-writer".into()).spawn(move || {
            for tree in trees {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                let pid = tree.pid();
                // One tree that breaks the renderer costs its files, not the writer.
                let result = match catch_unwind(AssertUnwindSafe(|| tree.write())) {
                    Ok(Ok(files)) => Ok(files),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err("the writer panicked on this process's files".to_owned()),
                };
                if report.send(RetiredWrite { pid, result }).is_err() {
                    break;
                }
            }
        })?;
        Ok(Self { queue: Some(queue), done, stop, submitted: 0, finished: 0, refused: 0 })
    }

    /// Queues `tree` without waiting: a full queue drops it.
    pub fn submit(&mut self, tree: RetiredTree) -> Submitted {
        match self.try_submit(tree) {
            Ok(()) => Submitted::Queued,
            Err(refused) => Submitted::Refused { first: refused.1 },
        }
    }

    /// Queues `tree` without waiting; a full queue (or a writer gone) hands it back, with
    /// whether this is the run's first refusal, for the caller to write itself.
    pub fn try_submit(&mut self, tree: RetiredTree) -> Result<(), Box<(RetiredTree, bool)>> {
        let sent = match &self.queue {
            Some(queue) => queue.try_send(tree),
            None => Err(TrySendError::Disconnected(tree)),
        };
        match sent {
            Ok(()) => {
                self.submitted += 1;
                Ok(())
            }
            Err(TrySendError::Full(tree) | TrySendError::Disconnected(tree)) => {
                self.refused += 1;
                Err(Box::new((tree, self.refused == 1)))
            }
        }
    }

    /// Trees refused so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Outcomes of the trees written since the last call, without waiting.
    pub fn written(&mut self) -> Vec<RetiredWrite> {
        let written: Vec<RetiredWrite> = self.done.try_iter().collect();
        self.finished += written.len() as u64;
        written
    }

    /// Closes the queue and waits at most `within` for what is in it; what is left then is not
    /// written (the thread stops taking trees and is left to the process's exit).
    pub fn finish(mut self, within: Duration) -> RetiredWriterEnd {
        self.queue = None;
        let give_up = Instant::now() + within;
        let mut written = Vec::new();
        loop {
            match self.done.recv_timeout(give_up.saturating_duration_since(Instant::now())) {
                Ok(w) => written.push(w),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    self.stop.store(true, Ordering::Relaxed);
                    break;
                }
            }
        }
        self.finished += written.len() as u64;
        RetiredWriterEnd { written, unfinished: self.submitted.saturating_sub(self.finished) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::stacks::methods::tests::java;
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
        let [w] = &end.written[..] else { panic!("one outcome: {:?}", end.written) };
        assert_eq!(w.pid, 42);
        let files = w.result.as_ref().expect("written");
        assert!(files.failed.is_empty(), "{:?}", files.failed);
        assert!(files.dir.join("summary.json").is_file(), "summary.json in {}", files.dir.display());
    }

    #[test]
    fn a_full_queue_refuses_without_waiting_and_says_so_once() {
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
        assert!(end.written.is_empty(), "{:?}", end.written);
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
        let [w] = &end.written[..] else { panic!("one outcome: {:?}", end.written) };
        assert!(w.result.is_err(), "{w:?}");
    }
}
