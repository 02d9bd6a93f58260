//! The HotSpot dynamic-attach client (what `jcmd` does, without needing a JDK):
//!
//! 1. If `<root>/tmp/.java_pid<nspid>` is not a socket yet, create the trigger file
//!    `.attach_pid<nspid>` in the JVM's cwd (or its /tmp) and send SIGQUIT: the JVM's
//!    signal thread sees the file and starts its attach listener.
//! 2. Connect to the socket with the JVM's euid/egid (HotSpot rejects other peers; root
//!    is accepted only from the JVM's own user namespace and by JDK 11+).
//! 3. Send `1\0<cmd>\0<arg0>\0<arg1>\0<arg2>\0` (protocol "1", arguments padded to
//!    three); the reply's first line is the result code, the rest is the output.
//!
//! The JVM's files are reached through `/proc/<pid>/root` and `/proc/<pid>/cwd`, which
//! resolve inside its mount namespace, so the profiler never has to setns() into a
//! container. Every step has a deadline.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::discovery::JvmInfo;
use crate::error::{Error, Result};

/// A reply larger than this is cut: no diagnostic command we send prints that much.
const MAX_REPLY_BYTES: u64 = 16 << 20;

/// Runs one `jcmd` command (e.g. `Compiler.perfmap`, `VM.flags`) in the JVM and
/// returns its output. Never blocks past `timeout`.
pub fn jcmd(jvm: &JvmInfo, command: &str, timeout: Duration) -> Result<String> {
    let deadline = Instant::now() + timeout;
    if jvm.attach_disabled {
        return Err(Error::AttachDisabled { pid: jvm.pid });
    }
    let socket = jvm.root().join(format!("tmp/.java_pid{}", jvm.nspid));
    if !is_socket(&socket) {
        start_listener(jvm, &socket, deadline)?;
    }
    let request = encode_request("jcmd", &[command]);
    let reply = talk_as(jvm, socket, request, deadline).map_err(|e| match e {
        TalkError::Io(path, source) => Error::io(path, source),
        TalkError::Timeout => Error::Timeout {
            pid: jvm.pid,
            command: command.to_owned(),
            timeout_ms: timeout.as_millis() as u64,
        },
    })?;
    let (code, output) = decode_reply(&reply).ok_or_else(|| Error::BadReply {
        pid: jvm.pid,
        reply: String::from_utf8_lossy(&reply[..reply.len().min(200)]).into_owned(),
    })?;
    // HotSpot reports a failed diagnostic command with code 0 and the exception text.
    let failed_in_jvm = output.starts_with("java.lang.") && output.contains("Exception");
    if code != 0 || failed_in_jvm {
        return Err(Error::CommandFailed {
            pid: jvm.pid,
            command: command.to_owned(),
            code,
            output: output.trim().to_owned(),
        });
    }
    Ok(output)
}

