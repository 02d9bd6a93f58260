//! Snapshots of /proc under a configurable root, and the diff of two into one window's
//! `CpuTime` and `ThreadCpuTime` rows in ns.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::model::{CpuTime, ThreadCpuTime};

use super::parse::{parse_proc_stat, parse_task_stat, CpuJiffies, TaskStat};
use super::ProcStatError;

/// CPU and thread jiffies at one instant. Read both together each cycle: jiffies tick per
/// CPU at different moments, so counters read apart do not describe the same window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    cpus: BTreeMap<u32, CpuJiffies>,
    /// By (pid, tid).
    tasks: HashMap<(u32, u32), TaskStat>,
}

/// One window from the procfs path, in the pipeline's units.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcCycle {
    pub cpus: Vec<CpuTime>,
    /// One row per thread that ran, on the CPU it last ran on (see the module docs).
    pub threads: Vec<ThreadCpuTime>,
    /// Thread names by tid, for reports on this path.
    pub comms: HashMap<u32, String>,
}

#[derive(Debug, Clone)]
pub struct ProcStatReader {
    proc_root: PathBuf,
    ns_per_jiffy: u64,
}

impl ProcStatReader {
    /// Uses the kernel's USER_HZ (`sysconf(_SC_CLK_TCK)`, 100 almost everywhere).
    pub fn new(proc_root: &Path) -> Result<Self, ProcStatError> {
        // SAFETY: sysconf has no preconditions.
        let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        Self::with_clock_ticks(proc_root, u64::try_from(ticks_per_s).unwrap_or(100).max(1))
    }

    pub fn with_clock_ticks(proc_root: &Path, ticks_per_s: u64) -> Result<Self, ProcStatError> {
        if !proc_root.exists() {
            return Err(ProcStatError::MissingRoot(proc_root.to_owned()));
        }
        Ok(Self { proc_root: proc_root.to_owned(), ns_per_jiffy: 1_000_000_000 / ticks_per_s.max(1) })
    }

    /// Reads /proc/stat and the tasks of `pids` (every process when `None`). Processes and
    /// threads that exit while being read are skipped: they race with any reader.
    pub fn snapshot(&self, pids: Option<&[u32]>) -> Result<Snapshot, ProcStatError> {
        let stat_path = self.proc_root.join("stat");
        let text = read(&stat_path)?;
        let cpus: BTreeMap<u32, CpuJiffies> = parse_proc_stat(&text).into_iter().map(|c| (c.cpu, c)).collect();
        if cpus.is_empty() {
            return Err(ProcStatError::NoCpuLines { path: stat_path });
        }
        let pids = match pids {
            Some(pids) => pids.to_vec(),
            None => numeric_entries(&self.proc_root)?,
        };
        let mut tasks = HashMap::new();
        for pid in pids {
            let task_dir = self.proc_root.join(pid.to_string()).join("task");
            let Ok(tids) = numeric_entries(&task_dir) else { continue };
            for tid in tids {
                let Ok(line) = fs::read_to_string(task_dir.join(tid.to_string()).join("stat")) else { continue };
                if let Some(stat) = parse_task_stat(&line) {
                    tasks.insert((pid, tid), stat);
                }
            }
        }
        Ok(Snapshot { cpus, tasks })
    }

    /// The window from `prev` to `now`. A thread born inside it counts all its jiffies; one
    /// that exited inside it is missing (its last jiffies are lost, a limit of polling).
    pub fn diff(&self, prev: &Snapshot, now: &Snapshot) -> ProcCycle {
        let ns = |jiffies: u64| jiffies * self.ns_per_jiffy;
        let cpus = now
            .cpus
            .values()
            .map(|c| {
                let before = prev.cpus.get(&c.cpu).copied().unwrap_or_default();
                CpuTime {
                    cpu: c.cpu,
                    busy_ns: ns(c.busy.saturating_sub(before.busy)),
                    idle_ns: ns(c.idle.saturating_sub(before.idle)),
                }
            })
            .collect();
        let mut threads = Vec::new();
        let mut comms = HashMap::new();
        for (&(pid, tid), stat) in &now.tasks {
            let before = prev.tasks.get(&(pid, tid)).map_or(0, |s| s.cpu_jiffies);
            let jiffies = stat.cpu_jiffies.saturating_sub(before);
            if jiffies > 0 {
                threads.push(ThreadCpuTime { pid, tid, cpu: stat.processor, on_cpu_ns: ns(jiffies) });
                comms.insert(tid, stat.comm.clone());
            }
        }
        threads.sort_unstable_by_key(|t| (t.pid, t.tid));
        ProcCycle { cpus, threads, comms }
    }
}

