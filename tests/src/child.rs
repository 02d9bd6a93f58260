//! Child processes of a test: killed and reaped when the test ends, passed or failed, and
//! waited for with a bound.

use std::io::{BufRead, BufReader};
use std::ops::{Deref, DerefMut};
use std::process::Child;
use std::time::{Duration, Instant};

/// A child process killed (and reaped) when dropped, so a failing test leaves none behind.
pub struct KillOnDrop(Child);

impl KillOnDrop {
    pub fn new(child: Child) -> Self {
        Self(child)
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Kills and reaps it now (for a wrapper that cleans up after it); dropping it later does
    /// nothing more.
    pub fn kill_now(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Deref for KillOnDrop {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// Reads `child`'s stdout (piped) until a line that starts with `ready`, then keeps draining
/// it so the child never blocks on a full pipe. Panics with what it printed if it exits first.
pub fn await_ready(child: &mut Child, what: &str) {
    let mut reader = BufReader::new(child.stdout.take().expect("stdout is piped"));
    // A JVM may print other lines first (e.g. -XX:CompileCommand echoes itself).
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(
            reader.read_line(&mut line).expect("read the child's stdout") > 0,
            "{what} exited before ready: {seen:?}"
        );
        if line.starts_with("ready") {
            break;
        }
        seen.push_str(&line);
    }
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
}

/// Waits for the profiler (bounded) and returns its exit code (128 + the signal when one
/// killed it) and its peak RSS in kB (wait4).
pub fn wait_with_rusage(child: &mut Child, timeout: Duration) -> (i32, i64) {
    let start = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: zeroed rusage is a valid out-buffer; pid is our child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::wait4(child.id() as i32, &mut status, libc::WNOHANG, &mut usage) };
        if rc == child.id() as i32 {
            let code = match (libc::WIFEXITED(status), libc::WIFSIGNALED(status)) {
                (true, _) => libc::WEXITSTATUS(status),
                (_, true) => 128 + libc::WTERMSIG(status),
                _ => -1,
            };
            return (code, usage.ru_maxrss);
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            panic!("joular-ebpf did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
