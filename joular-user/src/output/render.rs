//! End-of-run files of one process, from its `ProcessProfile` (at the end of a run and in
//! `joular-ebpf report`).

use std::io::{BufWriter, Write};

use super::flamegraph::{render_svg, write_bytes};
use super::folded::write_folded;
use super::html::{self, HtmlInput, HTML_FILE};
use super::joularjx::{Kind, Period, RunDir};
use super::pprof::write_pprof;
use super::raw_profile::{write_raw_profile, RAW_PROFILE_FILE};
pub use super::render_set::{RenderSet, PPROF_FILE, SUMMARY_FILE};
pub use super::written::OutputFiles;
use super::written::{write_totals, OUTPUT_FLAG};
use super::OutputError;
use crate::attribution::stacks::aggregate::{call_tree_totals, path_groups, Scope};
use crate::attribution::stacks::methods::{is_method_name, MethodFilter};
use crate::attribution::stacks::paths::PathStyle;
use crate::attribution::stacks::profile::{ProcessProfile, RunSummary};
use crate::safe_write::OutDir;

/// Writes into `dir`; the "app" folded stacks and flame graph need a non-empty `filter`.
/// `source_dir` is where the run's own tree is (its evolution files feed the HTML report).
/// Every file is tried: those that fail are in `failed`, and `summary.json`, written last,
/// lists them.
pub fn render_process(
    dir: &OutDir,
    source_dir: &OutDir,
    profile: &ProcessProfile,
    filter: &MethodFilter,
    set: RenderSet,
) -> OutputFiles {
    let mut written = OutputFiles { dir: dir.path().to_owned(), ..OutputFiles::default() };
    let stacks = &profile.stacks;
    let rules = profile.rules();
    let tree = if set.csv {
        let own = dir.try_clone().map_err(|e| OutputError::io(dir.path(), e));
        match own.and_then(|own| RunDir::create_at(own, profile.summary.pid)) {
            Ok(tree) => Some(tree),
            Err(e) => {
                written.failed.push(e.failed(OUTPUT_FLAG));
                None
            }
        }
    } else {
        None
    };
    for scope in [Scope::All, Scope::App(filter)] {
        // JoularJX always has both trees; the app graphs mean nothing without a filter.
        let graphs = matches!(scope, Scope::All) || !filter.is_empty();
        let html_graph = set.html && matches!(scope, Scope::All);
        if let Some(tree) = &tree {
            // JoularJX files hold methods only: samples whose method is a bucket or an unnamed
            // frame are `unattributed` in summary.json, in both files.
            let methods_of = write_totals(tree, stacks, scope, rules, &mut written);
            if profile.summary.carbon.is_some() {
                let grams = methods_of.iter().filter(|m| is_method_name(&m.name)).map(|m| (&*m.name, m.carbon_g));
                let methods = tree.write_carbon(scope, Kind::Methods, grams);
                written.keep(tree.file(scope, Period::Carbon, Kind::Methods), methods);
                let trees = call_tree_totals(stacks, scope, rules).into_iter().map(|(t, _, grams)| (t, grams));
                let trees = tree.write_carbon(scope, Kind::CallTrees, trees);
                written.keep(tree.file(scope, Period::Carbon, Kind::CallTrees), trees);
            }
        }
        if !graphs || !(set.folded || set.svg || html_graph) {
            continue;
        }
        let groups = path_groups(stacks, scope, rules, PathStyle::Graph);
        let view = scope.dir();
        if set.folded {
            let name = format!("stacks-{view}.folded");
            written.keep(dir.join(&name), write_folded(dir, &name, &groups));
        }
        if set.svg || html_graph {
            let title = match scope {
                Scope::All => format!(
                    "Energy of pid {} ({}), {}",
                    profile.summary.pid,
                    profile.summary.comm,
                    if rules.jvm && !rules.native_frames { "from the first Java frame" } else { "all frames" }
                ),
                Scope::App(f) => {
                    format!("Energy of pid {}, app methods ({})", profile.summary.pid, f.prefixes().join(","))
                }
            };
            let name = format!("flamegraph-{view}.svg");
            let svg = match render_svg(&title, &groups) {
                Ok(svg) => svg,
                Err(e) => {
                    written.keep(dir.join(&name), Err(OutputError::io(&dir.join(&name), e)));
                    continue;
                }
            };
            if set.svg {
                written.keep(dir.join(&name), write_bytes(dir, &name, &svg));
            }
            if html_graph {
                let path = dir.join(HTML_FILE);
                let page =
                    html::render(&HtmlInput { profile, filter, flamegraph_svg: &svg, evolution_dir: Some(source_dir) })
                        .map_err(|reason| OutputError::Format { path: path.clone(), reason });
                written.keep(path, page.and_then(|page| write_bytes(dir, HTML_FILE, page.as_bytes())));
            }
        }
    }
    // A device tree's totals need the JoularJX tree, as the process's own do.
    let device_set = RenderSet { csv: tree.is_some(), ..set };
    super::device_tree::write_device_trees(dir, profile, filter, device_set, &mut written);
    if set.pprof {
        written.keep(dir.join(PPROF_FILE), write_pprof(dir, PPROF_FILE, &profile.summary, stacks, rules));
    }
    if set.summary {
        written.keep(dir.join(RAW_PROFILE_FILE), write_raw_profile(dir, RAW_PROFILE_FILE, profile));
        // Last, so it lists what failed before it.
        let mut summary = profile.summary.clone();
        summary.outputs_failed.extend(written.failed.iter().cloned());
        written.keep(dir.join(SUMMARY_FILE), write_summary(dir, &summary));
    }
    written
}

