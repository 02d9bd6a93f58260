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

/// Grows `v` so `additional` more elements fit, paying `res` first: by half its size, or if
/// that is refused by a quarter, an eighth... down to just what is needed. False when even
/// that is refused. Near the cap this takes a few reallocations, not one per element.
pub(crate) fn reserve_within<T>(v: &mut Vec<T>, additional: usize, res: &mut Reservation) -> bool {
    let grown = grown_capacity(v.capacity(), v.len() + additional, std::mem::size_of::<T>(), 256, res);
    grown.map(|capacity| v.reserve_exact(capacity - v.len())).is_some()
}

/// As [`reserve_within`], for text (bytes, in steps of at least 4 KiB).
pub(crate) fn reserve_text(text: &mut String, additional: usize, res: &mut Reservation) -> bool {
    let grown = grown_capacity(text.capacity(), text.len() + additional, 1, 4096, res);
    grown.map(|capacity| text.reserve_exact(capacity - text.len())).is_some()
}

/// The capacity a buffer of `capacity` elements of `element_bytes` may grow to so that it
/// holds `needed`, paid from `res`: the current one when it already fits, else the largest
/// step (halved on each refusal, from half the buffer but `min_step` at least) `res` grants.
fn grown_capacity(
    capacity: usize,
    needed: usize,
    element_bytes: usize,
    min_step: usize,
    res: &mut Reservation,
) -> Option<usize> {
    if capacity >= needed {
        return Some(capacity);
    }
    let mut step = (capacity / 2).max(min_step);
    loop {
        let new_capacity = needed.max(capacity + step);
        if res.grow(((new_capacity - capacity) * element_bytes) as u64) {
            return Some(new_capacity);
        }
        if new_capacity == needed {
            return None;
        }
        step /= 2;
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

    #[test]
    fn vectors_grow_by_steps_that_shrink_near_the_cap_and_stop_at_it() {
        // 1,000 u32 fit in the cap: the first step is the 256 minimum, then half the vector.
        let mut res = Reservation::capped(4_000);
        let mut v: Vec<u32> = Vec::new();
        assert!(reserve_within(&mut v, 1, &mut res));
        assert_eq!((v.capacity(), res.held_bytes()), (256, 1_024));
        v.resize(256, 0);
        assert!(reserve_within(&mut v, 1, &mut res));
        assert_eq!((v.capacity(), res.held_bytes()), (512, 2_048), "half of 256 is below the minimum");
        v.resize(512, 0);
        assert!(reserve_within(&mut v, 1, &mut res));
        assert_eq!((v.capacity(), res.held_bytes()), (768, 3_072));
        v.resize(768, 0);
        // Half (384 more, 1,536 bytes) would pass the cap; a quarter (192) is less than the 200
        // needed, so exactly what is needed is taken.
        assert!(reserve_within(&mut v, 200, &mut res));
        assert_eq!((v.capacity(), res.held_bytes()), (968, 3_872));
        v.resize(968, 0);
        let held = res.held_bytes();
        assert!(!reserve_within(&mut v, 1_000, &mut res), "more than the cap leaves is refused");
        assert_eq!(res.held_bytes(), held, "and a refusal takes nothing");
    }

    #[test]
    fn text_grows_in_steps_of_four_kib_at_least() {
        let mut res = Reservation::capped(5_000);
        let mut text = String::new();
        assert!(reserve_text(&mut text, 10, &mut res));
        assert_eq!(res.held_bytes(), 4_096);
        text.push_str(&"x".repeat(4_096));
        assert!(reserve_text(&mut text, 100, &mut res), "the cap leaves room for what is needed");
        assert!(text.capacity() >= 4_196 && res.held_bytes() <= 5_000);
        assert!(!reserve_text(&mut text, 5_000, &mut res));
    }
}
