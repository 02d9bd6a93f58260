//! A cgroup of its own for a benchmark's workload processes, so that the profiler next to them
//! gets the CPU share a deployed daemon gets next to its workload (each in its own pod or systemd
//! unit) instead of 1/N of a group it shares with N busy threads. Uses the `cpu` controller of
//! cgroup v2, or of v1 on hybrid hosts.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};

pub struct WorkloadCgroup {
    dir: PathBuf,
    handle: CgroupHandle,
}

/// What a process needs to join the group; cheap to clone into threads.
#[derive(Clone)]
pub struct CgroupHandle {
    procs: Arc<CString>,
}

impl WorkloadCgroup {
    pub fn create(name: &str) -> anyhow::Result<Self> {
        let base = cpu_controller_root()?;
        let dir = base.join(format!("xtask-{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).with_context(|| format!("creating cgroup {}", dir.display()))?;
        let procs = CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())?;
        Ok(WorkloadCgroup { dir, handle: CgroupHandle { procs: Arc::new(procs) } })
    }

    pub fn handle(&self) -> CgroupHandle {
        self.handle.clone()
    }
}

fn cpu_controller_root() -> anyhow::Result<PathBuf> {
    let v2 = Path::new("/sys/fs/cgroup");
    if let Ok(controllers) = std::fs::read_to_string(v2.join("cgroup.controllers")) {
        if controllers.split_whitespace().any(|c| c == "cpu") {
            // Children get the controller only when the parent hands it down.
            let _ = std::fs::write(v2.join("cgroup.subtree_control"), "+cpu");
            return Ok(v2.to_path_buf());
        }
    }
    let v1 = v2.join("cpu");
    if v1.join("cpu.shares").exists() {
        return Ok(v1);
    }
    bail!("no cgroup cpu controller under /sys/fs/cgroup: the host benchmarks need one to give the profiler a deployed daemon's CPU share")
}

impl CgroupHandle {
    /// The command's process joins the group before it execs, so all its threads start there.
    pub fn add_on_exec(&self, cmd: &mut Command) {
        let procs = self.procs.clone();
        // SAFETY: between fork and exec only async-signal-safe calls are made (open, write, close),
        // on a path allocated before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // "0" moves the writing process.
                let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
                if written != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

impl Drop for WorkloadCgroup {
    fn drop(&mut self) {
        // A group can be removed once its last process has exited (they are reaped by now).
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("warning: cgroup {} left behind (processes still in it?)", self.dir.display());
    }
}