fn write_summary(dir: &OutDir, summary: &RunSummary) -> Result<(), OutputError> {
    let path = dir.join(SUMMARY_FILE);
    let file = dir.replace(SUMMARY_FILE).map_err(|e| OutputError::io(&path, e))?;
    let mut out = BufWriter::new(file);
    serde_json::to_writer_pretty(&mut out, summary).map_err(|e| OutputError::json(&path, e))?;
    out.flush().map_err(|e| OutputError::io(&path, e))?;
    let file = out.into_inner().map_err(|e| OutputError::io(&path, e.into_error()))?;
    file.commit().map_err(|e| OutputError::io(&path, e))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use crate::stages::results::tests::{config, fixture};
    use crate::stages::Results;

    #[test]
    fn a_file_that_cannot_be_written_stops_no_other_and_summary_json_lists_it() {
        let tmp = tempfile::tempdir().unwrap();
        let mut results = Results::new(config(tmp.path())).unwrap();
        for (mut report, stacks) in fixture() {
            results.on_cycle(&mut report, &stacks).unwrap();
        }
        let dir = results.finish().unwrap().outputs[0].dir.clone();
        // A non-empty directory where the flame graph goes: it cannot be replaced.
        fs::remove_file(dir.join("flamegraph-all.svg")).unwrap();
        fs::create_dir_all(dir.join("flamegraph-all.svg/x")).unwrap();
        fs::remove_file(dir.join("summary.json")).unwrap();
        let out = results.finish().unwrap().outputs.remove(0);
        assert_eq!(out.failed.len(), 1, "{:?}", out.failed);
        let failed = &out.failed[0];
        assert_eq!(
            (failed.flag.as_str(), failed.path.as_str()),
            ("--output", dir.join("flamegraph-all.svg").to_str().unwrap())
        );
        for name in ["summary.json", "profile.json", "profile.pb.gz", "stacks-all.folded", "flamegraph-app.svg"] {
            assert!(out.files.contains(&dir.join(name)), "{name} written: {:?}", out.files);
        }
        let summary: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["outputs_failed"][0]["path"], failed.path.as_str());
        assert_eq!(summary["outputs_failed"][0]["error"], failed.error.as_str());
    }
}
