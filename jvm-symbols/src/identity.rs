//! Acting on a target's files with the target's own identity, so that the kernel, not our
//! checks alone, decides what we may open.
//!
//! The profiler runs as root (or with CAP_BPF/CAP_PERFMON/CAP_SYS_PTRACE). Whatever a JVM
//! controls (its /tmp, its cwd, its sockets, its `/proc/<pid>/root`) is opened from a
//! short-lived thread that first becomes the JVM's user: its uid, its gid as the only group,
//! and the JVM's own capabilities (none for an ordinary JVM), never more than the profiler has.
//! The change is per thread (raw syscalls: the libc wrappers would change every thread of the
//! profiler) and irreversible, and the thread ends with its job. A file that user could not
//! open, the profiler does not open either; a symlink planted to a root-only file leads nowhere.
//!
//! Why the JVM's capabilities and not none: the kernel lets a task into another's
//! `/proc/<pid>/root` only if it holds every capability the other holds (a root JVM has them
//! all), and taking exactly the target's set gives no more than the target has.

use std::io;
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

/// A user, its primary group (host ids), and its permitted capability set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    /// Bit `n` is capability `n` (`CapPrm:` of `/proc/<pid>/status`).
    pub caps: u64,
}

impl Identity {
    /// An ordinary user: no capability.
    pub fn user(uid: u32, gid: u32) -> Self {
        Identity { uid, gid, caps: 0 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunAsError {
    #[error(
        "cannot act as uid {uid} gid {gid} ({source}): run as root, or grant cap_setuid,cap_setgid \
         to profile JVMs of other users"
    )]
    Become {
        uid: u32,
        gid: u32,
        #[source]
        source: io::Error,
    },
    #[error("timed out")]
    Timeout,
    #[error("cannot start a thread: {0}")]
    Spawn(io::Error),
    /// The job panicked (a reader tripped by what the target wrote); the caller goes on.
    #[error("the job panicked: {0}")]
    Panicked(String),
}

/// Runs `job` on a new thread that has become `who` (uid, gid, no supplementary group, no
/// capability). Waits for it until `deadline`; a job still running then is left behind and must
/// end by its own deadlines.
pub fn run_as<T, F>(who: Identity, deadline: Instant, job: F) -> Result<T, RunAsError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    thread::Builder::new()
        .name("as-target".into())
        .spawn(move || {
            let result = become_on_this_thread(who)
                .map_err(|source| RunAsError::Become { uid: who.uid, gid: who.gid, source })
                .and_then(|()| {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
                        .map_err(|payload| RunAsError::Panicked(panic_text(&*payload)))
                });
            let _ = tx.send(result);
        })
        .map_err(RunAsError::Spawn)?;
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).unwrap_or(Err(RunAsError::Timeout))
}

/// The text a panic was raised with.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

/// The calling thread becomes `who` for good. Only for threads that end afterwards.
fn become_on_this_thread(who: Identity) -> io::Result<()> {
    let check = |rc: libc::c_long| if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) };
    let same_ids = current_ids() == ((who.uid, who.uid, who.uid), (who.gid, who.gid, who.gid));
    if !same_ids {
        let groups = [who.gid];
        // SAFETY: per-thread credential syscalls with integer arguments and a live array.
        // Groups and gids first: once the uid is dropped we may no longer change them. Keep the
        // permitted set across the uid change so the target's own capabilities can be kept.
        unsafe {
            check(libc::syscall(libc::SYS_prctl, libc::PR_SET_KEEPCAPS, 1 as libc::c_long, 0, 0, 0))?;
            check(libc::syscall(libc::SYS_setgroups, 1 as libc::c_long, groups.as_ptr()))?;
            check(libc::syscall(libc::SYS_setresgid, who.gid, who.gid, who.gid))?;
            check(libc::syscall(libc::SYS_setresuid, who.uid, who.uid, who.uid))?;
        }
    }
    set_capabilities(who.caps & permitted_capabilities()?)
}

