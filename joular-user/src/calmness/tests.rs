//! Calmness on fake traces whose bins and correlations are worked out by hand below.

use super::*;
use crate::model::CpuFrequency;

/// One cycle per entry, CPU i at `khz[i]`.
fn trace(cycles: &[&[u64]]) -> Vec<FrequencyCycle> {
    cycles
        .iter()
        .enumerate()
        .map(|(t, khz)| FrequencyCycle {
            cycle: t as u64,
            start_epoch_ms: 1_000 * t as u64,
            end_epoch_ms: 1_000 * (t as u64 + 1),
            cpus: khz.iter().enumerate().map(|(cpu, &khz)| CpuFrequency { cpu: cpu as u32, khz }).collect(),
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn two_bins_by_hand() {
    // Pooled (16 samples): 1000 ×5, 2000 ×5, 3000 ×6. Q1 (position 3.75) = 1000, Q3 (11.25) =
    // 3000, IQR 2000, width 2·2000/∛16 = 1587.4 kHz, K = ⌈2000/1587.4⌉ = 2: [1000, 2000) and
    // [2000, 3000].
    let a = trace(&[&[1000, 1000], &[1000, 2000], &[2000, 3000], &[3000, 3000]]);
    let b = trace(&[&[1000, 2000], &[2000, 2000], &[3000, 3000], &[1000, 3000]]);
    let c = calmness(("a", &a), ("b", &b)).unwrap();
    assert_eq!(c.bins.rule, "freedman-diaconis");
    assert_eq!(c.bins.samples, 16);
    assert!(close(c.bins.iqr_khz, 2000.0));
    assert!(close(c.bins.fd_width_khz, 4000.0 / 16f64.cbrt()));
    assert_eq!(c.bins.edges_khz, vec![1000.0, 2000.0, 3000.0]);
    // C_S: a has 3 of 8 samples in bin 0, b 2 of 8.
    assert_eq!(c.a.spatial, vec![3.0 / 8.0, 5.0 / 8.0]);
    assert_eq!(c.b.spatial, vec![2.0 / 8.0, 6.0 / 8.0]);
    // Two points on a rising line each: r = 1.
    assert!(close(c.spatial_pearson.unwrap(), 1.0));
    // C_T row by row.
    assert_eq!(c.a.temporal, vec![vec![1.0, 0.0], vec![0.5, 0.5], vec![0.0, 1.0], vec![0.0, 1.0]]);
    assert_eq!(c.b.temporal, vec![vec![0.5, 0.5], vec![0.0, 1.0], vec![0.0, 1.0], vec![0.5, 0.5]]);
    // Flattened, both means 0.5: Σdx·dy = 0.5, Σdx² = 1.5, Σdy² = 1.0, r = 0.5/√1.5.
    assert!(close(c.temporal_pearson.unwrap(), 0.5 / 1.5f64.sqrt()));
    assert_eq!(c.temporal_cycles, 4);
    assert!(c.notes.is_empty(), "{:?}", c.notes);
    assert!(close(c.a.mean_khz, 16_000.0 / 8.0));
}

#[test]
fn twenty_bins_and_an_outlier_by_hand() {
    // Pooled (8): 1000 1000 1100 1100 1200 1200 1300 4000. Q1 (1.75) = 1075, Q3 (5.25) = 1225,
    // IQR 150, width 2·150/∛8 = 150, K = 3000/150 = 20 bins of 150 kHz.
    let a = trace(&[&[1000, 1100, 1200, 4000]]);
    let b = trace(&[&[1000, 1100, 1200, 1300]]);
    let c = calmness(("a", &a), ("b", &b)).unwrap();
    assert!(close(c.bins.iqr_khz, 150.0));
    assert!(close(c.bins.fd_width_khz, 150.0));
    assert_eq!(c.bins.count(), 20);
    // a: bins 0, 0, 1, 19; b: bins 0, 0, 1, 2.
    let mut want_a = vec![0.0; 20];
    (want_a[0], want_a[1], want_a[19]) = (0.5, 0.25, 0.25);
    let mut want_b = vec![0.0; 20];
    (want_b[0], want_b[1], want_b[2]) = (0.5, 0.25, 0.25);
    assert_eq!(c.a.spatial, want_a);
    assert_eq!(c.b.spatial, want_b);
    // Means 1/20: Σxy − n·mx·my = 0.3125 − 0.05, Σx² − n·mx² = 0.375 − 0.05 (the same for y):
    // r = 0.2625/0.325.
    assert!(close(c.spatial_pearson.unwrap(), 0.2625 / 0.325));
    // One cycle whose every CPU is counted: C_T is C_S.
    assert!(close(c.temporal_pearson.unwrap(), 0.2625 / 0.325));
}

#[test]
fn an_iqr_of_zero_falls_back_to_sturges_and_says_so() {
    // 10 samples, 9 at 2000: IQR 0. Sturges: ⌈log₂ 10⌉ + 1 = 5 bins over [2000, 3000].
    let a = trace(&[&[2000, 2000, 2000, 2000, 2000]]);
    let b = trace(&[&[2000, 2000, 2000, 2000, 3000]]);
    let c = calmness(("a", &a), ("b", &b)).unwrap();
    assert_eq!(c.bins.rule, "sturges (IQR is 0)");
    assert_eq!(c.bins.edges_khz, vec![2000.0, 2200.0, 2400.0, 2600.0, 2800.0, 3000.0]);
    assert_eq!(c.a.spatial, vec![1.0, 0.0, 0.0, 0.0, 0.0]);
    assert_eq!(c.b.spatial, vec![0.8, 0.0, 0.0, 0.0, 0.2]);
    // Means 0.2: Σxy − 5·0.04 = 0.8 − 0.2 = 0.6; Σx² − 0.2 = 0.8; Σy² − 0.2 = 0.48.
    assert!(close(c.spatial_pearson.unwrap(), 0.6 / (0.8f64 * 0.48).sqrt()));
}

#[test]
fn a_constant_distribution_has_no_correlation_and_says_why() {
    let a = trace(&[&[2000, 2000], &[2000, 2000]]);
    let b = trace(&[&[2000, 2000]]);
    let c = calmness(("a", &a), ("b", &b)).unwrap();
    assert_eq!(c.bins.count(), 1);
    assert_eq!((c.spatial_pearson, c.temporal_pearson), (None, None), "never a made-up number");
    assert!(c.notes.iter().any(|n| n.starts_with("the spatial correlation is undefined")), "{:?}", c.notes);
    assert!(c.notes.iter().any(|n| n.contains("2 and 1 cycles")), "{:?}", c.notes);
    assert_eq!(calmness(("a", &a), ("empty", &[])).unwrap_err(), NoSamples("empty".into()));
}

#[test]
fn pearson_by_hand_and_undefined_cases() {
    assert!(close(pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]).unwrap(), 1.0));
    assert!(close(pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap(), -1.0));
    // Means 2 and 2: dx = [-1, 0, 1], dy = [-1, 1, 0]: Σdx·dy = 1, Σdx² = Σdy² = 2, r = 0.5.
    assert!(close(pearson(&[1.0, 2.0, 3.0], &[1.0, 3.0, 2.0]).unwrap(), 0.5));
    assert_eq!(pearson(&[1.0, 1.0], &[1.0, 2.0]), None);
    assert_eq!(pearson(&[1.0], &[1.0]), None);
}

#[test]
fn the_html_shows_both_runs_and_the_correlations() {
    let a = trace(&[&[1000, 1000], &[1000, 2000], &[2000, 3000], &[3000, 3000]]);
    let b = trace(&[&[1000, 2000], &[2000, 2000], &[3000, 3000], &[1000, 3000]]);
    let c = calmness(("run-a", &a), ("run-b", &b)).unwrap();
    let page = render_html(&c).unwrap();
    assert!(page.contains("<svg"), "a chart");
    assert!(page.contains("run-a") && page.contains("run-b"));
    assert!(page.contains("1.000"), "the spatial correlation");
}
