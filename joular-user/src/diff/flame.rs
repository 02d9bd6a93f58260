//! The differential energy flame graph: each side's call paths (the mean over its runs, µJ)
//! merged by inferno's `differential`, drawn by inferno with widths from NEW and each frame red
//! where it took more energy in NEW, blue where less (Brendan Gregg's differential flame
//! graphs, as async-profiler's diff). A path NEW no longer has has no width, so it is not drawn;
//! the table lists it.

use std::collections::HashMap;
use std::fmt::Write as _;

use inferno::flamegraph::{self, Options};

use super::load::Run;
use crate::printable::printable;

pub const DIFF_FLAMEGRAPH_FILE: &str = "flamegraph-diff.svg";

/// Folded lines of the mean of `runs`, in whole µJ.
fn mean_folded(runs: &[Run]) -> String {
    let mut sums: HashMap<&str, f64> = HashMap::new();
    for run in runs {
        for (path, energy_uj) in &run.folded {
            *sums.entry(path).or_default() += energy_uj;
        }
    }
    let n = runs.len().max(1) as f64;
    let mut lines: Vec<(String, u64)> = sums
        .into_iter()
        .map(|(path, sum)| (printable(path).into_owned(), (sum / n).round() as u64))
        .filter(|(_, uj)| *uj > 0)
        .collect();
    lines.sort_unstable();
    let mut out = String::new();
    for (path, uj) in lines {
        let _ = writeln!(out, "{path} {uj}");
    }
    out
}

pub fn render_diff_svg(base: &[Run], new: &[Run], title: &str) -> std::io::Result<Vec<u8>> {
    let new_folded = mean_folded(new);
    let mut merged = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options::default(),
        mean_folded(base).as_bytes(),
        new_folded.as_bytes(),
        &mut merged,
    )?;
    let mut options = Options::default();
    options.title = printable(title).into_owned();
    options.count_name = "µJ".to_owned();
    options.subtitle = Some("widths: NEW; red: more energy than in BASE, blue: less".to_owned());
    let mut svg = Vec::new();
    if new_folded.is_empty() {
        // Widths are NEW's: with none, inferno has nothing to draw and refuses the input.
        options.subtitle = Some("NEW has no call path with energy: nothing to draw (see the table)".to_owned());
        flamegraph::from_lines(&mut options, ["(none) 1"], &mut svg)?;
    } else {
        flamegraph::from_reader(&mut options, merged.as_slice(), &mut svg)?;
    }
    Ok(svg)
}
