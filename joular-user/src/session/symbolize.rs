//! The symbol worker: a thread of its own owns the `Symbolizer` and turns each cycle's sampled
//! stacks into symbolized, interned `Stack`s, grouped per thread. The session loop hands it a
//! cycle and goes on flipping and draining; the reply comes back on a channel the loop selects
//! on, and the cycle's results are written then.
//!
//! Per cycle the worker looks ahead at what the stacks need (a JVM seen for the first time, JIT
//! addresses its map misses), waits for the JVM jobs that supply it until a deadline
//! ([`settle_within`] after it took the cycle up; none when more cycles are queued behind it),
//! and only then symbolizes: a JIT miss is resolved in the same cycle when its dump comes in
//! time, and a cycle written without it is counted (`settle_timeouts`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use joular_user::ebpf::Probe;
use joular_user::model::{Frame, FrameKind, RawSample, Stack, ThreadStack};
use joular_user::output::ThreadStacks;
use joular_user::symbols::{KernelUpdate, SymbolStats, Symbolizer, SymbolizerOptions};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// The frame of a stack written before the worker symbolized it.
pub const SYMBOLS_LATE: &str = "[symbols not ready]";

/// One cycle handed to the worker.
pub struct CycleSamples {
    pub cycle: u64,
    pub samples: Vec<RawSample>,
    /// Processes that ended in the cycle: forgotten once it is symbolized.
    pub ended: Vec<u32>,
}

/// The worker's answer for one cycle. Everything the loop must apply for a cycle comes back
/// here, so the `Symbolizer` never touches the probe.
pub struct SymbolReply {
    pub cycle: u64,
    /// Per thread, its stacks, busiest first; threads sorted by (pid, tid).
    pub stacks: Vec<ThreadStacks>,
    /// The symbolizer's counters after this cycle.
    pub stats: SymbolStats,
    /// JVMs whose stacks the sampler is to walk from now on (or no longer): the loop writes
    /// them into the probe's maps ([`apply_kernel_updates`]).
    pub kernel_updates: Vec<KernelUpdate>,
}

/// How long the start waits for the targets' HotSpot tables (read in milliseconds normally).
const WATCH_WAIT: Duration = Duration::from_secs(2);

/// How long the worker may wait for a JVM's job to complete a cycle's symbols: half a cycle
/// (so it keeps up with the loop), at most 2 s.
pub fn settle_within(interval: Duration) -> Duration {
    (interval / 2).min(Duration::from_secs(2))
}

pub struct SymbolWorker {
    cycles: Option<mpsc::Sender<CycleSamples>>,
    replies: UnboundedReceiver<SymbolReply>,
    /// Cycles handed over and not yet taken up.
    queued: Arc<AtomicUsize>,
    /// One more than the last cycle the loop wrote without waiting (0: none): the worker skips
    /// those.
    abandoned_below: Arc<AtomicU64>,
    alive: bool,
}

impl SymbolWorker {
    /// Starts the worker, which first looks at `targets` ([`Symbolizer::watch`]): what the
    /// kernel needs to walk their JVMs' stacks is returned, within `WATCH_WAIT`, so they are
    /// walked from the first cycle on. A JVM that takes longer is walked once a reply says so.
    /// (The symbolizer is built on the worker's thread: blazesym's caches stay on one thread.)
    pub fn start(opts: SymbolizerOptions, settle_within: Duration, targets: Vec<u32>) -> anyhow::Result<(Self, Vec<KernelUpdate>)> {
        let (cycles_tx, cycles_rx) = mpsc::channel::<CycleSamples>();
        let (replies_tx, replies) = unbounded_channel();
        let (watched_tx, watched_rx) = mpsc::channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let abandoned_below = Arc::new(AtomicU64::new(0));
        let (q, a) = (Arc::clone(&queued), Arc::clone(&abandoned_below));
        std::thread::Builder::new().name("symbols".into()).spawn(move || {
            let mut symbolizer = Symbolizer::new(opts);
            for pid in targets {
                symbolizer.watch(pid);
            }
            let _ = watched_tx.send(symbolizer.take_kernel_updates());
            run(symbolizer, settle_within, &cycles_rx, &replies_tx, &q, &a)
        })?;
        let updates = watched_rx.recv_timeout(WATCH_WAIT).unwrap_or_default();
        Ok((SymbolWorker { cycles: Some(cycles_tx), replies, queued, abandoned_below, alive: true }, updates))
    }

    pub fn submit(&mut self, cycle: CycleSamples) {
        self.queued.fetch_add(1, Ordering::AcqRel);
        let sent = self.cycles.as_ref().is_some_and(|tx| tx.send(cycle).is_ok());
        if !sent {
            self.alive = false;
        }
    }

