//! The HotSpot dynamic-attach client (what `jcmd` does, without a JDK and without running
//! any binary of the target's):
//!
//! 1. If `<root>/tmp/.java_pid<nspid>` is not a live socket yet, create the trigger file
//!    `.attach_pid<nspid>` in the JVM's cwd (or its /tmp) and send SIGQUIT: the JVM's
//!    signal thread sees the file and starts its attach listener (or re-creates its socket).
//! 2. Connect to the socket and send `1\0<cmd>\0<arg0>\0<arg1>\0<arg2>\0` (protocol "1",
//!    arguments padded to three); the reply's first line is the result code, the rest is the
//!    output.
//!
//! Everything a target controls is hostile here. So the whole exchange runs on a thread that
//! has become the JVM's user, with no capabilities ([`crate::run_as`]): the kernel checks
//! every open, link and signal as it would for that user. On top of that:
//! - the trigger file is created with `O_EXCL|O_NOFOLLOW`: an existing file is never
//!   truncated or handed over, and only the file we created is removed (same device, inode
//!   and owner, checked and unlinked through the directory's descriptor, never through a
//!   link): once the JVM's listener answers, when the attach fails, and at the latest when
//!   the profiler exits ([`remove_trigger_files`]), so none is left behind;
//! - the socket is opened with `O_PATH|O_NOFOLLOW` and must be a socket owned by the JVM's
//!   uid with no group/other access (HotSpot's own rule); we connect through that very
//!   descriptor, so it cannot be swapped in between, and the peer (`SO_PEERCRED`) must be the
//!   JVM's process;
//! - replies are bounded in size and time, and shown only through [`crate::text::printable`].
//!
//! The JVM's files are reached through `/proc/<pid>/root` and `/proc/<pid>/cwd`, which
//! resolve inside its mount namespace, so the profiler never has to setns() into a container.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::discovery::{catches_sigquit, JvmInfo};
use crate::error::{Error, Result};
use crate::identity::{run_as, RunAsError};
use crate::safe_open::openat_in_root;
use crate::text::printable;

/// A longer reply is refused: no diagnostic command we send prints that much.
pub const MAX_REPLY_BYTES: u64 = 1 << 20;
/// How much of a reply an error message shows.
const SHOWN_REPLY_CHARS: usize = 200;

/// Runs one `jcmd` command (e.g. `Compiler.perfmap`, `VM.flags`) in the JVM and
/// returns its output. Never blocks past `timeout`.
pub fn jcmd(jvm: &JvmInfo, command: &str, timeout: Duration) -> Result<String> {
    if jvm.attach_disabled {
        return Err(Error::AttachDisabled { pid: jvm.pid });
    }
    let deadline = Instant::now() + timeout;
    let timed_out =
        || Error::Timeout { pid: jvm.pid, command: command.to_owned(), timeout_ms: timeout.as_millis() as u64 };
    let (job_jvm, request) = (jvm.clone(), encode_request("jcmd", &[command]));
    let reply = match run_as(jvm.identity(), deadline, move || exchange(&job_jvm, &request, deadline)) {
        Ok(Ok(reply)) => reply,
        Ok(Err(Exchange::Timeout)) | Err(RunAsError::Timeout) => return Err(timed_out()),
        Ok(Err(Exchange::Failed(e))) => return Err(e),
        Err(source) => return Err(Error::AsTarget { path: jvm.proc_dir.clone(), source }),
    };
    let (code, output) = decode_reply(&reply).ok_or_else(|| Error::BadReply {
        pid: jvm.pid,
        reply: printable(&String::from_utf8_lossy(&reply), SHOWN_REPLY_CHARS),
    })?;
    // HotSpot reports a failed diagnostic command with code 0 and the exception text.
    let failed_in_jvm = output.starts_with("java.lang.") && output.contains("Exception");
    if code != 0 || failed_in_jvm {
        return Err(Error::CommandFailed {
            pid: jvm.pid,
            command: command.to_owned(),
            code,
            output: printable(output.trim(), SHOWN_REPLY_CHARS),
        });
    }
    Ok(output)
}

enum Exchange {
    Timeout,
    Failed(Error),
}

impl From<Error> for Exchange {
    fn from(e: Error) -> Self {
        Exchange::Failed(e)
    }
}

