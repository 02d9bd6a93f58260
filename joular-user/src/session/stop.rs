//! Stopping `record`'s command. The first Ctrl-C or SIGTERM is passed on to the command as
//! SIGTERM and profiling goes on while it shuts down; a second one, or `GRACE` after the first,
//! kills the command and every process it started (the kernel's target set) with SIGKILL. So a
//! command that ignores SIGTERM can always be stopped, and the profiler always gets to write
//! its results.

use std::time::Duration;

use joular_user::ebpf::Probe;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::signal::unix::Signal as SignalStream;
use tokio::time::Instant;

use super::target::{GatedChild, Target};

pub const GRACE: Duration = Duration::from_secs(10);
/// How long a killed command may take to be reaped (a process in uninterruptible sleep dies
/// only when it leaves it).
const REAP_AFTER_KILL: Duration = Duration::from_secs(2);
const POLL: Duration = Duration::from_millis(50);

#[derive(Default)]
pub struct Stopper {
    kill_at: Option<Instant>,
    killed: bool,
}

impl Stopper {
    /// When the grace period ends (after the first signal to `record`).
    pub fn kill_at(&self) -> Option<Instant> {
        self.kill_at.filter(|_| !self.killed)
    }

    /// A Ctrl-C or SIGTERM arrived: returns why the run stops now, or None while `record`'s
    /// command is given time to shut down.
    pub fn on_signal(&mut self, target: &mut Target, probe: &Probe, why: &'static str) -> Option<&'static str> {
        let Target::Command(child) = target else {
            return Some(why);
        };
        if child.try_wait().is_some() {
            return Some("target exited");
        }
        if self.kill_at.is_none() {
            self.terminate(child);
            errln!(
                "joular-ebpf: {why}: SIGTERM passed to the command, profiling its shutdown; it is killed after {} s or at the next Ctrl-C",
                GRACE.as_secs()
            );
            return None;
        }
        self.kill(child, probe);
        Some("killed at the second signal")
    }

    /// The grace period ended before the command did.
    pub fn on_grace_expired(&mut self, target: &mut Target, probe: &Probe) -> &'static str {
        if let Target::Command(child) = target {
            self.kill(child, probe);
        }
        "killed after the grace period"
    }

    /// Ends `record`'s command once profiling has stopped (duration reached, or killed) and
    /// returns its exit code: SIGTERM, the rest of the grace period, then SIGKILL; a signal
    /// meanwhile kills at once.
    pub async fn end_command(
        &mut self,
        child: &mut GatedChild,
        probe: &Probe,
        sigint: &mut SignalStream,
        sigterm: &mut SignalStream,
    ) -> i32 {
        if self.kill_at.is_none() && child.try_wait().is_none() {
            self.terminate(child);
            errln!(
                "joular-ebpf: SIGTERM sent to the command (PID {}); it is killed if it has not ended in {} s or at Ctrl-C",
                child.pid(),
                GRACE.as_secs()
            );
        }
        let mut reap_by = None;
        loop {
            if let Some(code) = child.try_wait() {
                return code;
            }
            if self.killed {
                let by = *reap_by.get_or_insert_with(|| Instant::now() + REAP_AFTER_KILL);
                if Instant::now() >= by {
                    errln!(
                        "joular-ebpf: warning: the command (PID {}) did not end after SIGKILL; not waiting for it",
                        child.pid()
                    );
                    return 128 + Signal::SIGKILL as i32;
                }
            } else if self.kill_at.is_some_and(|t| Instant::now() >= t) {
                self.kill(child, probe);
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = sigint.recv() => self.kill(child, probe),
                _ = sigterm.recv() => self.kill(child, probe),
            }
        }
    }

    fn terminate(&mut self, child: &GatedChild) {
        child.signal(Signal::SIGTERM);
        self.kill_at = Some(Instant::now() + GRACE);
    }

    /// SIGKILL to the command and to every process it started that still runs: killing only
    /// the command would leave, say, the JVM a shell started running on.
    fn kill(&mut self, child: &GatedChild, probe: &Probe) {
        if self.killed {
            return;
        }
        self.killed = true;
        child.signal(Signal::SIGKILL);
        for pid in probe.targets() {
            if pid != child.pid() && pid != std::process::id() {
                let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
        }
    }
}
