//! BASE against NEW, per method and for the process: the change, and whether it is larger than
//! its uncertainty. The uncertainty of a side is the spread of its runs (two or more), or the
//! bootstrap over the cycles of its one run; the interval of the change is Welch's. Every
//! method tested widens every interval (Bonferroni), so that a comparison of two sets of runs
//! of one program flags nothing, whatever its number of methods, 95% of the time.

use std::collections::BTreeSet;

use serde::Serialize;

use super::load::Run;
use super::stats::{bootstrap_sum_variance, half_width, Estimate};

/// The process's row.
pub const TOTAL: &str = "(process)";

/// What is compared per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Joules: runs that do a fixed amount of work (`record`).
    Energy,
    /// Mean watts: runs of a fixed duration (`--pid --duration`).
    Power,
}

impl Metric {
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Energy => "J",
            Metric::Power => "W",
        }
    }

    fn of(self, run: &Run, energy_uj: f64) -> f64 {
        match self {
            Metric::Energy => energy_uj / 1e6,
            Metric::Power if run.duration_s > 0.0 => energy_uj / 1e6 / run.duration_s,
            Metric::Power => 0.0,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct DiffOptions {
    pub metric: Metric,
    /// Family-wise confidence, 0..1.
    pub confidence: f64,
    /// Methods under this share (%) of their process on both sides are not tested.
    pub min_share_pct: f64,
}

impl Default for DiffOptions {
    fn default() -> Self {
        Self { metric: Metric::Energy, confidence: 0.95, min_share_pct: 1.0 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// Larger than its uncertainty, up.
    Increase,
    Decrease,
    /// Within its uncertainty.
    Same,
    /// No uncertainty: one run without per-cycle data on a side.
    Unknown,
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    pub base: f64,
    pub new: f64,
    pub delta: f64,
    /// Of `base`; `None` when `base` is 0.
    pub delta_pct: Option<f64>,
    /// Half the interval of `delta` (the same unit).
    pub uncertainty: Option<f64>,
    /// Of the process, in %, per side.
    pub base_share_pct: f64,
    pub new_share_pct: f64,
    pub change: Change,
    /// The value of each run, per side (in `diff.json`: what the spread came from).
    pub base_runs: Vec<f64>,
    pub new_runs: Vec<f64>,
}

impl Row {
    /// The change in % of `base` (∞ for what BASE did not have, 0 for nothing at all).
    pub fn rise_pct(&self) -> f64 {
        match self.delta_pct {
            Some(pct) => pct,
            None if self.delta > 0.0 => f64::INFINITY,
            None => 0.0,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    pub metric: Metric,
    pub unit: &'static str,
    pub base_runs: Vec<String>,
    pub new_runs: Vec<String>,
    pub estimated: bool,
    /// Family-wise, and per comparison after the Bonferroni correction.
    pub confidence: f64,
    pub comparison_confidence: f64,
    /// Where the uncertainty comes from, per side.
    pub base_spread: Spread,
    pub new_spread: Spread,
    pub total: Row,
    /// Tested methods, the largest change first.
    pub methods: Vec<Row>,
    /// Methods under `min_share_pct` on both sides: shown in no row and never flagged.
    pub untested_methods: usize,
    pub min_share_pct: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Spread {
    /// Two or more runs.
    Runs,
    /// One run: its cycles, resampled.
    Cycles,
    /// One run without per-cycle method energy (`--no-evolution`).
    None,
}

fn spread(runs: &[Run]) -> Spread {
    match runs {
        [one] if one.has_cycles() => Spread::Cycles,
        [_] => Spread::None,
        _ => Spread::Runs,
    }
}

/// One side's estimate of one quantity: `value` reads it from a run's totals, `cycles` from
/// each of its strata's per-cycle series (`None`: not in that process).
fn estimate<'a>(
    runs: &'a [Run],
    metric: Metric,
    value: impl Fn(&Run) -> f64,
    cycles: impl Fn(&'a super::load::Stratum) -> Option<&'a [f64]>,
) -> Estimate {
    let values = per_run(runs, metric, value);
    match runs {
        [run] if run.has_cycles() => {
            let variance_uj2 = bootstrap_sum_variance(run.strata.iter().filter_map(cycles));
            let scale = metric.of(run, 1.0);
            Estimate { value: values[0], variance: Some(variance_uj2 * scale * scale), dof: None }
        }
        _ => Estimate::of_runs(&values),
    }
}

fn per_run(runs: &[Run], metric: Metric, value: impl Fn(&Run) -> f64) -> Vec<f64> {
    runs.iter().map(|r| metric.of(r, value(r))).collect()
}

/// Compares the sides. Both must hold at least one run (the caller says which is empty).
pub fn compare(base: &[Run], new: &[Run], options: DiffOptions) -> Diff {
    let metric = options.metric;
    let total_of = |runs: &[Run]| estimate(runs, metric, |r| r.total_uj, |s| Some(&s.total_uj[..]));
    let (base_total, new_total) = (total_of(base), total_of(new));
    let share = |value: f64, total: f64| if total > 0.0 { 100.0 * value / total } else { 0.0 };

    let names: BTreeSet<&str> = base.iter().chain(new).flat_map(|r| r.methods.keys().map(String::as_str)).collect();
    let mut tested = Vec::new();
    let mut untested_methods = 0;
    for name in names {
        let of = |runs: &[Run]| {
            estimate(
                runs,
                metric,
                |r| r.methods.get(name).copied().unwrap_or(0.0),
                |s| s.methods.get(name).map(|v| &v[..]),
            )
        };
        let (b, n) = (of(base), of(new));
        let (bs, ns) = (share(b.value, base_total.value), share(n.value, new_total.value));
        if bs.max(ns) < options.min_share_pct {
            untested_methods += 1;
            continue;
        }
        tested.push((name.to_owned(), b, n, bs, ns));
    }
    let comparisons = tested.len() + 1;
    let comparison_confidence = 1.0 - (1.0 - options.confidence) / comparisons as f64;
    let row = |name: String, b: &Estimate, n: &Estimate, bs: f64, ns: f64| {
        let value = |r: &Run| if name == TOTAL { r.total_uj } else { r.methods.get(&name).copied().unwrap_or(0.0) };
        let (base_runs, new_runs) = (per_run(base, metric, value), per_run(new, metric, value));
        let delta = n.value - b.value;
        let uncertainty = half_width(b, n, comparison_confidence);
        let change = match uncertainty {
            None => Change::Unknown,
            Some(u) if delta > u => Change::Increase,
            Some(u) if -delta > u => Change::Decrease,
            Some(_) => Change::Same,
        };
        Row {
            name,
            base: b.value,
            new: n.value,
            delta,
            delta_pct: (b.value > 0.0).then(|| 100.0 * delta / b.value),
            uncertainty,
            base_share_pct: bs,
            new_share_pct: ns,
            change,
            base_runs,
            new_runs,
        }
    };
    let total = row(TOTAL.to_owned(), &base_total, &new_total, 100.0, 100.0);
    let mut methods: Vec<Row> = tested.into_iter().map(|(name, b, n, bs, ns)| row(name, &b, &n, bs, ns)).collect();
    methods.sort_by(|a, b| b.delta.abs().total_cmp(&a.delta.abs()).then_with(|| a.name.cmp(&b.name)));
    Diff {
        metric,
        unit: metric.unit(),
        base_runs: base.iter().map(|r| r.path.display().to_string()).collect(),
        new_runs: new.iter().map(|r| r.path.display().to_string()).collect(),
        estimated: base.iter().chain(new).any(|r| r.estimated),
        confidence: options.confidence,
        comparison_confidence,
        base_spread: spread(base),
        new_spread: spread(new),
        total,
        methods,
        untested_methods,
        min_share_pct: options.min_share_pct,
    }
}

/// `--fail-if-increase PCT[:METHOD_PREFIX]`: a rise trips it when it is both larger than its
/// uncertainty (flagged) and larger than PCT % (relevant), as a regression gate of a benchmark
/// comparison does: few runs give wide intervals, and a large rise is still caught once it is
/// sure to be a rise.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub pct: f64,
    /// Only methods whose stable name starts with it; without one, the process and every method.
    pub prefix: Option<String>,
}

impl std::str::FromStr for Gate {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (pct, prefix) = match s.split_once(':') {
            Some((pct, prefix)) if !prefix.is_empty() => (pct, Some(prefix.to_owned())),
            Some(_) => return Err(format!("`{s}`: the method prefix after `:` is empty (write PCT or PCT:PREFIX)")),
            None => (s, None),
        };
        let pct: f64 = pct
            .trim_end_matches('%')
            .parse()
            .map_err(|_| format!("`{s}`: expected a percentage, e.g. 20 or 20:com.acme.Shop"))?;
        if !(pct.is_finite() && pct >= 0.0) {
            return Err(format!("`{s}`: the percentage must be finite and at least 0"));
        }
        Ok(Gate { pct, prefix })
    }
}

impl Gate {
    /// The rows this gate trips on: they rose beyond their uncertainty, and by more than `pct`.
    pub fn tripped<'a>(&self, diff: &'a Diff) -> Vec<&'a Row> {
        let total = self.prefix.is_none().then_some(&diff.total);
        let methods = diff.methods.iter().filter(|r| self.prefix.as_deref().is_none_or(|p| r.name.starts_with(p)));
        total.into_iter().chain(methods).filter(|r| r.change == Change::Increase && r.rise_pct() > self.pct).collect()
    }
}