/// The whole handshake, on a thread that is the JVM's user.
fn exchange(jvm: &JvmInfo, request: &[u8], deadline: Instant) -> std::result::Result<Vec<u8>, Exchange> {
    let tmp = TargetDir::tmp(jvm)?;
    let socket = Socket::new(jvm, &tmp);
    let dead = match socket.connect(deadline)? {
        Connect::Connected(stream) => return talk(stream, &socket.path, request, deadline),
        Connect::Absent => None,
        Connect::Dead(id) => Some(id),
    };
    if !jvm.catches_sigquit {
        return Err(Error::SigquitNotCaught { pid: jvm.pid }.into());
    }
    if let Some(id) = dead {
        // The JVM's own stale socket (its user made it, or it outlived a listener): HotSpot
        // creates a new one on SIGQUIT only when the name is free.
        tmp.remove_if_same(&socket.name, id);
    }
    let trigger = TriggerFile::create(jvm, &tmp)?;
    if !catches_sigquit(&jvm.proc_dir) {
        // The pid now names a process that would die of SIGQUIT (the JVM exited meanwhile).
        return Err(Error::SigquitNotCaught { pid: jvm.pid }.into());
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(jvm.pid as i32), nix::sys::signal::Signal::SIGQUIT)
        .map_err(|e| Error::io(&jvm.proc_dir, io::Error::from(e)))?;
    let started = Instant::now();
    let mut pause = Duration::from_millis(10);
    while Instant::now() < deadline {
        thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
        if let Connect::Connected(stream) = socket.connect(deadline)? {
            // The listener is up: the trigger has served.
            drop(trigger);
            return talk(stream, &socket.path, request, deadline);
        }
        pause = (pause * 2).min(Duration::from_millis(200));
    }
    Err(Error::ListenerTimeout {
        pid: jvm.pid,
        socket: socket.path.clone(),
        timeout_ms: started.elapsed().as_millis() as u64,
    }
    .into())
}

/// Which file a name pointed to when we looked: its identity, type and owner (a freed inode
/// number is soon reused, so the type and owner must match too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    kind: libc::mode_t,
    uid: u32,
}

impl FileId {
    fn of(st: &libc::stat) -> Self {
        FileId { dev: st.st_dev, ino: st.st_ino, kind: st.st_mode & libc::S_IFMT, uid: st.st_uid }
    }
}

/// A directory of the target's, held open so later steps cannot be redirected.
struct TargetDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl TargetDir {
    /// `<root>/tmp`, resolved inside the JVM's root without following any symlink.
    fn tmp(jvm: &JvmInfo) -> Result<Self> {
        let root = jvm.root();
        let path = root.join("tmp");
        let root_dir = File::open(&root).map_err(|e| Error::io(&root, e))?;
        let fd = openat_in_root(&root_dir, Path::new("tmp"), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .map_err(|e| refusal_or_io(&path, e))?;
        Ok(TargetDir { fd, path })
    }

    /// The JVM's working directory (HotSpot looks for the trigger there first).
    fn cwd(jvm: &JvmInfo) -> Result<Self> {
        let path = jvm.proc_dir.join("cwd");
        let file = File::options()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        Ok(TargetDir { fd: file.into(), path })
    }

    /// fstatat without following: the file type, owner, mode and identity of `name`.
    fn stat(&self, name: &CString) -> io::Result<libc::stat> {
        // SAFETY: zeroed stat is a valid out-buffer; dirfd and name are valid.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::fstatat(self.fd.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        if rc == 0 {
            Ok(st)
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Removes `name` only if it is still the file we saw (the name itself, never what a
    /// symlink there points to: fstatat and unlinkat do not follow it).
    fn remove_if_same(&self, name: &CString, id: FileId) {
        if self.stat(name).is_ok_and(|st| FileId::of(&st) == id) {
            // SAFETY: valid dirfd and name.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), 0) };
        }
    }

    fn try_clone(&self) -> Result<Self> {
        let fd = self.fd.try_clone().map_err(|e| Error::io(&self.path, e))?;
        Ok(TargetDir { fd, path: self.path.clone() })
    }
}

fn refusal_or_io(path: &Path, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) => Error::Refused { path: path.to_owned(), reason: "a symlink is on the path".into() },
        Some(libc::EXDEV) => Error::Refused { path: path.to_owned(), reason: "path escapes its root".into() },
        _ => Error::io(path, e),
    }
}

enum Connect {
    Connected(UnixStream),
    Absent,
    /// A socket of the JVM's user that nobody listens on.
    Dead(FileId),
}

/// `.java_pid<nspid>` in the JVM's /tmp.
struct Socket<'a> {
    jvm: &'a JvmInfo,
    dir: &'a TargetDir,
    name: CString,
    path: PathBuf,
}

