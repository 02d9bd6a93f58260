//! Serve mode frees what it holds for processes that have ended, so a daemon's memory follows
//! the live processes, not every process it ever saw. Exit records name most of them; a sweep of
//! /proc every minute catches those whose record was lost (exits map full, counted as a drop).

use std::collections::HashSet;
use std::path::PathBuf;

use joular_user::collect::ThreadExit;

/// Cycles between two /proc sweeps.
const SWEEP_EVERY_CYCLES: u64 = 60;

pub struct Retirement {
    proc_root: PathBuf,
    cycles: u64,
}

impl Retirement {
    pub fn new(proc_root: PathBuf) -> Self {
        Self { proc_root, cycles: 0 }
    }

    /// The pids to forget after this cycle: processes whose exit was recorded, and on sweep
    /// cycles any `held` pid that /proc no longer has.
    pub fn ended(&mut self, exits: &[ThreadExit], held: impl Iterator<Item = u32>) -> HashSet<u32> {
        let mut pids: HashSet<u32> = exits.iter().filter(|e| e.process_ended).map(|e| e.pid).collect();
        self.cycles += 1;
        if self.cycles % SWEEP_EVERY_CYCLES == 0 {
            pids.extend(held.filter(|pid| !self.proc_root.join(pid.to_string()).exists()));
        }
        pids
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
        assert_eq!(r.ended(&exits, [10, 20].into_iter()), HashSet::from([7]));
        for _ in 1..SWEEP_EVERY_CYCLES - 1 {
            assert!(r.ended(&[], [10, 20].into_iter()).is_empty());
        }
        assert_eq!(r.ended(&[], [10, 20].into_iter()), HashSet::from([20]));
    }
}
