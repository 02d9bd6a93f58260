//! How far apart two profiles' leaf methods are, and how far apart they come by chance: the
//! top-[`TOP_METHODS`] distance, a reference's split-half noise and the pooled percentile the
//! comparisons with JFR (`apps.rs`) are held to.

use std::collections::HashMap;

/// How many leaf methods the agreement with JFR is measured on.
pub const TOP_METHODS: usize = 15;

/// Samples by leaf method.
pub fn count_leaves(leaves: &[String]) -> HashMap<String, u64> {
    let mut m: HashMap<String, u64> = HashMap::new();
    for leaf in leaves {
        *m.entry(leaf.clone()).or_default() += 1;
    }
    m
}

/// Random halvings of a reference's samples whose distances [`split_half_pp`] takes the
/// median of.
const SPLITS: usize = 101;

/// A reference's own noise: the median top-15 distance between two random halves of its
/// samples, over [`SPLITS`] halvings (seeded, so a run's figure is reproducible). One fixed
/// split (even against odd samples) is a single draw of that distance: on the same 14 Jetty
/// recordings it gave 3.4-10.5 pp where the median of random splits was 4.2-7.9 pp (4.3
/// against 7.0 in one, 10.5 against 7.9 in another). And the samples come in time order, in
/// which a thread's consecutive samples are alike: interleaving pairs them up.
pub fn split_half_pp(leaves: &[String]) -> f64 {
    let mut shuffled = leaves.to_vec();
    let at = shuffled.len() / 2;
    random_split_distances(&mut shuffled, at, SPLITS, 0x6a09_e667_f3bc_c909)[SPLITS / 2]
}

/// The top-15 distances between `pool[..at]` and `pool[at..]` over `draws` seeded shuffles
/// of `pool`, sorted.
fn random_split_distances(pool: &mut [String], at: usize, draws: usize, seed: u64) -> Vec<f64> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut distances: Vec<f64> = (0..draws)
        .map(|_| {
            rng.shuffle(pool);
            let (a, b) = pool.split_at(at);
            top_distance(&count_leaves(a), &count_leaves(b)).0
        })
        .collect();
    distances.sort_by(f64::total_cmp);
    distances
}

/// Random deals [`pooled_p95_pp`] takes the 95th percentile of.
const DEALS: usize = 200;

/// The top-15 distance two samplers of one and the same distribution reach by chance with
/// these numbers of samples: ours (`ours`, counts by method) and the reference's (`reference`)
/// pooled, shuffled and dealt out again as `ours.len()` and `reference.len()` samples, over
/// [`DEALS`] seeded deals; the 95th percentile.
pub fn pooled_p95_pp(ours: &HashMap<String, u64>, reference: &[String]) -> f64 {
    let mut pool: Vec<String> = ours
        .iter()
        .flat_map(|(m, &n)| std::iter::repeat_n(m.clone(), n as usize))
        .chain(reference.iter().cloned())
        .collect();
    // Sorted first: a map's order differs from run to run, a seeded shuffle of a sorted pool does not.
    pool.sort();
    let ours_len = pool.len() - reference.len();
    random_split_distances(&mut pool, ours_len, DEALS, 0xbb67_ae85_84ca_a73b)[DEALS * 95 / 100]
}

/// Our leaf methods against one set of a reference's samples: how many it has, how far apart
/// the two are, and how far apart chance takes them.
#[derive(Debug, Clone, Default)]
pub struct Reference {
    pub samples: u64,
    pub leaf_distance_pp: f64,
    /// [`split_half_pp`] of the reference's samples.
    pub split_half_pp: f64,
    /// [`pooled_p95_pp`] of both.
    pub pooled_p95_pp: f64,
}

impl Reference {
    /// `ours` (counts by leaf method) against the reference's leaf methods, one per sample.
    pub fn of(ours: &HashMap<String, u64>, leaves: &[String]) -> Self {
        Reference {
            samples: leaves.len() as u64,
            leaf_distance_pp: top_distance(ours, &count_leaves(leaves)).0,
            split_half_pp: split_half_pp(leaves),
            pooled_p95_pp: pooled_p95_pp(ours, leaves),
        }
    }
}

