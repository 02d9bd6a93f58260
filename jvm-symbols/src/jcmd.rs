//! Fallback when the attach client fails: the target JVM's own `jcmd`, found next to
//! its `java` (`/proc/<pid>/exe`), run as the JVM's user, with a deadline.

use std::fs;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::discovery::JvmInfo;
use crate::error::{Error, Result};

/// `jcmd` beside the JVM's launcher, as a path the profiler can execute.
pub fn find_jcmd(jvm: &JvmInfo) -> Result<PathBuf> {
    let exe_link = jvm.proc_dir.join("exe");
    let exe = fs::read_link(&exe_link).map_err(|e| Error::io(&exe_link, e))?;
    let bin_dir = exe.parent().unwrap_or(&exe).to_path_buf();
    // In a container the JVM's path only exists under its root.
    let jcmd = if jvm.in_container {
        jvm.root().join(bin_dir.strip_prefix("/").unwrap_or(&bin_dir)).join("jcmd")
    } else {
        bin_dir.join("jcmd")
    };
    if jcmd.is_file() {
        Ok(jcmd)
    } else {
        Err(Error::NoJcmd { pid: jvm.pid, path: jcmd })
    }
}

/// Runs `jcmd <pid> <command>` and returns its standard output.
pub fn run_jcmd(jvm: &JvmInfo, command: &str, timeout: Duration) -> Result<String> {
    let path = find_jcmd(jvm)?;
    let mut child = Command::new(&path)
        .arg(jvm.pid.to_string())
        .arg(command)
        // The JDK's attach code refuses a socket owned by another user than itself.
        .uid(jvm.uid)
        .gid(jvm.gid)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(&path, e))?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| Error::io(&path, e))? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Timeout {
                pid: jvm.pid,
                command: format!("{} {command}", path.display()),
                timeout_ms: timeout.as_millis() as u64,
            });
        }
        thread::sleep(Duration::from_millis(20));
    };
    let read_all = |pipe: Option<&mut dyn Read>| {
        let mut text = String::new();
        if let Some(pipe) = pipe {
            let _ = pipe.take(1 << 20).read_to_string(&mut text);
        }
        text
    };
    let stdout = read_all(child.stdout.as_mut().map(|p| p as &mut dyn Read));
    let stderr = read_all(child.stderr.as_mut().map(|p| p as &mut dyn Read));
    if !status.success() {
        return Err(Error::JcmdFailed {
            pid: jvm.pid,
            path,
            status: status.to_string(),
            stderr: format!("{}{}", stderr.trim(), stdout.trim()),
        });
    }
    Ok(stdout)
}
