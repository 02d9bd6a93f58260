//! `--sampler-cost`: the sampler's time per sample of a profiled thread, as the kernel counted
//! it in `SAMPLE_NS` (buckets of `SAMPLE_NS_BUCKET_NS`, per CPU), summed over the CPUs and read
//! as a distribution: its median and tail, which `kernel.bpf_stats_enabled` cannot give (it
//! keeps a sum and a count, over every sample, a profiled thread's or not).

use joular_ebpf::sampler_cost::{SAMPLE_NS_BUCKETS, SAMPLE_NS_BUCKET_NS};

/// Samples by bucket of the sampler's time on them, all CPUs together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplerCost {
    counts: Vec<u64>,
}

impl SamplerCost {
    /// Sums the per-CPU counts of each bucket (`per_bucket[i]`: bucket `i` on every CPU).
    pub fn from_per_cpu<I, C>(per_bucket: I) -> Self
    where
        I: IntoIterator<Item = C>,
        C: IntoIterator<Item = u64>,
    {
        let mut counts: Vec<u64> = per_bucket.into_iter().map(|cpus| cpus.into_iter().sum()).collect();
        counts.resize(SAMPLE_NS_BUCKETS as usize, 0);
        SamplerCost { counts }
    }

    pub fn samples(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The bucket holding the `q`-quantile of the samples (0 < q <= 1), as its ns bounds
    /// `[low, high)`; `high` is None for the last bucket, which has no upper bound. None when
    /// nothing was counted.
    pub fn quantile_ns(&self, q: f64) -> Option<(u64, Option<u64>)> {
        let total = self.samples();
        if total == 0 {
            return None;
        }
        // The rank of the quantile sample, 1-based: the median of 4 samples is the 2nd.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        let last = self.counts.len() - 1;
        for (i, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let low = i as u64 * SAMPLE_NS_BUCKET_NS;
                return Some((low, (i < last).then_some(low + SAMPLE_NS_BUCKET_NS)));
            }
        }
        None
    }

    /// One line for the end of a run: the sample count, median, p90 and p99, each as the bucket
    /// it falls in (the kernel counts whole buckets).
    pub fn summary(&self) -> String {
        let show = |q: f64| match self.quantile_ns(q) {
            Some((low, Some(high))) => format!("{low}-{high} ns"),
            Some((low, None)) => format!(">= {low} ns"),
            None => "-".to_owned(),
        };
        format!(
            "sampler cost: {} samples of profiled threads, median {}, p90 {}, p99 {} (ns a sample, \
             from the sampler's first clock read to its last store)",
            self.samples(),
            show(0.5),
            show(0.9),
            show(0.99)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts per bucket, one CPU.
    fn one_cpu(counts: &[(usize, u64)]) -> SamplerCost {
        let mut buckets = vec![vec![0u64]; SAMPLE_NS_BUCKETS as usize];
        for &(i, n) in counts {
            buckets[i][0] = n;
        }
        SamplerCost::from_per_cpu(buckets)
    }

    #[test]
    fn cpus_are_summed_bucket_by_bucket() {
        let cost = SamplerCost::from_per_cpu(vec![vec![1, 2], vec![0, 0], vec![3, 4]]);
        assert_eq!(cost.samples(), 10);
        // 3 in bucket 0, 7 in bucket 2: the median (5th sample) is in bucket 2.
        assert_eq!(cost.quantile_ns(0.5), Some((2 * SAMPLE_NS_BUCKET_NS, Some(3 * SAMPLE_NS_BUCKET_NS))));
        assert_eq!(cost.quantile_ns(0.3), Some((0, Some(SAMPLE_NS_BUCKET_NS))));
    }

    #[test]
    fn quantiles_fall_in_the_bucket_of_their_rank() {
        // 50 samples at 1.9-2.0 us, 50 at 3.0-3.1 us: the 50th sample is the median.
        let cost = one_cpu(&[(19, 50), (30, 50)]);
        assert_eq!(cost.quantile_ns(0.5), Some((1900, Some(2000))));
        assert_eq!(cost.quantile_ns(0.51), Some((3000, Some(3100))));
        assert_eq!(cost.quantile_ns(1.0), Some((3000, Some(3100))));
        assert_eq!(cost.quantile_ns(0.0), Some((1900, Some(2000))), "the first sample at least");
    }

    #[test]
    fn the_last_bucket_has_no_upper_bound() {
        let last = SAMPLE_NS_BUCKETS as usize - 1;
        let cost = one_cpu(&[(3, 1), (last, 9)]);
        assert_eq!(cost.quantile_ns(0.5), Some((last as u64 * SAMPLE_NS_BUCKET_NS, None)));
        assert!(
            cost.summary().contains(&format!("median >= {} ns", last as u64 * SAMPLE_NS_BUCKET_NS)),
            "{}",
            cost.summary()
        );
    }

    #[test]
    fn nothing_counted_has_no_quantiles() {
        let cost = one_cpu(&[]);
        assert_eq!(cost.samples(), 0);
        assert_eq!(cost.quantile_ns(0.5), None);
        assert!(cost.summary().contains("0 samples") && cost.summary().contains("median -"), "{}", cost.summary());
    }

    #[test]
    fn the_summary_gives_median_p90_and_p99() {
        // 100 samples: 89 at 2.0-2.1 us, 10 at 5.0-5.1 us, 1 at 9.0-9.1 us.
        let cost = one_cpu(&[(20, 89), (50, 10), (90, 1)]);
        let line = cost.summary();
        assert!(line.contains("100 samples"), "{line}");
        assert!(line.contains("median 2000-2100 ns"), "{line}");
        assert!(line.contains("p90 5000-5100 ns"), "{line}");
        assert!(line.contains("p99 5000-5100 ns"), "the 99th of 100 is still at 5 us: {line}");
        let cost = one_cpu(&[(20, 89), (50, 9), (90, 2)]);
        assert!(cost.summary().contains("p99 9000-9100 ns"), "{}", cost.summary());
    }
}