impl<'a> Socket<'a> {
    fn new(jvm: &'a JvmInfo, dir: &'a TargetDir) -> Self {
        let name = format!(".java_pid{}", jvm.nspid);
        Socket { jvm, dir, path: dir.path.join(&name), name: CString::new(name).expect("no NUL in a number") }
    }

    fn untrusted(&self, reason: String) -> Exchange {
        Exchange::Failed(Error::UntrustedSocket { pid: self.jvm.pid, path: self.path.clone(), reason })
    }

    /// Never blocks past `deadline`: a listener that does not accept (a stopped JVM, a full
    /// backlog) makes `connect` itself wait.
    fn connect(&self, deadline: Instant) -> std::result::Result<Connect, Exchange> {
        // SAFETY: valid dirfd and name; O_PATH opens the name itself, symlink or not.
        let raw = unsafe {
            libc::openat(self.dir.fd.as_raw_fd(), self.name.as_ptr(), libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        };
        if raw < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::NotFound => Ok(Connect::Absent),
                _ => Err(Error::io(&self.path, e).into()),
            };
        }
        // SAFETY: the kernel just gave us this descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let st = fstat(&fd).map_err(|e| Error::io(&self.path, e))?;
        let kind = st.st_mode & libc::S_IFMT;
        if kind == libc::S_IFLNK {
            return Err(self.untrusted("it is a symlink".into()));
        }
        if kind != libc::S_IFSOCK {
            return Err(self.untrusted("it is not a socket".into()));
        }
        if st.st_uid != self.jvm.uid {
            return Err(self.untrusted(format!("owned by uid {}, not by the JVM's uid {}", st.st_uid, self.jvm.uid)));
        }
        // Connect through the descriptor we checked, not through the name again.
        let via = format!("/proc/thread-self/fd/{}", fd.as_raw_fd());
        let stream = match connect_until(&via, deadline) {
            Ok(stream) => stream,
            // Dead whatever its mode: it is the JVM user's to replace, and HotSpot makes a new one.
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => return Ok(Connect::Dead(FileId::of(&st))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(Exchange::Timeout),
            Err(e) => return Err(Error::io(&self.path, e).into()),
        };
        if st.st_mode & 0o077 != 0 {
            return Err(self.untrusted(format!("accessible to group or others (mode {:03o})", st.st_mode & 0o777)));
        }
        let peer = nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)
            .map_err(|e| Error::io(&self.path, io::Error::from(e)))?;
        if peer.pid() as u32 != self.jvm.pid || peer.uid() != self.jvm.uid {
            return Err(self.untrusted(format!(
                "served by pid {} uid {}, not by the JVM (pid {} uid {})",
                peer.pid(),
                peer.uid(),
                self.jvm.pid,
                self.jvm.uid
            )));
        }
        Ok(Connect::Connected(stream))
    }
}

