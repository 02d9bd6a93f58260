//! `joular-ebpf diff BASE NEW`: what changed between two runs, or two sets of runs, per method
//! and for the process, with an uncertainty; a change is flagged only when it is larger than
//! that. Reads only what the runs wrote (`load`), compares (`compare`, `stats`), and renders a
//! terminal table, `diff.html`, a differential flame graph and `diff.json`.

mod compare;
mod flame;
mod glob;
mod html;
mod load;
mod stats;
mod table;

use std::io::Write as _;
use std::path::PathBuf;

pub use compare::{compare, Change, Diff, DiffOptions, Gate, Metric, Row, Spread};
pub use flame::{render_diff_svg, DIFF_FLAMEGRAPH_FILE};
pub use glob::expand;
pub use html::DIFF_HTML_FILE;
pub use load::{Run, Stratum};
pub use table::{pct as pct_text, table};

use crate::output::OutputError;
use crate::safe_write::OutDir;

pub const DIFF_JSON_FILE: &str = "diff.json";

#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: OutputError },
    #[error("{path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Render(String),
}

/// Writes `diff.html`, the differential flame graph and `diff.json` into `dir`.
pub fn write_outputs(dir: &OutDir, diff: &Diff, base: &[Run], new: &[Run]) -> Result<Vec<PathBuf>, DiffError> {
    let svg = render_diff_svg(base, new, "Energy diff: NEW against BASE")
        .map_err(|e| DiffError::Render(format!("flame graph: {e}")))?;
    let page = html::render(diff, &svg).map_err(DiffError::Render)?;
    let json = serde_json::to_vec_pretty(diff).map_err(|e| DiffError::Render(format!("{DIFF_JSON_FILE}: {e}")))?;
    let mut written = Vec::new();
    for (name, bytes) in [(DIFF_FLAMEGRAPH_FILE, &svg[..]), (DIFF_HTML_FILE, page.as_bytes()), (DIFF_JSON_FILE, &json)]
    {
        let path = dir.join(name);
        let write = || -> std::io::Result<()> {
            let mut file = dir.replace(name)?;
            file.write_all(bytes)?;
            file.commit()
        };
        write().map_err(|source| DiffError::Write { path: path.clone(), source })?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests;
