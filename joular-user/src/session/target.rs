//! What is being profiled: existing PIDs, every process, or a command we start.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use joular_user::collect::{start_ticks, ThreadExit};
use joular_user::model::CycleReport;
use nix::sys::signal::Signal;

use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{ForkResult, Pid};

use anyhow::Context as _;

use crate::cli::errors::UsageError;

pub enum Target {
    /// `starts[i]`: the start tick of the process `pids[i]` named when it was resolved (0:
    /// unknown): the run follows that process, not its number.
    Pids {
        pids: Vec<u32>,
        starts: Vec<u32>,
        follow_children: bool,
    },
    All,
    Command(GatedChild),
}

impl Target {
    /// TGIDs to put in the kernel's filter (empty in host mode).
    pub fn pids(&self) -> Vec<u32> {
        match self {
            Target::Pids { pids, .. } => pids.clone(),
            Target::All => Vec::new(),
            Target::Command(c) => vec![c.pid()],
        }
    }

    /// Whether the processes the targets start are profiled too (always for `record`).
    pub fn follows_children(&self) -> bool {
        match self {
            Target::Pids { follow_children, .. } => *follow_children,
            Target::All => false,
            Target::Command(_) => true,
        }
    }

    /// True once every targeted process is gone (never in host mode): exited, or its PID
    /// now names another process.
    pub fn ended(&mut self, proc_root: &Path) -> bool {
        match self {
            Target::Pids { pids, starts, .. } => {
                pids.iter().zip(starts.iter()).all(|(&pid, &start)| !process_alive(proc_root, pid, start))
            }
            Target::All => false,
            Target::Command(c) => c.try_wait().is_some(),
        }
    }
}

/// A zombie (exited, not yet reaped by its parent) still has a /proc entry but runs nothing;
/// a process with another start tick than `start` (unless 0) is another process with the PID.
fn process_alive(proc_root: &Path, pid: u32, start: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(proc_root.join(format!("{pid}/stat"))) else {
        return false;
    };
    let state = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next());
    let same = start == 0 || joular_user::collect::parse_start_ticks(&stat) == Some(start);
    same && !matches!(state, Some("Z" | "X"))
}

/// `PF_KTHREAD` in the flags field of /proc/<pid>/stat.
const PF_KTHREAD: u64 = 0x0020_0000;

/// The processes to profile for `--pid`, and what the user should know about how they were found.
#[derive(Debug, PartialEq, Eq)]
pub struct ResolvedPids {
    pub pids: Vec<u32>,
    /// Each process's start tick (0: unreadable), read with its other facts.
    pub starts: Vec<u32>,
    pub notes: Vec<String>,
}

/// Checks every `--pid` before anything is loaded: it must exist and not be a kernel thread
/// (no user stack, no energy of its own to split); a thread ID stands for its process.
pub fn resolve_pids(pids: &[u32], proc_root: &Path) -> Result<ResolvedPids, UsageError> {
    let mut resolved = ResolvedPids { pids: Vec::new(), starts: Vec::new(), notes: Vec::new() };
    for &pid in pids {
        let dir = proc_root.join(pid.to_string());
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            return Err(UsageError(format!(
                "--pid {pid}: PID {pid} not found: no such process (check `ps -p {pid}`; inside a container, use the host's PID)"
            )));
        };
        if stat_flags(&stat).is_some_and(|f| f & PF_KTHREAD != 0) {
            return Err(UsageError(format!(
                "--pid {pid}: PID {pid} is a kernel thread ({}): it runs no user code to profile; give the PID of a user process",
                stat_comm(&stat)
            )));
        }
        let tgid = std::fs::read_to_string(dir.join("status")).ok().and_then(|s| status_tgid(&s)).unwrap_or(pid);
        if tgid != pid {
            resolved
                .notes
                .push(format!("--pid {pid} is a thread of process {tgid}: profiling process {tgid} (all its threads)"));
        }
        if !resolved.pids.contains(&tgid) {
            resolved.pids.push(tgid);
            resolved.starts.push(
                if tgid == pid { joular_user::collect::parse_start_ticks(&stat) } else { start_ticks(proc_root, tgid) }
                    .unwrap_or(0),
            );
        }
    }
    Ok(resolved)
}

/// The command name between the parentheses of a stat line.
fn stat_comm(stat: &str) -> &str {
    match (stat.find('('), stat.rfind(')')) {
        (Some(a), Some(b)) if a < b => &stat[a + 1..b],
        _ => "",
    }
}

/// Field 9 (`flags`) of a stat line: the 7th after the command name.
fn stat_flags(stat: &str) -> Option<u64> {
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(6)?.parse().ok()
}

