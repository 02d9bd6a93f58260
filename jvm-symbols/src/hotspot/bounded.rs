//! The one reader every HotSpot reader goes through: the target controls every size, count
//! and pointer in its tables, so what one object may cost (bytes allocated) and what one JVM
//! may cost (bytes read and time, per cycle) is fixed here, not by the target.
//!
//! [`MemoryReader::read_vec`] refuses objects over [`MAX_OBJECT_BYTES`] before allocating.
//! [`BoundedReader`] adds a [`ReadBudget`]: once its bytes or its deadline are spent, every
//! further read fails (a counted miss for the caller) and [`BoundedReader::overrun`] says why,
//! so the owner can back the JVM off instead of letting it starve the others.

use std::cell::Cell;
use std::time::{Duration, Instant};

use super::memory::{MemoryReader, ReadError, MAX_OBJECT_BYTES};

/// What one JVM may read before it is stopped: bytes, and time spent in reads (not wall
/// time: what the caller does between reads, for other JVMs too, is not this JVM's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadBudget {
    pub max_bytes: u64,
    pub max_time: Duration,
}

impl ReadBudget {
    /// Reading the four tables: a real JVM's take ~150 KB and a few ms.
    pub const TABLES: ReadBudget = ReadBudget { max_bytes: 16 << 20, max_time: Duration::from_millis(500) };
    /// No bound but the per-object cap (fixtures and tools).
    pub const UNLIMITED: ReadBudget = ReadBudget { max_bytes: u64::MAX, max_time: Duration::MAX };
}

/// Why a JVM's reads were stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overrun {
    /// More than `max_bytes` read.
    Bytes(u64),
    /// Still reading after `max_time`.
    Time(Duration),
}

impl std::fmt::Display for Overrun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Overrun::Bytes(b) => write!(f, "read over {} KiB", b >> 10),
            Overrun::Time(t) => write!(f, "read for over {} ms", t.as_millis()),
        }
    }
}

/// A reader with a budget, started with [`BoundedReader::start`].
#[derive(Debug)]
pub struct BoundedReader<R> {
    inner: R,
    budget: Cell<ReadBudget>,
    spent: Cell<Duration>,
    bytes: Cell<u64>,
    overrun: Cell<Option<Overrun>>,
}

impl<R: MemoryReader> BoundedReader<R> {
    pub fn new(inner: R, budget: ReadBudget) -> Self {
        let reader = Self {
            inner,
            budget: Cell::new(budget),
            spent: Cell::new(Duration::ZERO),
            bytes: Cell::new(0),
            overrun: Cell::new(None),
        };
        reader.start(budget);
        reader
    }

    /// Starts a new budget (a new cycle): bytes and time count from now.
    pub fn start(&self, budget: ReadBudget) {
        self.budget.set(budget);
        self.spent.set(Duration::ZERO);
        self.bytes.set(0);
        self.overrun.set(None);
    }

    /// Why reads were stopped since the last [`BoundedReader::start`], if they were.
    pub fn overrun(&self) -> Option<Overrun> {
        self.overrun.get()
    }

    /// The reader this one bounds (which may say more about why reads failed).
    pub fn inner(&self) -> &R {
        &self.inner
    }

    /// Bytes read since the last [`BoundedReader::start`].
    pub fn bytes_read(&self) -> u64 {
        self.bytes.get()
    }

    fn admit(&self, len: usize) -> bool {
        if self.overrun.get().is_some() {
            return false;
        }
        let budget = self.budget.get();
        let bytes = self.bytes.get().saturating_add(len as u64);
        if bytes > budget.max_bytes {
            self.overrun.set(Some(Overrun::Bytes(budget.max_bytes)));
            return false;
        }
        if self.spent.get() > budget.max_time {
            self.overrun.set(Some(Overrun::Time(budget.max_time)));
            return false;
        }
        self.bytes.set(bytes);
        true
    }
}

impl<R: MemoryReader> MemoryReader for BoundedReader<R> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        if buf.len() > MAX_OBJECT_BYTES || !self.admit(buf.len()) {
            return Err(ReadError { addr, len: buf.len() });
        }
        let started = Instant::now();
        let result = self.inner.read(addr, buf);
        self.spent.set(self.spent.get() + started.elapsed());
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotspot::memory::SegmentsMemory;

    fn memory() -> SegmentsMemory {
        let mut mem = SegmentsMemory::new();
        mem.insert(0x1000, &[7; 4096]);
        mem
    }

    #[test]
    fn objects_over_the_cap_are_refused_before_allocating() {
        let mem = memory();
        assert!(mem.read_vec(0x1000, MAX_OBJECT_BYTES + 1).is_err());
        assert!(mem.read_vec(0x1000, usize::MAX).is_err(), "a target's 2^64 is refused, not allocated");
        assert_eq!(mem.read_vec(0x1000, 16).unwrap(), vec![7; 16]);
    }

    #[test]
    fn a_spent_byte_budget_fails_every_later_read_until_restarted() {
        let reader = BoundedReader::new(memory(), ReadBudget { max_bytes: 100, max_time: Duration::MAX });
        assert!(reader.read_vec(0x1000, 64).is_ok());
        assert!(reader.read_vec(0x1000, 64).is_err());
        assert!(reader.read_u8(0x1000).is_err(), "stopped, even for a small read");
        assert_eq!(reader.overrun(), Some(Overrun::Bytes(100)));
        reader.start(ReadBudget::UNLIMITED);
        assert_eq!(reader.overrun(), None);
        assert_eq!(reader.read_u8(0x1000), Ok(7));
        assert_eq!(reader.bytes_read(), 1);
    }

    /// Memory that takes 20 ms per read, as a hostile target can make each read cost.
    struct Slow(SegmentsMemory);

    impl MemoryReader for Slow {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
            std::thread::sleep(Duration::from_millis(20));
            self.0.read(addr, buf)
        }
    }

    #[test]
    fn time_spent_in_reads_is_bounded_and_time_between_them_is_not() {
        let budget = ReadBudget { max_bytes: u64::MAX, max_time: Duration::from_millis(150) };
        let reader = BoundedReader::new(Slow(memory()), budget);
        assert!(reader.read_u8(0x1000).is_ok());
        std::thread::sleep(Duration::from_millis(300));
        assert!(reader.read_u8(0x1000).is_ok(), "the time between reads is not counted");
        let more = (0..10).take_while(|_| reader.read_u8(0x1000).is_ok()).count();
        assert!(more < 7, "{more} more reads of 20 ms within 150 ms");
        assert_eq!(reader.overrun(), Some(Overrun::Time(Duration::from_millis(150))));
    }
}
