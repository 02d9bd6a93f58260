//! The JoularJX trees of `--devices network,disk`, beside the CPU's in a process's directory:
//!
//! ```text
//! <pid>-<epochms>/{all,app}/...              the CPU's tree, unchanged (JoularJX readers)
//! <pid>-<epochms>/network/{all,app}/total/{methods,calltrees}/joularJX-<pid>-{all,filtered}-...-energy.csv
//! <pid>-<epochms>/disk/{all,app}/total/...   the same for the disk
//! <pid>-<epochms>/total/{all,app}/total/...  CPU + every device, per method and call tree
//! ```
//!
//! Each of `network/`, `disk/` and `total/` is a JoularJX result directory of its own (same
//! file names, `name,joules` rows with `%.4f`); this writes its run totals, and each cycle's
//! runtime and evolution files come from `cycle_devices.rs`. A JoularJX reader
//! pointed at one reads that device's methods, and one pointed at the process's directory
//! reads the CPU's files as before. Methods come from the CPU's rules (`device_run.rs`), and
//! rows hold methods only, as the CPU's do. Nothing here is written with `--devices cpu`.

use super::device_graphs::{write_device_graphs, TreeEnergy};
use super::joularjx::RunDir;
use super::render_set::RenderSet;
use super::written::{write_totals, OutputFiles};
use super::OutputError;
use crate::attribution::stacks::aggregate::{Scope, StackTotal};
use crate::attribution::stacks::device_run::combined_stacks;
use crate::attribution::stacks::methods::MethodFilter;
use crate::attribution::stacks::profile::ProcessProfile;
use crate::safe_write::OutDir;

/// The directory of CPU + devices.
pub const TOTAL_DIR: &str = "total";

/// Writes each device's tree and the total's into `dir` (the process's directory), each file
/// tried on its own: the JoularJX totals with `set.csv`, the graphs and pprof with theirs
/// (`device_graphs.rs`).
pub fn write_device_trees(
    dir: &OutDir,
    profile: &ProcessProfile,
    filter: &MethodFilter,
    set: RenderSet,
    written: &mut OutputFiles,
) {
    if profile.devices.is_empty() {
        return;
    }
    for device in &profile.devices {
        let name = device.device.name();
        let energy = TreeEnergy { device: Some((name, &device.source)) };
        write_tree(dir, name, &device.stacks, &energy, profile, filter, set, written);
    }
    let total = combined_stacks(&profile.stacks, &profile.devices);
    write_tree(dir, TOTAL_DIR, &total, &TreeEnergy { device: None }, profile, filter, set, written);
}

