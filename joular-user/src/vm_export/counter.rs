//! The `energy_uj` counter written for a VM: what a reader of RAPL expects, only ever going up
//! until it wraps to 0 at `max_energy_range_uj` (powercap's convention, which the guest's
//! reader settles the same way as a real RAPL counter's wrap).

/// The range written when none is asked for: what Intel's RAPL driver reports on most
/// machines (2^32 counts of 61.035 µJ), so a reader treats it as it treats RAPL.
pub const DEFAULT_RANGE_UJ: u64 = 262_143_328_850;

#[derive(Debug, Clone, PartialEq)]
pub struct ExportCounter {
    /// The value written, in [0, range_uj).
    value_uj: u64,
    range_uj: u64,
    /// The part of a µJ not yet counted: a cycle's energy is fractional, the file is not, and
    /// dropping the fraction every cycle would drift.
    carry_uj: f64,
    /// Everything added since this counter started, for Prometheus (which has no wrap).
    total_uj: f64,
}

impl ExportCounter {
    /// Continues from `previous_uj`, the value a reader last saw (read back from the file at
    /// start), so a restart of the writer never shows the reader a step back. A value beyond
    /// the range (the range was changed) is taken modulo it.
    pub fn resume(previous_uj: u64, range_uj: u64) -> Self {
        let range_uj = range_uj.max(1);
        Self { value_uj: previous_uj % range_uj, range_uj, carry_uj: 0.0, total_uj: 0.0 }
    }

    /// Adds a cycle's energy; negative or non-finite energy adds nothing.
    pub fn add(&mut self, energy_uj: f64) {
        let energy_uj = if energy_uj.is_finite() && energy_uj > 0.0 { energy_uj } else { 0.0 };
        self.total_uj += energy_uj;
        let whole = (self.carry_uj + energy_uj).floor();
        self.carry_uj = self.carry_uj + energy_uj - whole;
        // f64 holds whole µJ exactly up to 2^53 (285 years at 1 kW): no saturation worry in a cycle.
        let step = whole as u128 % self.range_uj as u128;
        self.value_uj = ((self.value_uj as u128 + step) % self.range_uj as u128) as u64;
    }

    pub fn value_uj(&self) -> u64 {
        self.value_uj
    }

    pub fn range_uj(&self) -> u64 {
        self.range_uj
    }

    pub fn total_uj(&self) -> f64 {
        self.total_uj
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::WrappingCounter;

    #[test]
    fn fractions_are_carried_not_dropped() {
        let mut c = ExportCounter::resume(0, DEFAULT_RANGE_UJ);
        for _ in 0..1_000 {
            c.add(0.4);
        }
        assert_eq!(c.value_uj(), 400);
        assert!((c.total_uj() - 400.0).abs() < 1e-6);
        for bad in [-5.0, f64::NAN, f64::INFINITY] {
            c.add(bad);
        }
        assert_eq!(c.value_uj(), 400);
    }

    /// The reader's own wrap logic (the one every powercap counter goes through) sees exactly
    /// the energy written, across wraps and a restart of the writer.
    #[test]
    fn a_reader_sees_every_joule_across_wraps_and_a_restart() {
        let range = 1_000;
        let mut writer = ExportCounter::resume(0, range);
        let mut reader = WrappingCounter::new(writer.value_uj(), Some(range));
        let mut seen = 0u64;
        let mut written = 0u64;
        for step in [300.0, 600.0, 250.0, 999.0, 1.0, 40.0] {
            writer.add(step);
            written += step as u64;
            let delta = reader.update(writer.value_uj());
            assert!(!delta.flagged);
            seen += delta.delta;
        }
        assert_eq!((seen, written), (2_190, 2_190));
        assert_eq!(writer.value_uj(), 190);
        // The writer restarts from what it wrote: the reader sees no step back.
        let mut restarted = ExportCounter::resume(writer.value_uj(), range);
        restarted.add(20.0);
        let delta = reader.update(restarted.value_uj());
        assert_eq!((delta.delta, delta.flagged), (20, false));
        assert_eq!(ExportCounter::resume(2_500, range).value_uj(), 500);
    }

    #[test]
    fn a_huge_cycle_still_lands_in_range() {
        let mut c = ExportCounter::resume(DEFAULT_RANGE_UJ - 1, DEFAULT_RANGE_UJ);
        c.add(3.0 * DEFAULT_RANGE_UJ as f64 + 2.0);
        assert_eq!(c.value_uj(), 1);
    }
}
