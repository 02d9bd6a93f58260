//! Device energy (`--devices network,disk`) over a process's run: each cycle's split
//! (`CycleReport::device_energy`) summed per thread and per call path, the paths kept in a
//! `StackTable` of their own per device, so that their methods and call trees come from the
//! CPU's own rules (`methods.rs`, both views, thread kinds and the JVM flip included) and every
//! output that reads CPU stack totals reads device ones the same way.
//!
//! `summary.json` `device_energy` (built by [`device_summary`]):
//!
//! ```text
//! "device_energy": {
//!   "network": { "energy_j", "estimated", "source",
//!                "threads": [{ "tid", "comm", "energy_j" }],
//!                "methods": { "all": [{ "name", "energy_j" }], "app": [...] },
//!                "call_trees": { "all": [{ "tree", "energy_j" }], "app": [...] } },
//!   "disk":    { same },
//!   "total":   { "energy_j", "cpu_j", "network_j", "disk_j",
//!                "methods": { "all": [{ "name", "energy_j", "cpu_j", "network_j", "disk_j" }], "app": [...] } }
//! }
//! ```
//!
//! A device's `methods` hold every name its paths map to, buckets (`[native]`, `[GC]`...)
//! included, so they sum to its `threads`, which sum to its `energy_j`; so do its `call_trees`
//! (the JoularJX call-tree form, `a;b;c` root first, buckets included). `total.methods` lists
//! the methods with device energy (`energy_j = cpu_j + network_j + disk_j`); the complete list
//! of every method's total is the JoularJX `total/` tree. A device absent from the run is absent
//! here; with `--devices cpu` the key is absent.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::aggregate::{by_energy, method_totals, path_groups, Scope, StackTable, StackTotal};
use super::cycle::{DeviceCharge, DevicePathShare};
use super::methods::{MethodFilter, StackRules};
use super::paths::PathStyle;
use super::thread_kind::ThreadKind;
use super::thread_total::ThreadTotal;
use crate::device_reports::{Device, DeviceEnergy, PathDeviceEnergy, ThreadDeviceEnergy};
use crate::model::{Frame, FrameReport, Stack};

/// A frame of a device path as the symbolizer named it: `FrameReport` keeps the full name, and
/// a Java frame's short name is the part of it the symbolizer took it from (`jvm_symbols::short_name`
/// of HotSpot's `ret Class.method(args)` or a perf-map name); any other frame's is its name.
pub fn frame_of(report: &FrameReport) -> Frame {
    let short: Arc<str> = if report.kind.is_java() {
        Arc::from(jvm_symbols::short_name(&report.name).as_ref())
    } else {
        Arc::from(report.name.as_str())
    };
    Frame {
        name: Arc::from(report.name.as_str()),
        short,
        kind: report.kind,
        line: report.line,
        raw_name: report.raw_name.as_deref().map(Arc::from),
    }
}

pub fn stack_of(frames: &[FrameReport]) -> Stack {
    frames.iter().map(frame_of).collect::<Vec<_>>().into()
}

/// A cycle's device energy, each device's thread and path rows by process.
pub type CycleDevices<'a> =
    Vec<(&'a DeviceEnergy, HashMap<u32, (Vec<&'a ThreadDeviceEnergy>, Vec<&'a PathDeviceEnergy>)>)>;

/// Groups a cycle's rows by process once, so that adding them to every process costs the rows,
/// not processes × rows.
pub fn by_process(cycle: &[DeviceEnergy]) -> CycleDevices<'_> {
    cycle
        .iter()
        .map(|device| {
            let mut rows: HashMap<u32, (Vec<&ThreadDeviceEnergy>, Vec<&PathDeviceEnergy>)> = HashMap::new();
            for t in &device.threads {
                rows.entry(t.pid).or_default().0.push(t);
            }
            for p in &device.paths {
                rows.entry(p.pid).or_default().1.push(p);
            }
            (device, rows)
        })
        .collect()
}

/// One device's run in one process.
struct DeviceRun {
    estimated: bool,
    source: String,
    table: StackTable,
    threads: BTreeMap<u32, (String, f64)>,
}

/// One process's device energy over the run, per device class.
#[derive(Default)]
pub struct DeviceRuns {
    runs: BTreeMap<Device, DeviceRun>,
}

