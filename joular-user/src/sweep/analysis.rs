//! From the runs to the models: per swept parameter, the process's and each method's energy
//! at every successful run, the model each follows, and each method's part of the process's
//! growth between the smallest and the largest value.
//!
//! A method a successful run did not sample counts 0 J there: the profile saw none of its
//! energy (below one sample's worth), and dropping the point would fit only the values where
//! it was large enough to be seen. A failed run gives no point at all.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::fit::{choose, Choice};
use super::params::{along, Param, Point};
use crate::diff::Run;

/// The row of the process in the models and in `sweep.csv`.
pub const PROCESS: &str = "[process]";

/// What one successful run measured, in joules.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Energies {
    pub process_j: f64,
    /// By stable method name (as `diff` matches them).
    pub methods: BTreeMap<String, f64>,
}

impl Energies {
    pub fn of_run(run: &Run) -> Self {
        Self {
            process_j: run.total_uj / 1e6,
            methods: run.methods.iter().map(|(name, uj)| (name.clone(), uj / 1e6)).collect(),
        }
    }
}

/// One run of one point: its energies, or why it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub point: usize,
    /// 1-based, as the progress line counts.
    pub run: usize,
    pub seconds: f64,
    pub outcome: Result<Energies, String>,
}

/// The model of the process or of one method along one parameter.
#[derive(Debug, Clone, Serialize)]
pub struct Model {
    pub name: String,
    /// Runs fitted.
    pub points: usize,
    pub mean_at_min_j: f64,
    pub mean_at_max_j: f64,
    /// `mean_at_max_j − mean_at_min_j`: what the methods are ranked by.
    pub increase_j: f64,
    /// `increase_j` over the process's, in % (none when the process did not grow).
    pub share_of_increase_pct: Option<f64>,
    /// `None` when too few runs succeeded to fit any family.
    pub model: Option<Choice>,
    #[serde(skip)]
    pub xs: Vec<f64>,
    #[serde(skip)]
    pub ys: Vec<f64>,
}

/// One parameter's sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    pub param: String,
    pub values: Vec<f64>,
    pub process: Model,
    /// Ranked by `increase_j`, the largest first.
    pub methods: Vec<Model>,
}

/// Per parameter, the models of the process and of every method that took at least
/// `min_share_pct` % of the process's energy over the parameter's runs.
pub fn analyse(params: &[Param], points: &[Point], measured: &[Measurement], min_share_pct: f64) -> Vec<Analysis> {
    params
        .iter()
        .enumerate()
        .map(|(i, param)| {
            let on_series: BTreeSet<usize> = along(points, i).collect();
            let runs: Vec<(f64, &Energies)> = measured
                .iter()
                .filter(|m| on_series.contains(&m.point))
                .filter_map(|m| Some((param.values[points[m.point].values[i]].x, m.outcome.as_ref().ok()?)))
                .collect();
            let xs: Vec<f64> = runs.iter().map(|(x, _)| *x).collect();
            let process_ys: Vec<f64> = runs.iter().map(|(_, e)| e.process_j).collect();
            let process = model(PROCESS, &xs, process_ys, None);
            let process_total: f64 = process.ys.iter().sum();
            let mut totals: BTreeMap<&str, f64> = BTreeMap::new();
            for (_, e) in &runs {
                for (name, j) in &e.methods {
                    *totals.entry(name).or_default() += j;
                }
            }
            let mut methods: Vec<Model> = totals
                .into_iter()
                .filter(|(_, total)| *total > 0.0 && 100.0 * total >= min_share_pct * process_total)
                .map(|(name, _)| {
                    let ys = runs.iter().map(|(_, e)| e.methods.get(name).copied().unwrap_or(0.0)).collect();
                    model(name, &xs, ys, Some(process.increase_j))
                })
                .collect();
            methods.sort_by(|a, b| b.increase_j.total_cmp(&a.increase_j).then_with(|| a.name.cmp(&b.name)));
            Analysis { param: param.name.clone(), values: param.values.iter().map(|v| v.x).collect(), process, methods }
        })
        .collect()
}

