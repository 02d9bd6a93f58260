//! Serve mode frees what it holds for processes that have ended, so a daemon's memory follows
//! the live processes, not every process it ever saw. A process ends by its exit record, or, when
//! that was lost (exits map full, counted as a drop), by the one the collector makes up when its
//! PID names another process or none (its periodic /proc sweep of (PID, start time) identities,
//! `collect/incarnations.rs`): a reused PID ends the old process here too.

use std::collections::HashSet;

use joular_user::collect::ThreadExit;

/// Processes and threads that ended, `(pid, tid)` for threads.
#[derive(Debug, Default)]
pub struct Ended {
    pub pids: HashSet<u32>,
    pub threads: HashSet<(u32, u32)>,
}

/// What to forget after a cycle: processes whose exit was recorded (or made up), threads whose
/// exit was recorded.
pub fn ended(exits: &[ThreadExit]) -> Ended {
    Ended {
        pids: exits.iter().filter(|e| e.process_ended).map(|e| e.pid).collect(),
        threads: exits.iter().map(|e| (e.pid, e.tid)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(pid: u32, tid: u32, process_ended: bool) -> ThreadExit {
        ThreadExit { pid, tid, comm: String::new(), process_ended }
    }

    #[test]
    fn ended_processes_come_from_exits_and_threads_from_every_exit() {
        // A thread exit is not a process exit.
        let e = ended(&[exit(5, 6, false), exit(7, 7, true)]);
        assert_eq!(e.pids, HashSet::from([7]));
        assert_eq!(e.threads, HashSet::from([(5, 6), (7, 7)]));
    }
}
