//! Host mode: each process's exe, cgroup and container id, read once per process (labels
//! of exited processes come from the cache; their /proc entry is gone).

use std::collections::HashMap;

use joular_user::collect::ThreadExit;
use joular_user::fleet::{ProcFs, ProcessLabels, ProcessTable};
use joular_user::model::CycleReport;

pub struct Labeler {
    procs: ProcFs,
    cache: HashMap<u32, Option<ProcessLabels>>,
}

impl Labeler {
    pub fn new(procs: ProcFs) -> Self {
        Self { procs, cache: HashMap::new() }
    }

    pub fn fill(&mut self, report: &mut CycleReport, exits: &[ThreadExit]) {
        for p in &mut report.processes {
            let labels = self.cache.entry(p.pid).or_insert_with(|| self.procs.labels(p.pid));
            if let Some(l) = labels {
                p.exe.clone_from(&l.exe);
                p.cgroup.clone_from(&l.cgroup);
                p.container_id.clone_from(&l.container_id);
                // The leader's comm (what ps shows), not whichever thread ran this cycle: a JVM's
                // main thread mostly waits, and its process must not be named after a worker.
                if !l.comm.is_empty() {
                    p.comm.clone_from(&l.comm);
                }
            }
        }
        for e in exits.iter().filter(|e| e.process_ended) {
            self.cache.remove(&e.pid);
        }
    }
}
