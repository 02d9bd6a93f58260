//! Which function of the parameter a series of energies follows: the model families of Jalen
//! Unit's energy variation models, fitted by least squares on every run (not on the means, so
//! the repeats' spread counts), and chosen by AICc.
//!
//! Every family is fitted and scored in the original scale (joules), so their residuals are
//! comparable: the ones linear in their coefficients (`a + b·g(x)`, `g` fixed) in closed form;
//! the power law `a·x^b` and the exponential `a·b^x` by minimising the same squared error over
//! the exponent (for a given exponent the best `a` is closed form, so it is a one-dimensional
//! search). Fitting those two in log space instead would drop every zero (a method too cheap at
//! the smallest values to be sampled) and weigh the small values as much as the large ones.
//!
//! Quadratic and cubic are single-term, `a + b·x²` and `a + b·x³`: two coefficients like every
//! other family, so no family wins by having more of them.

use serde::Serialize;

/// A model family. The order is the tie-break: the simpler first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    Constant,
    Logarithmic,
    Linear,
    NLogN,
    Quadratic,
    Cubic,
    PowerLaw,
    Exponential,
}

impl Family {
    pub const ALL: [Family; 8] = [
        Family::Constant,
        Family::Logarithmic,
        Family::Linear,
        Family::NLogN,
        Family::Quadratic,
        Family::Cubic,
        Family::PowerLaw,
        Family::Exponential,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Family::Constant => "constant",
            Family::Logarithmic => "logarithmic",
            Family::Linear => "linear",
            Family::NLogN => "n log n",
            Family::Quadratic => "quadratic",
            Family::Cubic => "cubic",
            Family::PowerLaw => "power law",
            Family::Exponential => "exponential",
        }
    }

    pub fn formula(self) -> &'static str {
        match self {
            Family::Constant => "a",
            Family::Logarithmic => "a + b·ln x",
            Family::Linear => "a + b·x",
            Family::NLogN => "a + b·x·ln x",
            Family::Quadratic => "a + b·x²",
            Family::Cubic => "a + b·x³",
            Family::PowerLaw => "a·x^b",
            Family::Exponential => "a·b^x",
        }
    }

    /// Coefficients fitted (the residuals' variance, which AICc also counts, is not one).
    fn coefficients(self) -> usize {
        if self == Family::Constant {
            1
        } else {
            2
        }
    }

    /// The power law and the exponential fit their curve's shape (an exponent) where the other
    /// families fix it.
    fn free_shape(self) -> bool {
        matches!(self, Family::PowerLaw | Family::Exponential)
    }

    /// Needs `x > 0` (its `ln x`).
    fn needs_positive_x(self) -> bool {
        matches!(self, Family::Logarithmic | Family::NLogN | Family::PowerLaw)
    }

    /// `g(x)` of `a + b·g(x)`; `None` for the free-shape families.
    fn term(self, x: f64) -> Option<f64> {
        match self {
            Family::Constant => Some(0.0),
            Family::Logarithmic => Some(x.ln()),
            Family::Linear => Some(x),
            Family::NLogN => Some(x * x.ln()),
            Family::Quadratic => Some(x * x),
            Family::Cubic => Some(x * x * x),
            Family::PowerLaw | Family::Exponential => None,
        }
    }
}

/// One family fitted to a series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fit {
    pub family: Family,
    /// The coefficients of [`Family::formula`] (`b` is 0 for the constant).
    pub a: f64,
    pub b: f64,
    pub r2: f64,
    pub aicc: f64,
    /// Sum of squared residuals, J².
    pub sse: f64,
}

impl Fit {
    pub fn predict(&self, x: f64) -> f64 {
        match self.family {
            Family::PowerLaw => self.a * x.powf(self.b),
            Family::Exponential => self.a * self.b.powf(x),
            f => self.a + self.b * f.term(x).unwrap_or(0.0),
        }
    }

    /// The formula with its coefficients, e.g. `0.12 + 3.4e-3·x²`.
    pub fn equation(&self) -> String {
        let (a, b) = (short(self.a), short(self.b));
        match self.family {
            Family::Constant => a,
            Family::PowerLaw => format!("{a}·x^{b}"),
            Family::Exponential => format!("{a}·{b}^x"),
            f => format!("{a} + {b}·{}", f.formula().trim_start_matches("a + b·")),
        }
    }
}

fn short(v: f64) -> String {
    if v != 0.0 && (v.abs() < 1e-2 || v.abs() >= 1e5) {
        format!("{v:.3e}")
    } else {
        format!("{v:.4}")
    }
}

/// The chosen model of a series, the one that came closest, and every family that could be
/// fitted, best first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Choice {
    pub best: Fit,
    pub runner_up: Option<Fit>,
    pub fits: Vec<Fit>,
}

/// A free-shape family must beat the best fixed-shape one by more than this much AICc to be
/// chosen: within it the data do not tell them apart (Burnham and Anderson's "substantial
/// support" gap), and `a·x^1.02` is a line told less plainly.
pub const FREE_SHAPE_MARGIN: f64 = 2.0;

/// Every family fitted to the points `(xs[i], ys[i])`, the best by AICc. `None` when no family
/// has enough points: AICc needs more points than coefficients + 2.
pub fn choose(xs: &[f64], ys: &[f64]) -> Option<Choice> {
    let mut fits: Vec<Fit> = Family::ALL.iter().filter_map(|&f| fit(f, xs, ys)).collect();
    fits.sort_by(|p, q| p.aicc.total_cmp(&q.aicc).then(p.family.cmp(&q.family)));
    let first = *fits.first()?;
    let best = if first.family.free_shape() {
        fits.iter()
            .find(|f| !f.family.free_shape() && f.aicc - first.aicc <= FREE_SHAPE_MARGIN)
            .copied()
            .unwrap_or(first)
    } else {
        first
    };
    let runner_up = fits.iter().find(|f| f.family != best.family).copied();
    Some(Choice { best, runner_up, fits })
}