impl DeviceRuns {
    /// Adds process `pid`'s share of a cycle's device energy (`cycle`, grouped once per cycle
    /// by [`by_process`]). Every device of the cycle gets a run, with 0 J when the process
    /// moved no byte ("counted, none moved"). `threads` names a thread the device rows leave
    /// unnamed (its kind decides a JVM bucket). Returns the process's call paths of the cycle,
    /// per device it moved bytes on, named as the run's totals name them.
    pub fn add(
        &mut self,
        pid: u32,
        cycle: &CycleDevices,
        threads: &BTreeMap<u32, ThreadTotal>,
        filter: &MethodFilter,
        rules: StackRules,
    ) -> Vec<DeviceCharge> {
        let mut charges = Vec::new();
        for (device, rows) in cycle {
            let run = self.runs.entry(device.device).or_insert_with(|| DeviceRun {
                estimated: device.estimated,
                source: device.source.clone(),
                table: StackTable::default(),
                threads: BTreeMap::new(),
            });
            run.estimated |= device.estimated;
            if run.source != device.source && !device.source.is_empty() {
                run.source.clone_from(&device.source);
            }
            let Some((thread_rows, path_rows)) = rows.get(&pid) else { continue };
            let mut comms: HashMap<u32, &str> = HashMap::new();
            for t in thread_rows {
                let entry = run.threads.entry(t.tid).or_default();
                entry.1 += t.energy_uj;
                if !t.comm.is_empty() {
                    entry.0.clone_from(&t.comm);
                    comms.insert(t.tid, &t.comm);
                }
            }
            let mut paths = Vec::with_capacity(path_rows.len());
            for path in path_rows {
                let comm = comms
                    .get(&path.tid)
                    .copied()
                    .or_else(|| threads.get(&path.tid).map(|t| t.comm.as_str()))
                    .unwrap_or("");
                let stack = stack_of(&path.frames);
                let id = run.table.intern(&stack, ThreadKind::classify(comm, &stack), filter, rules);
                run.table.add(id, path.energy_uj, 0.0, 0);
                let entry = run.table.entry(id);
                paths.push(DevicePathShare {
                    tid: path.tid,
                    stack: entry.total.stack.clone(),
                    kind: entry.total.thread,
                    all_method: entry.all_method.clone(),
                    app_method: entry.app_method.clone(),
                    app_tree: entry.app_tree.clone(),
                    energy_uj: path.energy_uj,
                });
            }
            if !paths.is_empty() {
                charges.push(DeviceCharge { device: device.device, pid, paths });
            }
        }
        charges
    }

    /// The process turned out to be a JVM: its device paths read by the JVM rules too.
    pub fn relabel(&mut self, filter: &MethodFilter, rules: StackRules) {
        for run in self.runs.values_mut() {
            run.table.relabel(filter, rules);
        }
    }