fn read(path: &Path) -> Result<String, ProcStatError> {
    fs::read_to_string(path).map_err(|source| ProcStatError::Read { path: path.to_owned(), source })
}

/// Numeric directory names (pids or tids).
fn numeric_entries(dir: &Path) -> Result<Vec<u32>, ProcStatError> {
    let entries =
        fs::read_dir(dir).map_err(|source: io::Error| ProcStatError::Read { path: dir.to_owned(), source })?;
    Ok(entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_stat(proc: &Path, cpus: &[(u64, u64)]) {
        let mut text = String::from("cpu  0 0 0 0 0 0 0 0 0 0\n");
        for (i, (busy, idle)) in cpus.iter().enumerate() {
            text.push_str(&format!("cpu{i} {busy} 0 0 {idle} 0 0 0 0 0 0\n"));
        }
        fs::create_dir_all(proc).unwrap();
        fs::write(proc.join("stat"), text).unwrap();
    }

    fn write_task(proc: &Path, pid: u32, tid: u32, comm: &str, utime: u64, stime: u64, processor: u32) {
        let dir = proc.join(format!("{pid}/task/{tid}"));
        fs::create_dir_all(&dir).unwrap();
        let mut fields: Vec<String> = (3..=52).map(|_| "0".to_owned()).collect();
        fields[0] = "R".into();
        fields[11] = utime.to_string();
        fields[12] = stime.to_string();
        fields[36] = processor.to_string();
        fs::write(dir.join("stat"), format!("{tid} ({comm}) {}\n", fields.join(" "))).unwrap();
    }

    #[test]
    fn diff_gives_ns_per_cpu_and_per_thread() {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path();
        let reader = ProcStatReader::with_clock_ticks(proc, 100).unwrap();
        write_stat(proc, &[(100, 1_000), (50, 2_000)]);
        write_task(proc, 7, 7, "java", 10, 5, 0);
        write_task(proc, 7, 8, "GC Thread#0", 0, 0, 1);
        write_task(proc, 9, 9, "other", 100, 0, 1);
        let before = reader.snapshot(Some(&[7])).unwrap();
        write_stat(proc, &[(160, 1_040), (80, 2_070)]);
        write_task(proc, 7, 7, "java", 40, 15, 1);
        write_task(proc, 7, 8, "GC Thread#0", 0, 0, 1);
        write_task(proc, 7, 11, "new thread", 3, 0, 0);
        let after = reader.snapshot(Some(&[7])).unwrap();
        let cycle = reader.diff(&before, &after);
        let ms = 1_000_000;
        assert_eq!(
            cycle.cpus,
            vec![
                CpuTime { cpu: 0, busy_ns: 600 * ms, idle_ns: 400 * ms },
                CpuTime { cpu: 1, busy_ns: 300 * ms, idle_ns: 700 * ms },
            ]
        );
        // Thread 7 ran 40 jiffies and is charged to the CPU it last ran on; 8 did not run;
        // 11 was born in the window; pid 9 was not asked for.
        assert_eq!(
            cycle.threads,
            vec![
                ThreadCpuTime { pid: 7, tid: 7, cpu: 1, on_cpu_ns: 400 * ms },
                ThreadCpuTime { pid: 7, tid: 11, cpu: 0, on_cpu_ns: 30 * ms },
            ]
        );
        assert_eq!(cycle.comms[&11], "new thread");
        let all = reader.snapshot(None).unwrap();
        assert_eq!(reader.diff(&before, &all).threads.iter().filter(|t| t.pid == 9).count(), 1);
    }

    #[test]
    fn missing_root_and_bad_stat_are_clear_errors() {
        let err = ProcStatReader::new(Path::new("/nonexistent/proc")).unwrap_err();
        assert!(err.to_string().contains("--proc-root"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("stat"), "intr 1\n").unwrap();
        let err = ProcStatReader::new(dir.path()).unwrap().snapshot(Some(&[])).unwrap_err();
        assert!(matches!(err, ProcStatError::NoCpuLines { .. }), "{err}");
    }

    #[test]
    fn reads_this_process_from_the_real_proc() {
        let reader = ProcStatReader::new(Path::new("/proc")).unwrap();
        let pid = std::process::id();
        let snap = reader.snapshot(Some(&[pid])).unwrap();
        assert!(!snap.cpus.is_empty());
        assert!(snap.tasks.keys().any(|&(p, _)| p == pid));
    }
}
