//! Naming a cycle's samples: every raw stack symbolized once, grouped by thread. The symbolizer
//! is passed in (`StackNamer`), so a test or a bench names stacks without a live process. A
//! panic in it costs one stack (then its process), never the cycle.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use crate::attribution::devices::{DevicePath, DeviceSample};
use crate::attribution::stacks::ThreadStacks;
use crate::model::{Frame, FrameKind, RawSample, Stack, ThreadStack, WalkedStack};
use crate::symbols::{StackInput, Symbolizer};

/// The frame of a stack written before the worker symbolized it.
pub const SYMBOLS_LATE: &str = "[symbols not ready]";

/// What naming a cycle needs of a symbolizer.
pub trait StackNamer {
    /// A cycle starts: what is prepared from here on is waited for by `settle`.
    fn begin_cycle(&mut self);
    /// Reads, in one guarded job per process, what naming this cycle's `stacks` of `pid` needs
    /// from a HotSpot JVM's memory (nothing for other processes).
    fn prefetch(&mut self, pid: u32, stacks: Vec<StackInput<'_>>);
    /// Starts whatever reading `user`'s addresses will need (symbol files, perf maps).
    fn prepare(&mut self, pid: u32, user: &[u64]);
    /// Waits for what was prepared, until `deadline`.
    fn settle(&mut self, deadline: Instant);
    fn symbolize(&mut self, pid: u32, user: &[u64], kernel: &[u64]) -> Stack;
    /// `samples`: how many samples the stack stands for (counted per JVM).
    fn symbolize_walked(&mut self, pid: u32, walked: &WalkedStack, kernel: &[u64], samples: u64) -> Stack;
    /// Called between stacks: naming a cycle can take long enough for the code the sampler
    /// reported meanwhile to be freed, so reports are read here too when due.
    fn meanwhile(&mut self) {}
}

impl StackNamer for Symbolizer {
    fn begin_cycle(&mut self) {
        Symbolizer::begin_cycle(self);
    }

    fn prefetch(&mut self, pid: u32, stacks: Vec<StackInput<'_>>) {
        Symbolizer::prefetch_hotspot(self, pid, stacks);
    }

    fn prepare(&mut self, pid: u32, user: &[u64]) {
        Symbolizer::prepare(self, pid, user);
    }

    fn settle(&mut self, deadline: Instant) {
        Symbolizer::settle(self, deadline);
    }

    fn meanwhile(&mut self) {
        self.learn_reported(false);
    }

    fn symbolize(&mut self, pid: u32, user: &[u64], kernel: &[u64]) -> Stack {
        Symbolizer::symbolize(self, pid, user, kernel)
    }

    fn symbolize_walked(&mut self, pid: u32, walked: &WalkedStack, kernel: &[u64], samples: u64) -> Stack {
        Symbolizer::symbolize_walked(self, pid, walked, kernel, samples)
    }
}

/// The frame of a stack whose symbolization panicked.
pub const SYMBOLS_FAILED: &str = "[symbols failed]";

/// Panics in the worker are caught where they happen: the stack (and from then on the process)
/// that raised one is written as `[symbols failed]`, the rest of the cycle and the next cycles
/// are symbolized as usual. The first panic is printed (with where it happened) and logged;
/// the next ones are only counted.
#[derive(Default)]
pub struct PanicGuard {
    pub panics: u64,
    /// Samples written as `[symbols failed]`.
    pub samples_unsymbolized: u64,
    /// Processes whose symbolization panicked: not symbolized again.
    bad_pids: std::collections::HashSet<u32>,
}

impl PanicGuard {
    /// Runs `f`; a panic is counted and logged (`what` says what the worker was doing).
    pub fn contain<T>(&mut self, f: impl FnOnce() -> T, what: &str) -> Option<T> {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        if let Err(payload) = &caught {
            self.panics += 1;
            if self.panics == 1 {
                let message = crate::symbols::panic_message(&**payload);
                log::warn!("the symbol worker panicked {what} ({message}); it goes on, and the end of the run counts what this cost");
                QUIET_PANICS.with(|q| q.set(true));
            }
        }
        caught.ok()
    }
}

thread_local! {
    /// Set on the worker's thread after its first panic was printed: the next ones are counted,
    /// not printed again.
    static QUIET_PANICS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Keeps the default panic message for every panic except the worker's after its first.
pub fn install_quiet_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET_PANICS.with(|q| q.get()) {
                previous(info);
            }
        }));
    });
}