#[allow(clippy::too_many_arguments)]
fn write_tree(
    dir: &OutDir,
    name: &str,
    stacks: &[StackTotal],
    energy: &TreeEnergy,
    profile: &ProcessProfile,
    filter: &MethodFilter,
    set: RenderSet,
    written: &mut OutputFiles,
) {
    if !(set.csv || set.folded || set.svg || set.pprof) {
        return;
    }
    let sub = match dir.create_subdirs(name) {
        Ok(sub) => sub,
        Err(e) => return written.keep(dir.join(name), Err(OutputError::io(&dir.join(name), e))),
    };
    if set.csv {
        let tree = sub
            .try_clone()
            .map_err(|e| OutputError::io(sub.path(), e))
            .and_then(|own| RunDir::create_totals_at(own, profile.summary.pid));
        match tree {
            Ok(tree) => {
                for scope in [Scope::All, Scope::App(filter)] {
                    write_totals(&tree, stacks, scope, profile.rules(), written);
                }
            }
            Err(e) => written.keep(dir.join(name), Err(e)),
        }
    }
    write_device_graphs(&sub, stacks, energy, profile, filter, set, written);
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;
    use std::fs;
    use std::path::Path;

    use crate::attribution::stacks::device_run::tests::{device_cycle, java_report};
    use crate::attribution::stacks::ThreadStacks;
    use crate::device_reports::{Device, DeviceEnergy};
    use crate::model::{CycleReport, FrameKind, FrameReport};
    use crate::stages::results::tests::{config, csv_rows, fixture, PID, START_MS};
    use crate::stages::Results;

    fn native(name: &str) -> FrameReport {
        FrameReport { name: name.into(), kind: FrameKind::Native, line: None, raw_name: None }
    }

    fn path(method: &str) -> Vec<FrameReport> {
        vec![java_report("void java.lang.Thread.run()"), java_report(method), native("write")]
    }

    /// The results fixture's two cycles with device energy: the worker (tid 101) sends from
    /// `com.acme.App.compute` (2 J, then 1 J; 1 J of the first cycle no profiled byte explains)
    /// and saves from `com.acme.App.save` (1 J of disk in the first cycle).
    pub(crate) fn device_fixture() -> Vec<(CycleReport, Vec<ThreadStacks>)> {
        let compute = "void com.acme.App.compute()";
        let per_cycle: [Vec<DeviceEnergy>; 2] = [
            vec![
                device_cycle(Device::Network, PID, "worker", vec![(101, path(compute), 2e6)], 1e6),
                device_cycle(Device::Disk, PID, "worker", vec![(101, path("void com.acme.App.save(int)"), 1e6)], 0.0),
            ],
            vec![device_cycle(Device::Network, PID, "worker", vec![(101, path(compute), 1e6)], 0.0)],
        ];
        fixture()
            .into_iter()
            .zip(per_cycle)
            .map(|((report, stacks), device_energy)| (CycleReport { device_energy, ..report }, stacks))
            .collect()
    }

    /// The run of `cycles` in `root`, finished: its process's directory.
    pub(crate) fn run(root: &Path, cycles: Vec<(CycleReport, Vec<ThreadStacks>)>) -> std::path::PathBuf {
        let mut results = Results::new(config(root)).unwrap();
        for (mut report, stacks) in cycles {
            results.on_cycle(&mut report, &stacks).unwrap();
        }
        let finished = results.finish().unwrap();
        assert!(finished.outputs[0].failed.is_empty(), "{:?}", finished.outputs[0].failed);
        finished.outputs[0].dir.clone()
    }

    fn rows(dir: &Path, tree: &str, view: &str, kind: &str) -> BTreeMap<String, f64> {
        let (infix, file) = if view == "all" { ("all", kind) } else { ("filtered", kind) };
        let name = format!("joularJX-{PID}-{infix}-{file}-energy.csv");
        let sub = if kind == "methods" { "methods" } else { "calltrees" };
        let prefix = if tree.is_empty() { String::new() } else { format!("{tree}/") };
        csv_rows(&dir.join(format!("{prefix}{view}/total/{sub}/{name}"))).into_iter().collect()
    }

    #[test]
    fn device_trees_sit_beside_the_cpu_tree_and_total_is_cpu_plus_devices() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = run(tmp.path(), device_fixture());
        assert_eq!(dir, tmp.path().join(format!("{PID}-{START_MS}")));
        // Hand-checked: network 2 + 1 J on compute, disk 1 J on save, in both views.
        for view in ["all", "app"] {
            let net = rows(&dir, "network", view, "methods");
            assert_eq!(net, [("com.acme.App.compute".to_owned(), 3.0)].into());
            let disk = rows(&dir, "disk", view, "methods");
            assert_eq!(disk, [("com.acme.App.save".to_owned(), 1.0)].into());
        }
        // Call trees hold Java frames only, as the CPU's do.
        let trees = rows(&dir, "network", "all", "call-trees");
        assert_eq!(trees, [("java.lang.Thread.run;com.acme.App.compute".to_owned(), 3.0)].into());
        assert_eq!(rows(&dir, "network", "app", "call-trees"), [("com.acme.App.compute".to_owned(), 3.0)].into());
        // total = CPU + devices, per method and per call tree, in both views.
        for (view, kind) in [("all", "methods"), ("app", "methods"), ("all", "call-trees"), ("app", "call-trees")] {
            let mut want = rows(&dir, "", view, kind);
            for device in ["network", "disk"] {
                for (name, joules) in rows(&dir, device, view, kind) {
                    *want.entry(name).or_default() += joules;
                }
            }
            let total = rows(&dir, "total", view, kind);
            assert_eq!(total.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{view} {kind}");
            for (name, joules) in &want {
                assert!((total[name] - joules).abs() < 1e-4, "{view} {kind} {name}: {} vs {joules}", total[name]);
            }
        }
        // The CPU's compute (1 J in the fixture) and its network 3 J.
        assert_eq!(rows(&dir, "total", "all", "methods")["com.acme.App.compute"], 4.0);

        let summary: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
        let devices = &summary["device_energy"];
        assert_eq!(devices["network"]["energy_j"], 3.0);
        assert_eq!(devices["network"]["estimated"], true);
        assert_eq!(devices["network"]["source"], "model: network (test)");
        assert_eq!(devices["network"]["threads"][0]["tid"], 101);
        assert_eq!(devices["network"]["threads"][0]["comm"], "worker");
        assert_eq!(devices["network"]["methods"]["all"][0]["name"], "com.acme.App.compute");
        assert_eq!(devices["disk"]["methods"]["app"][0]["energy_j"], 1.0);
        for device in ["network", "disk"] {
            let d = &devices[device];
            let threads: f64 = d["threads"].as_array().unwrap().iter().map(|t| t["energy_j"].as_f64().unwrap()).sum();
            assert_eq!(threads, d["energy_j"].as_f64().unwrap());
            for view in ["all", "app"] {
                let methods: f64 =
                    d["methods"][view].as_array().unwrap().iter().map(|m| m["energy_j"].as_f64().unwrap()).sum();
                assert_eq!(methods, threads, "{device} {view}");
            }
        }
        let total = &devices["total"];
        let cpu_j = summary["energy_uj"].as_f64().unwrap() / 1e6;
        assert!((total["cpu_j"].as_f64().unwrap() - cpu_j).abs() < 1e-9);
        assert!((total["energy_j"].as_f64().unwrap() - (cpu_j + 4.0)).abs() < 1e-9);
        let compute = &total["methods"]["all"][0];
        assert_eq!(
            (&compute["name"], &compute["energy_j"], &compute["cpu_j"], &compute["network_j"], &compute["disk_j"]),
            (&"com.acme.App.compute".into(), &4.0.into(), &1.0.into(), &3.0.into(), &0.0.into())
        );
    }

    #[test]
    fn without_device_energy_there_is_no_device_tree_nor_key() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = run(tmp.path(), fixture());
        for name in ["network", "disk", super::TOTAL_DIR] {
            assert!(!dir.join(name).exists(), "{name}");
        }
        let summary = fs::read_to_string(dir.join("summary.json")).unwrap();
        assert!(!summary.contains("device_energy"));
    }

    #[test]
    fn the_cpu_tree_is_the_same_with_devices() {
        let (with, without) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (run(with.path(), device_fixture()), run(without.path(), fixture()));
        for view in ["all", "app"] {
            for kind in ["methods", "call-trees"] {
                assert_eq!(rows(&a, "", view, kind), rows(&b, "", view, kind), "{view} {kind}");
            }
        }
    }

    #[test]
    fn a_device_tree_that_cannot_be_written_stops_no_other_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(format!("{PID}-{START_MS}"));
        fs::create_dir_all(&dir).unwrap();
        let mut results = Results::new(config(tmp.path())).unwrap();
        for (mut report, stacks) in device_fixture() {
            results.on_cycle(&mut report, &stacks).unwrap();
        }
        let dir = results.finish().unwrap().outputs[0].dir.clone();
        // A file where the network tree goes: it cannot be made.
        fs::remove_dir_all(dir.join("network")).unwrap();
        fs::write(dir.join("network"), b"").unwrap();
        let out = results.finish().unwrap().outputs.remove(0);
        assert_eq!(out.failed.len(), 1, "{:?}", out.failed);
        assert!(out.failed[0].path.ends_with("/network"), "{:?}", out.failed);
        assert_eq!(rows(&dir, "disk", "all", "methods")["com.acme.App.save"], 1.0);
        assert_eq!(rows(&dir, "total", "all", "methods")["com.acme.App.save"], 1.0);
        let summary = fs::read_to_string(dir.join("summary.json")).unwrap();
        assert!(summary.contains("outputs_failed") && summary.contains("device_energy"));
    }
}