fn status_tgid(status: &str) -> Option<u32> {
    status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

/// Names each process of a cycle after its leader (/proc/<pid>/comm, what `ps` shows), not after
/// whichever thread ran: a JVM's main thread mostly waits, and "G1 Service" is no process name.
/// Read again each cycle (an `exec` renames the process); the last name read outlives the process,
/// never into another one with its PID.
#[derive(Default)]
pub struct LeaderNames {
    last: HashMap<u32, String>,
}

impl LeaderNames {
    /// `starts`: the start tick of the process each PID's rows are of (`RawCycle::starts`): a
    /// /proc entry of another start is another process (the PID was reused) and names nothing.
    pub fn fill(
        &mut self,
        report: &mut CycleReport,
        proc_root: &Path,
        starts: &HashMap<u32, u32>,
        exits: &[ThreadExit],
    ) {
        for p in &mut report.processes {
            let start = starts.get(&p.pid).copied().unwrap_or(0);
            let same = || start == 0 || start_ticks(proc_root, p.pid) == Some(start);
            if same() {
                // Checked again after the read: the PID may change hands between the two.
                if let Ok(comm) =
                    std::fs::read_to_string(proc_root.join(format!("{}/comm", p.pid))).map(|c| c.trim_end().to_string())
                {
                    if same() {
                        self.last.insert(p.pid, comm);
                    }
                }
            }
            if let Some(comm) = self.last.get(&p.pid).filter(|c| !c.is_empty()) {
                p.comm.clone_from(comm);
            }
        }
        for e in exits.iter().filter(|e| e.process_ended) {
            self.last.remove(&e.pid);
        }
    }
}

/// A child started but held before `exec` until `release`, so its PID is in the kernel's
/// filter before it runs a single instruction of the command.
///
/// Forked by hand: `std::process::Command::spawn` waits for the exec to happen, which a
/// child held in `pre_exec` never does. Call `spawn` before any thread exists (before the
/// tokio runtime), so the child may allocate between fork and exec.
pub struct GatedChild {
    pid: Pid,
    gate: Option<OwnedFd>,
    status: Option<i32>,
}

impl GatedChild {
    pub fn spawn(argv: &[String]) -> anyhow::Result<Self> {
        let program = argv.first().context("record needs a command after `--`")?;
        let c_argv: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .context("NUL byte in the command")?;
        let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        // SAFETY: the process is single-threaded here (see the type's docs).
        match unsafe { nix::unistd::fork() }? {
            ForkResult::Child => {
                drop(write_end);
                let mut byte = [0u8; 1];
                // EOF means the profiler failed or died before releasing us: never run the
                // command unprofiled.
                if nix::unistd::read(read_end.as_raw_fd(), &mut byte) != Ok(1) {
                    // SAFETY: leave without running the parent's atexit handlers.
                    unsafe { libc::_exit(126) }
                }
                let err = nix::unistd::execvp(&c_argv[0], &c_argv).unwrap_err();
                errln!("joular-ebpf: cannot run `{program}`: {err} (is it installed and on PATH?)");
                // SAFETY: leave without running the parent's atexit handlers or destructors.
                unsafe { libc::_exit(127) }
            }
            ForkResult::Parent { child } => {
                drop(read_end);
                Ok(Self { pid: child, gate: Some(write_end), status: None })
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid.as_raw() as u32
    }

    /// Sends `signal` to the command (not to the processes it started).
    pub fn signal(&self, signal: Signal) {
        let _ = nix::sys::signal::kill(self.pid, signal);
    }

    /// Lets the child exec the command.
    pub fn release(&mut self) {
        if let Some(gate) = self.gate.take() {
            let _ = nix::unistd::write(&gate, &[1u8]);
        }
    }

    /// The child's exit code once it has ended (shell convention: 128 + signal if killed).
    pub fn try_wait(&mut self) -> Option<i32> {
        if self.status.is_none() {
            self.status = match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(_, code)) => Some(code),
                Ok(WaitStatus::Signaled(_, sig, _)) => Some(128 + sig as i32),
                _ => None,
            };
        }
        self.status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl GatedChild {
        fn wait(&mut self) -> Option<i32> {
            self.release();
            for _ in 0..500 {
                if let Some(code) = self.try_wait() {
                    return Some(code);
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            None
        }
    }

    fn write_stat(root: &Path, pid: u32, state: &str) {
        std::fs::create_dir_all(root.join(pid.to_string())).unwrap();
        std::fs::write(root.join(format!("{pid}/stat")), format!("{pid} (java (x)) {state} 1 2 3\n")).unwrap();
    }

    #[test]
    fn zombies_and_missing_processes_have_ended() {
        let dir = tempfile::tempdir().unwrap();
        write_stat(dir.path(), 10, "R");
        write_stat(dir.path(), 11, "Z");
        assert!(process_alive(dir.path(), 10, 0));
        assert!(!process_alive(dir.path(), 11, 0));
        assert!(!process_alive(dir.path(), 12, 0));
        let pids = |pids: Vec<u32>| Target::Pids { starts: vec![0; pids.len()], pids, follow_children: false };
        assert!(!pids(vec![10, 11]).ended(dir.path()));
        assert!(pids(vec![11, 12]).ended(dir.path()));
        let err = resolve_pids(&[12], dir.path()).unwrap_err().to_string();
        assert!(err.starts_with("--pid 12: PID 12 not found"), "{err}");
    }

    #[test]
    fn pids_resolve_to_user_processes_and_threads_to_their_process() {
        let dir = tempfile::tempdir().unwrap();
        let proc = |pid: u32, comm: &str, flags: u64, tgid: u32| {
            std::fs::create_dir_all(dir.path().join(pid.to_string())).unwrap();
            std::fs::write(
                dir.path().join(format!("{pid}/stat")),
                format!("{pid} ({comm}) S 0 0 0 0 -1 {flags} 0 0\n"),
            )
            .unwrap();
            std::fs::write(
                dir.path().join(format!("{pid}/status")),
                format!("Name:\t{comm}\nTgid:\t{tgid}\nPid:\t{pid}\n"),
            )
            .unwrap();
        };
        proc(2, "kthreadd", 0x0020_8040, 2);
        proc(100, "java", 0x0040_0100, 100);
        proc(105, "G1 Service", 0x0040_0040, 100);
        let err = resolve_pids(&[100, 2], dir.path()).unwrap_err().to_string();
        assert!(err.starts_with("--pid 2: PID 2 is a kernel thread (kthreadd)"), "{err}");
        let r = resolve_pids(&[105, 100], dir.path()).unwrap();
        assert_eq!(r.pids, vec![100]);
        assert_eq!(r.starts, vec![0], "this fake stat has no start field");
        assert_eq!(
            r.notes,
            vec!["--pid 105 is a thread of process 100: profiling process 100 (all its threads)".to_string()]
        );
    }

    #[test]
    fn processes_are_named_after_their_leader_even_after_they_exit() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("100")).unwrap();
        std::fs::write(dir.path().join("100/comm"), "java\n").unwrap();
        let mut report = CycleReport::default();
        report.processes.push(joular_user::model::ProcessReport {
            pid: 100,
            comm: "G1 Service".into(),
            ..Default::default()
        });
        let mut names = LeaderNames::default();
        let none = HashMap::new();
        names.fill(&mut report, dir.path(), &none, &[]);
        assert_eq!(report.processes[0].comm, "java");
        std::fs::remove_dir_all(dir.path().join("100")).unwrap();
        report.processes[0].comm = "C2 CompilerThre".into();
        names.fill(&mut report, dir.path(), &none, &[]);
        assert_eq!(report.processes[0].comm, "java");
    }

    /// A stat line whose field 22 (start time) is `start`.
    fn stat_line(pid: u32, comm: &str, state: &str, start: u64) -> String {
        format!("{pid} ({comm}) {state} 1 {pid} {pid} 0 -1 4194304 0 0 0 0 5 1 0 0 20 0 1 0 {start} 1000 10\n")
    }

    #[test]
    fn a_pid_that_names_another_process_is_an_ended_target_and_lends_it_no_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("7")).unwrap();
        std::fs::write(dir.path().join("7/stat"), stat_line(7, "java", "S", 100)).unwrap();
        std::fs::write(dir.path().join("7/comm"), "java\n").unwrap();
        let r = resolve_pids(&[7], dir.path()).unwrap();
        assert_eq!((r.pids.clone(), r.starts.clone()), (vec![7], vec![100]));
        let mut target = Target::Pids { pids: r.pids, starts: r.starts, follow_children: false };
        assert!(!target.ended(dir.path()));
        let mut report = CycleReport::default();
        report.processes.push(joular_user::model::ProcessReport { pid: 7, comm: "main".into(), ..Default::default() });
        let mut names = LeaderNames::default();
        names.fill(&mut report, dir.path(), &HashMap::from([(7, 100)]), &[]);
        assert_eq!(report.processes[0].comm, "java");
        // The JVM exits and `nobody`'s burner gets PID 7: the target has ended.
        std::fs::write(dir.path().join("7/stat"), stat_line(7, "burn", "R", 900)).unwrap();
        std::fs::write(dir.path().join("7/comm"), "burn\n").unwrap();
        assert!(target.ended(dir.path()), "the run follows the process, not its number");
        names.fill(&mut report, dir.path(), &HashMap::from([(7, 100)]), &[]);
        assert_eq!(report.processes[0].comm, "java", "the JVM's last cycle is not renamed after the burner");
        let exits = [ThreadExit { pid: 7, tid: 7, comm: "java".into(), process_ended: true }];
        names.fill(&mut report, dir.path(), &HashMap::from([(7, 100)]), &exits);
        report.processes[0].comm = "burn".into();
        names.fill(&mut report, dir.path(), &HashMap::from([(7, 900)]), &[]);
        assert_eq!(report.processes[0].comm, "burn");
    }

    #[test]
    fn record_gates_the_child_and_returns_its_exit_code() {
        let mut c = GatedChild::spawn(&["sh".into(), "-c".into(), "exit 3".into()]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(c.try_wait(), None, "the child ran before release");
        assert_eq!(c.wait(), Some(3));
        let mut c = GatedChild::spawn(&["/nonexistent/cmd".into()]).unwrap();
        assert_eq!(c.wait(), Some(127));
        // Dropping the gate unreleased (the profiler failed to start) ends the child
        // without running the command.
        let mut c = GatedChild::spawn(&["sh".into(), "-c".into(), "exit 0".into()]).unwrap();
        c.gate = None;
        assert_eq!(c.wait(), Some(126));
    }
}
