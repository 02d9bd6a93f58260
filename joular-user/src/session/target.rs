//! What is being profiled: existing PIDs, every process, or a command we start.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{ForkResult, Pid};

use anyhow::{bail, Context as _};

pub enum Target {
    Pids(Vec<u32>),
    All,
    Command(GatedChild),
}

impl Target {
    /// TGIDs to put in the kernel's filter (empty in host mode).
    pub fn pids(&self) -> Vec<u32> {
        match self {
            Target::Pids(p) => p.clone(),
            Target::All => Vec::new(),
            Target::Command(c) => vec![c.pid()],
        }
    }

    /// True once every targeted process is gone (never in host mode).
    pub fn ended(&mut self, proc_root: &Path) -> bool {
        match self {
            Target::Pids(p) => p.iter().all(|&pid| !process_alive(proc_root, pid)),
            Target::All => false,
            Target::Command(c) => c.try_wait().is_some(),
        }
    }
}

/// A zombie (exited, not yet reaped by its parent) still has a /proc entry but runs nothing.
fn process_alive(proc_root: &Path, pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(proc_root.join(format!("{pid}/stat"))) else {
        return false;
    };
    let state = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next());
    !matches!(state, Some("Z" | "X"))
}

/// Checks that every PID exists before anything is loaded.
pub fn check_pids(pids: &[u32], proc_root: &Path) -> anyhow::Result<()> {
    for pid in pids {
        if !proc_root.join(pid.to_string()).join("stat").exists() {
            bail!("PID {pid} not found: no such process (check `ps -p {pid}`; inside a container, use the host's PID)");
        }
    }
    Ok(())
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
        let c_argv: Vec<CString> =
            argv.iter().map(|a| CString::new(a.as_bytes())).collect::<Result<_, _>>().context("NUL byte in the command")?;
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
                eprintln!("joular-ebpf: cannot run `{program}`: {err} (is it installed and on PATH?)");
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

    /// Waits for the child to end and returns its exit code.
    pub fn wait(&mut self) -> anyhow::Result<i32> {
        self.release();
        while self.status.is_none() {
            self.status = match waitpid(self.pid, None)? {
                WaitStatus::Exited(_, code) => Some(code),
                WaitStatus::Signaled(_, sig, _) => Some(128 + sig as i32),
                _ => None,
            };
        }
        Ok(self.status.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_stat(root: &Path, pid: u32, state: &str) {
        std::fs::create_dir_all(root.join(pid.to_string())).unwrap();
        std::fs::write(root.join(format!("{pid}/stat")), format!("{pid} (java (x)) {state} 1 2 3\n")).unwrap();
    }

    #[test]
    fn zombies_and_missing_processes_have_ended() {
        let dir = tempfile::tempdir().unwrap();
        write_stat(dir.path(), 10, "R");
        write_stat(dir.path(), 11, "Z");
        assert!(process_alive(dir.path(), 10));
        assert!(!process_alive(dir.path(), 11));
        assert!(!process_alive(dir.path(), 12));
        assert!(!Target::Pids(vec![10, 11]).ended(dir.path()));
        assert!(Target::Pids(vec![11, 12]).ended(dir.path()));
        assert!(check_pids(&[12], dir.path()).unwrap_err().to_string().contains("PID 12 not found"));
    }

    #[test]
    fn record_gates_the_child_and_returns_its_exit_code() {
        let mut c = GatedChild::spawn(&["sh".into(), "-c".into(), "exit 3".into()]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(c.try_wait(), None, "the child ran before release");
        assert_eq!(c.wait().unwrap(), 3);
        let mut c = GatedChild::spawn(&["/nonexistent/cmd".into()]).unwrap();
        assert_eq!(c.wait().unwrap(), 127);
        // Dropping the gate unreleased (the profiler failed to start) ends the child
        // without running the command.
        let mut c = GatedChild::spawn(&["sh".into(), "-c".into(), "exit 0".into()]).unwrap();
        c.gate = None;
        assert_eq!(c.wait().unwrap(), 126);
    }
}
