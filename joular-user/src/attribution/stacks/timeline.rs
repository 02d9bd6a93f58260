//! A process's energy over time, for the report's charts: the process and each of its
//! threads, in at most `MAX_BUCKETS` equal time buckets. When a run outgrows them, neighbours
//! merge two by two, and past `MAX_THREAD_SERIES` threads the one with the least energy joins
//! `other_threads`, so memory stays bounded whatever the run's length and thread churn.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// Enough for a readable chart, small enough for 200 threads of an hour-long run.
pub const MAX_BUCKETS: usize = 256;
/// Threads with their own series. A process that keeps starting threads (a pool recycling its
/// workers, a server with a thread per connection) would otherwise add a series per thread for
/// as long as it lives; the charts show the top 9 anyway.
pub const MAX_THREAD_SERIES: usize = 64;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timeline {
    /// Width of a bucket, seconds; bucket `i` covers `[i, i + 1) × bucket_s` from the run's start.
    pub bucket_s: f64,
    /// Per bucket: seconds of cycles in it, cycles in it, and the wall clock (unix seconds) at
    /// the end of its last cycle, as the evolution files write it (0 when the bucket is empty).
    pub covered_s: Vec<f64>,
    pub cycles: Vec<u32>,
    pub end_epoch_s: Vec<u64>,
    /// The process's energy per bucket.
    pub energy_uj: Vec<f64>,
    pub threads: Vec<ThreadSeries>,
    /// The threads folded out of `threads` (the least energy when a new one came past
    /// `MAX_THREAD_SERIES`), summed; `tid` 0. `threads` plus this make the process.
    #[serde(default)]
    pub other_threads: Option<ThreadSeries>,
    /// How many threads `other_threads` holds.
    #[serde(default)]
    pub other_thread_count: u32,
    /// Position of each tid in `threads`.
    #[serde(skip)]
    index: HashMap<u32, usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadSeries {
    pub tid: u32,
    pub comm: String,
    pub energy_uj: Vec<f64>,
}

impl PartialEq for Timeline {
    /// The tid index is a cache: two timelines with the same data are equal.
    fn eq(&self, other: &Self) -> bool {
        self.bucket_s == other.bucket_s
            && self.covered_s == other.covered_s
            && self.cycles == other.cycles
            && self.end_epoch_s == other.end_epoch_s
            && self.energy_uj == other.energy_uj
            && self.threads == other.threads
            && self.other_threads == other.other_threads
            && self.other_thread_count == other.other_thread_count
    }
}

impl ThreadSeries {
    pub fn total_uj(&self) -> f64 {
        self.energy_uj.iter().sum()
    }
}

impl Timeline {
    /// Adds one cycle that started `offset_s` after the run's start and lasted `duration_s`;
    /// `threads` are its `(tid, comm, energy)`.
    pub fn add_cycle<'a>(
        &mut self,
        offset_s: f64,
        duration_s: f64,
        end_epoch_s: u64,
        threads: impl IntoIterator<Item = (u32, &'a str, f64)>,
    ) {
        if self.bucket_s <= 0.0 {
            self.bucket_s = duration_s.max(1e-3);
        }
        let middle_s = (offset_s + duration_s / 2.0).max(0.0);
        let mut index = (middle_s / self.bucket_s) as usize;
        while index >= MAX_BUCKETS {
            self.merge_pairs();
            index = (middle_s / self.bucket_s) as usize;
        }
        self.grow(index + 1);
        self.covered_s[index] += duration_s;
        self.cycles[index] += 1;
        self.end_epoch_s[index] = self.end_epoch_s[index].max(end_epoch_s);
        for (tid, comm, energy_uj) in threads {
            self.energy_uj[index] += energy_uj;
            let len = self.covered_s.len();
            if self.index.len() != self.threads.len() {
                self.rebuild_index();
            }
            if !self.index.contains_key(&tid) && self.threads.len() >= MAX_THREAD_SERIES {
                self.fold_least_energy_thread();
                self.rebuild_index();
            }
            let next = self.threads.len();
            let i = *self.index.entry(tid).or_insert(next);
            if i == next {
                self.threads.push(ThreadSeries { tid, comm: String::new(), energy_uj: vec![0.0; len] });
            }
            let series = &mut self.threads[i];
            if !comm.is_empty() {
                series.comm = comm.to_owned();
            }
            series.energy_uj[index] += energy_uj;
        }
    }

    fn rebuild_index(&mut self) {
        self.index = self.threads.iter().enumerate().map(|(i, t)| (t.tid, i)).collect();
    }

    /// Moves the thread with the least energy so far (the oldest of equals) into
    /// `other_threads`.
    fn fold_least_energy_thread(&mut self) {
        let Some(least) =
            (0..self.threads.len()).min_by(|&a, &b| self.threads[a].total_uj().total_cmp(&self.threads[b].total_uj()))
        else {
            return;
        };
        let folded = self.threads.remove(least);
        let len = self.covered_s.len();
        let other = self.other_threads.get_or_insert_with(|| ThreadSeries {
            tid: 0,
            comm: String::new(),
            energy_uj: vec![0.0; len],
        });
        for (sum, e) in other.energy_uj.iter_mut().zip(&folded.energy_uj) {
            *sum += e;
        }
        self.other_thread_count += 1;
    }

    fn series_mut(&mut self) -> impl Iterator<Item = &mut ThreadSeries> {
        self.threads.iter_mut().chain(self.other_threads.as_mut())
    }

    fn grow(&mut self, len: usize) {
        if self.covered_s.len() >= len {
            return;
        }
        self.covered_s.resize(len, 0.0);
        self.cycles.resize(len, 0);
        self.end_epoch_s.resize(len, 0);
        self.energy_uj.resize(len, 0.0);
        for t in self.series_mut() {
            t.energy_uj.resize(len, 0.0);
        }
    }

    fn merge_pairs(&mut self) {
        fn pairs<T: Copy>(v: &[T], join: impl Fn(T, T) -> T) -> Vec<T> {
            v.chunks(2).map(|c| if c.len() == 2 { join(c[0], c[1]) } else { c[0] }).collect()
        }
        self.bucket_s *= 2.0;
        self.covered_s = pairs(&self.covered_s, |a, b| a + b);
        self.cycles = pairs(&self.cycles, |a, b| a + b);
        self.end_epoch_s = pairs(&self.end_epoch_s, u64::max);
        self.energy_uj = pairs(&self.energy_uj, |a, b| a + b);
        for t in self.series_mut() {
            t.energy_uj = pairs(&t.energy_uj, |a, b| a + b);
        }
    }

    /// The bucket holding the `occurrence`-th (from 0) cycle that ended at `epoch_s` (unix
    /// seconds, as the evolution files write it): the first bucket whose last cycle ended then
    /// or later, or a later one that also ends in that second. Two cycles can end in the same
    /// second (wall clock against cycle length); with one cycle per bucket they are told apart
    /// by their order.
    pub fn bucket_of_epoch(&self, epoch_s: u64, occurrence: usize) -> Option<usize> {
        let first = self.end_epoch_s.iter().position(|&end| end >= epoch_s)?;
        let same_second = self.end_epoch_s[first..].iter().take_while(|&&end| end == epoch_s).count();
        Some(first + occurrence.min(same_second.saturating_sub(1)))
    }

    /// Average power of `energy_uj` over each bucket (0 for an empty bucket).
    pub fn power_w(&self, energy_uj: &[f64]) -> Vec<f64> {
        energy_uj.iter().zip(&self.covered_s).map(|(e, s)| if *s > 0.0 { e / 1e6 / s } else { 0.0 }).collect()
    }

    /// Seconds from the run's start to the middle of each bucket.
    pub fn midpoints_s(&self) -> Vec<f64> {
        (0..self.covered_s.len()).map(|i| (i as f64 + 0.5) * self.bucket_s).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_ending_in_the_same_second_are_told_apart_by_order() {
        let mut t = Timeline::default();
        for (n, end) in [100, 101, 101, 102].into_iter().enumerate() {
            t.add_cycle(n as f64, 1.0, end, [(1, "main", 1.0)]);
        }
        assert_eq!(t.bucket_of_epoch(101, 0), Some(1));
        assert_eq!(t.bucket_of_epoch(101, 1), Some(2));
        assert_eq!(t.bucket_of_epoch(101, 5), Some(2), "never past that second");
        assert_eq!(t.bucket_of_epoch(102, 1), Some(3));
    }

    /// A pool that replaces its workers all the time: one long-lived busy thread and a new
    /// short-lived one every cycle, 1,000 of them.
    #[test]
    fn thread_churn_keeps_the_series_bounded_and_the_energy_whole() {
        let mut t = Timeline::default();
        let cycles = 1000u32;
        for n in 0..cycles {
            let worker_uj = 1.0 + f64::from(n % 7);
            t.add_cycle(
                f64::from(n),
                1.0,
                1_700_000_000 + u64::from(n) + 1,
                [(1, "main", 100.0), (1000 + n, "pool-worker", worker_uj)],
            );
        }
        assert!(t.threads.len() <= MAX_THREAD_SERIES, "{} series", t.threads.len());
        assert_eq!(t.other_thread_count as usize + t.threads.len(), 1 + cycles as usize);
        assert!(t.threads.iter().any(|s| s.tid == 1), "the busy thread keeps its series");
        let process: f64 = t.energy_uj.iter().sum();
        let other = t.other_threads.as_ref().expect("folded threads");
        let threads: f64 = t.threads.iter().map(ThreadSeries::total_uj).sum::<f64>() + other.total_uj();
        assert!((process - threads).abs() <= 1e-9 * process, "{process} vs {threads}");
        assert!(t.threads.iter().chain([other]).all(|s| s.energy_uj.len() == t.covered_s.len()));
        // The latest threads get their series: the last one is there.
        assert!(t.threads.iter().any(|s| s.tid == 1000 + cycles - 1));
    }

    #[test]
    fn energy_is_kept_when_buckets_merge_and_memory_stays_bounded() {
        let mut t = Timeline::default();
        let cycles = 3 * MAX_BUCKETS as u64 + 7;
        for n in 0..cycles {
            t.add_cycle(
                n as f64,
                1.0,
                1_700_000_000 + n + 1,
                [(10, "worker", 2.0), (11 + (n % 2) as u32, "pool", 1.0)],
            );
        }
        assert!(t.covered_s.len() <= MAX_BUCKETS);
        assert_eq!(t.bucket_s, 4.0);
        let total: f64 = t.energy_uj.iter().sum();
        assert_eq!(total, 3.0 * cycles as f64);
        let threads: f64 = t.threads.iter().map(ThreadSeries::total_uj).sum();
        assert_eq!(threads, total);
        assert_eq!(t.cycles.iter().sum::<u32>() as u64, cycles);
        assert_eq!(t.threads.len(), 3);
        assert!(t.threads.iter().all(|s| s.energy_uj.len() == t.covered_s.len()));
        // 3 µJ per 1 s cycle.
        assert!(t.power_w(&t.energy_uj)[..10].iter().all(|w| (w - 3e-6).abs() < 1e-12));
        // The cycle that ended at second 9 is in bucket 2 (cycles 8..12).
        assert_eq!(t.bucket_of_epoch(1_700_000_009, 0), Some(2));
        assert_eq!(t.bucket_of_epoch(1_800_000_000, 0), None);
    }
}
