//! Flame graphs, folded stacks and pprof of a device tree (`--devices network,disk`): in
//! `<pid>-<epochms>/{network,disk,total}/`, the same files as the process's own
//! (`flamegraph-{all,app}.svg`, `stacks-{all,app}.folded`, `profile.pb.gz`), weighted by that
//! device's joules, or by CPU + devices in `total/`. A device's graphs say in their title, and
//! its pprof in its comments, that its joules come from a model.

use super::flamegraph::{render_svg, write_bytes};
use super::folded::write_folded;
use super::pprof::write_pprof;
use super::render_set::{RenderSet, PPROF_FILE};
use super::written::OutputFiles;
use super::OutputError;
use crate::attribution::stacks::aggregate::{path_groups, Scope, StackTotal};
use crate::attribution::stacks::methods::MethodFilter;
use crate::attribution::stacks::paths::PathStyle;
use crate::attribution::stacks::profile::{ProcessProfile, RunSummary};
use crate::safe_write::OutDir;

/// What a tree's joules are: a device's (`Some(device name, model source)`) or CPU + devices.
pub(super) struct TreeEnergy<'a> {
    pub device: Option<(&'a str, &'a str)>,
}

impl TreeEnergy<'_> {
    fn title(&self, profile: &ProcessProfile, scope: Scope) -> String {
        let what = match self.device {
            Some((device, _)) => format!("{device} energy (estimated)"),
            None => "CPU + device energy".to_owned(),
        };
        let view = match scope {
            Scope::All => String::new(),
            Scope::App(f) => format!(", app methods ({})", f.prefixes().join(",")),
        };
        format!("{what} of pid {} ({}){view}", profile.summary.pid, profile.summary.comm)
    }

    /// The run's summary as the pprof's comments read it: a device's joules are its model's.
    fn summary(&self, profile: &ProcessProfile) -> RunSummary {
        let mut summary = profile.summary.clone();
        match self.device {
            Some((device, source)) => {
                summary.energy_source = format!("{device} model");
                summary.estimated = true;
                source.clone_into(&mut summary.energy_detail);
            }
            None => {
                summary.energy_detail = format!("CPU ({}) and device models", summary.energy_detail);
                summary.estimated = true;
            }
        }
        summary
    }
}

/// Writes the graphs of `set` into `dir` (the tree's directory), each file tried on its own.
pub(super) fn write_device_graphs(
    dir: &OutDir,
    stacks: &[StackTotal],
    energy: &TreeEnergy,
    profile: &ProcessProfile,
    filter: &MethodFilter,
    set: RenderSet,
    written: &mut OutputFiles,
) {
    let rules = profile.rules();
    for scope in [Scope::All, Scope::App(filter)] {
        // As the process's own: the app graphs mean nothing without a filter.
        if (matches!(scope, Scope::App(_)) && filter.is_empty()) || !(set.folded || set.svg) {
            continue;
        }
        let groups = path_groups(stacks, scope, rules, PathStyle::Graph);
        let view = scope.dir();
        if set.folded {
            let name = format!("stacks-{view}.folded");
            written.keep(dir.join(&name), write_folded(dir, &name, &groups));
        }
        if set.svg {
            let name = format!("flamegraph-{view}.svg");
            let svg = render_svg(&energy.title(profile, scope), &groups)
                .map_err(|e| OutputError::io(&dir.join(&name), e))
                .and_then(|svg| write_bytes(dir, &name, &svg));
            written.keep(dir.join(&name), svg);
        }
    }
    if set.pprof {
        let summary = energy.summary(profile);
        written.keep(dir.join(PPROF_FILE), write_pprof(dir, PPROF_FILE, &summary, stacks, rules));
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::io::Read;
    use std::path::Path;

    use prost::Message;

    use crate::output::device_tree::tests::{device_fixture, run};
    use crate::output::pprof::Profile;
    use crate::stages::results::tests::fixture;

    /// `(folded path, µJ)` rows of a folded file.
    fn folded(path: &Path) -> Vec<(String, u64)> {
        fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .lines()
            .map(|l| {
                let (stack, uj) = l.rsplit_once(' ').unwrap();
                (stack.to_owned(), uj.parse().unwrap())
            })
            .collect()
    }

    fn total_uj(rows: &[(String, u64)]) -> u64 {
        rows.iter().map(|r| r.1).sum()
    }

    /// The fixture's devices (network 3 J on `compute`, disk 1 J on `save`): each device tree
    /// has the process's graph files, weighted by its joules and said to be a model's; `total/`
    /// weighs CPU + devices.
    #[test]
    fn each_device_tree_has_its_flame_graphs_folded_stacks_and_pprof() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = run(tmp.path(), device_fixture());
        let network = folded(&dir.join("network/stacks-all.folded"));
        assert_eq!(total_uj(&network), 3_000_000, "{network:?}");
        assert!(network.iter().all(|(stack, _)| stack.contains("com.acme.App.compute")), "{network:?}");
        assert_eq!(total_uj(&folded(&dir.join("disk/stacks-app.folded"))), 1_000_000);
        // total = the process's own (CPU) + 4 J of devices, to rounding of each row.
        let cpu = total_uj(&folded(&dir.join("stacks-all.folded")));
        let total = total_uj(&folded(&dir.join("total/stacks-all.folded")));
        assert!(total.abs_diff(cpu + 4_000_000) <= 10, "total {total} µJ vs CPU {cpu} + 4 J");

        let svg = fs::read_to_string(dir.join("network/flamegraph-all.svg")).unwrap();
        assert!(svg.contains("network energy (estimated) of pid"), "the title says what it weighs");
        assert!(svg.contains("com.acme.App.compute"));
        assert!(fs::read_to_string(dir.join("total/flamegraph-app.svg")).unwrap().contains("CPU + device energy"));

        let mut bytes = Vec::new();
        let file = fs::File::open(dir.join("network/profile.pb.gz")).unwrap();
        flate2::read::GzDecoder::new(file).read_to_end(&mut bytes).unwrap();
        let profile = Profile::decode(bytes.as_slice()).unwrap();
        let comments: Vec<&str> = profile.comment.iter().map(|i| profile.string_table[*i as usize].as_str()).collect();
        assert!(
            comments.iter().any(|c| c.contains("network model (estimated): model: network (test)")),
            "{comments:?}"
        );
        let energy_uj: i64 = profile.sample.iter().map(|s| s.value[0]).sum();
        assert!((energy_uj - 3_000_000).abs() <= 2, "{energy_uj} µJ in the network pprof");
    }

    #[test]
    fn without_devices_no_device_graph_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = run(tmp.path(), fixture());
        assert!(dir.join("flamegraph-all.svg").is_file());
        for tree in ["network", "disk", "total"] {
            assert!(!dir.join(tree).exists(), "{tree}");
        }
    }
}
