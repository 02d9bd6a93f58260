//! One cycle's device energy (`--devices network,disk`) in a process's runtime and evolution
//! files: `<pid>-<epochms>/{network,disk,total}/{all,app}/{runtime,evolution}/`, the same files
//! as the CPU's (`cycle_files.rs`), each device's from the call paths the stack stage named
//! this cycle (`AttributedCycle::device_charges`), `total/` the CPU's and every device's summed
//! per name.

use std::collections::HashMap;
use std::sync::Arc;

use super::cycle_sums::{add, methods_only};
use crate::attribution::stacks::aggregate::{named, NamedTotal};
use crate::attribution::stacks::methods::{is_method_name, join_frames, StackRules};
use crate::attribution::stacks::paths::{all_path, PathStyle};
use crate::attribution::stacks::{AttributedCycle, DevicePathShare};

use super::device_tree::TOTAL_DIR;

/// One tree's rows of one cycle: methods (all, app) and, when asked for, call trees (all, app).
#[derive(Debug, Default)]
pub(super) struct TreeRows {
    pub all_methods: Vec<NamedTotal>,
    pub app_methods: Vec<NamedTotal>,
    pub trees: Option<(Vec<NamedTotal>, Vec<NamedTotal>)>,
}

/// A device tree's rows of one process's cycle.
#[derive(Debug)]
pub(super) struct DeviceTreeRows {
    /// Its directory (`network`, `disk`, `total`).
    pub name: &'static str,
    pub rows: TreeRows,
    /// Whether the process moved bytes on the device (on any, for `total`) this cycle. A tree
    /// without is written only where it exists already: its runtime files then say 0 W (or,
    /// for `total`, the CPU's) instead of an earlier cycle's power, and a process that never
    /// moved a byte gets no tree.
    pub moved: bool,
    /// `total/` of a cycle without device bytes: its rows are the CPU's (not copied: a host run
    /// has thousands of processes that never move a byte).
    pub same_as_cpu: bool,
}

/// The cycle's device paths by process, grouped once per cycle (a host run has thousands of
/// processes and only some move bytes).
pub(super) struct CyclePaths<'a> {
    /// Each device class counted in the cycle, with its processes' paths.
    devices: Vec<(&'static str, HashMap<u32, &'a [DevicePathShare]>)>,
}

impl<'a> CyclePaths<'a> {
    pub fn new(cycle: &'a AttributedCycle) -> Self {
        let devices = cycle
            .report
            .device_energy
            .iter()
            .map(|device| {
                let paths = cycle
                    .device_charges
                    .iter()
                    .filter(|c| c.device == device.device && !c.paths.is_empty())
                    .map(|c| (c.pid, c.paths.as_slice()))
                    .collect();
                (device.device.name(), paths)
            })
            .collect();
        Self { devices }
    }

    /// Processes with device energy on a path this cycle.
    pub fn pids(&self) -> impl Iterator<Item = u32> + '_ {
        self.devices.iter().flat_map(|(_, paths)| paths.keys().copied())
    }

    /// Process `pid`'s tree of every device of the cycle, then `total/` (the CPU's `cpu` rows
    /// plus every device's); nothing when the run counts no device.
    pub fn trees(&self, pid: u32, cpu: &TreeRows, rules: StackRules) -> Vec<DeviceTreeRows> {
        if self.devices.is_empty() {
            return Vec::new();
        }
        let call_trees = cpu.trees.is_some();
        let mut out: Vec<DeviceTreeRows> = self
            .devices
            .iter()
            .map(|(name, paths)| match paths.get(&pid) {
                Some(paths) => DeviceTreeRows {
                    name,
                    rows: device_rows(paths, rules, call_trees),
                    moved: true,
                    same_as_cpu: false,
                },
                None => DeviceTreeRows { name, rows: TreeRows::empty(call_trees), moved: false, same_as_cpu: false },
            })
            .collect();
        let total = if out.iter().any(|t| t.moved) {
            let rows = summed(std::iter::once(cpu).chain(out.iter().map(|t| &t.rows)), call_trees);
            DeviceTreeRows { name: TOTAL_DIR, rows, moved: true, same_as_cpu: false }
        } else {
            DeviceTreeRows { name: TOTAL_DIR, rows: TreeRows::default(), moved: false, same_as_cpu: true }
        };
        out.push(total);
        out
    }
}

impl TreeRows {
    fn empty(call_trees: bool) -> Self {
        Self { trees: call_trees.then(Default::default), ..Self::default() }
    }
}

