//! jcarbon's calmness: how alike the CPU frequency distributions of two runs are, so a profiler
//! that disturbs the power state it measures shows it.
//!
//! - Bins (Freedman–Diaconis) over the two runs' frequencies pooled, so both runs are counted
//!   in the same bins: width `h = 2·IQR(f)/∛n`, `n` = the pooled samples (|cpu|·|time| per
//!   run), `K = ⌈(max − min)/h⌉` equal bins from `min` to `max` (jcarbon's `f_k = min + k/K ·
//!   (max − min)`). Bin `k` holds `[f_k, f_{k+1})`, the last one also `max`. With an IQR of 0
//!   (over half the samples at one frequency) the rule gives no width: Sturges' `⌈log₂ n⌉ + 1`
//!   bins are used instead, and the output says so.
//! - Spatial correspondence `C_S(k)`: the share of a run's (CPU, cycle) samples in bin `k`.
//! - Temporal correspondence `C_T(t, k)`: in cycle `t`, the share of the CPUs in bin `k`.
//! - Calmness: the Pearson correlation of the two runs' `C_S` vectors (K values each), and of
//!   their `C_T` matrices flattened over their first `min(T_A, T_B)` cycles (cycle `t` of one
//!   run against cycle `t` of the other). A correlation with a constant side is undefined and
//!   reported as such (`null`), never as a number.

use serde::Serialize;

use super::trace::FrequencyCycle;

/// Bins drawn at most: past it a chart says nothing more and a hostile file costs memory.
pub const MAX_BINS: usize = 512;

/// How the bins were chosen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bins {
    /// `freedman-diaconis`, `sturges (IQR is 0)` or `one bin (every sample at one frequency)`.
    pub rule: String,
    /// Samples pooled (both runs).
    pub samples: usize,
    pub iqr_khz: f64,
    /// `2·IQR/∛n`.
    pub fd_width_khz: f64,
    /// `K + 1` edges from the lowest to the highest frequency.
    pub edges_khz: Vec<f64>,
}

impl Bins {
    pub fn count(&self) -> usize {
        self.edges_khz.len() - 1
    }

    /// The bin of frequency `khz` (within the edges).
    pub fn of(&self, khz: f64) -> usize {
        let (lo, hi) = (self.edges_khz[0], self.edges_khz[self.count()]);
        if hi <= lo {
            return 0;
        }
        let k = ((khz - lo) / (hi - lo) * self.count() as f64).floor();
        (k.max(0.0) as usize).min(self.count() - 1)
    }
}

/// One run's side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDistribution {
    pub name: String,
    pub cycles: usize,
    pub samples: usize,
    pub mean_khz: f64,
    /// `C_S(k)`.
    pub spatial: Vec<f64>,
    /// `C_T(t, k)`, one row per cycle.
    pub temporal: Vec<Vec<f64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calmness {
    pub method: &'static str,
    pub bins: Bins,
    pub a: RunDistribution,
    pub b: RunDistribution,
    /// Pearson correlation of `a.spatial` and `b.spatial`; `None` when undefined.
    pub spatial_pearson: Option<f64>,
    /// Pearson correlation of `a.temporal` and `b.temporal` flattened (row by row) over
    /// their first `temporal_cycles` cycles; `None` when undefined.
    pub temporal_pearson: Option<f64>,
    pub temporal_cycles: usize,
    /// Why a correlation is undefined, or anything else the reader must know.
    pub notes: Vec<String>,
}

pub const METHOD: &str = "jcarbon calmness: Freedman-Diaconis bins over both runs' CPU frequencies pooled; \
C_S(k) share of a run's (cpu, cycle) samples in bin k; C_T(t,k) share of cycle t's CPUs in bin k; \
Pearson correlation of the two runs' C_S vectors (spatial) and of their C_T matrices over the common cycles (temporal)";

/// A run with no frequency sample.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0} has no CPU frequency sample")]
pub struct NoSamples(pub String);

/// Linear-interpolation quantile (numpy's default) of sorted values.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p;
    let (lo, frac) = (h.floor() as usize, h - h.floor());
    match sorted.get(lo + 1) {
        Some(next) => sorted[lo] + frac * (next - sorted[lo]),
        None => sorted[lo],
    }
}