    /// Distinct paths held, over every device (for `--max-stacks`-like bounds).
    pub fn len(&self) -> usize {
        self.runs.values().map(|r| r.table.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Starts every device's paths over (the process's stack totals started over).
    pub fn clear_stacks(&mut self) {
        for run in self.runs.values_mut() {
            run.table = StackTable::default();
        }
    }

    pub fn profiles(&self) -> Vec<DeviceProfile> {
        self.runs
            .iter()
            .map(|(device, run)| DeviceProfile {
                device: *device,
                estimated: run.estimated,
                source: run.source.clone(),
                energy_uj: run.threads.values().map(|t| t.1).sum(),
                threads: run
                    .threads
                    .iter()
                    .map(|(tid, (comm, energy_uj))| DeviceThreadTotal {
                        tid: *tid,
                        comm: comm.clone(),
                        energy_uj: *energy_uj,
                    })
                    .collect(),
                stacks: run.table.totals(),
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeviceThreadTotal {
    pub tid: u32,
    pub comm: String,
    pub energy_uj: f64,
}

/// One device's totals of a process's run: its threads' energy and its paths' (the same stack
/// totals as the CPU's, with 0 samples).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceProfile {
    pub device: Device,
    pub estimated: bool,
    pub source: String,
    pub energy_uj: f64,
    pub threads: Vec<DeviceThreadTotal>,
    pub stacks: Vec<StackTotal>,
}

/// The CPU's stacks and every device's, as one list: methods and call trees summed over it are
/// CPU + devices (the JoularJX `total/` tree, `total` in `summary.json`).
pub fn combined_stacks(cpu: &[StackTotal], devices: &[DeviceProfile]) -> Vec<StackTotal> {
    cpu.iter().chain(devices.iter().flat_map(|d| d.stacks.iter())).cloned().collect()
}

/// `summary.json` `device_energy` (see the module comment).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceEnergySummary {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<DeviceSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DeviceSummary>,
    pub total: TotalSummary,
}

impl DeviceEnergySummary {
    pub fn device(&self, device: Device) -> Option<&DeviceSummary> {
        match device {
            Device::Network => self.network.as_ref(),
            Device::Disk => self.disk.as_ref(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceSummary {
    pub energy_j: f64,
    pub estimated: bool,
    pub source: String,
    pub threads: Vec<DeviceThreadSummary>,
    pub methods: MethodViews<MethodEnergy>,
    pub call_trees: MethodViews<TreeEnergy>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeEnergy {
    pub tree: String,
    pub energy_j: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceThreadSummary {
    pub tid: u32,
    pub comm: String,
    pub energy_j: f64,
}

/// The "all" view, and the "app" view when the run has a `--filter`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MethodViews<T> {
    pub all: Vec<T>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub app: Vec<T>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MethodEnergy {
    pub name: String,
    pub energy_j: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TotalSummary {
    /// CPU + every device.
    pub energy_j: f64,
    pub cpu_j: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_j: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_j: Option<f64>,
    pub methods: MethodViews<MethodTotal>,
}

/// A method's energy on every device, for the methods with device energy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MethodTotal {
    pub name: String,
    pub energy_j: f64,
    pub cpu_j: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_j: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_j: Option<f64>,
}

fn views<T>(scopes: &[Scope], f: impl Fn(Scope) -> Vec<T>) -> MethodViews<T> {
    MethodViews { all: f(scopes[0]), app: scopes.get(1).map(|s| f(*s)).unwrap_or_default() }
}

fn joules(uj: f64) -> f64 {
    uj / 1e6
}

/// `summary.json` `device_energy` of a process whose CPU stacks are `cpu` (`None` without
/// device runs).
pub fn device_summary(
    cpu: &[StackTotal],
    devices: &[DeviceProfile],
    filter: &MethodFilter,
    rules: StackRules,
) -> Option<DeviceEnergySummary> {
    if devices.is_empty() {
        return None;
    }
    let scopes: Vec<Scope> = if filter.is_empty() { vec![Scope::All] } else { vec![Scope::All, Scope::App(filter)] };
    let mut summary = DeviceEnergySummary::default();
    for d in devices {
        let methods = views(&scopes, |scope| {
            method_totals(&d.stacks, scope, rules)
                .into_iter()
                .map(|m| MethodEnergy { name: m.name.to_string(), energy_j: joules(m.energy_uj) })
                .collect()
        });
        let call_trees = views(&scopes, |scope| {
            let groups = path_groups(&d.stacks, scope, rules, PathStyle::CallTree);
            by_energy(&groups)
                .into_iter()
                .map(|g| TreeEnergy { tree: g.tree(false), energy_j: joules(g.energy_uj) })
                .collect()
        });
        let device = DeviceSummary {
            energy_j: joules(d.energy_uj),
            estimated: d.estimated,
            source: d.source.clone(),
            threads: d
                .threads
                .iter()
                .map(|t| DeviceThreadSummary { tid: t.tid, comm: t.comm.clone(), energy_j: joules(t.energy_uj) })
                .collect(),
            methods,
            call_trees,
        };
        match d.device {
            Device::Network => summary.network = Some(device),
            Device::Disk => summary.disk = Some(device),
        }
    }
    let cpu_uj: f64 = cpu.iter().map(|s| s.energy_uj).sum();
    let of = |device: Device| devices.iter().find(|d| d.device == device);
    let total = &mut summary.total;
    total.cpu_j = joules(cpu_uj);
    total.network_j = of(Device::Network).map(|d| joules(d.energy_uj));
    total.disk_j = of(Device::Disk).map(|d| joules(d.energy_uj));
    total.energy_j = joules(cpu_uj + devices.iter().map(|d| d.energy_uj).sum::<f64>());
    total.methods = views(&scopes, |scope| {
        let cpu_methods: HashMap<Arc<str>, f64> =
            method_totals(cpu, scope, rules).into_iter().map(|m| (m.name, m.energy_uj)).collect();
        let per_device: Vec<(Device, HashMap<Arc<str>, f64>)> = devices
            .iter()
            .map(|d| {
                (d.device, method_totals(&d.stacks, scope, rules).into_iter().map(|m| (m.name, m.energy_uj)).collect())
            })
            .collect();
        let mut rows: Vec<MethodTotal> = method_totals(&combined_stacks(&[], devices), scope, rules)
            .into_iter()
            .filter(|m| m.energy_uj > 0.0)
            .map(|m| {
                let on = |device| {
                    per_device
                        .iter()
                        .find(|(d, _)| *d == device)
                        .map(|(_, methods)| joules(methods.get(&m.name).copied().unwrap_or(0.0)))
                };
                let cpu_uj = cpu_methods.get(&m.name).copied().unwrap_or(0.0);
                MethodTotal {
                    name: m.name.to_string(),
                    energy_j: joules(cpu_uj + m.energy_uj),
                    cpu_j: joules(cpu_uj),
                    network_j: on(Device::Network),
                    disk_j: on(Device::Disk),
                }
            })
            .collect();
        rows.sort_by(|a, b| b.energy_j.total_cmp(&a.energy_j).then_with(|| a.name.cmp(&b.name)));
        rows
    });
    Some(summary)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::device_reports::ProcessDeviceEnergy;
    use crate::model::FrameKind;

    pub(crate) fn java_report(name: &str) -> FrameReport {
        FrameReport { name: name.into(), kind: FrameKind::JavaJit, line: None, raw_name: None }
    }

    fn native_report(name: &str) -> FrameReport {
        FrameReport { name: name.into(), kind: FrameKind::Native, line: None, raw_name: None }
    }

    /// One device's cycle: process `pid`, its paths `(tid, frames, µJ)`, plus `unattributed_uj`.
    pub(crate) fn device_cycle(
        device: Device,
        pid: u32,
        comm: &str,
        paths: Vec<(u32, Vec<FrameReport>, f64)>,
        unattributed_uj: f64,
    ) -> DeviceEnergy {
        let mut threads: BTreeMap<u32, f64> = BTreeMap::new();
        for (tid, _, uj) in &paths {
            *threads.entry(*tid).or_default() += uj;
        }
        let process_uj: f64 = threads.values().sum();
        DeviceEnergy {
            device,
            estimated: true,
            source: format!("model: {} (test)", device.name()),
            energy_uj: process_uj + unattributed_uj,
            unattributed_uj,
            units: vec![],
            processes: vec![ProcessDeviceEnergy { pid, energy_uj: process_uj, bytes: 1 }],
            threads: threads
                .iter()
                .map(|(tid, uj)| ThreadDeviceEnergy { pid, tid: *tid, comm: comm.into(), energy_uj: *uj, bytes: 1 })
                .collect(),
            paths: paths
                .into_iter()
                .map(|(tid, frames, energy_uj)| PathDeviceEnergy { pid, tid, frames, energy_uj, bytes: 1 })
                .collect(),
        }
    }

    #[test]
    fn frames_get_back_the_short_name_the_symbolizer_gave_them() {
        let f = frame_of(&FrameReport {
            name: "void a.B$$Lambda.run(int)".into(),
            kind: FrameKind::JavaInlined,
            line: Some(3),
            raw_name: Some("void a.B$$Lambda$1/0x10.run(int)".into()),
        });
        assert_eq!(
            (&*f.short, f.line, f.raw_name.as_deref()),
            ("a.B$$Lambda.run", Some(3), Some("void a.B$$Lambda$1/0x10.run(int)"))
        );
        assert_eq!(
            &*frame_of(&native_report("void x(int)")).short,
            "void x(int)",
            "a native name is its own short name"
        );
        assert_eq!(&*frame_of(&java_report("[unknown JIT code]")).short, "[unknown JIT code]");
    }

    #[test]
    fn device_methods_follow_the_cpu_rules_and_sum_to_threads() {
        let filter = MethodFilter::parse("com.acme");
        let jvm = StackRules { jvm: true, native_frames: false };
        let send = vec![
            java_report("void java.lang.Thread.run()"),
            java_report("void com.acme.Net.send(int)"),
            java_report("void java.net.SocketOutputStream.write(byte[])"),
            native_report("write"),
        ];
        let log = vec![java_report("void com.acme.Log.flush()"), native_report("write")];
        let gc = vec![native_report("G1ParTask::work")];
        let mut runs = DeviceRuns::default();
        let mut threads = BTreeMap::new();
        threads.insert(9, ThreadTotal { tid: 9, comm: "GC Thread#0".into(), ..ThreadTotal::default() });
        for _ in 0..2 {
            let cycle = [
                device_cycle(Device::Network, 1, "main", vec![(2, send.clone(), 3e6), (2, log.clone(), 1e6)], 5e6),
                device_cycle(Device::Disk, 1, "", vec![(3, log.clone(), 0.5e6), (9, gc.clone(), 0.25e6)], 0.0),
            ];
            let grouped = by_process(&cycle);
            let charges = runs.add(1, &grouped, &threads, &filter, jvm);
            // The cycle's paths, per device, named as the run's totals below name them.
            type Named<'a> = Vec<(u32, &'a str, &'a str, f64)>;
            let named: Vec<(Device, Named)> = charges
                .iter()
                .map(|c| {
                    assert_eq!(c.pid, 1);
                    let paths = c.paths.iter().map(|p| (p.tid, &*p.all_method, &*p.app_method, p.energy_uj)).collect();
                    (c.device, paths)
                })
                .collect();
            assert_eq!(
                named,
                [
                    (
                        Device::Network,
                        vec![
                            (2, "java.net.SocketOutputStream.write", "com.acme.Net.send", 3e6),
                            (2, "com.acme.Log.flush", "com.acme.Log.flush", 1e6)
                        ]
                    ),
                    (
                        Device::Disk,
                        vec![(3, "com.acme.Log.flush", "com.acme.Log.flush", 0.5e6), (9, "[GC]", "[GC]", 0.25e6)]
                    ),
                ]
            );
            assert_eq!(&*charges[0].paths[0].app_tree, "com.acme.Net.send");
            assert!(runs.add(7, &grouped, &threads, &filter, jvm).is_empty(), "pid 7 moved no byte");
        }
        let profiles = runs.profiles();
        assert_eq!(profiles.len(), 2);
        let net = &profiles[0];
        assert_eq!((net.device, net.energy_uj, net.threads.len()), (Device::Network, 8e6, 1));
        let cpu = vec![StackTotal {
            stack: stack_of(&log),
            thread: ThreadKind::Application,
            energy_uj: 2e6,
            carbon_g: 0.0,
            samples: 2,
        }];
        let s = device_summary(&cpu, &profiles, &filter, jvm).unwrap();
        let net = s.network.as_ref().unwrap();
        let all: Vec<(&str, f64)> = net.methods.all.iter().map(|m| (m.name.as_str(), m.energy_j)).collect();
        // "all": the topmost Java frame; "app": the nearest com.acme frame.
        assert_eq!(all, [("java.net.SocketOutputStream.write", 6.0), ("com.acme.Log.flush", 2.0)]);
        let app: Vec<(&str, f64)> = net.methods.app.iter().map(|m| (m.name.as_str(), m.energy_j)).collect();
        assert_eq!(app, [("com.acme.Net.send", 6.0), ("com.acme.Log.flush", 2.0)]);
        let disk = s.disk.as_ref().unwrap();
        let all: Vec<(&str, f64)> = disk.methods.all.iter().map(|m| (m.name.as_str(), m.energy_j)).collect();
        // A GC thread named only by the CPU's threads: its path is the [GC] bucket.
        assert_eq!(all, [("com.acme.Log.flush", 1.0), ("[GC]", 0.5)]);
        // Call trees: Java frames only in a JVM, root first; a bucket is its own tree.
        let trees: Vec<(&str, f64)> = net.call_trees.all.iter().map(|t| (t.tree.as_str(), t.energy_j)).collect();
        assert_eq!(
            trees,
            [
                ("java.lang.Thread.run;com.acme.Net.send;java.net.SocketOutputStream.write", 6.0),
                ("com.acme.Log.flush", 2.0)
            ]
        );
        assert_eq!(
            disk.call_trees.app.iter().map(|t| t.tree.as_str()).collect::<Vec<_>>(),
            ["com.acme.Log.flush", "[GC]"]
        );
        for d in [net, disk] {
            let threads: f64 = d.threads.iter().map(|t| t.energy_j).sum();
            for view in [&d.methods.all, &d.methods.app] {
                assert_eq!(view.iter().map(|m| m.energy_j).sum::<f64>(), threads);
            }
            for view in [&d.call_trees.all, &d.call_trees.app] {
                assert_eq!(view.iter().map(|t| t.energy_j).sum::<f64>(), threads);
            }
            assert_eq!(threads, d.energy_j);
        }
        assert_eq!(
            (s.total.cpu_j, s.total.network_j, s.total.disk_j, s.total.energy_j),
            (2.0, Some(8.0), Some(1.5), 11.5)
        );
        let flush = s.total.methods.all.iter().find(|m| m.name == "com.acme.Log.flush").unwrap();
        assert_eq!((flush.energy_j, flush.cpu_j, flush.network_j, flush.disk_j), (5.0, 2.0, Some(2.0), Some(1.0)));
        assert_eq!(s.total.methods.all[0].name, "java.net.SocketOutputStream.write");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["network"]["energy_j"], 8.0);
        assert_eq!(json["total"]["methods"]["app"][0]["name"], "com.acme.Net.send");
        assert_eq!(serde_json::from_value::<DeviceEnergySummary>(json).unwrap(), s);
        assert!(device_summary(&cpu, &[], &filter, jvm).is_none());
    }
}