    /// The next reply; `None` once the worker is gone (it cannot be, unless it panicked).
    pub async fn recv(&mut self) -> Option<SymbolReply> {
        let reply = self.replies.recv().await;
        self.alive &= reply.is_some();
        reply
    }

    pub fn alive(&self) -> bool {
        self.alive
    }

    /// The loop wrote the cycles up to `cycle` without their symbols: the worker skips them.
    pub fn abandon_through(&self, cycle: u64) {
        self.abandoned_below.fetch_max(cycle + 1, Ordering::AcqRel);
    }
}

impl Drop for SymbolWorker {
    fn drop(&mut self) {
        // The worker ends with its queue; a JVM job still running ends by its own deadlines.
        self.cycles = None;
    }
}

fn run(
    mut symbolizer: Symbolizer,
    settle_within: Duration,
    cycles: &mpsc::Receiver<CycleSamples>,
    replies: &UnboundedSender<SymbolReply>,
    queued: &AtomicUsize,
    abandoned_below: &AtomicU64,
) {
    while let Ok(cycle) = cycles.recv() {
        let behind = queued.fetch_sub(1, Ordering::AcqRel) > 1;
        if cycle.cycle >= abandoned_below.load(Ordering::Acquire) {
            // Catching up matters more than completing one cycle's JIT frames.
            let deadline = Instant::now() + if behind { Duration::ZERO } else { settle_within };
            let stacks = symbolize_cycle(&mut symbolizer, &cycle.samples, deadline);
            for &pid in &cycle.ended {
                symbolizer.forget_process(pid);
            }
            let reply = SymbolReply {
                cycle: cycle.cycle,
                stacks,
                stats: symbolizer.stats(),
                kernel_updates: symbolizer.take_kernel_updates(),
            };
            if replies.send(reply).is_err() {
                return;
            }
        } else {
            for &pid in &cycle.ended {
                symbolizer.forget_process(pid);
            }
        }
    }
}

/// Look ahead, wait for what is missing (until `deadline`), then symbolize every sample.
pub fn symbolize_cycle(symbolizer: &mut Symbolizer, samples: &[RawSample], deadline: Instant) -> Vec<ThreadStacks> {
    symbolizer.begin_cycle();
    // Walked stacks are named through HotSpot's tables, which need no job to wait for.
    for s in samples.iter().filter(|s| s.walked.is_none()) {
        symbolizer.prepare(s.pid, &s.user);
    }
    symbolizer.settle(deadline);
    // Interned stacks share one Arc, so the pointer identifies the stack.
    type ByStack = HashMap<*const [Frame], (Stack, u64)>;
    let mut by_thread: HashMap<(u32, u32), ByStack> = HashMap::new();
    for s in samples {
        let stack = match &s.walked {
            Some(walked) => symbolizer.symbolize_walked(s.pid, walked, &s.kernel),
            None => symbolizer.symbolize(s.pid, &s.user, &s.kernel),
        };
        let e = by_thread.entry((s.pid, s.tid)).or_default().entry(Arc::as_ptr(&stack)).or_insert((stack, 0));
        e.1 += s.count;
    }
    let mut out: Vec<ThreadStacks> = by_thread
        .into_iter()
        .map(|((pid, tid), stacks)| {
            let mut stacks: Vec<ThreadStack> = stacks.into_values().map(|(stack, samples)| ThreadStack { stack, samples }).collect();
            stacks.sort_by_key(|s| std::cmp::Reverse(s.samples));
            (pid, tid, stacks)
        })
        .collect();
    out.sort_by_key(|t| (t.0, t.1));
    out
}

/// Tells the kernel which processes are JVMs whose stacks it walks.
pub fn apply_kernel_updates(updates: Vec<KernelUpdate>, probe: &mut Probe) {
    for update in updates {
        match update {
            // This kernel's sampler does not walk: the JVM is named from bare pcs.
            KernelUpdate::WalkJvm { .. } if !probe.walks_jvms => {}
            KernelUpdate::WalkJvm { pid, config } => {
                if let Err(e) = probe.set_jvm(pid, config) {
                    log::warn!("JVM {pid}: its Java frames are named from bare pcs only: {e}");
                }
            }
            KernelUpdate::ForgetJvm { pid } => probe.remove_jvm(pid),
        }
    }
}

