//! The symbol worker runs the symbolize stage on a thread of its own: it owns the `Symbolizer`
//! and turns each cycle's sampled stacks into symbolized, interned `Stack`s, grouped per thread.
//! The session loop hands it a cycle and goes on flipping and draining; the reply comes back on
//! a channel the loop selects on, and the cycle's results are written then.
//!
//! Per cycle the worker looks ahead at what the stacks need (a JVM seen for the first time, JIT
//! addresses its map misses), waits for the JVM jobs that supply it until a deadline
//! ([`settle_within`] after it took the cycle up; none when more cycles are queued behind it),
//! and only then symbolizes: a JIT miss is resolved in the same cycle when its dump comes in
//! time, and a cycle written without it is counted (`settle_timeouts`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::symbolize::{install_quiet_panic_hook, symbolize_cycle, PanicGuard};
use crate::attribution::devices::{DevicePath, DeviceSample};
use crate::attribution::stacks::ThreadStacks;
use crate::ebpf::CodeReports;
use crate::model::RawSample;
use crate::symbols::{KernelUpdate, SymbolStats, Symbolizer, SymbolizerOptions};
use crate::urgency::urgent;

/// One cycle handed to the worker.
pub struct CycleSamples {
    pub cycle: u64,
    pub samples: Vec<RawSample>,
    /// The cycle's byte counts (`--devices`), named as the samples are.
    pub devices: Vec<DeviceSample>,
    /// Processes that ended in the cycle: forgotten once it is symbolized.
    pub ended: Vec<u32>,
}

/// The worker's answer for one cycle. Everything the loop must apply for a cycle comes back
/// here, so the `Symbolizer` never touches the probe.
pub struct SymbolReply {
    pub cycle: u64,
    /// Per thread, its stacks, busiest first; threads sorted by (pid, tid).
    pub stacks: Vec<ThreadStacks>,
    /// The cycle's bytes per thread and call path (`--devices`).
    pub device_paths: Vec<DevicePath>,
    /// The symbolizer's counters after this cycle.
    pub stats: SymbolStats,
    /// JVMs whose stacks the sampler is to walk from now on (or no longer): the loop writes
    /// them into the probe's maps.
    pub kernel_updates: Vec<KernelUpdate>,
}

/// How long the start waits for the targets' HotSpot tables (read in milliseconds normally).
const WATCH_WAIT: Duration = Duration::from_secs(2);

/// The first watch's kernel updates: to the starting thread while it waits for them (`start`,
/// a rendezvous), else, once it has stopped waiting and dropped its end, as early updates.
fn hand_over(
    watched: Vec<KernelUpdate>,
    start: &mpsc::SyncSender<Vec<KernelUpdate>>,
    early: &UnboundedSender<Vec<KernelUpdate>>,
) {
    if let Err(mpsc::SendError(late)) = start.send(watched) {
        if !late.is_empty() {
            let _ = early.send(late);
        }
    }
}

/// How long the worker may wait for a JVM's job to complete a cycle's symbols: half a cycle
/// (so it keeps up with the loop), at most 2 s.
pub fn settle_within(interval: Duration) -> Duration {
    (interval / 2).min(Duration::from_secs(2))
}

