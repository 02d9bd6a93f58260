//! Where each thread JFR's execution sampler signalled was when the signal was sent: on a CPU,
//! or runnable and waiting for one. It tells how far JFR's samples (JDK 11-21) can be held
//! against a CPU-time profile.
//!
//! JFR's sampler checks that a thread is in Java code, sends it SIGUSR2 to suspend it
//! (`os::SuspendedThreadTask`), and in the handler checks again: a thread that left Java code
//! in between is not sampled ("Skip sample if we signaled a thread that moved to other state",
//! `OSThreadSampler::protected_task`). A thread waiting for a CPU cannot leave Java code before
//! the handler runs. A running one leaves it in the 15 µs to 2 ms the signal takes whenever its
//! stretch of Java code is that short (a call into the VM, a JNI or system call), so JFR keeps
//! its samples of long loops and drops many of short methods called between native calls. On
//! Jetty, JDK 17 and 21, JFR's samples of running threads were 11.7-18.0 pp from its samples
//! of waiting threads, where chance reached 7.9-10.6 pp (7 runs): JFR's execution samples
//! disagree with themselves. The waiting threads' samples were nearer ours (5.1-10.1 pp) but
//! not always within their own noise: a waiting thread was preempted, which happens late in a
//! long burst of CPU more often than early (a hypothesis), so they are no clean reference
//! either. JFR's CPU-time samples (JDK 25) are one.
//!
//! bpftrace (a reference tool, as in the overhead bench) records the scheduler's switches and
//! wake-ups, and for every SIGUSR2 sent, its target's state then. JDK 11's sample times do not
//! line up with the signals (off by -0.6 to +0.9 ms, where a suspend and its resume are 10-100
//! µs apart): its samples come out unmatched and are not split.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::child::KillOnDrop;
use crate::jfr::TimedSample;
use crate::leaf_distance::{count_leaves, pooled_p95_pp, top_distance, Reference, TOP_METHODS};

/// On every switch and wake-up, whether a thread is on a CPU (`@on`) and, off one, whether it
/// is runnable (`@st` 1: switched out still `TASK_RUNNING`, i.e. preempted, or woken since)
/// or sleeping (`@st` its state + 1). Every SIGUSR2 sent: `S <CLOCK_MONOTONIC ns> <tid> <on>
/// <st>` (0 for a thread never seen switching: unknown).
const SCRIPT: &str = r#"
tracepoint:sched:sched_switch {
  @on[args->next_pid] = 1;
  delete(@on[args->prev_pid]);
  @st[args->prev_pid] = args->prev_state + 1;
  delete(@st[args->next_pid]);
}
tracepoint:sched:sched_wakeup { @st[args->pid] = 1; }
tracepoint:signal:signal_generate /args->sig == 12/ {
  printf("S %llu %d %d %d\n", nsecs, args->pid, @on[args->pid], @st[args->pid]);
}
END { clear(@on); clear(@st); }
"#;

/// A sample's signal came at most this long before it: JFR waits 2 ms for a signalled thread to
/// suspend and gives up on it after that (`do_suspend`).
const SIGNAL_BEFORE_SAMPLE_MAX_NS: i128 = 5_000_000;

/// The signalled thread, when JFR's signal was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadWas {
    OnCpu,
    /// Runnable, waiting for a CPU.
    Waiting,
    /// Asleep, or not seen switching since the watch began.
    Other,
}

/// Every SIGUSR2 sent while the watch ran: by target thread, (Unix time in ns, its state), in
/// time order.
#[derive(Debug, Clone, Default)]
pub struct Signals {
    by_tid: HashMap<u64, Vec<(i128, ThreadWas)>>,
}

impl Signals {
    /// The script's output; `realtime_minus_monotonic_ns` converts its clock to Unix time.
    pub fn parse(text: &str, realtime_minus_monotonic_ns: i128) -> Signals {
        let mut by_tid: HashMap<u64, Vec<(i128, ThreadWas)>> = HashMap::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [tag, at, tid, on, st] = fields[..] else { continue };
            let (Ok(at), Ok(tid), Ok(on), Ok(st)) =
                (at.parse::<i128>(), tid.parse(), on.parse::<u8>(), st.parse::<u64>())
            else {
                continue;
            };
            if tag != "S" {
                continue;
            }
            let was = match (on, st) {
                (1, _) => ThreadWas::OnCpu,
                (_, 1) => ThreadWas::Waiting,
                _ => ThreadWas::Other,
            };
            by_tid.entry(tid).or_default().push((at + realtime_minus_monotonic_ns, was));
        }
        for signals in by_tid.values_mut() {
            signals.sort_by_key(|(at, _)| *at);
        }
        Signals { by_tid }
    }

    pub fn len(&self) -> usize {
        self.by_tid.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How thread `tid` was at the signal behind a sample JFR took of it at `at_unix_ns`: the
    /// last signal sent it before then, if recent enough; `None` when there is none. JFR stamps
    /// a sample once its thread has suspended, and resumes it after the walk with a second
    /// SIGUSR2: the sample falls between its two signals (15 µs or more after the first, 9 µs
    /// or more before the second here), so no margin for the clocks is needed.
    pub fn thread_at(&self, tid: u64, at_unix_ns: i128) -> Option<ThreadWas> {
        let signals = self.by_tid.get(&tid)?;
        let before = signals.partition_point(|(at, _)| *at <= at_unix_ns);
        let &(at, was) = signals.get(before.checked_sub(1)?)?;
        (at_unix_ns - at <= SIGNAL_BEFORE_SAMPLE_MAX_NS).then_some(was)
    }
}