/// One device's rows of one process's cycle, summed as the CPU's are (`cycle_files.rs`).
fn device_rows(paths: &[DevicePathShare], rules: StackRules, call_trees: bool) -> TreeRows {
    type Sums = HashMap<Arc<str>, (f64, u64)>;
    let (mut all_methods, mut app_methods, mut all_trees, mut app_trees) =
        (Sums::new(), Sums::new(), Sums::new(), Sums::new());
    for path in paths {
        add(all_methods.entry(path.all_method.clone()).or_default(), path.energy_uj, 0);
        add(app_methods.entry(path.app_method.clone()).or_default(), path.energy_uj, 0);
        if call_trees {
            // As the CPU's runtime trees: a stack whose method is not a method has no all tree.
            if is_method_name(&path.all_method) {
                let tree = join_frames(all_path(&path.stack, path.kind, rules, PathStyle::CallTree).into_iter(), false);
                add(all_trees.entry(Arc::from(tree)).or_default(), path.energy_uj, 0);
            }
            add(app_trees.entry(path.app_tree.clone()).or_default(), path.energy_uj, 0);
        }
    }
    TreeRows {
        all_methods: methods_only(named(all_methods, |m| m)),
        app_methods: methods_only(named(app_methods, |m| m)),
        trees: call_trees.then(|| (named(all_trees, |t| t), methods_only(named(app_trees, |t| t)))),
    }
}