fn current_ids() -> ((u32, u32, u32), (u32, u32, u32)) {
    let u = nix::unistd::getresuid().expect("getresuid cannot fail");
    let g = nix::unistd::getresgid().expect("getresgid cannot fail");
    (
        (u.real.as_raw(), u.effective.as_raw(), u.saved.as_raw()),
        (g.real.as_raw(), g.effective.as_raw(), g.saved.as_raw()),
    )
}

fn permitted_capabilities() -> io::Result<u64> {
    let status = std::fs::read_to_string("/proc/thread-self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapPrm:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no CapPrm line in /proc/thread-self/status"))
}

/// Sets the calling thread's effective and permitted sets to `caps` (a subset of what it has)
/// and clears its inheritable set. Needed even after the uid change: a profiler that is the
/// JVM's user with file capabilities would otherwise keep CAP_DAC_OVERRIDE and friends.
fn set_capabilities(caps: u64) -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header { version: VERSION_3, pid: 0 };
    let (low, high) = (caps as u32, (caps >> 32) as u32);
    let data = [
        Data { effective: low, permitted: low, inheritable: 0 },
        Data { effective: high, permitted: high, inheritable: 0 },
    ];
    // SAFETY: capset reads a valid header and two data words; pid 0 is the calling thread.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cap_eff_of_this_thread() -> u64 {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:")).unwrap().trim();
        u64::from_str_radix(hex, 16).unwrap()
    }

    #[test]
    fn the_job_runs_without_capabilities_and_the_caller_keeps_its_own() {
        let me = Identity::user(nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
        let before = cap_eff_of_this_thread();
        let deadline = Instant::now() + Duration::from_secs(5);
        let (caps, ids) = run_as(me, deadline, || (cap_eff_of_this_thread(), current_ids())).unwrap();
        assert_eq!(caps, 0);
        assert_eq!(ids.0 .1, me.uid);
        assert_eq!(cap_eff_of_this_thread(), before, "the calling thread must be untouched");
    }

    #[test]
    fn as_root_the_job_becomes_another_user() {
        // Changing uid needs root: a run that is not root fails here rather than pass untested.
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test becomes another user: run it as root (`cargo xtask test`)"
        );
        let nobody = Identity::user(65534, 65534);
        let deadline = Instant::now() + Duration::from_secs(5);
        let (ids, shadow) =
            run_as(nobody, deadline, || (current_ids(), std::fs::File::open("/etc/shadow").is_ok())).unwrap();
        assert_eq!(ids, ((65534, 65534, 65534), (65534, 65534, 65534)));
        assert!(!shadow, "nobody must not read /etc/shadow");
        assert!(nix::unistd::geteuid().is_root(), "the caller stays root");
        assert!(std::fs::File::open("/etc/shadow").is_ok());
    }

    #[test]
    fn the_job_keeps_no_more_capabilities_than_the_target_has() {
        const CAP_SYS_PTRACE: u64 = 1 << 19;
        let me = Identity {
            caps: CAP_SYS_PTRACE,
            ..Identity::user(nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw())
        };
        let caps = run_as(me, Instant::now() + Duration::from_secs(5), cap_eff_of_this_thread).unwrap();
        assert_eq!(caps, CAP_SYS_PTRACE & cap_eff_of_this_thread());
    }

    #[test]
    fn a_slow_job_times_out() {
        let me = Identity::user(nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
        let deadline = Instant::now() + Duration::from_millis(50);
        let err = run_as(me, deadline, || thread::sleep(Duration::from_millis(500))).unwrap_err();
        assert!(matches!(err, RunAsError::Timeout));
    }

    #[test]
    fn a_panicking_job_is_an_error_not_a_timeout() {
        let me = Identity::user(nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
        let deadline = Instant::now() + Duration::from_secs(5);
        let err = run_as(me, deadline, || -> u8 { panic!("a hostile reply") }).unwrap_err();
        assert!(matches!(&err, RunAsError::Panicked(m) if m == "a hostile reply"), "{err}");
        assert!(Instant::now() < deadline, "answered at once, not at the deadline");
    }
}