fn model(name: &str, xs: &[f64], ys: Vec<f64>, process_increase_j: Option<f64>) -> Model {
    let at = |target: Option<f64>| -> f64 {
        let Some(target) = target else { return 0.0 };
        let picked: Vec<f64> = xs.iter().zip(&ys).filter(|(x, _)| **x == target).map(|(_, y)| *y).collect();
        picked.iter().sum::<f64>() / picked.len().max(1) as f64
    };
    let min = xs.iter().copied().reduce(f64::min);
    let max = xs.iter().copied().reduce(f64::max);
    let (mean_at_min_j, mean_at_max_j) = (at(min), at(max));
    let increase_j = mean_at_max_j - mean_at_min_j;
    let base = process_increase_j.unwrap_or(increase_j);
    Model {
        name: name.to_owned(),
        points: ys.len(),
        mean_at_min_j,
        mean_at_max_j,
        increase_j,
        share_of_increase_pct: (base > 0.0).then(|| 100.0 * increase_j / base),
        model: choose(xs, &ys),
        xs: xs.to_vec(),
        ys,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::fit::Family;
    use crate::sweep::params::{parse_list, plan};

    fn energies(process_j: f64, methods: &[(&str, f64)]) -> Energies {
        Energies { process_j, methods: methods.iter().map(|(n, j)| (n.to_string(), *j)).collect() }
    }

    #[test]
    fn methods_are_fitted_with_zeros_where_absent_and_ranked_by_their_part_of_the_growth() {
        let params = [parse_list("n=1,2,3,4,5,6").unwrap()];
        let points = plan(&params, false);
        let mut measured = Vec::new();
        for (p, pt) in points.iter().enumerate() {
            let n = params[0].values[pt.values[0]].x;
            for run in 1..=3 {
                let wobble = 1.0 + 0.01 * run as f64;
                let mut methods = vec![("A.flat", 1.0 * wobble), ("B.line", 2.0 * n * wobble)];
                // C only shows from n = 3 on.
                if n >= 3.0 {
                    methods.push(("C.square", 0.5 * n * n * wobble));
                }
                let total = 5.0 + methods.iter().map(|(_, j)| j).sum::<f64>();
                measured.push(Measurement { point: p, run, seconds: 1.0, outcome: Ok(energies(total, &methods)) });
            }
        }
        // A failed run gives no point.
        measured.push(Measurement { point: 5, run: 4, seconds: 0.1, outcome: Err("exit status 1".into()) });
        let a = analyse(&params, &points, &measured, 1.0).remove(0);
        assert_eq!(a.process.points, 18);
        let names: Vec<_> = a.methods.iter().map(|m| &*m.name).collect();
        assert_eq!(names, ["C.square", "B.line", "A.flat"]);
        let square = &a.methods[0];
        assert_eq!(square.ys[..3], [0.0, 0.0, 0.0], "absent at n = 1: 0 J");
        assert_eq!(square.model.as_ref().unwrap().best.family, Family::Quadratic);
        assert_eq!(a.methods[1].model.as_ref().unwrap().best.family, Family::Linear);
        assert_eq!(a.methods[2].model.as_ref().unwrap().best.family, Family::Constant);
        let shares: f64 = a.methods.iter().filter_map(|m| m.share_of_increase_pct).sum();
        assert!((shares - 100.0).abs() < 1e-9, "the methods carry all of the growth here: {shares}");
        assert!((a.process.increase_j - (a.process.mean_at_max_j - a.process.mean_at_min_j)).abs() < 1e-12);
    }

    #[test]
    fn small_methods_are_left_out_and_a_sweep_without_successes_has_no_model() {
        let params = [parse_list("n=1,2,3,4,5").unwrap()];
        let points = plan(&params, false);
        let measured: Vec<_> = (0..5)
            .map(|p| Measurement {
                point: p,
                run: 1,
                seconds: 1.0,
                outcome: Ok(energies(100.0, &[("Big.m", 50.0), ("Tiny.m", 0.5)])),
            })
            .collect();
        let a = analyse(&params, &points, &measured, 1.0).remove(0);
        assert_eq!(a.methods.iter().map(|m| &*m.name).collect::<Vec<_>>(), ["Big.m"]);
        let failed: Vec<_> = (0..5)
            .map(|p| Measurement { point: p, run: 1, seconds: 1.0, outcome: Err("exit status 2".into()) })
            .collect();
        let a = analyse(&params, &points, &failed, 1.0).remove(0);
        assert!(a.process.model.is_none() && a.methods.is_empty() && a.process.points == 0);
        assert_eq!(a.process.share_of_increase_pct, None);
    }
}
