//! A cycle's sample counts from its two kernel sources: each CPU's `SampleLog` (samples
//! appended in order) and the `COUNTS_*` hash map the sampler falls back to when its log is
//! full. Both count the same keys; a cycle's counts are their sum per key.

use std::collections::HashMap;

use joular_ebpf::{SampleKey, SampleLog, SAMPLE_LOG_SLOTS};

/// Counts per key of the logs written under `tag` (the drained buffer's
/// `CONFIG_ACTIVE_BUFFER` value) plus the hash map's `counted` entries. A log with another
/// tag was last written in an older cycle, already drained.
pub fn merge_counts<'a>(
    logs: impl IntoIterator<Item = &'a SampleLog>,
    tag: u32,
    counted: &[(SampleKey, u64)],
) -> Vec<(SampleKey, u64)> {
    let mut counts: HashMap<SampleKey, u64> = HashMap::with_capacity(counted.len());
    for log in logs.into_iter().filter(|log| log.tag == tag) {
        let len = (log.len as usize).min(SAMPLE_LOG_SLOTS);
        for key in &log.keys[..len] {
            *counts.entry(*key).or_default() += 1;
        }
    }
    for (key, n) in counted {
        *counts.entry(*key).or_default() += n;
    }
    counts.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use joular_ebpf::JavaFrame;

    fn key(tid: u32, cpu: u32, leaf: u64) -> SampleKey {
        SampleKey {
            tgid: 100,
            tid,
            cpu,
            user_stack_id: -1,
            kernel_stack_id: if leaf.is_multiple_of(7) { 3 } else { -1 },
            start_ticks: 0,
            java_stack_hash: 0xabc + u64::from(tid),
            java_leaf: JavaFrame { addr: 0x7f00_0000 + leaf, aux: 1 << 56 },
            comm: *b"worker\0\0\0\0\0\0\0\0\0\0",
        }
    }

    fn empty_log(tag: u32) -> Box<SampleLog> {
        Box::new(SampleLog { tag, len: 0, keys: [key(0, 0, 0); SAMPLE_LOG_SLOTS] })
    }

    /// What the sampler does with one sample (account.rs `log_sample`, then `COUNTS_*`).
    fn kernel_sample(log: &mut SampleLog, counts: &mut HashMap<SampleKey, u64>, tag: u32, k: SampleKey) {
        if log.tag != tag {
            log.tag = tag;
            log.len = 0;
        }
        if (log.len as usize) < SAMPLE_LOG_SLOTS {
            log.keys[log.len as usize] = k;
            log.len += 1;
        } else {
            *counts.entry(k).or_default() += 1;
        }
    }

    fn sorted(mut v: Vec<(SampleKey, u64)>) -> Vec<(SampleKey, u64)> {
        v.sort_by_key(|(k, _)| (k.cpu, k.tid, k.java_leaf.addr, k.kernel_stack_id));
        v
    }

    /// A recorded cycle shape: 2 CPUs, 2 busy threads, hot-loop leaves that repeat, one CPU
    /// past its log's capacity (so a key is counted in both the log and the hash map).
    fn recorded_cycle() -> Vec<SampleKey> {
        let mut samples = Vec::new();
        for i in 0..(SAMPLE_LOG_SLOTS as u64 + 250) {
            samples.push(key(11, 0, (i * 13) % 37));
            if i % 3 == 0 {
                samples.push(key(12, 1, (i * 5) % 29));
            }
        }
        samples
    }

    #[test]
    fn logged_and_hashed_counts_equal_the_hash_map_alone_on_a_recorded_cycle() {
        let tag = 7 << 1 | 1;
        let samples = recorded_cycle();
        // The path without logs: every sample through the hash map.
        let mut hashed_only: HashMap<SampleKey, u64> = HashMap::new();
        for k in &samples {
            *hashed_only.entry(*k).or_default() += 1;
        }
        let mut logs = [empty_log(0), empty_log(0)];
        let mut overflow = HashMap::new();
        for k in &samples {
            kernel_sample(&mut logs[k.cpu as usize], &mut overflow, tag, *k);
        }
        assert_eq!(logs[0].len as usize, SAMPLE_LOG_SLOTS, "CPU 0 must overflow its log for this test");
        assert!(!overflow.is_empty());
        let counted: Vec<_> = overflow.into_iter().collect();
        let merged = merge_counts(logs.iter().map(|l| &**l), tag, &counted);
        assert_eq!(sorted(merged.clone()), sorted(hashed_only.into_iter().collect()));
        assert_eq!(merged.iter().map(|(_, n)| n).sum::<u64>(), samples.len() as u64);
    }

    #[test]
    fn a_log_of_an_older_cycle_is_not_counted_again() {
        let (old_tag, tag) = (5 << 1 | 1, 6 << 1 | 1);
        let mut stale = empty_log(old_tag);
        stale.keys[0] = key(11, 0, 1);
        stale.len = 1;
        let mut fresh = empty_log(tag);
        fresh.keys[0] = key(12, 1, 2);
        fresh.keys[1] = key(12, 1, 2);
        fresh.len = 2;
        let merged = merge_counts([&*stale, &*fresh], tag, &[(key(12, 1, 2), 3)]);
        assert_eq!(merged, vec![(key(12, 1, 2), 5)]);
    }

    #[test]
    fn a_length_past_the_log_reads_only_the_log() {
        let tag = 2;
        let mut log = empty_log(tag);
        log.len = u32::MAX;
        let merged = merge_counts([&*log], tag, &[]);
        assert_eq!(merged, vec![(key(0, 0, 0), SAMPLE_LOG_SLOTS as u64)]);
    }
}