#[cfg(test)]
mod report_tests {
    use std::fs;

    use super::tests::device_fixture;
    use crate::output::{report_to, ReportArgs, ReportFormat};
    use crate::stages::results::tests::config;
    use crate::stages::Results;

    /// `profile.json` keeps the device stacks: `report` writes the same device trees, summary
    /// key and table columns as the run did.
    #[test]
    fn report_rerenders_the_device_trees_from_the_raw_profile() {
        let tmp = tempfile::tempdir().unwrap();
        let mut results = Results::new(config(&tmp.path().join("run"))).unwrap();
        for (mut report, stacks) in device_fixture() {
            results.on_cycle(&mut report, &stacks).unwrap();
        }
        let dir = results.finish().unwrap().outputs[0].dir.clone();
        let out = tmp.path().join("again");
        let args = ReportArgs {
            result_dir: dir.clone(),
            output: Some(out.clone()),
            format: vec![ReportFormat::Csv, ReportFormat::Summary, ReportFormat::Table],
            top: 10,
            filter: None,
            native_frames: false,
            output_mode: None,
        };
        let mut table = Vec::new();
        report_to(&args, &mut table).unwrap();
        let table = String::from_utf8(table).unwrap();
        assert!(table.lines().nth(1).unwrap().contains("network J"), "{table}");
        for tree in ["network", "disk", super::TOTAL_DIR] {
            for rel in ["all/total/methods", "all/total/calltrees", "app/total/calltrees"] {
                let (a, b) = (dir.join(tree).join(rel), out.join(tree).join(rel));
                let name = fs::read_dir(&a).unwrap().next().unwrap().unwrap().file_name();
                assert_eq!(fs::read(a.join(&name)).unwrap(), fs::read(b.join(&name)).unwrap(), "{tree}/{rel}");
            }
        }
        let summary = |d: &std::path::Path| -> serde_json::Value {
            serde_json::from_str(&fs::read_to_string(d.join("summary.json")).unwrap()).unwrap()
        };
        let (was, is) = (summary(&dir)["device_energy"].clone(), summary(&out)["device_energy"].clone());
        assert_eq!(was["network"]["methods"], is["network"]["methods"]);
        assert_eq!(was["disk"]["threads"], is["disk"]["threads"]);
        assert_eq!(was["total"]["methods"], is["total"]["methods"]);
    }
}