pub struct SymbolWorker {
    cycles: Option<mpsc::Sender<CycleSamples>>,
    replies: UnboundedReceiver<SymbolReply>,
    /// Kernel map changes found between cycles, until the loop takes them ([`Self::take_early`]).
    early: Option<EarlyUpdates>,
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
    /// walked from the first cycle on. What takes longer comes as early updates ([`Self::take_early`]).
    /// (The symbolizer is built on the worker's thread: blazesym's caches stay on one thread.)
    pub fn start(
        opts: SymbolizerOptions,
        settle_within: Duration,
        targets: Vec<u32>,
        reports: Option<CodeReports>,
    ) -> std::io::Result<(Self, Vec<KernelUpdate>)> {
        let (cycles_tx, cycles_rx) = mpsc::channel::<CycleSamples>();
        let (replies_tx, replies) = unbounded_channel();
        let (early_tx, early) = unbounded_channel();
        // A rendezvous: a send completes only if this thread takes it within `WATCH_WAIT`;
        // else it fails once the receiver is dropped, and the worker sends the updates as early
        // ones. (A buffered channel would keep the updates of a watch that took longer in a
        // channel no one reads: the kernel then never walked that JVM's stacks, as when
        // libjvm.so's tables took 4 s to read from a throttled disk.)
        let (watched_tx, watched_rx) = mpsc::sync_channel(0);
        let queued = Arc::new(AtomicUsize::new(0));
        let abandoned_below = Arc::new(AtomicU64::new(0));
        let (q, a) = (Arc::clone(&queued), Arc::clone(&abandoned_below));
        install_quiet_panic_hook();
        std::thread::Builder::new().name("symbols".into()).spawn(move || {
            let mut symbolizer = Symbolizer::new(opts);
            if let Some(mut reports) = reports {
                symbolizer.set_report_source(Box::new(move || reports.take()));
            }
            let mut guard = PanicGuard::default();
            for pid in targets {
                guard.contain(|| symbolizer.watch(pid), "looking at a target");
            }
            let watched = guard
                .contain(|| symbolizer.take_kernel_updates(), "updating the kernel's JVM list")
                .unwrap_or_default();
            hand_over(watched, &watched_tx, &early_tx);
            let channels = Channels { cycles: &cycles_rx, replies: &replies_tx, early: &early_tx };
            run(symbolizer, guard, settle_within, channels, &q, &a)
        })?;
        let updates = watched_rx.recv_timeout(WATCH_WAIT).unwrap_or_default();
        let worker = SymbolWorker {
            cycles: Some(cycles_tx),
            replies,
            early: Some(EarlyUpdates(Some(early))),
            queued,
            abandoned_below,
            alive: true,
        };
        Ok((worker, updates))
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

    /// The kernel map changes the worker finds between cycles (a JVM that became walkable
    /// while it starts), for the loop to apply as they come.
    pub fn take_early(&mut self) -> EarlyUpdates {
        self.early.take().unwrap_or(EarlyUpdates(None))
    }

    /// The loop wrote the cycles up to `cycle` without their symbols: the worker skips them.
    pub fn abandon_through(&self, cycle: u64) {
        self.abandoned_below.fetch_max(cycle + 1, Ordering::AcqRel);
    }
}

/// The worker's kernel map changes between cycles.
pub struct EarlyUpdates(Option<UnboundedReceiver<Vec<KernelUpdate>>>);

impl EarlyUpdates {
    /// The next changes; never returns once the worker is gone.
    pub async fn recv(&mut self) -> Vec<KernelUpdate> {
        if let Some(rx) = self.0.as_mut() {
            if let Some(updates) = rx.recv().await {
                return updates;
            }
            self.0 = None;
        }
        std::future::pending().await
    }
}

impl Drop for SymbolWorker {
    fn drop(&mut self) {
        // The worker ends with its queue; a JVM job still running ends by its own deadlines.
        self.cycles = None;
    }
}

/// The worker's ends of its channels.
struct Channels<'a> {
    cycles: &'a mpsc::Receiver<CycleSamples>,
    replies: &'a UnboundedSender<SymbolReply>,
    early: &'a UnboundedSender<Vec<KernelUpdate>>,
}

fn run(
    mut symbolizer: Symbolizer,
    mut guard: PanicGuard,
    settle_within: Duration,
    channels: Channels,
    queued: &AtomicUsize,
    abandoned_below: &AtomicU64,
) {
    let Channels { cycles, replies, early } = channels;
    // While a target starts, it is looked at between cycles: its JVM is walked from its
    // first Java code, not from the end of the first cycle.
    let mut next_poll = Some(Instant::now());
    loop {
        let wake = match symbolizer.reports_due() {
            Some(due) => Some(next_poll.map_or(due, |at| at.min(due))),
            None => next_poll,
        };
        let cycle = match wake {
            Some(at) => match cycles.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(cycle) => cycle,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    learn(&mut symbolizer, false, &mut guard);
                    let now = Instant::now();
                    if next_poll.is_some_and(|at| now >= at) {
                        let Some(next) = poll_young(&mut symbolizer, &mut guard, early) else { return };
                        next_poll = next;
                    }
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            },
            None => match cycles.recv() {
                Ok(cycle) => cycle,
                Err(_) => return,
            },
        };
        // What the sampler met up to the flip, named before the cycle's stacks are.
        learn(&mut symbolizer, true, &mut guard);
        let behind = queued.fetch_sub(1, Ordering::AcqRel) > 1;
        if cycle.cycle >= abandoned_below.load(Ordering::Acquire) {
            // Catching up matters more than completing one cycle's JIT frames.
            let deadline = Instant::now() + if behind { Duration::ZERO } else { settle_within };
            let (stacks, device_paths) =
                symbolize_cycle(&mut symbolizer, &cycle.samples, &cycle.devices, deadline, &mut guard);
            forget(&mut symbolizer, &cycle.ended, &mut guard);
            let mut stats = guard.contain(|| symbolizer.stats(), "reading its counters").unwrap_or_default();
            stats.worker_panics = guard.panics;
            stats.samples_unsymbolized = guard.samples_unsymbolized;
            let kernel_updates = guard
                .contain(|| symbolizer.take_kernel_updates(), "updating the kernel's JVM list")
                .unwrap_or_default();
            let reply = SymbolReply { cycle: cycle.cycle, stacks, device_paths, stats, kernel_updates };
            if replies.send(reply).is_err() {
                return;
            }
        } else {
            forget(&mut symbolizer, &cycle.ended, &mut guard);
        }
        // A cycle may bring new processes (children, `--all`) that are still starting.
        next_poll = Some(Instant::now());
    }
}

