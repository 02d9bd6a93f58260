//! End-of-run files of one process, from its `ProcessProfile` (at the end of a run and in
//! `joular-ebpf report`).

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use super::aggregate::{method_call_trees, method_totals, path_groups, Scope};
use super::flamegraph::{render_svg, write_bytes};
use super::folded::write_folded;
use super::html::{self, HtmlInput, HTML_FILE};
use super::joularjx::{Kind, Period, RunDir};
use super::methods::{is_method_name, MethodFilter};
use super::paths::PathStyle;
use super::pprof::write_pprof;
use super::profile::ProcessProfile;
use super::raw_profile::{write_raw_profile, RAW_PROFILE_FILE};
use super::OutputError;
use crate::safe_write::OutDir;

pub const SUMMARY_FILE: &str = "summary.json";
pub const PPROF_FILE: &str = "profile.pb.gz";

/// Which files to write.
#[derive(Debug, Clone, Copy, Default)]
pub struct RenderSet {
    /// JoularJX `total/` CSVs (methods and call trees, both views).
    pub csv: bool,
    pub folded: bool,
    pub svg: bool,
    pub pprof: bool,
    /// `summary.json` and the raw profile.
    pub summary: bool,
    /// `report.html`.
    pub html: bool,
}

impl RenderSet {
    /// Every file but the HTML report (`--html`).
    pub const ALL: Self = Self {
        csv: true,
        folded: true,
        svg: true,
        pprof: true,
        summary: true,
        html: false,
    };
}

/// The files written for one process.
#[derive(Debug, Clone, Default)]
pub struct OutputFiles {
    pub dir: PathBuf,
    pub files: Vec<PathBuf>,
}

/// Writes into `dir`; the "app" folded stacks and flame graph need a non-empty `filter`.
/// `source_dir` is where the run's own tree is (its evolution files feed the HTML report).
pub fn render_process(
    dir: &OutDir,
    source_dir: &OutDir,
    profile: &ProcessProfile,
    filter: &MethodFilter,
    set: RenderSet,
) -> Result<OutputFiles, OutputError> {
    let mut written = OutputFiles {
        dir: dir.path().to_owned(),
        files: Vec::new(),
    };
    let stacks = &profile.stacks;
    let rules = profile.rules();
    let tree = if set.csv {
        let own = dir.try_clone().map_err(|e| OutputError::io(dir.path(), e))?;
        Some(RunDir::create_at(own, profile.summary.pid)?)
    } else {
        None
    };
    for scope in [Scope::All, Scope::App(filter)] {
        // JoularJX always has both trees; the app graphs mean nothing without a filter.
        let graphs = matches!(scope, Scope::All) || !filter.is_empty();
        let html_graph = set.html && matches!(scope, Scope::All);
        if tree.is_none() && !(graphs && (set.folded || set.svg || html_graph)) {
            continue;
        }
        if let Some(tree) = &tree {
            // JoularJX files hold methods only: samples whose method is a bucket or an unnamed
            // frame are `unattributed` in summary.json, in both files.
            tree.write_total(
                scope,
                Kind::Methods,
                method_totals(stacks, scope, rules)
                    .iter()
                    .filter(|m| is_method_name(&m.name))
                    .map(|m| (&*m.name, m.energy_uj)),
            )?;
            tree.write_total(scope, Kind::CallTrees, method_call_trees(stacks, scope, rules))?;
            written
                .files
                .push(tree.file(scope, Period::Total, Kind::Methods));
            written
                .files
                .push(tree.file(scope, Period::Total, Kind::CallTrees));
        }
        if !graphs || !(set.folded || set.svg || html_graph) {
            continue;
        }
        let groups = path_groups(stacks, scope, rules, PathStyle::Graph);
        let view = scope.dir();
        if set.folded {
            let name = format!("stacks-{view}.folded");
            write_folded(dir, &name, &groups)?;
            written.files.push(dir.join(name));
        }
        if set.svg || html_graph {
            let title = match scope {
                Scope::All => format!(
                    "Energy of pid {} ({}), {}",
                    profile.summary.pid,
                    profile.summary.comm,
                    if rules.jvm && !rules.native_frames {
                        "from the first Java frame"
                    } else {
                        "all frames"
                    }
                ),
                Scope::App(f) => format!(
                    "Energy of pid {}, app methods ({})",
                    profile.summary.pid,
                    f.prefixes().join(",")
                ),
            };
            let name = format!("flamegraph-{view}.svg");
            let svg = render_svg(&title, &groups).map_err(|e| OutputError::io(&dir.join(&name), e))?;
            if set.svg {
                write_bytes(dir, &name, &svg)?;
                written.files.push(dir.join(name));
            }
            if html_graph {
                let path = dir.join(HTML_FILE);
                let page = html::render(&HtmlInput {
                    profile,
                    filter,
                    flamegraph_svg: &svg,
                    evolution_dir: Some(source_dir),
                })
                .map_err(|reason| OutputError::Format {
                    path: path.clone(),
                    reason,
                })?;
                write_bytes(dir, HTML_FILE, page.as_bytes())?;
                written.files.push(path);
            }
        }
    }
    if set.pprof {
        write_pprof(dir, PPROF_FILE, &profile.summary, stacks, rules)?;
        written.files.push(dir.join(PPROF_FILE));
    }
    if set.summary {
        let path = dir.join(SUMMARY_FILE);
        let file = dir.replace(SUMMARY_FILE).map_err(|e| OutputError::io(&path, e))?;
        let mut out = BufWriter::new(file);
        serde_json::to_writer_pretty(&mut out, &profile.summary)
            .map_err(|e| OutputError::json(&path, e))?;
        out.flush().map_err(|e| OutputError::io(&path, e))?;
        let file = out.into_inner().map_err(|e| OutputError::io(&path, e.into_error()))?;
        file.commit().map_err(|e| OutputError::io(&path, e))?;
        written.files.push(path);
        write_raw_profile(dir, RAW_PROFILE_FILE, profile)?;
        written.files.push(dir.join(RAW_PROFILE_FILE));
    }
    Ok(written)
}
