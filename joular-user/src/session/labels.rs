//! Host mode: each process's exe, cgroup and container id, read once per process (labels
//! of exited processes come from the cache; their /proc entry is gone).

use std::collections::HashMap;

use joular_user::collect::ThreadExit;
use joular_user::fleet::{ProcessLabels, ProcessTable};
use joular_user::model::CycleReport;

pub struct Labeler<P> {
    procs: P,
    cache: HashMap<u32, Option<ProcessLabels>>,
}

impl<P: ProcessTable> Labeler<P> {
    pub fn new(procs: P) -> Self {
        Self { procs, cache: HashMap::new() }
    }

    /// `starts`: the start tick of the process each PID's rows are of (`RawCycle::starts`). A
    /// /proc entry that names another process (the PID was reused since) labels nothing: the
    /// kernel's names stay.
    pub fn fill(&mut self, report: &mut CycleReport, exits: &[ThreadExit], starts: &HashMap<u32, u32>) {
        for p in &mut report.processes {
            let start = starts.get(&p.pid).copied().unwrap_or(0);
            let procs = &self.procs;
            let labels = self.cache.entry(p.pid).or_insert_with(|| {
                let same = |ticks: u64| start == 0 || ticks as u32 == start;
                // Checked again after the reads: the PID may change hands between them.
                procs.labels(p.pid).filter(|l| same(l.start_ticks) && procs.start_ticks(p.pid).is_some_and(same))
            });
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

#[cfg(test)]
mod tests {
    use super::*;
    use joular_user::fleet::ProcFs;
    use joular_user::model::ProcessReport;

    fn write_proc(root: &std::path::Path, pid: u32, comm: &str, start: u64) {
        let dir = root.join(pid.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        let stat = format!("{pid} ({comm}) R 1 {pid} {pid} 0 -1 4194304 0 0 0 0 5 1 0 0 20 0 1 0 {start} 1000 10\n");
        std::fs::write(dir.join("stat"), stat).unwrap();
        std::fs::write(dir.join("cgroup"), format!("0::/{comm}.slice\n")).unwrap();
    }

    fn report(pid: u32, comm: &str) -> CycleReport {
        CycleReport {
            processes: vec![ProcessReport { pid, comm: comm.into(), ..Default::default() }],
            ..Default::default()
        }
    }

    #[test]
    fn a_reused_pid_is_labelled_only_by_its_own_process() {
        let proc = tempfile::tempdir().unwrap();
        // PID 7 now belongs to `nobody`'s burner (start 900); the rows are the JVM's (start 100).
        write_proc(proc.path(), 7, "burn", 900);
        let mut labeler = Labeler::new(ProcFs::new(proc.path()));
        let mut jvm = report(7, "java");
        let exits = [ThreadExit { pid: 7, tid: 7, comm: "java".into(), process_ended: true }];
        labeler.fill(&mut jvm, &exits, &HashMap::from([(7, 100)]));
        assert_eq!(jvm.processes[0].comm, "java", "not renamed after the impostor");
        assert_eq!(jvm.processes[0].cgroup, None);
        // The next cycle's rows are the burner's: its own labels.
        let mut burner = report(7, "burn");
        labeler.fill(&mut burner, &[], &HashMap::from([(7, 900)]));
        assert_eq!(burner.processes[0].cgroup.as_deref(), Some("/burn.slice"));
        // Unknown start ticks (no BTF): labels as before.
        let mut unknown = report(7, "");
        Labeler::new(ProcFs::new(proc.path())).fill(&mut unknown, &[], &HashMap::new());
        assert_eq!(unknown.processes[0].comm, "burn");
    }
}