/// JFR's execution samples told apart by where their thread was at JFR's signal, each set
/// against our leaf methods.
#[derive(Debug, Clone, Default)]
pub struct ByThreadState {
    /// SIGUSR2s sent while the watch ran (to every thread).
    pub signals: usize,
    /// Of threads waiting for a CPU: not kept by whether the thread stayed in Java code.
    pub waiting: Reference,
    /// Of threads on a CPU: kept only where the thread stayed in Java code until the handler.
    pub on_cpu: Reference,
    /// Matched to no signal, or to a thread asleep or never seen switching.
    pub unmatched: u64,
    /// JFR against itself: its samples of running threads against those of waiting ones, and
    /// the distance chance reaches with those numbers (95th percentile of pooled deals).
    pub on_cpu_vs_waiting_pp: f64,
    pub on_cpu_vs_waiting_chance_pp: f64,
}

/// `samples` (leaf methods named as in `ours`) split by [`Signals::thread_at`], each part
/// against `ours`.
pub fn by_thread_state(ours: &HashMap<String, u64>, samples: &[TimedSample], signals: &Signals) -> ByThreadState {
    let (mut waiting, mut on_cpu, mut unmatched) = (Vec::new(), Vec::new(), 0);
    for s in samples {
        match signals.thread_at(s.os_thread_id, s.at_unix_ns) {
            Some(ThreadWas::Waiting) => waiting.push(s.leaf.clone()),
            Some(ThreadWas::OnCpu) => on_cpu.push(s.leaf.clone()),
            Some(ThreadWas::Other) | None => unmatched += 1,
        }
    }
    let waiting_counts = count_leaves(&waiting);
    ByThreadState {
        signals: signals.len(),
        waiting: Reference::of(ours, &waiting),
        on_cpu: Reference::of(ours, &on_cpu),
        unmatched,
        on_cpu_vs_waiting_pp: top_distance(&waiting_counts, &count_leaves(&on_cpu)).0,
        on_cpu_vs_waiting_chance_pp: pooled_p95_pp(&waiting_counts, &on_cpu),
    }
}

impl ByThreadState {
    /// Whether JFR's sample times lined up with the signals (9 in 10 samples matched): not on
    /// JDK 11 (see above), where the split means nothing.
    pub fn lined_up(&self) -> bool {
        self.unmatched * 10 <= self.waiting.samples + self.on_cpu.samples + self.unmatched
    }
}

impl std::fmt::Display for ByThreadState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let part = |r: &Reference| {
            format!(
                "{} samples, top-{TOP_METHODS} leaf methods {:.1} pp from ours, their split-half noise {:.1} pp, pooled 95% within {:.1} pp",
                r.samples, r.leaf_distance_pp, r.split_half_pp, r.pooled_p95_pp
            )
        };
        writeln!(
            f,
            "JFR's execution samples by where the thread was at JFR's signal ({} SIGUSR2s seen):",
            self.signals
        )?;
        if !self.lined_up() {
            let all = self.waiting.samples + self.on_cpu.samples + self.unmatched;
            return write!(
                f,
                "  {} of {all} samples matched to no signal: JFR's times and the signals' do not line up",
                self.unmatched
            );
        }
        writeln!(f, "  waiting for a CPU: {}", part(&self.waiting))?;
        writeln!(f, "  on a CPU: {}", part(&self.on_cpu))?;
        write!(
            f,
            "  JFR's on-CPU samples {:.1} pp from its waiting ones (chance: 95% within {:.1} pp); {} samples matched to no signal",
            self.on_cpu_vs_waiting_pp, self.on_cpu_vs_waiting_chance_pp, self.unmatched
        )
    }
}

/// CLOCK_REALTIME - CLOCK_MONOTONIC now (bpftrace's `nsecs` is the monotonic clock, JFR's
/// times are Unix times).
pub fn realtime_minus_monotonic_ns() -> i128 {
    let read = |clock| {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid timespec to write.
        assert_eq!(unsafe { libc::clock_gettime(clock, &mut ts) }, 0, "clock_gettime");
        i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
    };
    let monotonic = read(libc::CLOCK_MONOTONIC);
    let realtime = read(libc::CLOCK_REALTIME);
    realtime - monotonic
}

/// bpftrace running [`SCRIPT`] until [`SignalWatch::finish`].
pub struct SignalWatch {
    child: KillOnDrop,
    out: PathBuf,
}

