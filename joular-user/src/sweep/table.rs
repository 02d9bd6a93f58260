//! The terminal's summary of a sweep: per parameter, the process and its top methods, each with
//! the model chosen, its fit, the runner-up, and its part of the growth.

use std::fmt::Write as _;

use super::analysis::{Analysis, Model};
use crate::printable::printable;

/// Longest method name shown: the end of a long name says the most.
const NAME_WIDTH: usize = 44;

pub fn table(analyses: &[Analysis], top: usize) -> String {
    let mut out = String::new();
    for a in analyses {
        let _ = writeln!(
            out,
            "\nEnergy over {} ({} values, {} successful runs): model chosen by AICc; Δ is the mean at the largest value minus the mean at the smallest",
            a.param,
            a.values.len(),
            a.process.points
        );
        let _ = writeln!(
            out,
            "  {:<NAME_WIDTH$}  {:<12} {:<32} {:>6}  {:<22} {:>10} {:>7}",
            "method", "model", "fit (J)", "R²", "runner-up (ΔAICc)", "Δ J", "share"
        );
        for m in std::iter::once(&a.process).chain(a.methods.iter().take(top)) {
            out.push_str(&row(m));
        }
        if a.methods.len() > top {
            let _ = writeln!(out, "  ... {} more methods in sweep.json", a.methods.len() - top);
        }
    }
    out
}

fn row(m: &Model) -> String {
    let name = printable(&m.name);
    let chars = name.chars().count();
    let name = if chars > NAME_WIDTH {
        format!("…{}", name.chars().skip(chars - (NAME_WIDTH - 1)).collect::<String>())
    } else {
        name.into_owned()
    };
    let share = m.share_of_increase_pct.map_or_else(|| "-".to_owned(), |p| format!("{p:.0}%"));
    let Some(choice) = &m.model else {
        return format!(
            "  {name:<NAME_WIDTH$}  {:<12} {:<32} {:>6}  {:<22} {:>+10.3} {share:>7}\n",
            "(too few runs)", "", "", "", m.increase_j
        );
    };
    let runner = choice
        .runner_up
        .map_or_else(|| "-".to_owned(), |r| format!("{} ({:+.1})", r.family.name(), r.aicc - choice.best.aicc));
    format!(
        "  {name:<NAME_WIDTH$}  {:<12} {:<32} {:>6.3}  {runner:<22} {:>+10.3} {share:>7}\n",
        choice.best.family.name(),
        choice.best.equation(),
        choice.best.r2,
        m.increase_j
    )
}
