//! The few statistics `diff` needs: the mean and variance of a side's runs, the bootstrap
//! variance of one run's total over its cycles, and Student's t quantile for Welch's interval.

/// A side's estimate of one quantity: its value and the variance of that value, with the
/// degrees of freedom the variance rests on (`None`: known well enough to use the normal law).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub value: f64,
    /// `None` when nothing says how much the value varies (one run without per-cycle data).
    pub variance: Option<f64>,
    pub dof: Option<f64>,
}

impl Estimate {
    /// Several runs: their mean, and the variance of that mean (`s² / n`, `n − 1` degrees of
    /// freedom), as Welch's test takes it. One run gives no spread.
    pub fn of_runs(values: &[f64]) -> Self {
        let n = values.len() as f64;
        let value = mean(values);
        if values.len() < 2 {
            return Self { value, variance: None, dof: None };
        }
        let s2 = values.iter().map(|v| (v - value).powi(2)).sum::<f64>() / (n - 1.0);
        Self { value, variance: Some(s2 / n), dof: Some(n - 1.0) }
    }
}

pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// The bootstrap variance of a run's total, resampling its cycles with replacement within each
/// stratum (a process of the run): for a sum of `n` values drawn from `n`, it is exactly
/// `n · σ²` with the population variance σ² (the limit of the resampling, without its noise).
pub fn bootstrap_sum_variance<'a>(strata: impl IntoIterator<Item = &'a [f64]>) -> f64 {
    strata
        .into_iter()
        .filter(|s| !s.is_empty())
        .map(|s| {
            let m = mean(s);
            s.iter().map(|v| (v - m).powi(2)).sum::<f64>()
        })
        .sum()
}

/// Half the width of the two-sided interval of `new − base` at `confidence` (0..1): Welch's,
/// with the Welch–Satterthwaite degrees of freedom (a side without `dof` counts as normal).
/// `None` when a side has no variance.
pub fn half_width(base: &Estimate, new: &Estimate, confidence: f64) -> Option<f64> {
    let (vb, vn) = (base.variance?, new.variance?);
    let var = vb + vn;
    if var <= 0.0 {
        return Some(0.0);
    }
    let term = |v: f64, dof: Option<f64>| dof.map_or(0.0, |d| v * v / d);
    let denominator = term(vb, base.dof) + term(vn, new.dof);
    let dof = if denominator > 0.0 { var * var / denominator } else { f64::INFINITY };
    Some(t_quantile(0.5 + confidence / 2.0, dof) * var.sqrt())
}

/// Past this many degrees of freedom t is the normal law to 0.1%, and the continued fraction
/// below converges slowly.
const MAX_DOF: f64 = 1000.0;

/// The `p` quantile (0.5 < p < 1) of Student's t with `dof` degrees of freedom, by bisection
/// of its distribution function.
pub fn t_quantile(p: f64, dof: f64) -> f64 {
    let dof = dof.clamp(1.0, MAX_DOF);
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while t_cdf(hi, dof) < p && hi < 1e12 {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if t_cdf(mid, dof) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// P(T ≤ t) for t ≥ 0: `1 − I_x(ν/2, 1/2) / 2` with `x = ν / (ν + t²)`.
fn t_cdf(t: f64, dof: f64) -> f64 {
    1.0 - 0.5 * incomplete_beta(dof / (dof + t * t), dof / 2.0, 0.5)
}

/// The regularized incomplete beta function `I_x(a, b)`, by its continued fraction
/// (modified Lentz), on the side of `x` where it converges.
fn incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(x, a, b) / a
    } else {
        1.0 - front * beta_fraction(1.0 - x, b, a) / b
    }
}

fn beta_fraction(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let guard = |v: f64| if v.abs() < TINY { TINY } else { v };
    let mut c = 1.0;
    let mut d = 1.0 / guard(1.0 - (a + b) * x / (a + 1.0));
    let mut h = d;
    for m in 1..10_000 {
        let m = f64::from(m);
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 / guard(1.0 + even * d);
        c = guard(1.0 + even / c);
        h *= d * c;
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 / guard(1.0 + odd * d);
        c = guard(1.0 + odd / c);
        let step = d * c;
        h *= step;
        if (step - 1.0).abs() < 1e-14 {
            break;
        }
    }
    h
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms: 15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 − x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let sum = G[1..].iter().enumerate().fold(G[0], |acc, (i, g)| acc + g / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// A small seeded generator (SplitMix64) for the tests' synthetic runs: reproducible trials
/// without a dependency.
#[cfg(test)]
pub struct SplitMix(pub u64);

#[cfg(test)]
impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u = 1.0 - self.uniform();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * self.uniform()).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        // Two-sided 95%: 12.706 (1), 4.303 (2), 2.776 (4), 2.228 (10), 1.962 (1000).
        for (dof, want) in [(1.0, 12.706), (2.0, 4.303), (4.0, 2.776), (10.0, 2.228), (1e9, 1.962)] {
            let got = t_quantile(0.975, dof);
            assert!((got - want).abs() < 2e-3, "dof {dof}: {got} != {want}");
        }
        // Fractional degrees of freedom lie between their neighbours.
        let mid = t_quantile(0.975, 2.5);
        assert!(mid < 4.303 && mid > 3.182, "{mid}");
        assert!((t_quantile(0.995, 5.0) - 4.032).abs() < 2e-3);
    }

    #[test]
    fn runs_give_the_variance_of_their_mean() {
        let e = Estimate::of_runs(&[1.0, 2.0, 3.0]);
        assert_eq!((e.value, e.variance, e.dof), (2.0, Some(1.0 / 3.0), Some(2.0)));
        assert_eq!(Estimate::of_runs(&[4.0]).variance, None);
    }

    #[test]
    fn the_bootstrap_variance_is_the_resampling_limit() {
        let cycles = [1.0, 3.0, 2.0, 6.0];
        let exact = bootstrap_sum_variance([&cycles[..]]);
        let mut rng = SplitMix(7);
        let sums: Vec<f64> =
            (0..40_000).map(|_| (0..cycles.len()).map(|_| cycles[(rng.uniform() * 4.0) as usize]).sum()).collect();
        let m = mean(&sums);
        let resampled = sums.iter().map(|s| (s - m).powi(2)).sum::<f64>() / (sums.len() - 1) as f64;
        assert!((resampled / exact - 1.0).abs() < 0.03, "{resampled} vs {exact}");
    }

    #[test]
    fn welch_interval_of_two_sides() {
        let (b, n) = (Estimate::of_runs(&[10.0, 11.0, 9.0]), Estimate::of_runs(&[20.0, 21.0, 19.0]));
        // var = 1/3 + 1/3, dof = (2/3)² / (2 · (1/3)² / 2) = 4.
        let half = half_width(&b, &n, 0.95).unwrap();
        assert!((half - 2.776 * (2.0f64 / 3.0).sqrt()).abs() < 1e-2, "{half}");
        assert_eq!(half_width(&Estimate::of_runs(&[1.0]), &n, 0.95), None);
    }
}
