//! How many connections the metrics endpoint keeps open, and which one goes when more arrive.
//!
//! Anyone who can reach the port can open connections and send nothing. Refusing newcomers once
//! the cap is reached would let such a client lock Prometheus out; instead the connection that
//! has waited longest for its request is closed to make room. A scraper sends its request as
//! soon as it is connected, so it is answered long before it would be the oldest, whatever
//! number of idle connections arrive. Connections already being answered are never closed to
//! make room: when all are, a newcomer is refused.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

/// The open connections, each with what ends it early (`T`: the sender that tells its task).
#[derive(Debug)]
pub(crate) struct ConnectionLimiter<T> {
    max_open: usize,
    next_id: u64,
    /// Waiting for their request, oldest first: the ones closed to make room.
    waiting: VecDeque<(u64, T)>,
    /// Request read, response being written.
    answering: HashSet<u64>,
}

/// A connection let in: its id, and the connection it displaced, to be told to close.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Admitted<T> {
    pub id: u64,
    pub displaced: Option<T>,
}

impl<T> ConnectionLimiter<T> {
    pub fn new(max_open: usize) -> Self {
        Self { max_open: max_open.max(1), next_id: 0, waiting: VecDeque::new(), answering: HashSet::new() }
    }

    /// Lets a new connection in, closing the oldest waiting one if the cap is reached; `Err`
    /// gives `close_early` back when every open connection is being answered.
    pub fn admit(&mut self, close_early: T) -> Result<Admitted<T>, T> {
        let mut displaced = None;
        if self.open() >= self.max_open {
            match self.waiting.pop_front() {
                Some((_, oldest)) => displaced = Some(oldest),
                None => return Err(close_early),
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.waiting.push_back((id, close_early));
        Ok(Admitted { id, displaced })
    }

    /// Connection `id` has sent its request: from now on it is answered, not displaced.
    /// False when it was displaced already (its task should stop).
    pub fn start_answering(&mut self, id: u64) -> bool {
        let Some(at) = self.waiting.iter().position(|(waiting, _)| *waiting == id) else {
            return false;
        };
        self.waiting.remove(at);
        self.answering.insert(id);
        true
    }

    /// Connection `id` is closed (a displaced one was counted out already).
    pub fn close(&mut self, id: u64) {
        if !self.answering.remove(&id) {
            self.waiting.retain(|(waiting, _)| *waiting != id);
        }
    }

    pub fn open(&self) -> usize {
        self.waiting.len() + self.answering.len()
    }
}

/// Lets a repeated failure be logged at most once per period, with how many were not.
#[derive(Debug)]
pub(crate) struct LogEvery {
    period: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl LogEvery {
    pub fn new(period: Duration) -> Self {
        Self { period, last: None, suppressed: 0 }
    }

    /// `Some(count of the ones not logged since the last)` when this one is to be logged.
    pub fn due(&mut self, now: Instant) -> Option<u64> {
        if self.last.is_some_and(|last| now.duration_since(last) < self.period) {
            self.suppressed += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_cap_the_oldest_waiting_connection_makes_room() {
        let mut limiter = ConnectionLimiter::new(3);
        let ids: Vec<u64> = ["a", "b", "c"].into_iter().map(|t| limiter.admit(t).unwrap().id).collect();
        assert_eq!(limiter.open(), 3);
        // "a" has sent its request: "b" is now the oldest waiting.
        assert!(limiter.start_answering(ids[0]));
        let d = limiter.admit("d").unwrap();
        assert_eq!(d.displaced, Some("b"));
        assert_eq!(limiter.open(), 3);
        // The displaced connection's task learns it when its request arrives, and its close
        // counts nothing twice.
        assert!(!limiter.start_answering(ids[1]));
        limiter.close(ids[1]);
        assert_eq!(limiter.open(), 3);
        assert_eq!(limiter.admit("e").unwrap().displaced, Some("c"));
        assert_eq!(limiter.admit("f").unwrap().displaced, Some("d"));
        limiter.close(ids[0]);
        assert_eq!(limiter.open(), 2);
        assert_eq!(limiter.admit("g").unwrap().displaced, None);
    }

    #[test]
    fn when_every_connection_is_being_answered_a_newcomer_is_refused() {
        let mut limiter = ConnectionLimiter::new(2);
        let a = limiter.admit(1).unwrap().id;
        let b = limiter.admit(2).unwrap().id;
        assert!(limiter.start_answering(a) && limiter.start_answering(b));
        assert_eq!(limiter.admit(3), Err(3));
        limiter.close(b);
        assert_eq!(limiter.admit(4).unwrap().displaced, None);
        assert_eq!(limiter.open(), 2);
    }

    #[test]
    fn a_thousand_idle_connections_leave_the_cap_open_and_a_scraper_in() {
        let mut limiter = ConnectionLimiter::new(64);
        let mut displaced = 0;
        for i in 0..1000 {
            displaced += usize::from(limiter.admit(i).unwrap().displaced.is_some());
        }
        assert_eq!((limiter.open(), displaced), (64, 1000 - 64));
        let scraper = limiter.admit(1000).unwrap();
        assert!(limiter.start_answering(scraper.id));
    }

    #[test]
    fn a_repeated_failure_is_logged_once_per_period_with_the_count_left_out() {
        let mut log = LogEvery::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(log.due(t0), Some(0));
        for ms in 1..=100 {
            assert_eq!(log.due(t0 + Duration::from_millis(ms * 10)), None);
        }
        assert_eq!(log.due(t0 + Duration::from_secs(10)), Some(100));
        assert_eq!(log.due(t0 + Duration::from_secs(11)), None);
    }
}