/// Rows summed per name over `parts` (CPU and devices): the `total/` tree.
fn summed<'r>(parts: impl Iterator<Item = &'r TreeRows>, call_trees: bool) -> TreeRows {
    type Sums = HashMap<Arc<str>, (f64, u64)>;
    let (mut all_methods, mut app_methods, mut all_trees, mut app_trees) =
        (Sums::new(), Sums::new(), Sums::new(), Sums::new());
    let sum = |into: &mut Sums, rows: &[NamedTotal]| {
        for r in rows {
            add(into.entry(r.name.clone()).or_default(), r.energy_uj, r.samples);
        }
    };
    for part in parts {
        sum(&mut all_methods, &part.all_methods);
        sum(&mut app_methods, &part.app_methods);
        if let Some((all, app)) = &part.trees {
            sum(&mut all_trees, all);
            sum(&mut app_trees, app);
        }
    }
    TreeRows {
        all_methods: named(all_methods, |m| m),
        app_methods: named(app_methods, |m| m),
        trees: call_trees.then(|| (named(all_trees, |t| t), named(app_trees, |t| t))),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use crate::attribution::stacks::device_run::tests::device_cycle;
    use crate::device_reports::Device;
    use crate::output::device_tree::tests::device_fixture;
    use crate::stages::results::tests::{config, csv_rows, PID, START_MS};
    use crate::stages::Results;

    /// `name -> watts` of a runtime file of tree `tree` (`""` for the CPU's), view `view`.
    fn runtime(dir: &Path, tree: &str, view: &str, kind: &str) -> BTreeMap<String, f64> {
        let infix = if view == "all" { "all" } else { "filtered" };
        let sub = if kind == "methods" { "methods" } else { "calltrees" };
        let path = dir
            .join(tree)
            .join(view)
            .join("runtime")
            .join(sub)
            .join(format!("joularJX-{PID}-{infix}-{kind}-power.csv"));
        csv_rows(&path).into_iter().collect()
    }

    fn evolution(dir: &Path, tree: &str, view: &str, method: &str) -> Vec<(String, f64)> {
        csv_rows(&dir.join(tree).join(view).join("evolution").join(format!("joularJX-{PID}-{method}-evolution.csv")))
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-4
    }

    /// The fixture's device energy per cycle (network 2 J then 1 J on `compute`, disk 1 J on
    /// `save` in the first cycle, none in the second), over cycles of 1 s then 2 s: each
    /// device's runtime files hold its last cycle's watts, its evolution a row per cycle it
    /// moved bytes in, and `total/` the CPU's plus the devices' per name, in both views.
    #[test]
    fn each_cycle_writes_device_runtime_and_evolution_files_beside_the_cpus() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cycles = device_fixture();
        // The disk is counted in the second cycle too, with no byte of the process on it.
        cycles[1].0.device_energy.push(device_cycle(Device::Disk, PID, "worker", vec![], 0.0));
        let mut results = Results::new(config(tmp.path())).unwrap();
        let dir = tmp.path().join(format!("{PID}-{START_MS}"));
        let (first_end_s, second_end_s) = (START_MS / 1000 + 1, START_MS / 1000 + 3);
        let mut cycles = cycles.into_iter();

        let (mut report, stacks) = cycles.next().unwrap();
        results.on_cycle(&mut report, &stacks).unwrap();
        for view in ["all", "app"] {
            assert_eq!(runtime(&dir, "network", view, "methods"), [("com.acme.App.compute".into(), 2.0)].into());
            assert_eq!(runtime(&dir, "disk", view, "methods"), [("com.acme.App.save".into(), 1.0)].into());
            // total = CPU + devices, per method and per call tree, computed here from the files.
            for kind in ["methods", "call-trees"] {
                let mut want = runtime(&dir, "", view, kind);
                for device in ["network", "disk"] {
                    for (name, watts) in runtime(&dir, device, view, kind) {
                        *want.entry(name).or_default() += watts;
                    }
                }
                let total = runtime(&dir, "total", view, kind);
                assert_eq!(total.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{view} {kind}");
                for (name, watts) in &want {
                    assert!(close(total[name], *watts), "{view} {kind} {name}: {} vs {watts}", total[name]);
                }
            }
        }
        assert_eq!(
            runtime(&dir, "network", "all", "call-trees"),
            [("java.lang.Thread.run;com.acme.App.compute".into(), 2.0)].into()
        );

        let (mut report, stacks) = cycles.next().unwrap();
        results.on_cycle(&mut report, &stacks).unwrap();
        // 1 J over 2 s; the disk's file says the process wrote nothing, not the first cycle's 1 W.
        assert_eq!(runtime(&dir, "network", "all", "methods"), [("com.acme.App.compute".into(), 0.5)].into());
        assert!(runtime(&dir, "disk", "all", "methods").is_empty());
        assert!(runtime(&dir, "disk", "app", "call-trees").is_empty());
        for view in ["all", "app"] {
            // In the all view the CPU's samples of `compute` are the inlined `multiply`'s.
            let cpu_compute_w = runtime(&dir, "", view, "methods").get("com.acme.App.compute").copied().unwrap_or(0.0);
            let total_w = runtime(&dir, "total", view, "methods")["com.acme.App.compute"];
            assert!(close(total_w, cpu_compute_w + 0.5), "{view}: {total_w} vs {cpu_compute_w} + 0.5");
        }

        for view in ["all", "app"] {
            assert_eq!(
                evolution(&dir, "network", view, "com.acme.App.compute"),
                [(first_end_s.to_string(), 2.0), (second_end_s.to_string(), 0.5)]
            );
            assert_eq!(evolution(&dir, "disk", view, "com.acme.App.save"), [(first_end_s.to_string(), 1.0)]);
            // total's rows are the CPU's plus the devices' at each cycle's end.
            let cpu: BTreeMap<String, f64> = if dir
                .join(view)
                .join("evolution")
                .join(format!("joularJX-{PID}-com.acme.App.compute-evolution.csv"))
                .exists()
            {
                evolution(&dir, "", view, "com.acme.App.compute").into_iter().collect()
            } else {
                BTreeMap::new()
            };
            let total = evolution(&dir, "total", view, "com.acme.App.compute");
            let whens: Vec<&str> = total.iter().map(|(when, _)| when.as_str()).collect();
            assert_eq!(whens, [first_end_s.to_string(), second_end_s.to_string()], "{view}");
            for ((when, total_w), device_w) in total.iter().zip([2.0, 0.5]) {
                let cpu_w = cpu.get(when).copied().unwrap_or(0.0);
                assert!(close(*total_w, cpu_w + device_w), "{view} at {when}: {total_w} vs {cpu_w} + {device_w}");
            }
        }
        // The run's totals still come at its end, in the same trees.
        let finished = results.finish().unwrap();
        assert!(finished.outputs[0].failed.is_empty(), "{:?}", finished.outputs[0].failed);
        let total_file = dir.join("network/all/total/methods").join(format!("joularJX-{PID}-all-methods-energy.csv"));
        assert_eq!(csv_rows(&total_file), [("com.acme.App.compute".to_owned(), 3.0)]);
    }

    /// With devices counted, a process that moves no byte gets no device tree (a host run has
    /// thousands); its first bytes make the trees of the devices it moved them on, and `total/`.
    #[test]
    fn a_process_gets_a_device_tree_when_it_first_moves_bytes_on_the_device() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cycles = device_fixture();
        let none = |device| device_cycle(device, PID, "worker", vec![], 0.0);
        cycles[0].0.device_energy = vec![none(Device::Network), none(Device::Disk)];
        cycles[1].0.device_energy.push(none(Device::Disk));
        // A third cycle as the second, without device bytes.
        let mut third = cycles[1].clone();
        third.0.cycle = 3;
        third.0.device_energy = vec![none(Device::Network), none(Device::Disk)];
        cycles.push(third);
        let mut results = Results::new(config(tmp.path())).unwrap();
        let dir = tmp.path().join(format!("{PID}-{START_MS}"));
        let mut cycles = cycles.into_iter();
        let (mut report, stacks) = cycles.next().unwrap();
        results.on_cycle(&mut report, &stacks).unwrap();
        assert!(dir.join("all/runtime/methods").is_dir(), "the CPU's tree is written");
        for tree in ["network", "disk", "total"] {
            assert!(!dir.join(tree).exists(), "{tree}");
        }
        let (mut report, stacks) = cycles.next().unwrap();
        results.on_cycle(&mut report, &stacks).unwrap();
        assert_eq!(runtime(&dir, "network", "all", "methods"), [("com.acme.App.compute".into(), 0.5)].into());
        assert!(dir.join("total/app/runtime/methods").is_dir());
        assert!(!dir.join("disk").exists());
        // No device byte: the network's runtime files say so, and total's are the CPU's.
        let (mut report, stacks) = cycles.next().unwrap();
        results.on_cycle(&mut report, &stacks).unwrap();
        assert!(runtime(&dir, "network", "all", "methods").is_empty());
        for (view, kind) in [("all", "methods"), ("app", "methods"), ("all", "call-trees")] {
            let cpu = runtime(&dir, "", view, kind);
            assert!(!cpu.is_empty(), "{view} {kind}");
            assert_eq!(runtime(&dir, "total", view, kind), cpu, "{view} {kind}");
        }
    }
}
