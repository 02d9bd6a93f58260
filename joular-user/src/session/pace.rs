//! Keeps the cycle boundary on time.
//!
//! - The loop is one thread, so writing a cycle (the result tree, JSON, metrics) when its
//!   symbols come back just before a boundary would delay the next flip by as long as the
//!   writing takes (1-3 s per cycle for a JVM starting 5,000 threads under `--all`). A reply
//!   that would not be written before the next boundary waits until just after it, when a whole
//!   cycle is ahead.
//! - Thousands of busy threads (a JVM starting 5,000) leave a normal thread a sliver of a CPU:
//!   the loop woke on time but then took 1-2 s to drain and write a cycle it does in 0.1-0.5 s
//!   alone, so the next flip came late. While the session runs, the loop thread is real-time at
//!   the lowest priority ([`punctual`]), as `perf record --realtime` makes perf; the threads it
//!   starts, the symbol worker and every JVM job are normal threads, and the kernel's real-time
//!   throttling still leaves the targets 5% of each CPU even if the loop never slept.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::emit::Sinks;
use super::symbolize::SymbolReply;

/// Slack kept before a boundary beyond the expected writing time (timer and scheduling delay).
const MARGIN: Duration = Duration::from_millis(20);

/// The lowest real-time priority: above every normal thread, below any real-time one.
const WAKE_PRIORITY: libc::c_int = 1;

/// The calling thread becomes real-time (`SCHED_FIFO`; threads and processes it starts are
/// not). Without CAP_SYS_NICE it stays as it was: the load then costs cadence only.
pub fn punctual() {
    set_policy(libc::SCHED_FIFO, WAKE_PRIORITY);
}

/// The calling thread is a normal one again.
pub fn relaxed() {
    set_policy(libc::SCHED_OTHER, 0);
}

fn set_policy(policy: libc::c_int, priority: libc::c_int) {
    let param = libc::sched_param { sched_priority: priority };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(0, policy | libc::SCHED_RESET_ON_FORK, &param) };
    if rc != 0 {
        log::debug!("sched_setscheduler({policy}): {}", std::io::Error::last_os_error());
    }
}

#[derive(Default)]
pub struct ReplyPacer {
    /// How long writing a reply may take: the longest recent one, decaying by a quarter per
    /// reply so one slow write does not hold back every later reply.
    expected: Duration,
    deferred: VecDeque<SymbolReply>,
}

impl ReplyPacer {
    /// Writes the reply now if that ends before `boundary`, else keeps it for [`Self::write_deferred`].
    pub fn on_reply(&mut self, reply: SymbolReply, boundary: Instant, sinks: &mut Sinks) -> anyhow::Result<()> {
        match self.admit(reply, Instant::now(), boundary) {
            Some(reply) => self.write(reply, sinks),
            None => Ok(()),
        }
    }

    /// Writes the replies kept, oldest first: right after a flip, or at the end.
    pub fn write_deferred(&mut self, sinks: &mut Sinks) -> anyhow::Result<()> {
        for reply in std::mem::take(&mut self.deferred) {
            self.write(reply, sinks)?;
        }
        Ok(())
    }

    fn write(&mut self, reply: SymbolReply, sinks: &mut Sinks) -> anyhow::Result<()> {
        let began = Instant::now();
        sinks.on_reply(reply)?;
        self.wrote(began.elapsed());
        Ok(())
    }

    /// The reply back if it can be written before `boundary`, else kept. Replies are kept in
    /// order, and none is written before those already kept.
    fn admit(&mut self, reply: SymbolReply, now: Instant, boundary: Instant) -> Option<SymbolReply> {
        if self.deferred.is_empty() && now + self.expected + MARGIN <= boundary {
            return Some(reply);
        }
        self.deferred.push_back(reply);
        None
    }

    /// Records how long writing one reply took.
    fn wrote(&mut self, took: Duration) {
        self.expected = took.max(self.expected * 3 / 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(cycle: u64) -> SymbolReply {
        SymbolReply {
            cycle,
            stacks: Vec::new(),
            device_paths: Vec::new(),
            stats: Default::default(),
            kernel_updates: Vec::new(),
        }
    }

    #[test]
    fn a_reply_that_would_overrun_the_boundary_waits_and_keeps_its_order() {
        let mut pacer = ReplyPacer::default();
        let now = Instant::now();
        let boundary = now + Duration::from_millis(500);
        assert_eq!(
            pacer.admit(reply(0), now, boundary).map(|r| r.cycle),
            Some(0),
            "nothing known yet: written at once"
        );
        pacer.wrote(Duration::from_millis(400));
        assert!(
            pacer.admit(reply(1), now + Duration::from_millis(200), boundary).is_none(),
            "400 ms of writing 300 ms before the boundary"
        );
        assert!(pacer.admit(reply(2), now, boundary).is_none(), "never written before an earlier reply");
        let kept: Vec<u64> = std::mem::take(&mut pacer.deferred).iter().map(|r| r.cycle).collect();
        assert_eq!(kept, [1, 2]);
        assert!(pacer.admit(reply(3), now, boundary).is_some(), "room again once the kept ones are taken");
    }

    /// capability(7) number.
    const CAP_SYS_NICE: u32 = 23;

    #[test]
    fn the_loop_thread_is_real_time_only_while_punctual_and_its_threads_never_are() {
        let policy = || unsafe { libc::sched_getscheduler(0) } & !libc::SCHED_RESET_ON_FORK;
        std::thread::spawn(move || {
            punctual();
            // Without CAP_SYS_NICE (an unprivileged run) the thread keeps the normal policy.
            let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            let caps = status.lines().find_map(|l| l.strip_prefix("CapEff:")).unwrap();
            let sys_nice = u64::from_str_radix(caps.trim(), 16).unwrap() & (1 << CAP_SYS_NICE) != 0;
            assert_eq!(policy(), if sys_nice { libc::SCHED_FIFO } else { libc::SCHED_OTHER });
            assert_eq!(std::thread::spawn(policy).join().unwrap(), libc::SCHED_OTHER, "a thread it starts is normal");
            relaxed();
            assert_eq!(policy(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_expected_writing_time_decays_after_a_slow_write() {
        let mut pacer = ReplyPacer::default();
        pacer.wrote(Duration::from_millis(800));
        pacer.wrote(Duration::from_millis(10));
        assert_eq!(pacer.expected, Duration::from_millis(600));
        for _ in 0..20 {
            pacer.wrote(Duration::from_millis(10));
        }
        assert_eq!(pacer.expected, Duration::from_millis(10));
    }
}