/// How many stacks are named between two looks at whether the sampler's reports are due
/// ([`StackNamer::meanwhile`]): a look costs a clock read; a stack, microseconds.
const LEARN_EVERY_STACKS: usize = 8;

/// Look ahead, wait for what is missing (until `deadline`), then symbolize every sample.
/// `devices`: the cycle's byte counts (`--devices`), looked ahead at and named with the samples
/// (their frames named as the samples' are), returned apart: they are no CPU samples.
pub fn symbolize_cycle(
    symbolizer: &mut dyn StackNamer,
    samples: &[RawSample],
    devices: &[DeviceSample],
    deadline: Instant,
    guard: &mut PanicGuard,
) -> (Vec<ThreadStacks>, Vec<DevicePath>) {
    let all = || samples.iter().chain(devices.iter().map(|d| &d.sample));
    // A panic while looking ahead costs the wait, not the names.
    guard.contain(
        || {
            symbolizer.begin_cycle();
            // Walked stacks are named through HotSpot's tables, which need no job to wait for:
            // each JVM's frames of the cycle are read in one guarded job.
            let mut by_pid: HashMap<u32, Vec<StackInput>> = HashMap::new();
            for s in all() {
                let input = match &s.walked {
                    Some(walked) => StackInput::Walked(walked),
                    None => StackInput::Bare(&s.user),
                };
                by_pid.entry(s.pid).or_default().push(input);
            }
            for (pid, stacks) in by_pid {
                symbolizer.prefetch(pid, stacks);
            }
            for s in all().filter(|s| s.walked.is_none()) {
                symbolizer.prepare(s.pid, &s.user);
            }
            symbolizer.settle(deadline);
        },
        "looking ahead at a cycle",
    );
    let failed: Stack = Arc::from([Frame::new(FrameKind::Native, SYMBOLS_FAILED, SYMBOLS_FAILED, None)]);
    // Interned stacks share one Arc, so the pointer identifies the stack.
    type ByStack = HashMap<*const [Frame], (Stack, u64)>;
    let mut by_thread: HashMap<(u32, u32), ByStack> = HashMap::new();
    for (i, s) in samples.iter().enumerate() {
        if i % LEARN_EVERY_STACKS == 0 {
            guard.contain(|| symbolizer.meanwhile(), "naming the code the sampler met");
        }
        let symbolized = match guard.bad_pids.contains(&s.pid) {
            true => None,
            false => guard.contain(
                || match &s.walked {
                    Some(walked) => symbolizer.symbolize_walked(s.pid, walked, &s.kernel, s.count),
                    None => symbolizer.symbolize(s.pid, &s.user, &s.kernel),
                },
                "symbolizing a stack",
            ),
        };
        let stack = symbolized.unwrap_or_else(|| {
            guard.bad_pids.insert(s.pid);
            guard.samples_unsymbolized += s.count;
            Arc::clone(&failed)
        });
        let e = by_thread.entry((s.pid, s.tid)).or_default().entry(Arc::as_ptr(&stack)).or_insert((stack, 0));
        e.1 += s.count;
    }
    let mut out: Vec<ThreadStacks> = by_thread
        .into_iter()
        .map(|((pid, tid), stacks)| {
            let mut stacks: Vec<ThreadStack> =
                stacks.into_values().map(|(stack, samples)| ThreadStack { stack, samples }).collect();
            stacks.sort_by_key(|s| std::cmp::Reverse(s.samples));
            (pid, tid, stacks)
        })
        .collect();
    out.sort_by_key(|t| (t.0, t.1));
    let paths = devices
        .iter()
        .filter_map(|d| {
            let s = &d.sample;
            let stack = match guard.bad_pids.contains(&s.pid) {
                true => Arc::clone(&failed),
                false => guard
                    .contain(
                        // 0 samples: a byte count's stack adds nothing to the JVM's sample counters.
                        || match &s.walked {
                            Some(walked) => symbolizer.symbolize_walked(s.pid, walked, &s.kernel, 0),
                            None => symbolizer.symbolize(s.pid, &s.user, &s.kernel),
                        },
                        "symbolizing a byte count's stack",
                    )
                    .unwrap_or_else(|| Arc::clone(&failed)),
            };
            DevicePath::of_count(s.pid, s.tid, stack, d.class, d.bytes, d.dev)
        })
        .collect();
    (out, paths)
}

