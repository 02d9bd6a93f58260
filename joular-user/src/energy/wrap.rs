//! Energy counters only go up, until they wrap. Turning two raw reads into a delta is the
//! one place where a wrap, or a counter that misbehaves, is decided.

/// Energy counted since the previous read, in the counter's own unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterDelta {
    pub delta: u64,
    /// The counter went backwards and no wrap range explains it (reset, hotplug, firmware):
    /// the delta is then 0, never negative, and the cycle is flagged.
    pub flagged: bool,
}

/// A counter that wraps to 0 after `range` (powercap `max_energy_range_uj`, 2^32 for MSRs),
/// or never wraps (`range = None`, e.g. perf's 64-bit accumulated count).
#[derive(Debug, Clone)]
pub struct WrappingCounter {
    range: Option<u64>,
    last: u64,
}

impl WrappingCounter {
    /// `first` is the baseline read when the source opens, so the first delta covers the
    /// first cycle only.
    pub fn new(first: u64, range: Option<u64>) -> Self {
        Self { range, last: first }
    }

    pub fn update(&mut self, now: u64) -> CounterDelta {
        let prev = std::mem::replace(&mut self.last, now);
        if now >= prev {
            return CounterDelta { delta: now - prev, flagged: false };
        }
        match self.range {
            // One wrap per cycle at most: at RAPL rates a 32-bit counter takes minutes to wrap.
            Some(range) if prev <= range => CounterDelta { delta: range - prev + now, flagged: false },
            _ => CounterDelta { delta: 0, flagged: true },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_reads_give_the_difference() {
        let mut c = WrappingCounter::new(100, Some(1_000));
        assert_eq!(c.update(350), CounterDelta { delta: 250, flagged: false });
        assert_eq!(c.update(350), CounterDelta { delta: 0, flagged: false });
    }

    #[test]
    fn wrap_in_the_middle_of_a_run_counts_both_sides() {
        let mut c = WrappingCounter::new(900, Some(1_000));
        assert_eq!(c.update(950).delta, 50);
        // 950 -> 1000 (50) then 0 -> 30 (30).
        assert_eq!(c.update(30), CounterDelta { delta: 80, flagged: false });
        assert_eq!(c.update(130).delta, 100);
    }

    #[test]
    fn thirty_two_bit_wrap_is_exact_modular_difference() {
        let range = 1u64 << 32;
        let prev = u32::MAX as u64 - 5;
        let mut c = WrappingCounter::new(prev, Some(range));
        let now = 10u64;
        let expected = (now as u32).wrapping_sub(prev as u32) as u64;
        assert_eq!(c.update(now).delta, expected);
    }

    #[test]
    fn backwards_without_range_is_flagged_not_negative() {
        let mut c = WrappingCounter::new(5_000, None);
        assert_eq!(c.update(4_000), CounterDelta { delta: 0, flagged: true });
        // The next cycle continues from the new value.
        assert_eq!(c.update(4_500), CounterDelta { delta: 500, flagged: false });
    }

    #[test]
    fn backwards_from_beyond_the_range_is_flagged() {
        let mut c = WrappingCounter::new(2_000, Some(1_000));
        assert!(c.update(10).flagged);
    }
}
