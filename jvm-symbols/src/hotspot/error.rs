//! Errors of the HotSpot introspection readers. Per-frame failures (a freed `Method*`, a
//! pc outside the code cache) are not errors: they are counted misses (see `Misses`).
//! These are the failures that make a whole JVM unreadable.

use std::path::PathBuf;

use super::bounded::Overrun;
#[cfg(doc)]
use super::bounded::ReadBudget;
use super::memory::ReadError;

#[derive(Debug, thiserror::Error)]
pub enum HotspotError {
    #[error("process {pid}: no libjvm.so mapped")]
    NoLibjvm { pid: u32 },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a readable ELF file: {reason}")]
    Elf { path: PathBuf, reason: String },
    #[error("{path}: {size_bytes} bytes is over the limit of {limit_bytes} bytes")]
    TooLarge { path: PathBuf, size_bytes: u64, limit_bytes: u64 },
    #[error("libjvm.so does not export {symbol}: no introspection tables (not HotSpot, or too old)")]
    MissingSymbol { symbol: String },
    #[error("HotSpot introspection table {table}: {reason}")]
    BadTable { table: &'static str, reason: String },
    #[error("HotSpot introspection tables lack {what}")]
    MissingField { what: String },
    /// A size, count or offset in the tables beyond what HotSpot produces: a hostile or
    /// corrupt table, never read further.
    #[error("HotSpot introspection tables out of bounds: {what} = {value}, over the limit of {limit}")]
    Bound { what: String, value: u64, limit: u64 },
    /// Reading the tables spent the budget of bytes or time ([`ReadBudget::TABLES`]).
    #[error("reading the HotSpot introspection tables stopped: {0}")]
    Overrun(Overrun),
    /// The reader panicked on these tables (a bug the tables found; caught, never retried).
    #[error("reading the HotSpot introspection tables panicked: {0}")]
    Panicked(String),
    /// A read of the target (its memory or its libjvm.so) blocked past its deadline: memory
    /// registered with userfaultfd and never served, a file on a stalled FUSE filesystem. Never
    /// retried.
    #[error("a read of the target blocked: {0}")]
    Blocked(String),
    #[error(transparent)]
    Read(#[from] ReadError),
}

/// A value read from the target over `limit`, as a [`HotspotError::Bound`].
pub(crate) fn bound(what: impl Into<String>, value: u64, limit: u64) -> HotspotError {
    HotspotError::Bound { what: what.into(), value, limit }
}

impl HotspotError {
    /// Whether trying again later may succeed: a JVM read while it starts has tables that
    /// are not filled in yet (and one read under load may overrun its budget), but a
    /// missing libjvm or missing tables stay missing, and tables out of bounds stay so.
    pub fn may_pass(&self) -> bool {
        !matches!(
            self,
            HotspotError::NoLibjvm { .. }
                | HotspotError::Elf { .. }
                | HotspotError::TooLarge { .. }
                | HotspotError::MissingSymbol { .. }
                | HotspotError::Bound { .. }
                | HotspotError::Panicked(_)
                | HotspotError::Blocked(_)
        )
    }
}