/// Stacks for a cycle written without waiting for the worker: each thread's samples on one
/// `[symbols not ready]` frame, so its energy is still split and still adds up.
pub fn late_stacks(threads: &[(u32, u32, u64)]) -> Vec<ThreadStacks> {
    let frame = Frame::new(FrameKind::Native, SYMBOLS_LATE, SYMBOLS_LATE, None);
    let stack: Stack = Arc::from([frame]);
    let mut out: Vec<ThreadStacks> = threads
        .iter()
        .filter(|t| t.2 > 0)
        .map(|&(pid, tid, samples)| (pid, tid, vec![ThreadStack { stack: Arc::clone(&stack), samples }]))
        .collect();
    out.sort_by_key(|t| (t.0, t.1));
    out
}

impl PanicGuard {
    /// Forgets an ended process: a later one with its PID is symbolized again.
    pub fn forget(&mut self, pid: u32) {
        self.bad_pids.remove(&pid);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::symbols::SymbolizerOptions;

    #[inline(never)]
    fn marker_function_for_the_worker(x: u64) -> u64 {
        std::hint::black_box(x.wrapping_mul(7))
    }

    /// A sample of this process whose one frame is `marker_function_for_the_worker`.
    pub(crate) fn sample(tid: u32, count: u64) -> RawSample {
        let ip = marker_function_for_the_worker as *const () as u64 + 1;
        RawSample {
            pid: std::process::id(),
            tid,
            cpu: 0,
            user: Arc::from([ip]),
            kernel: Arc::from([]),
            count,
            walked: None,
        }
    }

    /// A symbolizer for user stacks of this process only.
    pub(crate) fn options() -> SymbolizerOptions {
        SymbolizerOptions { kernel: false, attach: false, ..Default::default() }
    }

    #[test]
    fn a_panic_is_counted_and_its_process_written_unsymbolized_while_the_rest_is_named() {
        let mut guard = PanicGuard::default();
        assert_eq!(guard.contain(|| panic!("a hostile file"), "testing"), None::<()>);
        assert_eq!(guard.contain(|| 5, "testing"), Some(5), "the next call runs");
        assert_eq!(guard.panics, 1);
        // A process whose symbolization panicked is not symbolized again.
        let mut bad = sample(1, 3);
        bad.pid = u32::MAX;
        guard.bad_pids.insert(bad.pid);
        let mut symbolizer = Symbolizer::new(options());
        let (stacks, _) = symbolize_cycle(&mut symbolizer, &[bad, sample(2, 4)], &[], Instant::now(), &mut guard);
        let by_pid: HashMap<u32, &str> = stacks.iter().map(|(pid, _, s)| (*pid, &*s[0].stack[0].name)).collect();
        assert_eq!(by_pid[&u32::MAX], SYMBOLS_FAILED);
        assert!(by_pid[&std::process::id()].contains("marker_function_for_the_worker"), "{by_pid:?}");
        assert_eq!((guard.panics, guard.samples_unsymbolized), (1, 3));
    }

    #[test]
    fn late_stacks_keep_every_threads_samples() {
        let stacks = late_stacks(&[(7, 9, 4), (7, 8, 0), (6, 1, 2)]);
        let got: Vec<(u32, u32, u64, &str)> =
            stacks.iter().map(|(p, t, s)| (*p, *t, s[0].samples, &*s[0].stack[0].name)).collect();
        assert_eq!(got, [(6, 1, 2, SYMBOLS_LATE), (7, 9, 4, SYMBOLS_LATE)]);
    }
}
