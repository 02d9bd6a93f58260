//! Which function of the parameter a series of energies follows: the model families of Jalen
//! Unit's energy variation models, fitted by least squares on every run (not on the means, so
//! the repeats' spread counts), and chosen by AICc.
//!
//! Every family is fitted and scored in the original scale (joules), so their residuals are
//! comparable: the ones linear in their coefficients (`a + b·g(x)`, `g` fixed) in closed form;
//! the power law `a + c·x^b` and the exponential `a + c·b^x` by minimising the same squared
//! error over the exponent (for a given exponent the best `a` and `c` are closed form, so it is
//! a one-dimensional search). Fitting those two in log space instead would drop every zero (a
//! method too cheap at the smallest values to be sampled) and weigh the small values as much as
//! the large ones.
//!
//! Every family has a floor `a`: a measured method's energy has one (its calls' fixed cost,
//! the sample or two of a short call). Without it a power law bends its exponent to pass
//! through the floor (`0.4 + 0.25·n²` measured came out as `a·x^1.9`, ahead of quadratic).
//! Quadratic and cubic are single-term, `a + b·x²` and `a + b·x³`, two coefficients as every
//! other fixed-shape family; the free-shape ones have a third (their exponent), which AICc
//! counts.

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
            Family::PowerLaw => "a + c·x^b",
            Family::Exponential => "a + c·b^x",
        }
    }

    /// Coefficients fitted (the residuals' variance, which AICc also counts, is not one).
    fn coefficients(self) -> usize {
        match self {
            Family::Constant => 1,
            Family::PowerLaw | Family::Exponential => 3,
            _ => 2,
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
    /// The coefficients of [`Family::formula`]: `a` the floor; `b` the slope, or the power
    /// law's exponent and the exponential's base (0 for the constant); `c` the free-shape
    /// families' scale (0 for the others).
    pub a: f64,
    pub b: f64,
    pub c: f64,
    pub r2: f64,
    pub aicc: f64,
    /// Sum of squared residuals, J².
    pub sse: f64,
}

impl Fit {
    pub fn predict(&self, x: f64) -> f64 {
        match self.family {
            Family::PowerLaw => self.a + self.c * x.powf(self.b),
            Family::Exponential => self.a + self.c * self.b.powf(x),
            f => self.a + self.b * f.term(x).unwrap_or(0.0),
        }
    }

    /// The formula with its coefficients, e.g. `0.12 + 3.4e-3·x²`.
    pub fn equation(&self) -> String {
        let (a, b, c) = (short(self.a), short(self.b), short(self.c));
        match self.family {
            Family::Constant => a,
            Family::PowerLaw => format!("{a} + {c}·x^{b}"),
            Family::Exponential => format!("{a} + {c}·{b}^x"),
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

/// AICc a free-shape family must gain over the best fixed-shape one to be chosen, beyond the
/// extra coefficient AICc already counts. Over a short range both chase the noise around a
/// polynomial: the power law nests the line, the quadratic and the cubic (`b` = 1, 2, 3), and
/// an exponential on a floor bends like them. On `0.4 + 0.25·n²` for n = 1..6, three runs
/// each, ±4% noise, the power law comes out ahead by more than 2 in 5% of draws and by more
/// than 6 in 1%, the exponential by more than 6 in 1.5%; on `0.5 + 0.3·2ⁿ` the exponential is
/// ahead by 29 or more in 99% (`fit/tests.rs`). Burnham and Anderson's 2 ("substantial
/// support") would call one quadratic in twenty a power law.
pub const FREE_SHAPE_MARGIN: f64 = 6.0;

/// Every family fitted to the points `(xs[i], ys[i])`, the best by AICc. `None` when no family
/// has enough points: AICc needs more points than coefficients + 2.
pub fn choose(xs: &[f64], ys: &[f64]) -> Option<Choice> {
    let mut fits: Vec<Fit> = Family::ALL.iter().filter_map(|&f| fit(f, xs, ys)).collect();
    fits.sort_by(|p, q| p.aicc.total_cmp(&q.aicc).then(p.family.cmp(&q.family)));
    let first = *fits.first()?;
    // The best fixed shape, unless a free shape beats it by its margin.
    let fixed = fits.iter().find(|f| !f.family.free_shape()).copied();
    let best = fits
        .iter()
        .find(|f| match fixed {
            Some(fixed) if f.family.free_shape() => fixed.aicc - f.aicc > FREE_SHAPE_MARGIN,
            _ => true,
        })
        .copied()
        .unwrap_or(first);
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
    let (a, b, c) = match family {
        Family::Constant => (mean(ys), 0.0, 0.0),
        Family::PowerLaw => {
            let t: Vec<f64> = xs.iter().map(|x| x.ln()).collect();
            let (a, c, k) = fit_exponential_in(&t, ys)?;
            (a, k, c)
        }
        Family::Exponential => {
            let (a, c, k) = fit_exponential_in(xs, ys)?;
            (a, k.exp(), c)
        }
        f => {
            let g: Vec<f64> = xs.iter().map(|&x| f.term(x).unwrap_or(0.0)).collect();
            let (a, b) = least_squares_line(&g, ys)?;
            (a, b, 0.0)
        }
    };
    if !(a.is_finite() && b.is_finite() && c.is_finite()) {
        return None;
    }
    let mut fitted = Fit { family, a, b, c, r2: 0.0, aicc: 0.0, sse: 0.0 };
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

/// `y = a + c·e^(k·t)`, least squares in y: `(a, c, k)`. `t` is rescaled to [0, 1] so the
/// search stays in range whatever its units (a key length of 4096 or n of 5); for each exponent
/// the best `a` and `c` are a straight line's fit on `e^(k·t)`, so only the exponent is
/// searched: a scan, then golden section. `None` when `t` takes a single value.
fn fit_exponential_in(t: &[f64], ys: &[f64]) -> Option<(f64, f64, f64)> {
    let (lo, hi) = t.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| (l.min(v), h.max(v)));
    let span = hi - lo;
    if !(span > 0.0 && span.is_finite()) {
        return None;
    }
    let u: Vec<f64> = t.iter().map(|v| (v - lo) / span).collect();
    // For a scaled exponent k: the best floor and scale and the squared error left. At k = 0
    // the curve is flat and its scale undefined: it is the constant's fit, which any other k
    // matches or beats.
    let solve = |k: f64| -> (f64, f64, f64) {
        let g: Vec<f64> = u.iter().map(|&ui| (k * ui).exp()).collect();
        let (a, c) = least_squares_line(&g, ys).unwrap_or((mean(ys), 0.0));
        let sse = g.iter().zip(ys).map(|(&gi, &y)| (y - a - c * gi).powi(2)).sum::<f64>();
        (a, c, sse)
    };
    // Scaled exponents beyond ±60 would make the curve e^60 ≈ 1e26 times its start over the
    // range: no measured series does. The scan starts off 0, where the scale is undefined.
    const LIMIT: f64 = 60.0;
    const STEP: f64 = 0.25;
    let mut best_k = STEP / 2.0;
    let mut best_sse = f64::INFINITY;
    let steps = (2.0 * LIMIT / STEP) as usize;
    for i in 0..steps {
        let k = -LIMIT + STEP / 2.0 + i as f64 * STEP;
        let (_, _, sse) = solve(k);
        if sse < best_sse {
            (best_k, best_sse) = (k, sse);
        }
    }
    let (mut l, mut h) = (best_k - STEP, best_k + STEP);
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..60 {
        let (m1, m2) = (h - ratio * (h - l), l + ratio * (h - l));
        if solve(m1).2 <= solve(m2).2 {
            h = m2;
        } else {
            l = m1;
        }
    }
    let k_scaled = (l + h) / 2.0;
    let (a, c_scaled, _) = solve(k_scaled);
    // y = a + c'·e^(k'·(t − lo)/span) = a + c'·e^(−k·lo)·e^(k·t), k = k'/span.
    let k = k_scaled / span;
    Some((a, c_scaled * (-k * lo).exp(), k))
}

#[cfg(test)]
mod tests;