/// Stacks for a cycle written without waiting for the worker: each thread's samples on one
/// `[symbols not ready]` frame, so its energy is still split and still adds up.
pub fn late_stacks(threads: &[(u32, u32, u64)]) -> Vec<ThreadStacks> {
    let frame = Frame { name: SYMBOLS_LATE.into(), short: SYMBOLS_LATE.into(), kind: FrameKind::Native, line: None };
    let stack: Stack = Arc::from([frame]);
    let mut out: Vec<ThreadStacks> = threads
        .iter()
        .filter(|t| t.2 > 0)
        .map(|&(pid, tid, samples)| (pid, tid, vec![ThreadStack { stack: Arc::clone(&stack), samples }]))
        .collect();
    out.sort_by_key(|t| (t.0, t.1));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn marker_function_for_the_worker(x: u64) -> u64 {
        std::hint::black_box(x.wrapping_mul(7))
    }

    fn sample(tid: u32, count: u64) -> RawSample {
        let ip = marker_function_for_the_worker as *const () as u64 + 1;
        RawSample { pid: std::process::id(), tid, cpu: 0, user: Arc::from([ip]), kernel: Arc::from([]), count, walked: None }
    }

    fn options() -> SymbolizerOptions {
        SymbolizerOptions { kernel: false, attach: false, ..Default::default() }
    }

    #[tokio::test]
    async fn replies_come_in_cycle_order_and_skip_abandoned_cycles() {
        let (mut worker, updates) = SymbolWorker::start(options(), Duration::from_millis(100), vec![]).unwrap();
        assert!(updates.is_empty());
        worker.submit(CycleSamples { cycle: 0, samples: vec![sample(1, 3), sample(2, 1), sample(1, 2)], ended: vec![] });
        let reply = worker.recv().await.unwrap();
        assert_eq!(reply.cycle, 0);
        let threads: Vec<(u32, u64)> = reply.stacks.iter().map(|(_, tid, s)| (*tid, s.iter().map(|s| s.samples).sum())).collect();
        assert_eq!(threads, [(1, 5), (2, 1)]);
        assert!(reply.stacks[0].2[0].stack[0].name.contains("marker_function_for_the_worker"), "{:?}", reply.stacks[0].2[0].stack);
        // Two equal stacks of one thread are one interned stack.
        assert_eq!(reply.stacks[0].2.len(), 1);

        worker.abandon_through(2);
        for cycle in 1..=3 {
            worker.submit(CycleSamples { cycle, samples: vec![sample(1, 1)], ended: vec![] });
        }
        assert_eq!(worker.recv().await.unwrap().cycle, 3, "cycles 1 and 2 were written without waiting");
        assert!(worker.alive());
    }

    #[test]
    fn late_stacks_keep_every_threads_samples() {
        let stacks = late_stacks(&[(7, 9, 4), (7, 8, 0), (6, 1, 2)]);
        let got: Vec<(u32, u32, u64, &str)> = stacks.iter().map(|(p, t, s)| (*p, *t, s[0].samples, &*s[0].stack[0].name)).collect();
        assert_eq!(got, [(6, 1, 2, SYMBOLS_LATE), (7, 9, 4, SYMBOLS_LATE)]);
    }

    #[test]
    fn the_wait_is_half_a_cycle_at_most_two_seconds() {
        assert_eq!(settle_within(Duration::from_secs(1)), Duration::from_millis(500));
        assert_eq!(settle_within(Duration::from_secs(60)), Duration::from_secs(2));
    }
}

/// The end-of-run line about how a JVM's stacks were unwound.
pub fn unwinder_line(pid: u32, u: &joular_user::model::JavaUnwinder) -> String {
    let how = match (u.unwinder.as_str(), &u.reason) {
        ("hotspot", _) => "the HotSpot unwinder (compiled frames stepped by their code blobs' frame sizes; the JIT code keeps no frame pointers)".to_owned(),
        (_, Some(reason)) => format!("frame pointers only, cut at compiled frames: the HotSpot unwinder cannot run ({reason})"),
        _ => "frame pointers (the JIT code keeps them)".to_owned(),
    };
    format!(
        "JVM {pid}: Java stacks walked by {how}; {} walked stacks stepped a compiled frame by its frame size, {} by frame pointers only, {} cut",
        u.stacks_hotspot, u.stacks_frame_pointers, u.stacks_cut
    )
}

/// The end-of-run line about Java frames named through HotSpot's tables.
pub fn hotspot_line(st: &SymbolStats) -> String {
    format!(
        "Java frames: {} JVM(s) read through their HotSpot tables; {} methods and {} compiled methods read, \
         {} code-cache re-reads, {} JIT frames left unknown ({} freed before they were named), {} interpreted frames unnamed; \
         misses: {} unreadable, {} stale, {} corrupt Method*s, {} unreadable code; \
         {} walked stacks ({} cut, {} truncated); caches ~{} KiB; symbolization {:.1} ms in all",
        st.hotspot_jvms,
        st.hotspot_methods_read,
        st.hotspot_nmethods_read,
        st.code_cache_refreshes,
        st.unknown_jit_frames,
        st.stale_compiled_frames,
        st.unnamed_interpreted_frames,
        st.method_unreadable,
        st.method_stale,
        st.method_corrupt,
        st.code_unreadable,
        st.walked_stacks,
        st.walked_stacks_cut,
        st.walked_stacks_truncated,
        st.hotspot_cache_bytes / 1024,
        st.symbolize_ns as f64 / 1e6,
    )
}
