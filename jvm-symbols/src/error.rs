//! The one error type of this crate. Every variant names the process or file it is about,
//! so a log line is enough to act on.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A user-writable file that failed a safety check (symlink, not a regular file,
    /// wrong owner): it is never read.
    #[error("{path}: refused: {reason}")]
    Refused { path: PathBuf, reason: String },
    #[error("{path}: {size_bytes} bytes is over the limit of {limit_bytes} bytes")]
    TooLarge { path: PathBuf, size_bytes: u64, limit_bytes: u64 },
    /// A file that could not be read in time (a FUSE file system that stalls, a huge map).
    #[error("{path}: reading took over {timeout_ms} ms; gave up")]
    ReadTimeout { path: PathBuf, timeout_ms: u64 },
    #[error("process {pid} is not a HotSpot JVM (no libjvm.so mapped)")]
    NotHotSpot { pid: u32 },
    #[error(
        "JVM {pid} runs with -XX:+DisableAttachMechanism: its perf map cannot be dumped; \
         restart it without that flag, or have it write /tmp/perf-<pid>.map itself"
    )]
    AttachDisabled { pid: u32 },
    /// Sending SIGQUIT to a process that does not catch it (`-Xrs`) would kill it.
    #[error("JVM {pid} does not catch SIGQUIT (started with -Xrs?): not starting its attach listener")]
    SigquitNotCaught { pid: u32 },
    #[error("JVM {pid}: attach listener socket {socket} did not appear within {timeout_ms} ms")]
    ListenerTimeout { pid: u32, socket: PathBuf, timeout_ms: u64 },
    #[error("JVM {pid}: attach command `{command}` timed out after {timeout_ms} ms")]
    Timeout { pid: u32, command: String, timeout_ms: u64 },
    #[error("JVM {pid}: attach command `{command}` failed with code {code}: {output}")]
    CommandFailed { pid: u32, command: String, code: i32, output: String },
    #[error("JVM {pid}: malformed attach reply: {reply:?}")]
    BadReply { pid: u32, reply: String },
    /// The attach socket is not the JVM's: planted by another user, a symlink, or served by
    /// another process. HotSpot's own `jcmd` refuses these too ("well-known file is not secure").
    #[error("JVM {pid}: refusing attach socket {path}: {reason}")]
    UntrustedSocket { pid: u32, path: PathBuf, reason: String },
    /// A step that runs with the target's identity (see [`crate::run_as`]) could not.
    #[error("{path}: {source}")]
    AsTarget {
        path: PathBuf,
        #[source]
        source: crate::identity::RunAsError,
    },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
