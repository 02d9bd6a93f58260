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

/// A stack map keeps one stack per hash bucket: a stack whose bucket holds another is
/// refused. `STACKS_*` get `STACK_BUCKETS_PER_STACK` buckets for each stack a cycle can bring
/// (a user and a kernel stack per sample); the few stacks refused there go to
/// `STACKS_OVERFLOW_*`, a quarter of that size. With k stacks in a cycle about k²/2m collide
/// in the first map and almost none of those again in the second: at 100 Hz on 2 CPUs (400
/// stacks, 4096 + 1024 entries) ~20 stacks a cycle take the second chance and ~0.2 are lost
/// (0.05%), where one 32,768-entry map lost ~2.4 (0.6%) in six times the memory, which the
/// kernel allocates, charges and zeroes at start-up (~1 KB an entry).
const STACK_BUCKETS_PER_STACK: f64 = 8.0;
const MIN_STACK_ENTRIES: u32 = 1024;

/// Entries of `STACKS_*` and of `STACKS_OVERFLOW_*`, each capped at `declared`.
pub fn stack_map_entries(frequency_hz: u64, cpus: usize, interval_s: f64, declared: u32) -> (u32, u32) {
    let stacks = 2.0 * frequency_hz as f64 * cpus as f64 * interval_s.max(0.0) * STACK_BUCKETS_PER_STACK;
    let main = if !stacks.is_finite() || stacks >= f64::from(declared) {
        declared
    } else {
        (stacks.ceil() as u32).next_power_of_two().clamp(MIN_STACK_ENTRIES.min(declared), declared)
    };
    (main, (main / 4).max(MIN_STACK_ENTRIES).min(declared))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_maps_get_eight_buckets_per_stack_and_a_quarter_for_overflow() {
        // 2 stacks × 100 Hz × 2 CPUs × 1 s × 8 = 3,200 → 4,096.
        assert_eq!(stack_map_entries(100, 2, 1.0, 32 * 1024), (4096, 1024));
        // 2 × 100 × 16 × 1 × 8 = 25,600 → 32,768, overflow 8,192.
        assert_eq!(stack_map_entries(100, 16, 1.0, 32 * 1024), (32 * 1024, 8 * 1024));
        // Capped at the object's size, floors for tiny runs.
        assert_eq!(stack_map_entries(1000, 64, 1.0, 32 * 1024), (32 * 1024, 8 * 1024));
        assert_eq!(stack_map_entries(1, 1, 1.0, 32 * 1024), (1024, 1024));
        assert_eq!(stack_map_entries(100, 2, f64::INFINITY, 32 * 1024), (32 * 1024, 8 * 1024));
    }

    /// The loss the sizing comment promises, by simulating the kernel's one-stack-per-bucket
    /// maps with uniformly hashed distinct stacks: the two maps lose fewer stacks than one
    /// map of the old 32,768 entries.
    #[test]
    fn main_and_overflow_maps_lose_fewer_stacks_than_one_big_map() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            // splitmix64: a fixed, well-mixed sequence standing in for stack hashes.
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let (main, overflow) = stack_map_entries(100, 2, 1.0, 32 * 1024);
        let (cycles, stacks_per_cycle) = (2000, 400);
        let (mut lost_two_maps, mut lost_one_map) = (0u64, 0u64);
        for _ in 0..cycles {
            let mut first = vec![false; main as usize];
            let mut second = vec![false; overflow as usize];
            let mut big = vec![false; 32 * 1024];
            for _ in 0..stacks_per_cycle {
                let hash = next();
                let b = (hash % u64::from(main)) as usize;
                if first[b] {
                    let o = (hash % u64::from(overflow)) as usize;
                    if second[o] {
                        lost_two_maps += 1;
                    } else {
                        second[o] = true;
                    }
                } else {
                    first[b] = true;
                }
                let b = (hash % (32 * 1024)) as usize;
                if big[b] {
                    lost_one_map += 1;
                } else {
                    big[b] = true;
                }
            }
        }
        let total = (cycles * stacks_per_cycle) as f64;
        let (two, one) = (lost_two_maps as f64 / total, lost_one_map as f64 / total);
        assert!(two < 0.002, "two maps lose {:.3}%", two * 100.0);
        assert!(two < one, "two maps lose {:.3}%, one 32k map {:.3}%", two * 100.0, one * 100.0);
    }

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
            assert!(
                f64::from(entries) >= 4.0 * hz as f64 * cpus as f64 * interval,
                "{hz} Hz {cpus} CPUs {interval} s: {entries}"
            );
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