/// Half the L1 distance in pp between two count tables' shares over the union of their
/// top-[`TOP_METHODS`] keys, and those keys' shares (largest in `b` first).
pub fn top_distance(a: &HashMap<String, u64>, b: &HashMap<String, u64>) -> (f64, Vec<(String, f64, f64)>) {
    let share = |m: &HashMap<String, u64>| {
        let total = m.values().sum::<u64>().max(1) as f64;
        m.iter().map(|(k, &v)| (k.clone(), 100.0 * v as f64 / total)).collect::<HashMap<String, f64>>()
    };
    let (sa, sb) = (share(a), share(b));
    let top = |s: &HashMap<String, f64>| {
        let mut v: Vec<(&String, &f64)> = s.iter().collect();
        v.sort_by(|x, y| y.1.total_cmp(x.1).then_with(|| x.0.cmp(y.0)));
        v.into_iter().take(TOP_METHODS).map(|(k, _)| k.clone()).collect::<Vec<String>>()
    };
    let mut keys = top(&sb);
    for k in top(&sa) {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let rows: Vec<(String, f64, f64)> = keys
        .into_iter()
        .map(|k| {
            let (x, y) = (sa.get(&k).copied().unwrap_or(0.0), sb.get(&k).copied().unwrap_or(0.0));
            (k, x, y)
        })
        .collect();
    let distance = rows.iter().map(|(_, x, y)| (x - y).abs()).sum::<f64>() / 2.0;
    (distance, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recording's samples of a steady workload: the methods in turn, each sampled `run`
    /// times in a row (a thread stays a while in what it runs).
    fn samples(counts: &[(&str, usize)], run: usize) -> Vec<String> {
        let mut out = Vec::new();
        let longest = counts.iter().map(|(_, n)| *n).max().unwrap_or(0);
        for i in (0..longest).step_by(run) {
            for (m, n) in counts {
                out.extend((i..(i + run).min(*n)).map(|_| m.to_string()));
            }
        }
        out
    }

    #[test]
    fn one_method_has_no_split_half_noise() {
        assert_eq!(split_half_pp(&samples(&[("A.run", 400)], 1)), 0.0);
    }

    #[test]
    fn split_half_noise_is_the_sampling_noise_of_half_the_samples() {
        // Two methods, 500 samples each. Halves of 500 samples: the share of one method in a
        // half is 50% ± sqrt(0.25 / 500) = 2.24 pp, the two halves' shares differ by
        // |N(0, 3.16 pp)| (they sum to 100%), and the top-15 distance (half the L1 over both
        // methods) is that difference, whose median is 0.674 x 3.16 = 2.13 pp.
        let paired = samples(&[("A.run", 500), ("B.run", 500)], 2);
        let noise = split_half_pp(&paired);
        assert!((1.5..2.8).contains(&noise), "{noise}");
        // Even against odd samples, where each sample is like the one before it: two halves
        // alike to the sample, which would say there is no noise at all.
        let (even, odd): (Vec<String>, Vec<String>) =
            (paired.iter().step_by(2).cloned().collect(), paired.iter().skip(1).step_by(2).cloned().collect());
        assert_eq!(top_distance(&count_leaves(&even), &count_leaves(&odd)).0, 0.0);
    }

    #[test]
    fn two_samplers_of_one_distribution_stay_within_the_pooled_noise_and_a_shifted_one_does_not() {
        let reference = samples(&[("A.run", 600), ("B.run", 300), ("C.run", 100)], 1);
        let same: HashMap<String, u64> = count_leaves(&samples(&[("A.run", 590), ("B.run", 310), ("C.run", 100)], 1));
        let shifted: HashMap<String, u64> =
            count_leaves(&samples(&[("A.run", 500), ("B.run", 400), ("C.run", 100)], 1));
        let p95 = pooled_p95_pp(&same, &reference);
        // Two sides of 1,000: A's shares differ by N(0, sqrt(2 x 0.24 / 1000) = 2.2 pp), and the
        // top-15 distance is at least that difference: a 95th percentile of some 4-5 pp.
        assert!((3.0..6.0).contains(&p95), "{p95}");
        assert!(top_distance(&same, &count_leaves(&reference)).0 <= p95);
        // 10 pp moved from A to B is far past it.
        assert!(top_distance(&shifted, &count_leaves(&reference)).0 > 1.5 * pooled_p95_pp(&shifted, &reference));
    }

    #[test]
    fn a_reference_with_four_times_the_samples_has_half_the_noise() {
        let small = split_half_pp(&samples(&[("A.run", 300), ("B.run", 200), ("C.run", 100)], 1));
        let large = split_half_pp(&samples(&[("A.run", 1200), ("B.run", 800), ("C.run", 400)], 1));
        assert!(large < 0.7 * small && large > 0.3 * small, "{small} -> {large}");
    }
}