impl SignalWatch {
    /// Starts bpftrace (output in `dir`) and waits until its probes are attached.
    pub fn start(dir: &Path) -> SignalWatch {
        let out = dir.join("jfr-signals.txt");
        let child = Command::new("bpftrace")
            .arg("-o")
            .arg(&out)
            .args(["-e", SCRIPT])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start bpftrace (`cargo xtask test` installs it): {e}"));
        let mut watch = SignalWatch { child: KillOnDrop::new(child), out };
        // `-o`'s file gets "Attaching N probes..." once they are.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if std::fs::read_to_string(&watch.out).is_ok_and(|t| t.contains("Attaching")) {
                return watch;
            }
            if let Ok(Some(status)) = watch.child.try_wait() {
                panic!("bpftrace exited ({status}) before attaching its probes");
            }
            assert!(Instant::now() < deadline, "bpftrace attached no probes within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops bpftrace and reads what it recorded.
    pub fn finish(mut self) -> Signals {
        let offset = realtime_minus_monotonic_ns();
        // SAFETY: signals our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = std::fs::read_to_string(&self.out).unwrap_or_else(|e| panic!("{}: {e}", self.out.display()));
        Signals::parse(&text, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thread 7 suspended on a CPU and resumed asleep in the handler, then suspended waiting
    /// for a CPU and resumed; thread 8 signalled before it was seen switching.
    const TEXT: &str = "Attaching 4 probes...\n\
                        S 1000000000 7 1 0\n\
                        S 1000050000 7 0 2\n\
                        S 1002000000 7 0 1\n\
                        S 1002050000 7 0 2\n\
                        S 1001000000 8 0 0\n\
                        garbage line\n\
                        X 1 2 3 4\n";

    #[test]
    fn each_signal_is_read_with_its_target_state() {
        let s = Signals::parse(TEXT, 10);
        assert_eq!(s.len(), 5);
        let at = |ns: i128, was| (ns + 10, was);
        assert_eq!(
            s.by_tid[&7],
            [
                at(1_000_000_000, ThreadWas::OnCpu),
                at(1_000_050_000, ThreadWas::Other),
                at(1_002_000_000, ThreadWas::Waiting),
                at(1_002_050_000, ThreadWas::Other)
            ]
        );
        assert_eq!(s.by_tid[&8], [(1_001_000_010, ThreadWas::Other)]);
    }

    #[test]
    fn a_sample_gets_the_state_at_the_last_signal_before_it() {
        let s = Signals::parse(TEXT, 0);
        // Between a suspend signal and its resume.
        assert_eq!(s.thread_at(7, 1_000_020_000), Some(ThreadWas::OnCpu));
        assert_eq!(s.thread_at(7, 1_002_000_000), Some(ThreadWas::Waiting));
        assert_eq!(s.thread_at(7, 1_002_049_999), Some(ThreadWas::Waiting));
        // After a resume: no sample of JFR's falls there.
        assert_eq!(s.thread_at(7, 1_000_100_000), Some(ThreadWas::Other));
        // Too long after the last signal, before any, or of a thread never signalled.
        assert_eq!(s.thread_at(7, 1_010_000_000), None);
        assert_eq!(s.thread_at(7, 999_000_000), None);
        assert_eq!(s.thread_at(9, 1_000_100_000), None);
    }

    #[test]
    fn samples_are_split_by_the_state_at_their_signal() {
        let s = Signals::parse(TEXT, 0);
        let sample = |tid, at, leaf: &str| TimedSample {
            os_thread_id: tid,
            thread: "t".into(),
            at_unix_ns: at,
            leaf: leaf.into(),
        };
        let samples = [
            sample(7, 1_000_020_000, "A.loop"),
            sample(7, 1_002_020_000, "B.short"),
            sample(7, 1_002_100_000, "C.asleep"),
            sample(8, 1_001_100_000, "D.unknown"),
            sample(9, 1_000_100_000, "E.unsignalled"),
        ];
        let ours: HashMap<String, u64> = [("A.loop".to_owned(), 3), ("B.short".to_owned(), 1)].into();
        let split = by_thread_state(&ours, &samples, &s);
        assert_eq!((split.signals, split.on_cpu.samples, split.waiting.samples, split.unmatched), (5, 1, 1, 3));
        // 3 of 5 matched to no signal: the split is not to be read.
        assert!(!split.lined_up());
        // Ours is 75:25; the on-CPU part all A, the waiting part all B.
        assert!((split.on_cpu.leaf_distance_pp - 25.0).abs() < 1e-9, "{split:?}");
        assert!((split.waiting.leaf_distance_pp - 75.0).abs() < 1e-9, "{split:?}");
        assert!((split.on_cpu_vs_waiting_pp - 100.0).abs() < 1e-9, "{split:?}");
    }

    #[test]
    fn the_clock_offset_is_the_unix_time_of_the_monotonic_zero() {
        let offset = realtime_minus_monotonic_ns();
        let unix_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i128;
        let monotonic_ns = unix_ns - offset;
        // Positive and less than the time since the epoch: the machine booted after 1970.
        assert!(monotonic_ns > 0 && monotonic_ns < unix_ns, "{offset}");
    }
}
