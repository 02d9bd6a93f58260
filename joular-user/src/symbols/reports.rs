//! The sampler's reports of code it met for the first time (`joular_ebpf::CodeReport`), handed
//! to each JVM's HotSpot reader to name while the JVM still has the code
//! ([`super::hotspot::HotspotProcess::learn`]).
//!
//! A report is worth only as much as how soon it is read: a JVM that is starting frees compiled
//! code (a lower tier replaced, a class unloaded with its methods) within a few hundred
//! milliseconds, and the `Method*` a report carries can only be read while the JVM has it. So
//! reports are read every [`REPORTS_EVERY`], between cycles and while a cycle's stacks are being
//! named (naming a JVM's first cycle takes 150–350 ms on the test machine, most of it loading
//! libjvm's symbols: reports waiting that long lost their code).
//!
//! A JVM past its start-up meets new code rarely, and each read that finds nothing still wakes
//! the worker (its wake-ups were 81 a second, 26 ms of CPU in 10 s of a steady JVM on the test
//! VM, taken from the JVM's own CPUs). So each empty read doubles the wait for the next, up to
//! [`REPORTS_IDLE_EVERY`], and the first read that finds reports brings it back to
//! [`REPORTS_EVERY`]; the read before each cycle's stacks stays.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use joular_ebpf::CodeReport;

use super::hotspot::HotspotProcess;
use super::Symbolizer;

/// How often the reports are read. Code freed (or a JVM that exits) within this of its sample
/// may stay unnamed. A read costs a look at the ring's positions when nothing was reported.
pub const REPORTS_EVERY: Duration = Duration::from_millis(20);
/// The longest wait between reads once they find nothing: what the first code of a burst after
/// a quiet time may wait.
pub const REPORTS_IDLE_EVERY: Duration = Duration::from_millis(160);

/// The wait before the read after one that took `taken` reports, when the last wait was
/// `every`.
fn next_every(every: Duration, taken: usize) -> Duration {
    if taken > 0 {
        REPORTS_EVERY
    } else {
        (every * 2).clamp(REPORTS_EVERY, REPORTS_IDLE_EVERY)
    }
}

/// Where reports come from (the kernel's `NEW_CODE` ring, or a test's list), and when they are
/// next due.
pub(super) struct ReportSource {
    take: Box<dyn FnMut() -> Vec<CodeReport> + Send>,
    next_due: Instant,
    /// The wait since the last read ([`next_every`]).
    every: Duration,
}

impl Symbolizer {
    /// Reads the sampler's reports from `take` (each call returns those sent since the last),
    /// from now on.
    pub fn set_report_source(&mut self, take: Box<dyn FnMut() -> Vec<CodeReport> + Send>) {
        self.reports = Some(ReportSource { take, next_due: Instant::now(), every: REPORTS_EVERY });
    }

    /// When reports are next due (`None`: there is no source).
    pub fn reports_due(&self) -> Option<Instant> {
        self.reports.as_ref().map(|r| r.next_due)
    }

    /// Names the code reported since the last read, if `now` is past the next due time or
    /// `force` (before a cycle's stacks are named, so they find what was met up to the flip).
    pub fn learn_reported(&mut self, force: bool) {
        let Some(source) = &mut self.reports else { return };
        let now = Instant::now();
        if !force && now < source.next_due {
            return;
        }
        let taken = (source.take)();
        source.every = next_every(source.every, taken.len());
        source.next_due = now + source.every;
        if !taken.is_empty() {
            self.learn_code(taken);
        }
    }

    /// Names the reported code, one job per JVM. Reports of processes not read through their
    /// HotSpot tables (or not known) are dropped: nothing names their frames by `Method*`.
    pub fn learn_code(&mut self, reports: Vec<CodeReport>) {
        self.stats.code_reports += reports.len() as u64;
        let mut by_pid: BTreeMap<u32, Vec<CodeReport>> = BTreeMap::new();
        for r in reports {
            by_pid.entry(r.tgid).or_default().push(r);
        }
        for (pid, reports) in by_pid {
            if let Some(named) = self.hotspot_job(pid, |h| HotspotProcess::learn_in_job(h, reports)) {
                self.stats.code_reports_named += named;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn counting_source(s: &mut Symbolizer) -> Arc<Mutex<u32>> {
        let reads = Arc::new(Mutex::new(0));
        let r = Arc::clone(&reads);
        s.set_report_source(Box::new(move || {
            *r.lock().unwrap() += 1;
            vec![CodeReport { jvm: 1, method: 2, tgid: u32::MAX, kind: 1, compile_id: 3, _pad: 0 }]
        }));
        reads
    }

    #[test]
    fn reports_are_read_when_due_or_forced_and_counted() {
        let mut s = Symbolizer::new(Default::default());
        assert!(s.reports_due().is_none());
        s.learn_reported(true);
        let reads = counting_source(&mut s);
        assert!(s.reports_due().is_some_and(|at| at <= Instant::now()));
        s.learn_reported(false);
        assert_eq!(*reads.lock().unwrap(), 1, "due at once when set");
        s.learn_reported(false);
        assert_eq!(*reads.lock().unwrap(), 1, "not due again within {REPORTS_EVERY:?}");
        s.learn_reported(true);
        assert_eq!(*reads.lock().unwrap(), 2, "forced");
        std::thread::sleep(REPORTS_EVERY);
        s.learn_reported(false);
        assert_eq!(*reads.lock().unwrap(), 3, "due again after {REPORTS_EVERY:?}");
        // A report of a process nothing knows is counted as taken, and named by nothing.
        assert_eq!((s.stats.code_reports, s.stats.code_reports_named), (3, 0));
    }

    #[test]
    fn empty_reads_space_the_next_ones_out_and_a_report_brings_them_back() {
        let mut every = REPORTS_EVERY;
        let mut waits = Vec::new();
        for _ in 0..5 {
            every = next_every(every, 0);
            waits.push(every.as_millis());
        }
        assert_eq!(waits, [40, 80, 160, 160, 160]);
        assert_eq!(next_every(every, 1), REPORTS_EVERY);
        assert_eq!(next_every(REPORTS_EVERY, 3), REPORTS_EVERY);
    }

    #[test]
    fn an_empty_source_is_read_less_often_and_a_report_makes_it_due_sooner() {
        let mut s = Symbolizer::new(Default::default());
        let queue = Arc::new(Mutex::new(Vec::new()));
        let q = Arc::clone(&queue);
        s.set_report_source(Box::new(move || std::mem::take(&mut *q.lock().unwrap())));
        let wait = |s: &Symbolizer| s.reports_due().unwrap().saturating_duration_since(Instant::now());
        for _ in 0..4 {
            s.learn_reported(true);
        }
        assert!(wait(&s) > REPORTS_IDLE_EVERY / 2, "after empty reads: {:?}", wait(&s));
        queue.lock().unwrap().push(CodeReport { jvm: 1, method: 2, tgid: u32::MAX, kind: 1, compile_id: 3, _pad: 0 });
        s.learn_reported(true);
        assert!(wait(&s) <= REPORTS_EVERY, "after a report: {:?}", wait(&s));
    }
}
