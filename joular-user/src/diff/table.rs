//! The diff as a terminal table: the process, then the largest changes.

use std::fmt::Write as _;

use super::compare::{Change, Diff, Row, Spread};
use crate::printable::printable;

pub fn describe_side(runs: usize, spread: Spread) -> String {
    match spread {
        Spread::Runs => format!("{runs} runs (spread of the runs)"),
        Spread::Cycles => "1 run (bootstrap over its cycles)".to_owned(),
        Spread::None => "1 run (no per-cycle data: no uncertainty)".to_owned(),
    }
}

/// What the table's first lines say: the sides, the confidence, what was not tested.
pub fn header(diff: &Diff) -> String {
    format!(
        "{what} diff{estimated}: BASE {base} vs NEW {new}\n\
         flagged when the change is larger than its {conf:.0}% interval ({per:.2}% per comparison, {tested} compared); \
         {untested} methods under {min}% of the process on both sides not compared",
        what = match diff.metric {
            super::Metric::Energy => "Energy",
            super::Metric::Power => "Power",
        },
        estimated = if diff.estimated { " (estimated)" } else { "" },
        base = describe_side(diff.base_runs.len(), diff.base_spread),
        new = describe_side(diff.new_runs.len(), diff.new_spread),
        conf = diff.confidence * 100.0,
        per = diff.comparison_confidence * 100.0,
        tested = diff.methods.len() + 1,
        untested = diff.untested_methods,
        min = diff.min_share_pct,
    )
}

pub fn change_label(change: Change) -> &'static str {
    match change {
        Change::Increase => "MORE",
        Change::Decrease => "less",
        Change::Same => "-",
        Change::Unknown => "?",
    }
}

pub fn pct(p: Option<f64>) -> String {
    p.map_or_else(|| "new".to_owned(), |p| format!("{p:+.1}%"))
}

pub fn table(diff: &Diff, top: usize) -> String {
    let unit = diff.unit;
    let mut out = header(diff);
    out.push_str("\n\n");
    let _ = writeln!(
        out,
        "{:>11} {:>11} {:>11} {:>8} {:>10} {:>6} {:>6}  {:<6} name",
        format!("BASE {unit}"),
        format!("NEW {unit}"),
        format!("Δ {unit}"),
        "Δ %",
        format!("± {unit}"),
        "BASE%",
        "NEW%",
        "change"
    );
    let row = |out: &mut String, r: &Row| {
        let _ = writeln!(
            out,
            "{:>11.4} {:>11.4} {:>+11.4} {:>8} {:>10} {:>6.1} {:>6.1}  {:<6} {}",
            r.base,
            r.new,
            r.delta,
            pct(r.delta_pct),
            r.uncertainty.map_or_else(|| "?".to_owned(), |u| format!("{u:.4}")),
            r.base_share_pct,
            r.new_share_pct,
            change_label(r.change),
            printable(&r.name)
        );
    };
    row(&mut out, &diff.total);
    for r in diff.methods.iter().take(top) {
        row(&mut out, r);
    }
    if diff.methods.len() > top {
        let _ = writeln!(out, "({} more methods compared; --top N shows more)", diff.methods.len() - top);
    }
    let flagged: Vec<&Row> =
        diff.methods.iter().filter(|r| matches!(r.change, Change::Increase | Change::Decrease)).collect();
    let _ = writeln!(
        out,
        "{} of {} methods changed beyond their uncertainty{}",
        flagged.len(),
        diff.methods.len(),
        if flagged.is_empty() { String::new() } else { format!(": {}", names(&flagged)) }
    );
    out
}

fn names(rows: &[&Row]) -> String {
    let shown: Vec<String> = rows.iter().take(5).map(|r| printable(&r.name).into_owned()).collect();
    let more = rows.len().saturating_sub(5);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}
