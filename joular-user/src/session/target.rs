//! What is being profiled: existing PIDs, every process, or a command we start.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};

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
            Target::Pids(p) => p.iter().all(|pid| !proc_root.join(pid.to_string()).exists()),
            Target::All => false,
            Target::Command(c) => c.try_wait().is_some(),
        }
    }
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
pub struct GatedChild {
    child: Child,
    gate: Option<OwnedFd>,
    status: Option<ExitStatus>,
}

impl GatedChild {
    pub fn spawn(argv: &[String]) -> anyhow::Result<Self> {
        let (program, args) = argv.split_first().context("record needs a command after `--`")?;
        let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let read_fd = read_end.as_raw_fd();
        let write_fd = write_end.as_raw_fd();
        let mut cmd = Command::new(program);
        cmd.args(args);
        // SAFETY: only async-signal-safe calls (close, read) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::close(write_fd);
                let mut byte = 0u8;
                // EOF (the profiler died) also releases the child: it then runs unprofiled.
                libc::read(read_fd, (&mut byte as *mut u8).cast(), 1);
                Ok(())
            });
        }
        let child = cmd.spawn().with_context(|| format!("cannot start `{program}`: is it installed and on PATH?"))?;
        drop(read_end);
        Ok(Self { child, gate: Some(write_end), status: None })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets the child exec the command.
    pub fn release(&mut self) {
        if let Some(gate) = self.gate.take() {
            let _ = nix::unistd::write(&gate, &[1u8]);
        }
    }

    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Waits for the child (after the profiler stopped for another reason, e.g. Ctrl-C).
    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.release();
        if let Some(s) = self.status {
            return Ok(s);
        }
        let s = self.child.wait()?;
        self.status = Some(s);
        Ok(s)
    }
}

/// The shell convention for a child's status: its code, or 128 + the signal that killed it.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}