/// Looks at the targets still starting ([`Symbolizer::poll_young`]) and sends the kernel what
/// it found. Returns when to look again (`None`: no target is worth it any more), or `None`
/// when the loop is gone.
fn poll_young(
    symbolizer: &mut Symbolizer,
    guard: &mut PanicGuard,
    early: &UnboundedSender<Vec<KernelUpdate>>,
) -> Option<Option<Instant>> {
    let poll_in = guard.contain(|| urgent(|| symbolizer.poll_young()), "looking at a starting target").flatten();
    // A new walk configuration goes to the kernel before the native unwind tables are read,
    // which takes longer than the JVM takes to run Java code.
    for take in [Symbolizer::take_walk_updates, Symbolizer::take_kernel_updates] {
        let updates = guard.contain(|| take(symbolizer), "updating the kernel's JVM list").unwrap_or_default();
        if !updates.is_empty() && early.send(updates).is_err() {
            return None;
        }
    }
    Some(poll_in.map(|wait| Instant::now() + wait))
}

/// Names the code the sampler reported since the last look, when due or `force`d.
fn learn(symbolizer: &mut Symbolizer, force: bool, guard: &mut PanicGuard) {
    guard.contain(|| symbolizer.learn_reported(force), "naming the code the sampler met");
}

fn forget(symbolizer: &mut Symbolizer, ended: &[u32], guard: &mut PanicGuard) {
    for &pid in ended {
        guard.contain(|| symbolizer.forget_process(pid), "forgetting an ended process");
        guard.forget(pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stages::symbolize::tests::{options, sample};

    #[tokio::test]
    async fn replies_come_in_cycle_order_and_skip_abandoned_cycles() {
        let (mut worker, updates) = SymbolWorker::start(options(), Duration::from_millis(100), vec![], None).unwrap();
        assert!(updates.is_empty());
        worker.submit(CycleSamples {
            cycle: 0,
            samples: vec![sample(1, 3), sample(2, 1), sample(1, 2)],
            devices: vec![],
            ended: vec![],
        });
        let reply = worker.recv().await.unwrap();
        assert_eq!(reply.cycle, 0);
        let threads: Vec<(u32, u64)> =
            reply.stacks.iter().map(|(_, tid, s)| (*tid, s.iter().map(|s| s.samples).sum())).collect();
        assert_eq!(threads, [(1, 5), (2, 1)]);
        assert!(
            reply.stacks[0].2[0].stack[0].name.contains("marker_function_for_the_worker"),
            "{:?}",
            reply.stacks[0].2[0].stack
        );
        // Two equal stacks of one thread are one interned stack.
        assert_eq!(reply.stacks[0].2.len(), 1);

        worker.abandon_through(2);
        for cycle in 1..=3 {
            worker.submit(CycleSamples { cycle, samples: vec![sample(1, 1)], devices: vec![], ended: vec![] });
        }
        assert_eq!(worker.recv().await.unwrap().cycle, 3, "cycles 1 and 2 were written without waiting");
        assert!(worker.alive());
    }

    /// A watch that ends after the start stopped waiting: its updates come as early ones, not
    /// into a channel no one reads. One within the wait: to the start, and only there.
    #[test]
    fn the_first_watchs_updates_reach_the_kernel_however_late() {
        let forget = |pid| vec![KernelUpdate::ForgetJvm { pid }];
        let (early_tx, mut early) = unbounded_channel();

        let (start_tx, start_rx) = mpsc::sync_channel(0);
        let waiting = std::thread::spawn(move || start_rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default());
        hand_over(forget(1), &start_tx, &early_tx);
        assert_eq!(waiting.join().unwrap(), forget(1));
        assert!(early.try_recv().is_err(), "given to the start only");

        let (start_tx, start_rx) = mpsc::sync_channel(0);
        let gave_up = std::thread::spawn(move || start_rx.recv_timeout(Duration::from_millis(20)).unwrap_or_default());
        assert_eq!(gave_up.join().unwrap(), vec![], "the start stopped waiting");
        hand_over(forget(2), &start_tx, &early_tx);
        assert_eq!(early.try_recv().unwrap(), forget(2));

        // Nothing to say: no empty early update.
        hand_over(vec![], &start_tx, &early_tx);
        assert!(early.try_recv().is_err());
    }

    #[test]
    fn the_wait_is_half_a_cycle_at_most_two_seconds() {
        assert_eq!(settle_within(Duration::from_secs(1)), Duration::from_millis(500));
        assert_eq!(settle_within(Duration::from_secs(60)), Duration::from_secs(2));
    }
}