/// `family` fitted to the points, or `None` when it cannot be: too few points (or distinct
/// values of x) for its coefficients, an `x ≤ 0` under a logarithm, or a non-finite value.
pub fn fit(family: Family, xs: &[f64], ys: &[f64]) -> Option<Fit> {
    let n = xs.len();
    let k = family.coefficients() + 1;
    if n != ys.len() || n < k + 2 || xs.iter().chain(ys).any(|v| !v.is_finite()) {
        return None;
    }
    if family.needs_positive_x() && xs.iter().any(|&x| x <= 0.0) {
        return None;
    }
    let (a, b) = match family {
        Family::Constant => (mean(ys), 0.0),
        Family::PowerLaw => {
            let t: Vec<f64> = xs.iter().map(|x| x.ln()).collect();
            let (a, c) = fit_exponential_in(&t, ys)?;
            (a, c)
        }
        Family::Exponential => {
            let (a, c) = fit_exponential_in(xs, ys)?;
            (a, c.exp())
        }
        f => {
            let g: Vec<f64> = xs.iter().map(|&x| f.term(x).unwrap_or(0.0)).collect();
            least_squares_line(&g, ys)?
        }
    };
    if !(a.is_finite() && b.is_finite()) {
        return None;
    }
    let mut fitted = Fit { family, a, b, r2: 0.0, aicc: 0.0, sse: 0.0 };
    let sse: f64 = xs.iter().zip(ys).map(|(&x, &y)| (y - fitted.predict(x)).powi(2)).sum();
    if !sse.is_finite() {
        return None;
    }
    let y_mean = mean(ys);
    let sst: f64 = ys.iter().map(|y| (y - y_mean).powi(2)).sum();
    // A perfect fit would score -∞: its error is floored far below any measurement's.
    let floor = (ys.iter().map(|y| y * y).sum::<f64>() * 1e-20).max(f64::MIN_POSITIVE);
    let (nf, kf) = (n as f64, k as f64);
    fitted.sse = sse;
    fitted.r2 = if sst > floor {
        1.0 - sse / sst
    } else if sse <= floor {
        1.0
    } else {
        0.0
    };
    fitted.aicc = nf * (sse.max(floor) / nf).ln() + 2.0 * kf + 2.0 * kf * (kf + 1.0) / (nf - kf - 1.0);
    Some(fitted)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// `y = a + b·g`, least squares; `None` when `g` takes a single value.
fn least_squares_line(g: &[f64], ys: &[f64]) -> Option<(f64, f64)> {
    let (gm, ym) = (mean(g), mean(ys));
    let sxx: f64 = g.iter().map(|v| (v - gm).powi(2)).sum();
    if sxx <= f64::EPSILON * g.iter().map(|v| v * v).sum::<f64>() || sxx == 0.0 {
        return None;
    }
    let sxy: f64 = g.iter().zip(ys).map(|(v, y)| (v - gm) * (y - ym)).sum();
    let b = sxy / sxx;
    Some((ym - b * gm, b))
}

/// `y = a·e^(c·t)`, least squares in y: `(a, c)`. `t` is rescaled to [0, 1] so the search
/// stays in range whatever its units (a key length of 4096 or n of 5); for each exponent the
/// best `a` is closed form, so only the exponent is searched: a scan, then golden section.
fn fit_exponential_in(t: &[f64], ys: &[f64]) -> Option<(f64, f64)> {
    let (lo, hi) = t.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| (l.min(v), h.max(v)));
    let span = hi - lo;
    if !(span > 0.0 && span.is_finite()) {
        return None;
    }
    let u: Vec<f64> = t.iter().map(|v| (v - lo) / span).collect();
    // For a scaled exponent c: the best a and the squared error left.
    let solve = |c: f64| -> (f64, f64) {
        let (mut sye, mut see) = (0.0, 0.0);
        for (&ui, &y) in u.iter().zip(ys) {
            let e = (c * ui).exp();
            sye += y * e;
            see += e * e;
        }
        let a = if see > 0.0 { sye / see } else { 0.0 };
        let sse = u.iter().zip(ys).map(|(&ui, &y)| (y - a * (c * ui).exp()).powi(2)).sum::<f64>();
        (a, sse)
    };
    // Scaled exponents beyond ±60 would make the curve e^60 ≈ 1e26 times its start over the
    // range: no measured series does.
    const LIMIT: f64 = 60.0;
    const STEP: f64 = 0.25;
    let mut best_c = 0.0;
    let mut best_sse = f64::INFINITY;
    let steps = (2.0 * LIMIT / STEP) as usize;
    for i in 0..=steps {
        let c = -LIMIT + i as f64 * STEP;
        let (_, sse) = solve(c);
        if sse < best_sse {
            (best_c, best_sse) = (c, sse);
        }
    }
    let (mut l, mut h) = (best_c - STEP, best_c + STEP);
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..60 {
        let (m1, m2) = (h - ratio * (h - l), l + ratio * (h - l));
        if solve(m1).1 <= solve(m2).1 {
            h = m2;
        } else {
            l = m1;
        }
    }
    let c_scaled = (l + h) / 2.0;
    let (a_scaled, _) = solve(c_scaled);
    // y = a'·e^(c'·(t − lo)/span) = a'·e^(−c·lo)·e^(c·t), c = c'/span.
    let c = c_scaled / span;
    Some((a_scaled * (-c * lo).exp(), c))
}

#[cfg(test)]
mod tests;
