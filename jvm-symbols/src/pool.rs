//! Memory that several perf-map indexes share, possibly built on several threads at once.
//!
//! A [`MemoryPool`] has a limit; each index holds a [`Reservation`] of it, with its own cap, and
//! asks for more before any vector of it grows. A request that would take the pool or the index
//! past its bound is refused, and the index stops growing (it is then partial). Dropping the
//! reservation (with its index) gives the bytes back. So the indexes of every JVM together never
//! hold more than the limit, however many are loading at the same time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Debug)]
pub struct MemoryPool {
    limit_bytes: AtomicU64,
    used_bytes: AtomicU64,
}

impl MemoryPool {
    pub fn new(limit_bytes: u64) -> Arc<Self> {
        Arc::new(MemoryPool { limit_bytes: AtomicU64::new(limit_bytes), used_bytes: AtomicU64::new(0) })
    }

    /// A lower limit refuses new requests; what is already held stays until released.
    pub fn set_limit(&self, bytes: u64) {
        self.limit_bytes.store(bytes, Ordering::Relaxed);
    }

    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes.load(Ordering::Relaxed)
    }

    pub fn used_bytes(&self) -> u64 {
        self.used_bytes.load(Ordering::Relaxed)
    }

    fn take(&self, bytes: u64) -> bool {
        let limit = self.limit_bytes();
        self.used_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= limit)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: u64) {
        self.used_bytes.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// What one index holds of a pool (or, without a pool, just a cap).
#[derive(Debug)]
pub struct Reservation {
    pool: Option<Arc<MemoryPool>>,
    cap_bytes: u64,
    held_bytes: u64,
    /// The most ever held.
    peak_bytes: u64,
}

impl Reservation {
    /// Up to `cap_bytes`, and only while `pool` has room.
    pub fn new(pool: Arc<MemoryPool>, cap_bytes: u64) -> Self {
        Reservation { pool: Some(pool), cap_bytes, held_bytes: 0, peak_bytes: 0 }
    }

    /// No pool: bounded by `cap_bytes` alone.
    pub fn capped(cap_bytes: u64) -> Self {
        Reservation { pool: None, cap_bytes, held_bytes: 0, peak_bytes: 0 }
    }

    pub fn unlimited() -> Self {
        Self::capped(u64::MAX)
    }

    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    pub fn cap_bytes(&self) -> u64 {
        self.cap_bytes
    }

    /// The most this reservation ever held: for a partial index, what it was allowed.
    pub fn peak_bytes(&self) -> u64 {
        self.peak_bytes
    }

    /// Takes `bytes` more; false (and nothing taken) past the cap or the pool's limit.
    pub fn grow(&mut self, bytes: u64) -> bool {
        let Some(total) = self.held_bytes.checked_add(bytes).filter(|&t| t <= self.cap_bytes) else {
            return false;
        };
        if let Some(pool) = &self.pool {
            if !pool.take(bytes) {
                return false;
            }
        }
        self.held_bytes = total;
        self.peak_bytes = self.peak_bytes.max(total);
        true
    }

    /// Gives back what is held beyond `bytes` (after a vector was shrunk or freed).
    pub fn shrink_to(&mut self, bytes: u64) {
        if bytes < self.held_bytes {
            if let Some(pool) = &self.pool {
                pool.give_back(self.held_bytes - bytes);
            }
            self.held_bytes = bytes;
        }
    }
}

impl Default for Reservation {
    fn default() -> Self {
        Self::unlimited()
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.shrink_to(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_share_the_limit_and_give_back_on_drop() {
        let pool = MemoryPool::new(100);
        let mut a = Reservation::new(Arc::clone(&pool), 80);
        let mut b = Reservation::new(Arc::clone(&pool), 80);
        assert!(a.grow(60));
        assert!(!a.grow(30), "over its own cap");
        assert!(!b.grow(50), "over the pool's limit");
        assert!(b.grow(40));
        assert_eq!(pool.used_bytes(), 100);
        a.shrink_to(10);
        assert_eq!((a.held_bytes(), a.peak_bytes(), pool.used_bytes()), (10, 60, 50));
        drop(b);
        assert_eq!(pool.used_bytes(), 10);
        pool.set_limit(5);
        assert!(!a.grow(1), "a lowered limit refuses new requests");
        drop(a);
        assert_eq!(pool.used_bytes(), 0);
    }

    #[test]
    fn concurrent_growth_never_passes_the_limit() {
        let pool = MemoryPool::new(10_000);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let pool = Arc::clone(&pool);
                std::thread::spawn(move || {
                    let mut r = Reservation::new(pool, u64::MAX);
                    while r.grow(7) {}
                    r
                })
            })
            .collect();
        let held: Vec<Reservation> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let total: u64 = held.iter().map(Reservation::held_bytes).sum();
        assert!(total <= 10_000 && total > 10_000 - 4 * 7, "{total}");
        assert_eq!(pool.used_bytes(), total);
    }
}