/// Freedman–Diaconis bins over `pooled` (non-empty).
pub fn bins(pooled: &[f64]) -> Bins {
    let mut sorted = pooled.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let (lo, hi) = (sorted[0], sorted[n - 1]);
    let iqr_khz = quantile(&sorted, 0.75) - quantile(&sorted, 0.25);
    let fd_width_khz = 2.0 * iqr_khz / (n as f64).cbrt();
    let (count, rule) = if hi <= lo {
        (1, "one bin (every sample at one frequency)".to_owned())
    } else if fd_width_khz > 0.0 {
        (((hi - lo) / fd_width_khz).ceil() as usize, "freedman-diaconis".to_owned())
    } else {
        ((n as f64).log2().ceil() as usize + 1, "sturges (IQR is 0)".to_owned())
    };
    let count = count.clamp(1, MAX_BINS);
    let rule = if count == MAX_BINS { format!("{rule}, capped at {MAX_BINS} bins") } else { rule };
    let edges_khz = (0..=count).map(|k| lo + (hi - lo) * k as f64 / count as f64).collect();
    Bins { rule, samples: n, iqr_khz, fd_width_khz, edges_khz }
}

fn distribution(name: &str, trace: &[FrequencyCycle], bins: &Bins) -> RunDistribution {
    let k = bins.count();
    let mut spatial = vec![0.0; k];
    let mut temporal = Vec::with_capacity(trace.len());
    let (mut samples, mut sum_khz) = (0usize, 0.0);
    for cycle in trace {
        let mut row = vec![0.0; k];
        for f in &cycle.cpus {
            row[bins.of(f.khz as f64)] += 1.0;
            sum_khz += f.khz as f64;
        }
        for (s, r) in spatial.iter_mut().zip(&row) {
            *s += r;
        }
        samples += cycle.cpus.len();
        let cpus = cycle.cpus.len().max(1) as f64;
        temporal.push(row.into_iter().map(|c| c / cpus).collect());
    }
    for s in &mut spatial {
        *s /= samples.max(1) as f64;
    }
    RunDistribution {
        name: name.to_owned(),
        cycles: trace.len(),
        samples,
        mean_khz: sum_khz / samples.max(1) as f64,
        spatial,
        temporal,
    }
}

/// Pearson's r; `None` for fewer than two pairs or a side without variance.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len().min(y.len());
    if n < 2 {
        return None;
    }
    let (mx, my) = (x[..n].iter().sum::<f64>() / n as f64, y[..n].iter().sum::<f64>() / n as f64);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x[..n].iter().zip(&y[..n]) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| (sxy / (sxx * syy).sqrt()).clamp(-1.0, 1.0))
}

/// Calmness of run `b` against run `a`.
pub fn calmness(
    (name_a, a): (&str, &[FrequencyCycle]),
    (name_b, b): (&str, &[FrequencyCycle]),
) -> Result<Calmness, NoSamples> {
    let khz = |t: &[FrequencyCycle]| t.iter().flat_map(|c| c.cpus.iter().map(|f| f.khz as f64)).collect::<Vec<_>>();
    let (fa, fb) = (khz(a), khz(b));
    if fa.is_empty() {
        return Err(NoSamples(name_a.to_owned()));
    }
    if fb.is_empty() {
        return Err(NoSamples(name_b.to_owned()));
    }
    let bins = bins(&[fa, fb].concat());
    let (da, db) = (distribution(name_a, a, &bins), distribution(name_b, b, &bins));
    let mut notes = Vec::new();
    let spatial_pearson = pearson(&da.spatial, &db.spatial);
    if spatial_pearson.is_none() {
        notes.push(undefined("spatial", bins.count(), &da.spatial, &db.spatial));
    }
    let temporal_cycles = da.cycles.min(db.cycles);
    let flat = |d: &RunDistribution| d.temporal[..temporal_cycles].concat();
    let (ta, tb) = (flat(&da), flat(&db));
    let temporal_pearson = pearson(&ta, &tb);
    if temporal_pearson.is_none() {
        notes.push(undefined("temporal", ta.len(), &ta, &tb));
    }
    if da.cycles != db.cycles {
        notes.push(format!(
            "the runs have {} and {} cycles: the temporal correlation compares the first {temporal_cycles}",
            da.cycles, db.cycles
        ));
    }
    Ok(Calmness { method: METHOD, bins, a: da, b: db, spatial_pearson, temporal_pearson, temporal_cycles, notes })
}

fn undefined(what: &str, len: usize, x: &[f64], y: &[f64]) -> String {
    let constant = |v: &[f64]| v.windows(2).all(|w| w[0] == w[1]);
    let why = if len < 2 {
        format!("only {len} value(s) to correlate")
    } else if constant(x) || constant(y) {
        "a run's distribution is constant (one bin, or every CPU at one frequency throughout)".to_owned()
    } else {
        "no variance".to_owned()
    };
    format!("the {what} correlation is undefined: {why}")
}
