//! How big the per-cycle maps are made at load. The object declares them for the largest
//! host (`MAX_SAMPLE_KEYS`, `MAX_JAVA_STACKS`), but a map is preallocated and zeroed in
//! full when it is created: at those sizes the sample and walked-stack maps alone are ~40 MB
//! of kernel memory the profiler charges, zeroes and frees on every run, inside the first
//! seconds of the workload it measures.
//!
//! Both maps take at most one new entry per sample, and a buffer holds one cycle: their
//! need is bounded by the samples of a cycle, `frequency × CPUs × interval`. They get
//! `CYCLE_MARGIN` times that (a cycle drained late, a burst of exits), never less than
//! `MIN_ENTRIES` and never more than the object's size. A map that fills anyway counts
//! what it loses (`samples_map_full`, `java_stack_map_full`).

/// Cycles' worth of samples a buffer can hold.
const CYCLE_MARGIN: f64 = 4.0;
const MIN_ENTRIES: u32 = 2048;

/// Entries for a map that takes at most one entry per sample of a cycle, capped at
/// `declared` (the object's own size).
pub fn per_cycle_entries(frequency_hz: u64, cpus: usize, interval_s: f64, declared: u32) -> u32 {
    let samples = frequency_hz as f64 * cpus as f64 * interval_s.max(0.0) * CYCLE_MARGIN;
    if !samples.is_finite() || samples >= f64::from(declared) {
        return declared;
    }
    (samples.ceil() as u32).next_power_of_two().clamp(MIN_ENTRIES.min(declared), declared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_cpus_at_100_hz_get_the_floor() {
        // 800 samples' worth rounds up to 1024, below the floor.
        assert_eq!(per_cycle_entries(100, 2, 1.0, 32 * 1024), 2048);
    }

    #[test]
    fn grows_with_frequency_cpus_and_interval() {
        // 4 × 1000 Hz × 8 CPUs × 1 s = 32,000 → 32,768.
        assert_eq!(per_cycle_entries(1000, 8, 1.0, 1 << 20), 32 * 1024);
        // 4 × 100 Hz × 16 CPUs × 5 s = 32,000 → 32,768.
        assert_eq!(per_cycle_entries(100, 16, 5.0, 1 << 20), 32 * 1024);
        // Always room for every sample of four cycles.
        for (hz, cpus, interval) in [(97, 3, 1.0), (100, 64, 1.0), (1000, 2, 0.25), (250, 12, 2.5)] {
            let entries = per_cycle_entries(hz, cpus, interval, u32::MAX);
            assert!(f64::from(entries) >= 4.0 * hz as f64 * cpus as f64 * interval, "{hz} Hz {cpus} CPUs {interval} s: {entries}");
        }
    }

    #[test]
    fn never_above_the_declared_size() {
        assert_eq!(per_cycle_entries(100, 64, 1.0, 8192), 8192);
        assert_eq!(per_cycle_entries(1000, 1024, 60.0, 32 * 1024), 32 * 1024);
        assert_eq!(per_cycle_entries(100, 2, f64::INFINITY, 8192), 8192);
        // A declared size under the floor stays as declared.
        assert_eq!(per_cycle_entries(1, 1, 1.0, 1000), 1000);
    }
}