/// `connect(2)` to a Unix socket, waiting for room in its backlog at most until `deadline`
/// (`SO_SNDTIMEO` bounds a blocking Unix connect); `WouldBlock` when that passed.
fn connect_until(path: &str, deadline: Instant) -> io::Result<UnixStream> {
    use nix::sys::socket::{connect, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, UnixAddr};
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    let fd = socket(AddressFamily::Unix, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)?;
    setsockopt(
        &fd,
        sockopt::SendTimeout,
        &nix::sys::time::TimeVal::from(libc::timeval {
            tv_sec: left.as_secs() as libc::time_t,
            // At least 1 µs: a zero timeout means "wait forever".
            tv_usec: (left.subsec_micros().max(1)) as libc::suseconds_t,
        }),
    )?;
    connect(fd.as_raw_fd(), &UnixAddr::new(path)?)?;
    Ok(UnixStream::from(fd))
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: zeroed stat is a valid out-buffer; fd is open.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0 {
        Ok(st)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `.attach_pid<nspid>`, created by us (as the JVM's user, so HotSpot trusts it) and removed
/// when dropped, if it is still the file we created.
struct TriggerFile {
    /// Its key in [`LIVE_TRIGGERS`].
    serial: u64,
}

/// A trigger file created and not removed yet.
struct LiveTrigger {
    dir: TargetDir,
    name: CString,
    id: FileId,
}

/// Every trigger file not removed yet, by serial. An attach still waiting for its JVM when the
/// profiler exits is not joined (it ends by its own deadline): [`remove_trigger_files`] removes
/// its file then. Removal happens under the lock, so once that returns none is left.
static LIVE_TRIGGERS: Mutex<(u64, Vec<(u64, LiveTrigger)>)> = Mutex::new((0, Vec::new()));

/// Removes the trigger files of attaches still in flight; call before the process exits.
pub fn remove_trigger_files() {
    let mut live = LIVE_TRIGGERS.lock().unwrap_or_else(PoisonError::into_inner);
    for (_, trigger) in live.1.drain(..) {
        trigger.dir.remove_if_same(&trigger.name, trigger.id);
    }
}

impl TriggerFile {
    fn create(jvm: &JvmInfo, tmp: &TargetDir) -> Result<Self> {
        let name = CString::new(format!(".attach_pid{}", jvm.nspid)).expect("no NUL in a number");
        let mut last_error = None;
        let dirs = [TargetDir::cwd(jvm), tmp.try_clone()];
        for dir in dirs {
            let dir = match dir {
                Ok(dir) => dir,
                Err(e) => {
                    last_error = Some(e);
                    continue;
                }
            };
            // SAFETY: valid dirfd and name. O_EXCL|O_NOFOLLOW: whatever is there already (a
            // hard link to someone's file, a symlink) is left alone.
            let raw = unsafe {
                libc::openat(
                    dir.fd.as_raw_fd(),
                    name.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                    0o600 as libc::c_uint,
                )
            };
            if raw < 0 {
                let path = dir.path.join(format!(".attach_pid{}", jvm.nspid));
                last_error = Some(Error::io(path, io::Error::last_os_error()));
                continue;
            }
            // SAFETY: the kernel just gave us this descriptor.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let st = fstat(&fd).map_err(|e| Error::io(&dir.path, e))?;
            return Ok(TriggerFile::register(LiveTrigger { dir, name, id: FileId::of(&st) }));
        }
        Err(last_error.expect("two directories tried"))
    }

    fn register(trigger: LiveTrigger) -> Self {
        let mut live = LIVE_TRIGGERS.lock().unwrap_or_else(PoisonError::into_inner);
        let serial = live.0;
        live.0 += 1;
        live.1.push((serial, trigger));
        TriggerFile { serial }
    }
}

impl Drop for TriggerFile {
    fn drop(&mut self) {
        let mut live = LIVE_TRIGGERS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = live.1.iter().position(|(serial, _)| *serial == self.serial) {
            let (_, trigger) = live.1.swap_remove(at);
            trigger.dir.remove_if_same(&trigger.name, trigger.id);
        }
    }
}

fn encode_request(command: &str, args: &[&str]) -> Vec<u8> {
    let mut request = b"1\0".to_vec();
    for part in std::iter::once(command).chain(args.iter().copied().chain(std::iter::repeat("")).take(3)) {
        request.extend_from_slice(part.as_bytes());
        request.push(0);
    }
    request
}

/// First line: the result code; the rest: the command's output.
pub fn decode_reply(reply: &[u8]) -> Option<(i32, String)> {
    let text = String::from_utf8_lossy(reply);
    let (code, output) = text.split_once('\n').unwrap_or((&text, ""));
    Some((code.trim().parse().ok()?, output.to_owned()))
}

fn talk(
    mut stream: UnixStream,
    path: &Path,
    request: &[u8],
    deadline: Instant,
) -> std::result::Result<Vec<u8>, Exchange> {
    let io_err = |e| Exchange::Failed(Error::io(path, e));
    let remaining = || {
        let left = deadline.saturating_duration_since(Instant::now());
        // A zero timeout means "block forever" to the socket API.
        (!left.is_zero()).then_some(left).ok_or(Exchange::Timeout)
    };
    stream.set_write_timeout(Some(remaining()?)).map_err(io_err)?;
    stream.write_all(request).map_err(io_err)?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        stream.set_read_timeout(Some(remaining()?)).map_err(io_err)?;
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(reply),
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(Exchange::Timeout)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err(e)),
        }
        if reply.len() as u64 > MAX_REPLY_BYTES {
            return Err(Exchange::Failed(Error::io(
                path,
                io::Error::new(io::ErrorKind::InvalidData, format!("attach reply over {MAX_REPLY_BYTES} bytes")),
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_is_padded_to_three_arguments() {
        assert_eq!(encode_request("jcmd", &["Compiler.perfmap"]), b"1\0jcmd\0Compiler.perfmap\0\0\0".to_vec());
    }

    /// A listener that never accepts fills its backlog; the next connect must give up at the
    /// deadline instead of waiting for ever.
    #[test]
    fn connect_gives_up_at_the_deadline_when_the_backlog_is_full() {
        use nix::sys::socket::{bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sock");
        let listener = socket(AddressFamily::Unix, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).unwrap();
        bind(listener.as_raw_fd(), &UnixAddr::new(&path).unwrap()).unwrap();
        listen(&listener, Backlog::new(0).unwrap()).unwrap();
        let path = path.to_str().unwrap();
        let mut held = Vec::new();
        let started = Instant::now();
        let outcome = loop {
            match connect_until(path, Instant::now() + Duration::from_millis(300)) {
                Ok(stream) => held.push(stream),
                Err(e) => break e,
            }
            assert!(held.len() < 1000, "the backlog never filled");
        };
        assert_eq!(outcome.kind(), io::ErrorKind::WouldBlock, "{outcome}");
        assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
        assert!(!held.is_empty(), "the first connections fit the backlog");
    }

    fn live_trigger(dir: &Path, name: &str) -> LiveTrigger {
        let fd = File::options().read(true).custom_flags(libc::O_PATH | libc::O_DIRECTORY).open(dir).unwrap();
        let dir = TargetDir { fd: fd.into(), path: dir.to_owned() };
        let name = CString::new(name).unwrap();
        let id = FileId::of(&dir.stat(&name).unwrap());
        LiveTrigger { dir, name, id }
    }

    /// One test: [`remove_trigger_files`] empties the registry every test would share.
    #[test]
    fn only_the_trigger_file_we_created_is_removed_and_none_outlives_the_profiler() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        std::fs::write(at(".attach_pid1"), "").unwrap();
        drop(TriggerFile::register(live_trigger(dir.path(), ".attach_pid1")));
        assert!(!at(".attach_pid1").exists(), "removed when the attach is over");

        // Replaced meanwhile (another inode at the name): left alone.
        std::fs::write(at(".attach_pid2"), "").unwrap();
        let guard = TriggerFile::register(live_trigger(dir.path(), ".attach_pid2"));
        std::fs::write(at("other"), "someone's").unwrap();
        std::fs::rename(at("other"), at(".attach_pid2")).unwrap();
        drop(guard);
        assert_eq!(std::fs::read_to_string(at(".attach_pid2")).unwrap(), "someone's");

        // A symlink put at the name is not followed: neither it nor its target goes.
        std::fs::write(at(".attach_pid3"), "").unwrap();
        let guard = TriggerFile::register(live_trigger(dir.path(), ".attach_pid3"));
        std::fs::write(at("victim"), "kept").unwrap();
        std::fs::remove_file(at(".attach_pid3")).unwrap();
        std::os::unix::fs::symlink(at("victim"), at(".attach_pid3")).unwrap();
        drop(guard);
        assert!(at(".attach_pid3").symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(at("victim")).unwrap(), "kept");

        // An attach still waiting when the profiler exits: its file goes at the exit, once.
        std::fs::write(at(".attach_pid4"), "").unwrap();
        let waiting = TriggerFile::register(live_trigger(dir.path(), ".attach_pid4"));
        remove_trigger_files();
        assert!(!at(".attach_pid4").exists(), "removed at exit");
        std::fs::write(at(".attach_pid4"), "a new one").unwrap();
        drop(waiting);
        assert!(at(".attach_pid4").exists(), "a later file of that name is not the one we made");
    }

    #[test]
    fn reply_code_then_output() {
        assert_eq!(
            decode_reply(b"0\nCommand executed successfully\n"),
            Some((0, "Command executed successfully\n".into()))
        );
        assert_eq!(decode_reply(b"-1\n"), Some((-1, String::new())));
        assert_eq!(decode_reply(b"0"), Some((0, String::new())));
        assert_eq!(decode_reply(b"garbage\n"), None);
    }
}
