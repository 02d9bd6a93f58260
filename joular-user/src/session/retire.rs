//! Serve mode frees what it holds for processes that have ended, so a daemon's memory follows
//! the live processes, not every process it ever saw. Exit records name most of them; a sweep of
//! /proc every minute catches those whose record was lost (exits map full, counted as a drop).

use std::collections::HashSet;
use std::path::PathBuf;

use joular_user::collect::ThreadExit;

/// Cycles between two /proc sweeps.
const SWEEP_EVERY_CYCLES: u64 = 60;

/// Processes and threads that ended, `(pid, tid)` for threads.
#[derive(Debug, Default)]
pub struct Ended {
    pub pids: HashSet<u32>,
    pub threads: HashSet<(u32, u32)>,
}

pub struct Retirement {
    proc_root: PathBuf,
    cycles: u64,
}

impl Retirement {
    pub fn new(proc_root: PathBuf) -> Self {
        Self { proc_root, cycles: 0 }
    }

    /// What to forget after this cycle: processes whose exit was recorded and, on sweep cycles,
    /// any `held` pid that /proc no longer has; threads whose exit was recorded.
    pub fn ended(&mut self, exits: &[ThreadExit], held: impl Iterator<Item = u32>) -> Ended {
        let mut pids: HashSet<u32> = exits.iter().filter(|e| e.process_ended).map(|e| e.pid).collect();
        self.cycles += 1;
        if self.cycles.is_multiple_of(SWEEP_EVERY_CYCLES) {
            pids.extend(held.filter(|pid| !self.proc_root.join(pid.to_string()).exists()));
        }
        Ended { pids, threads: exits.iter().map(|e| (e.pid, e.tid)).collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(pid: u32, tid: u32, process_ended: bool) -> ThreadExit {
        ThreadExit { pid, tid, comm: String::new(), process_ended }
    }

    #[test]
    fn ended_processes_come_from_exits_and_the_periodic_proc_sweep() {
        let proc = tempfile::tempdir().unwrap();
        std::fs::create_dir(proc.path().join("10")).unwrap();
        let mut r = Retirement::new(proc.path().to_owned());
        let exits = [exit(5, 6, false), exit(7, 7, true)];
        // A thread exit is not a process exit; pid 20 is gone from /proc but no sweep is due.
        let ended = r.ended(&exits, [10, 20].into_iter());
        assert_eq!(ended.pids, HashSet::from([7]));
        assert_eq!(ended.threads, HashSet::from([(5, 6), (7, 7)]));
        for _ in 1..SWEEP_EVERY_CYCLES - 1 {
            assert!(r.ended(&[], [10, 20].into_iter()).pids.is_empty());
        }
        assert_eq!(r.ended(&[], [10, 20].into_iter()).pids, HashSet::from([20]));
    }
}