fn is_socket(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

fn start_listener(jvm: &JvmInfo, socket: &Path, deadline: Instant) -> Result<()> {
    if !jvm.catches_sigquit {
        return Err(Error::SigquitNotCaught { pid: jvm.pid });
    }
    let _trigger = TriggerFile::create(jvm)?;
    kill(Pid::from_raw(jvm.pid as i32), Signal::SIGQUIT)
        .map_err(|e| Error::io(&jvm.proc_dir, io::Error::from(e)))?;
    let started = Instant::now();
    let mut pause = Duration::from_millis(10);
    while Instant::now() < deadline {
        thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
        if is_socket(socket) {
            return Ok(());
        }
        pause = (pause * 2).min(Duration::from_millis(200));
    }
    Err(Error::ListenerTimeout {
        pid: jvm.pid,
        socket: socket.to_owned(),
        timeout_ms: started.elapsed().as_millis() as u64,
    })
}

/// `.attach_pid<nspid>`, owned by the JVM's user (HotSpot ignores a trigger file owned by
/// anyone else but itself or root, and root may not be root inside a user namespace).
/// Removed when dropped.
struct TriggerFile(PathBuf);

impl TriggerFile {
    fn create(jvm: &JvmInfo) -> Result<Self> {
        let name = format!(".attach_pid{}", jvm.nspid);
        let candidates = [jvm.proc_dir.join("cwd").join(&name), jvm.root().join("tmp").join(&name)];
        let mut last_error = None;
        for path in candidates {
            match Self::create_at(&path, jvm) {
                Ok(()) => return Ok(TriggerFile(path)),
                Err(e) => {
                    let _ = fs::remove_file(&path);
                    last_error = Some(Error::io(path, e));
                }
            }
        }
        Err(last_error.expect("two candidates tried"))
    }

    fn create_at(path: &Path, jvm: &JvmInfo) -> io::Result<()> {
        let file = File::options()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o660)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        let me = (nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
        if me != (jvm.uid, jvm.gid) {
            // SAFETY: a descriptor we own, plain integer ids.
            if unsafe { libc::fchown(file.as_raw_fd(), jvm.uid, jvm.gid) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

impl Drop for TriggerFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
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
fn decode_reply(reply: &[u8]) -> Option<(i32, String)> {
    let text = String::from_utf8_lossy(reply);
    let (code, output) = text.split_once('\n').unwrap_or((&text, ""));
    Some((code.trim().parse().ok()?, output.to_owned()))
}

enum TalkError {
    Io(PathBuf, io::Error),
    Timeout,
}

/// Connects and exchanges one request on a thread of its own, with the JVM's
/// credentials on that thread only. The caller waits at most until `deadline`; a stuck
/// thread is left behind and ends with its socket timeouts.
fn talk_as(jvm: &JvmInfo, socket: PathBuf, request: Vec<u8>, deadline: Instant) -> std::result::Result<Vec<u8>, TalkError> {
    let (tx, rx) = mpsc::channel();
    let (uid, gid) = (jvm.uid, jvm.gid);
    let spawned = thread::Builder::new().name("jvm-attach".into()).spawn(move || {
        let result = become_on_this_thread(uid, gid)
            .map_err(|e| TalkError::Io(socket.clone(), e))
            .and_then(|()| talk(&socket, &request, deadline));
        let _ = tx.send(result);
    });
    if let Err(e) = spawned {
        return Err(TalkError::Io(PathBuf::from("jvm-attach thread"), e));
    }
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .unwrap_or(Err(TalkError::Timeout))
}

fn talk(socket: &Path, request: &[u8], deadline: Instant) -> std::result::Result<Vec<u8>, TalkError> {
    let io_err = |e| TalkError::Io(socket.to_owned(), e);
    let remaining = || {
        let left = deadline.saturating_duration_since(Instant::now());
        // A zero timeout means "block forever" to the socket API.
        (!left.is_zero()).then_some(left).ok_or(TalkError::Timeout)
    };
    let mut stream = UnixStream::connect(socket).map_err(io_err)?;
    stream.set_write_timeout(Some(remaining()?)).map_err(io_err)?;
    stream.write_all(request).map_err(io_err)?;
    stream.set_read_timeout(Some(remaining()?)).map_err(io_err)?;
    let mut reply = Vec::new();
    match (&mut stream).take(MAX_REPLY_BYTES).read_to_end(&mut reply) {
        Ok(_) => Ok(reply),
        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => Err(TalkError::Timeout),
        Err(e) => Err(io_err(e)),
    }
}

/// Sets this thread's effective gid/uid. Raw syscalls on purpose: the libc wrappers
/// change the credentials of every thread in the profiler.
fn become_on_this_thread(uid: u32, gid: u32) -> io::Result<()> {
    let me = (nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
    if me == (uid, gid) {
        return Ok(());
    }
    let keep = u32::MAX; // -1: leave unchanged
    // SAFETY: plain syscalls with integer arguments. Group first: without root it is too late.
    let rc = unsafe { libc::syscall(libc::SYS_setresgid, keep, gid, keep) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    let rc = unsafe { libc::syscall(libc::SYS_setresuid, keep, uid, keep) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_is_padded_to_three_arguments() {
        assert_eq!(
            encode_request("jcmd", &["Compiler.perfmap"]),
            b"1\0jcmd\0Compiler.perfmap\0\0\0".to_vec()
        );
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
