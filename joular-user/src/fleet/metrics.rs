//! Accumulates cycle reports into the Prometheus series of host mode.
//!
//! Counters only grow: energy is added per cycle and a negative or non-finite cycle value counts as 0.
//! A process keeps its series while it lives and for `retain_exited` after it exits (so scrapes see its
//! final value); then its total moves into `joular_exited_process_energy_joules_total`, so at every
//! scrape `Σ process + exited + Σ unattributed = Σ host{domain="package"}` holds, as it does per cycle.
//! A pid reused by a new process (another start time) retires the old series at once; if the new one has
//! the same labels, Prometheus sees a counter reset, which `rate`/`increase` handle.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::exposition::{Exposition, MetricKind};
use super::labels::{ProcessLabels, ProcessTable};
use crate::attribution::stacks::AttributedCycle;

/// VMs exported at most (`serve --vm-energy-dir`): each is a directory, two files rewritten per
/// cycle and a series here; a host spawning throwaway processes named like a hypervisor must
/// not make that unbounded.
pub const MAX_VMS: usize = 256;

/// One VM's series, as `vm_export` hands them over each cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct VmSeries {
    pub name: String,
    pub hypervisor: &'static str,
    /// Energy exported since this `serve` started.
    pub energy_j: f64,
    /// The last cycle's power.
    pub power_w: f64,
}

/// Where method energy goes once a process has `tracked_methods` distinct methods, so memory stays
/// bounded and the methods still sum to what was reported.
pub const UNTRACKED_METHOD: &str = "[untracked]";

#[derive(Debug, Clone, Copy)]
pub struct RegistryConfig {
    /// Methods exported per process, the largest by cumulative energy (`--top-methods`).
    pub top_methods: usize,
    /// Distinct methods whose totals are kept per process.
    pub tracked_methods: usize,
    /// How long, on the cycle clock, an exited process keeps its series.
    pub retain_exited: Duration,
    /// Exited processes kept at most (a fork-heavy host must not flood Prometheus); the oldest go first.
    pub max_exited: usize,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self { top_methods: 10, tracked_methods: 4096, retain_exited: Duration::from_secs(300), max_exited: 1000 }
    }
}

#[derive(Debug, Default)]
struct SocketSeries {
    package_j: f64,
    dram_j: Option<f64>,
    unattributed_j: f64,
    power_w: f64,
}

#[derive(Debug)]
struct ProcessSeries {
    labels: ProcessLabels,
    energy_j: f64,
    /// Grams of CO₂e of `energy_j` (when the run has a carbon intensity).
    carbon_g: f64,
    power_w: f64,
    /// Cycle clock (`end_ns`) of the cycle in which the process was found gone.
    exited_at_ns: Option<u64>,
    methods_j: HashMap<String, f64>,
}

impl ProcessSeries {
    fn add_method(&mut self, method: &str, energy_j: f64, tracked_methods: usize) {
        let key = if self.methods_j.contains_key(method) || self.methods_j.len() < tracked_methods {
            method
        } else {
            UNTRACKED_METHOD
        };
        *self.methods_j.entry(key.to_owned()).or_default() += energy_j;
    }

    /// `pid`, `comm`, `container` (empty outside containers, which Prometheus treats as absent), then `extra`.
    fn identity_and(&self, extra: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        let l = &self.labels;
        let container = l.container_id.clone().unwrap_or_default();
        [("pid", l.pid.to_string()), ("comm", l.comm.clone()), ("container", container)]
            .into_iter()
            .chain(extra.iter().map(|(k, v)| (*k, (*v).to_owned())))
            .collect()
    }

    fn top_methods(&self, n: usize) -> Vec<(&str, f64)> {
        let mut methods: Vec<(&str, f64)> = self.methods_j.iter().map(|(m, j)| (m.as_str(), *j)).collect();
        methods.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        methods.truncate(n);
        methods
    }
}

/// All series of host mode. Feed it every cycle with `on_cycle`; `render` is a scrape.
#[derive(Debug)]
pub struct MetricsRegistry {
    config: RegistryConfig,
    cycles: u64,
    /// Whether the energy source is the model; the `estimated` label of every energy series.
    estimated: bool,
    /// The energy source's name and what its figures are (model and coefficients, or where a
    /// counter is read), for `joular_energy_source_info`.
    energy_source: Option<(String, String)>,
    sockets: BTreeMap<u32, SocketSeries>,
    processes: BTreeMap<u32, ProcessSeries>,
    exited_energy_j: f64,
    /// Grams of CO₂e of the machine's energy, and of processes aged out; `None` until a cycle
    /// carries carbon (no intensity, no series).
    host_carbon_g: Option<f64>,
    exited_carbon_g: f64,
    drops: BTreeMap<String, u64>,
    /// `serve --vm-energy-dir`: each VM's exported energy, by sanitized name (bounded by
    /// `MAX_VMS`).
    vms: Vec<VmSeries>,
}

/// Energy that can only add to a counter.
fn joules(energy_uj: f64) -> f64 {
    if energy_uj.is_finite() && energy_uj > 0.0 {
        energy_uj * 1e-6
    } else {
        0.0
    }
}

fn finite_or_zero(value: f64) -> f64 {
    if value.is_finite() {
        value.max(0.0)
    } else {
        0.0
    }
}

impl MetricsRegistry {
    pub fn new(config: RegistryConfig) -> Self {
        Self {
            config,
            cycles: 0,
            estimated: false,
            energy_source: None,
            sockets: BTreeMap::new(),
            processes: BTreeMap::new(),
            exited_energy_j: 0.0,
            host_carbon_g: None,
            exited_carbon_g: 0.0,
            drops: BTreeMap::new(),
            vms: Vec::new(),
        }
    }

    /// The VMs' series as the export last wrote them; names are sanitized and at most
    /// `MAX_VMS` (more are dropped here too, so the bound holds whoever calls).
    pub fn set_vms(&mut self, mut vms: Vec<VmSeries>) {
        vms.truncate(MAX_VMS);
        self.vms = vms;
    }

    /// Names the energy source once it is open (the endpoint binds before).
    pub fn set_energy_source(&mut self, source: &str, detail: &str) {
        self.energy_source = Some((source.to_owned(), detail.to_owned()));
    }

    /// Adds one cycle. `table` gives the labels of processes seen for the first time and tells which
    /// tracked processes are gone.
    pub fn on_cycle(&mut self, cycle: &AttributedCycle, table: &dyn ProcessTable) {
        let report = &cycle.report;
        let now_ns = report.end_ns;
        self.cycles += 1;
        if !report.sockets.is_empty() {
            self.estimated = report.sockets.iter().any(|s| s.estimated);
        }
        for s in &report.sockets {
            let series = self.sockets.entry(s.socket).or_default();
            series.package_j += joules(s.energy_uj);
            series.unattributed_j += joules(s.unattributed_uj);
            series.power_w = finite_or_zero(s.power_w);
            if let Some(dram_uj) = s.dram_energy_uj {
                *series.dram_j.get_or_insert(0.0) += joules(dram_uj);
            }
        }
        for (cause, lost) in &report.drops {
            *self.drops.entry(cause.clone()).or_default() += lost;
        }

        self.notice_exits(table, now_ns);
        // A process absent from this cycle ran for none of it.
        for series in self.processes.values_mut() {
            series.power_w = 0.0;
        }
        for p in &report.processes {
            let series = self.series_for(p.pid, &p.comm, table, now_ns);
            series.energy_j += joules(p.energy_uj);
            series.power_w = finite_or_zero(p.power_w);
        }
        if let Some(carbon) = &cycle.carbon {
            *self.host_carbon_g.get_or_insert(0.0) += finite_or_zero(carbon.host_g);
            for charge in &cycle.charges {
                let comm = report.processes.iter().find(|p| p.pid == charge.pid).map_or("", |p| p.comm.as_str());
                self.series_for(charge.pid, comm, table, now_ns).carbon_g += finite_or_zero(charge.energy.carbon_g);
            }
        }
        let tracked_methods = self.config.tracked_methods;
        for m in cycle.methods() {
            let comm = report.threads.iter().find(|t| t.pid == m.pid).map_or("", |t| t.comm.as_str());
            self.series_for(m.pid, comm, table, now_ns).add_method(&m.method, joules(m.energy_uj), tracked_methods);
        }
        self.age_out(now_ns);
    }

    fn notice_exits(&mut self, table: &dyn ProcessTable, now_ns: u64) {
        for series in self.processes.values_mut().filter(|s| s.exited_at_ns.is_none()) {
            if table.start_ticks(series.labels.pid) != Some(series.labels.start_ticks) {
                series.exited_at_ns = Some(now_ns);
            }
        }
    }

    fn series_for(&mut self, pid: u32, comm: &str, table: &dyn ProcessTable, now_ns: u64) -> &mut ProcessSeries {
        if let Some(old) = self.processes.get(&pid) {
            // An exited process's pid that a new process holds now: the old series is done. Otherwise
            // this is the exited process's own last energy, or a live one.
            let reused = old.exited_at_ns.is_some()
                && table.start_ticks(pid).is_some_and(|start| start != old.labels.start_ticks);
            if reused {
                self.exited_energy_j += old.energy_j;
                self.exited_carbon_g += old.carbon_g;
                self.processes.remove(&pid);
            }
        }
        self.processes.entry(pid).or_insert_with(|| {
            // A process that exited before we looked keeps its energy under the comm the report gives.
            let (labels, exited_at_ns) = match table.labels(pid) {
                Some(labels) => (labels, None),
                None => (ProcessLabels { pid, comm: comm.to_owned(), ..ProcessLabels::default() }, Some(now_ns)),
            };
            ProcessSeries {
                labels,
                energy_j: 0.0,
                carbon_g: 0.0,
                power_w: 0.0,
                exited_at_ns,
                methods_j: HashMap::new(),
            }
        })
    }

    fn age_out(&mut self, now_ns: u64) {
        let retain_ns = u64::try_from(self.config.retain_exited.as_nanos()).unwrap_or(u64::MAX);
        let mut exited: Vec<(u64, u32)> =
            self.processes.iter().filter_map(|(pid, s)| s.exited_at_ns.map(|at| (at, *pid))).collect();
        exited.sort_unstable();
        let over_cap = exited.len().saturating_sub(self.config.max_exited);
        for (i, (exited_at_ns, pid)) in exited.into_iter().enumerate() {
            if i < over_cap || now_ns.saturating_sub(exited_at_ns) >= retain_ns {
                if let Some(series) = self.processes.remove(&pid) {
                    self.exited_energy_j += series.energy_j;
                    self.exited_carbon_g += series.carbon_g;
                }
            }
        }
    }

    /// The exposition of every series, in the text format 0.0.4.
    pub fn render(&self) -> String {
        let estimated = if self.estimated { "true" } else { "false" };
        let mut e = Exposition::default();

        e.family("joular_cycles_total", "Monitoring cycles accounted.", MetricKind::Counter);
        e.sample("joular_cycles_total", &[], self.cycles as f64);

        if let Some((source, detail)) = &self.energy_source {
            e.family(
                "joular_energy_source_info",
                "The energy source, and for a model its coefficients and their source.",
                MetricKind::Gauge,
            );
            let labels = [("source", source.as_str()), ("estimated", estimated), ("detail", detail.as_str())];
            e.sample("joular_energy_source_info", &labels, 1.0);
        }

        self.render_host(&mut e, estimated);
        self.render_processes(&mut e, estimated);
        self.render_carbon(&mut e, estimated);
        self.render_vms(&mut e, estimated);

        e.family(
            "joular_exited_process_energy_joules_total",
            "Energy of processes that exited and whose own series were aged out.",
            MetricKind::Counter,
        );
        e.sample("joular_exited_process_energy_joules_total", &[("estimated", estimated)], self.exited_energy_j);

        e.family(
            "joular_method_energy_joules_total",
            "Energy of a process's methods, only its top methods by cumulative energy.",
            MetricKind::Counter,
        );
        for (pid, series) in &self.processes {
            let pid = pid.to_string();
            for (method, energy_j) in series.top_methods(self.config.top_methods) {
                let labels = [("pid", pid.as_str()), ("method", method), ("estimated", estimated)];
                e.sample("joular_method_energy_joules_total", &labels, energy_j);
            }
        }

        e.family(
            "joular_samples_dropped_total",
            "Samples, records or perf-map entries lost, by cause (a full kernel map, the symbol memory budget).",
            MetricKind::Counter,
        );
        for (cause, lost) in &self.drops {
            e.sample("joular_samples_dropped_total", &[("cause", cause)], *lost as f64);
        }
        e.finish()
    }

    fn render_vms(&self, e: &mut Exposition, estimated: &str) {
        if self.vms.is_empty() {
            return;
        }
        e.family(
            "joular_vm_energy_joules_total",
            "Energy of each virtual machine's process since serve started, as written under --vm-energy-dir.",
            MetricKind::Counter,
        );
        for vm in &self.vms {
            let labels = [("vm", vm.name.as_str()), ("hypervisor", vm.hypervisor), ("estimated", estimated)];
            e.sample("joular_vm_energy_joules_total", &labels, finite_or_zero(vm.energy_j));
        }
        e.family(
            "joular_vm_power_watts",
            "Power of each virtual machine's process in the last cycle.",
            MetricKind::Gauge,
        );
        for vm in &self.vms {
            let labels = [("vm", vm.name.as_str()), ("hypervisor", vm.hypervisor), ("estimated", estimated)];
            e.sample("joular_vm_power_watts", &labels, finite_or_zero(vm.power_w));
        }
    }

    fn render_host(&self, e: &mut Exposition, estimated: &str) {
        e.family(
            "joular_host_energy_joules_total",
            "Energy of each socket; domain=\"package\" is the energy split among processes.",
            MetricKind::Counter,
        );
        for (socket, s) in &self.sockets {
            let socket = socket.to_string();
            let labels = [("socket", socket.as_str()), ("domain", "package"), ("estimated", estimated)];
            e.sample("joular_host_energy_joules_total", &labels, s.package_j);
            if let Some(dram_j) = s.dram_j {
                let labels = [("socket", socket.as_str()), ("domain", "dram"), ("estimated", estimated)];
                e.sample("joular_host_energy_joules_total", &labels, dram_j);
            }
        }
        e.family("joular_host_power_watts", "Package power of each socket in the last cycle.", MetricKind::Gauge);
        for (socket, s) in &self.sockets {
            let socket = socket.to_string();
            e.sample("joular_host_power_watts", &[("socket", socket.as_str()), ("estimated", estimated)], s.power_w);
        }
        e.family(
            "joular_unattributed_energy_joules_total",
            "Package energy of each socket that no process took (idle, or time not accounted to any task).",
            MetricKind::Counter,
        );
        for (socket, s) in &self.sockets {
            let socket = socket.to_string();
            e.sample(
                "joular_unattributed_energy_joules_total",
                &[("socket", socket.as_str()), ("estimated", estimated)],
                s.unattributed_j,
            );
        }
    }

    /// `joular_carbon_grams_total`: the machine's, each process's and the aged-out processes'.
    fn render_carbon(&self, e: &mut Exposition, estimated: &str) {
        let Some(host_g) = self.host_carbon_g else { return };
        e.family(
            "joular_carbon_grams_total",
            "Grams of CO2e of the energy (operational: kWh x grid intensity x PUE, per cycle), by scope.",
            MetricKind::Counter,
        );
        e.sample("joular_carbon_grams_total", &[("scope", "host"), ("estimated", estimated)], host_g);
        e.sample("joular_carbon_grams_total", &[("scope", "exited"), ("estimated", estimated)], self.exited_carbon_g);
        for s in self.processes.values() {
            let labels = s.identity_and(&[("scope", "process"), ("estimated", estimated)]);
            sample(e, "joular_carbon_grams_total", &labels, s.carbon_g);
        }
    }

    fn render_processes(&self, e: &mut Exposition, estimated: &str) {
        e.family(
            "joular_process_energy_joules_total",
            "Energy attributed to each process (its threads' share of socket energy).",
            MetricKind::Counter,
        );
        for s in self.processes.values() {
            let labels = s.identity_and(&[("estimated", estimated)]);
            sample(e, "joular_process_energy_joules_total", &labels, s.energy_j);
        }
        e.family("joular_process_power_watts", "Power of each process in the last cycle.", MetricKind::Gauge);
        for s in self.processes.values() {
            let labels = s.identity_and(&[("estimated", estimated)]);
            sample(e, "joular_process_power_watts", &labels, s.power_w);
        }
        e.family(
            "joular_process_info",
            "Constant 1 carrying a process's executable and cgroup, to join on pid.",
            MetricKind::Gauge,
        );
        for s in self.processes.values() {
            let exe = s.labels.exe.as_deref().unwrap_or_default();
            let cgroup = s.labels.cgroup.as_deref().unwrap_or_default();
            let labels = s.identity_and(&[("exe", exe), ("cgroup", cgroup)]);
            sample(e, "joular_process_info", &labels, 1.0);
        }
    }
}

fn sample(e: &mut Exposition, name: &str, labels: &[(&'static str, String)], value: f64) {
    let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
    e.sample(name, &labels, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::stacks::{CycleCarbon, Energy, ThreadCharge};
    use crate::model::{CycleReport, MethodReport, ProcessReport, SocketReport};
    use std::cell::RefCell;

    /// Live processes by pid; tests kill and respawn them.
    #[derive(Default)]
    struct FakeTable(RefCell<HashMap<u32, ProcessLabels>>);

    impl FakeTable {
        fn spawn(&self, pid: u32, comm: &str, start_ticks: u64, container: Option<&str>) {
            let labels = ProcessLabels {
                pid,
                comm: comm.to_owned(),
                exe: Some(format!("/usr/bin/{comm}")),
                cgroup: Some("/system.slice/x.service".to_owned()),
                container_id: container.map(str::to_owned),
                start_ticks,
            };
            self.0.borrow_mut().insert(pid, labels);
        }
        fn kill(&self, pid: u32) {
            self.0.borrow_mut().remove(&pid);
        }
    }

    impl ProcessTable for FakeTable {
        fn labels(&self, pid: u32) -> Option<ProcessLabels> {
            self.0.borrow().get(&pid).cloned()
        }
        fn start_ticks(&self, pid: u32) -> Option<u64> {
            self.0.borrow().get(&pid).map(|l| l.start_ticks)
        }
    }

    const SECOND_NS: u64 = 1_000_000_000;

    /// One cycle on one socket: each process takes its energy, the rest of `host_uj` is unattributed.
    fn cycle(n: u64, host_uj: f64, processes: &[(u32, f64)], methods: &[(u32, &str, f64)]) -> CycleReport {
        let taken: f64 = processes.iter().map(|p| p.1).sum();
        CycleReport {
            cycle: n,
            start_ns: (n - 1) * SECOND_NS,
            end_ns: n * SECOND_NS,
            sockets: vec![SocketReport {
                socket: 0,
                energy_uj: host_uj,
                source: "powercap".to_owned(),
                unattributed_uj: host_uj - taken,
                power_w: host_uj * 1e-6,
                ..SocketReport::default()
            }],
            processes: processes
                .iter()
                .map(|&(pid, energy_uj)| ProcessReport {
                    pid,
                    comm: format!("gone-{pid}"),
                    energy_uj,
                    power_w: energy_uj * 1e-6,
                    on_cpu_ns: 1,
                    ..ProcessReport::default()
                })
                .collect(),
            methods: methods
                .iter()
                .map(|&(pid, method, energy_uj)| MethodReport {
                    pid,
                    tid: pid,
                    method: method.to_owned(),
                    energy_uj,
                    samples: 1,
                })
                .collect(),
            ..CycleReport::default()
        }
    }

    /// Series (`name{labels}`) to value, from a rendered exposition.
    fn scrape(registry: &MetricsRegistry) -> BTreeMap<String, f64> {
        registry
            .render()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').unwrap();
                (series.to_owned(), value.parse().unwrap())
            })
            .collect()
    }

    fn sum(series: &BTreeMap<String, f64>, name: &str, with: &str) -> f64 {
        series.iter().filter(|(k, _)| k.split('{').next() == Some(name) && k.contains(with)).map(|(_, v)| v).sum()
    }

    fn value(series: &BTreeMap<String, f64>, name: &str, with: &str) -> Option<f64> {
        let hits: Vec<f64> = series
            .iter()
            .filter(|(k, _)| k.split('{').next() == Some(name) && k.contains(with))
            .map(|(_, v)| *v)
            .collect();
        assert!(hits.len() <= 1, "{name} {with}: {hits:?}");
        hits.first().copied()
    }

    fn config(retain_cycles: u64) -> RegistryConfig {
        RegistryConfig {
            top_methods: 2,
            tracked_methods: 3,
            retain_exited: Duration::from_nanos(retain_cycles * SECOND_NS),
            max_exited: 100,
        }
    }

    fn assert_balanced(series: &BTreeMap<String, f64>) {
        let host = sum(series, "joular_host_energy_joules_total", "domain=\"package\"");
        let parts = sum(series, "joular_process_energy_joules_total", "")
            + sum(series, "joular_exited_process_energy_joules_total", "")
            + sum(series, "joular_unattributed_energy_joules_total", "");
        assert!(host > 0.0);
        assert!((parts - host).abs() < 1e-9 * host, "parts {parts} host {host}");
    }

    #[test]
    fn counters_stay_monotonic_and_balanced_while_processes_come_and_go() {
        let table = FakeTable::default();
        let mut registry = MetricsRegistry::new(config(2));
        let mut previous: BTreeMap<String, f64> = BTreeMap::new();
        for n in 1..=12u32 {
            // pid 100 lives throughout; pid 200+n lives for two cycles, then exits.
            table.spawn(100, "java", 1, None);
            table.spawn(200 + n, "worker", u64::from(n), Some(&"c".repeat(64)));
            table.kill(200 + n - 2);
            let report =
                cycle(u64::from(n), 50e6, &[(100, 20e6 + f64::from(n)), (200 + n, 5e6), (200 + n - 1, 4e6)], &[]);
            registry.on_cycle(&AttributedCycle::of_report(report.clone()), &table);
            let now = scrape(&registry);
            assert_balanced(&now);
            for (key, before) in &previous {
                if let Some(after) = now.get(key) {
                    if key.contains("_total") {
                        assert!(after >= before, "{key}: {before} -> {after}");
                    }
                }
            }
            previous = now;
        }
        assert_eq!(value(&previous, "joular_cycles_total", ""), Some(12.0));
        let java = value(&previous, "joular_process_energy_joules_total", "pid=\"100\"").unwrap();
        assert!((java - (12.0 * 20.0 + 78e-6)).abs() < 1e-9, "{java}");
        // Exited workers linger two cycles then move into the exited counter: a bounded set of series.
        let workers =
            previous.keys().filter(|k| k.starts_with("joular_process_energy") && k.contains("worker")).count();
        assert!(workers <= 4, "{workers} worker series");
        assert!(value(&previous, "joular_exited_process_energy_joules_total", "").unwrap() > 0.0);
    }

    #[test]
    fn exited_process_keeps_its_series_for_the_retention_then_its_energy_moves_to_exited() {
        let table = FakeTable::default();
        table.spawn(7, "batch", 3, None);
        let mut registry = MetricsRegistry::new(config(3));
        registry.on_cycle(&AttributedCycle::of_report(cycle(1, 10e6, &[(7, 6e6)], &[])), &table);
        table.kill(7);
        // Its last cycle's energy arrives in the cycle in which it is found gone.
        registry.on_cycle(&AttributedCycle::of_report(cycle(2, 10e6, &[(7, 2e6)], &[])), &table);
        for n in 3..=4 {
            registry.on_cycle(&AttributedCycle::of_report(cycle(n, 10e6, &[], &[])), &table);
            let s = scrape(&registry);
            assert_eq!(value(&s, "joular_process_energy_joules_total", "pid=\"7\""), Some(8.0));
            assert_eq!(value(&s, "joular_process_power_watts", "pid=\"7\""), Some(0.0));
            assert_eq!(value(&s, "joular_exited_process_energy_joules_total", ""), Some(0.0));
        }
        registry.on_cycle(&AttributedCycle::of_report(cycle(5, 10e6, &[], &[])), &table);
        let s = scrape(&registry);
        assert_eq!(value(&s, "joular_process_energy_joules_total", "pid=\"7\""), None);
        assert_eq!(value(&s, "joular_process_info", "pid=\"7\""), None);
        assert_eq!(value(&s, "joular_exited_process_energy_joules_total", ""), Some(8.0));
        assert_balanced(&s);
    }

    #[test]
    fn a_process_gone_before_it_was_first_seen_keeps_its_energy_under_the_reported_comm() {
        let table = FakeTable::default();
        let mut registry = MetricsRegistry::new(config(1));
        registry.on_cycle(&AttributedCycle::of_report(cycle(1, 10e6, &[(55, 3e6)], &[])), &table);
        let s = scrape(&registry);
        assert_eq!(value(&s, "joular_process_energy_joules_total", "comm=\"gone-55\""), Some(3.0));
        registry.on_cycle(&AttributedCycle::of_report(cycle(2, 10e6, &[], &[])), &table);
        let s = scrape(&registry);
        assert_eq!(value(&s, "joular_process_energy_joules_total", "pid=\"55\""), None);
        assert_eq!(value(&s, "joular_exited_process_energy_joules_total", ""), Some(3.0));
    }

    #[test]
    fn a_reused_pid_retires_the_old_series_at_once() {
        let table = FakeTable::default();
        table.spawn(9, "old", 10, None);
        let mut registry = MetricsRegistry::new(config(100));
        registry.on_cycle(&AttributedCycle::of_report(cycle(1, 10e6, &[(9, 4e6)], &[])), &table);
        table.spawn(9, "new", 11, None);
        registry.on_cycle(&AttributedCycle::of_report(cycle(2, 10e6, &[(9, 1e6)], &[])), &table);
        let s = scrape(&registry);
        assert_eq!(value(&s, "joular_process_energy_joules_total", "comm=\"old\""), None);
        assert_eq!(value(&s, "joular_process_energy_joules_total", "comm=\"new\""), Some(1.0));
        assert_eq!(value(&s, "joular_exited_process_energy_joules_total", ""), Some(4.0));
        assert_balanced(&s);
    }

    #[test]
    fn exited_processes_beyond_the_cap_retire_oldest_first() {
        let table = FakeTable::default();
        let mut registry = MetricsRegistry::new(RegistryConfig { max_exited: 2, ..config(1000) });
        for n in 1..=5u64 {
            registry.on_cycle(&AttributedCycle::of_report(cycle(n, 10e6, &[(n as u32, 1e6)], &[])), &table);
        }
        let s = scrape(&registry);
        let pids: Vec<&String> = s.keys().filter(|k| k.starts_with("joular_process_energy")).collect();
        assert_eq!(pids.len(), 2, "{pids:?}");
        assert!(pids.iter().all(|k| k.contains("pid=\"4\"") || k.contains("pid=\"5\"")));
        assert_eq!(value(&s, "joular_exited_process_energy_joules_total", ""), Some(3.0));
    }

    #[test]
    fn only_the_top_methods_are_exported_and_a_returning_one_resumes_its_total() {
        let table = FakeTable::default();
        table.spawn(1, "java", 1, None);
        let mut registry = MetricsRegistry::new(config(10));
        registry.on_cycle(
            &AttributedCycle::of_report(cycle(1, 10e6, &[(1, 6e6)], &[(1, "a", 3e6), (1, "b", 2e6), (1, "c", 1e6)])),
            &table,
        );
        let s = scrape(&registry);
        assert_eq!(value(&s, "joular_method_energy_joules_total", "method=\"a\""), Some(3.0));
        assert_eq!(value(&s, "joular_method_energy_joules_total", "method=\"b\""), Some(2.0));
        assert_eq!(value(&s, "joular_method_energy_joules_total", "method=\"c\""), None);
        registry.on_cycle(&AttributedCycle::of_report(cycle(2, 10e6, &[(1, 4e6)], &[(1, "c", 4e6)])), &table);
        let s = scrape(&registry);
        assert_eq!(value(&s, "joular_method_energy_joules_total", "method=\"c\""), Some(5.0));
        assert_eq!(value(&s, "joular_method_energy_joules_total", "method=\"b\""), None);
        registry.on_cycle(&AttributedCycle::of_report(cycle(3, 10e6, &[(1, 4e6)], &[(1, "b", 4e6)])), &table);
        let s = scrape(&registry);
        assert_eq!(value(&s, "joular_method_energy_joules_total", "method=\"b\""), Some(6.0));
        // A fourth distinct method is beyond tracked_methods (3): it counts as untracked.
        registry.on_cycle(&AttributedCycle::of_report(cycle(4, 10e6, &[(1, 9e6)], &[(1, "d", 9e6)])), &table);
        let s = scrape(&registry);
        assert_eq!(value(&s, "joular_method_energy_joules_total", "method=\"d\""), None);
        let untracked = format!("method=\"{UNTRACKED_METHOD}\"");
        assert_eq!(value(&s, "joular_method_energy_joules_total", &untracked), Some(9.0));
    }

    #[test]
    fn carbon_is_a_counter_per_process_and_host_only_with_an_intensity() {
        let table = FakeTable::default();
        table.spawn(1, "java", 1, None);
        let mut registry = MetricsRegistry::new(config(10));
        registry.on_cycle(&AttributedCycle::of_report(cycle(1, 10e6, &[(1, 6e6)], &[])), &table);
        assert!(!registry.render().contains("joular_carbon_grams_total"), "no intensity, no carbon series");
        for n in 2..=3 {
            let mut attributed = AttributedCycle::of_report(cycle(n, 10e6, &[(1, 6e6)], &[]));
            let g_per_uj = 400.0 / 3.6e12;
            attributed.carbon = Some(CycleCarbon { g_per_kwh: 400.0, pue: 1.0, g_per_uj, host_g: 10e6 * g_per_uj });
            attributed.charges = vec![ThreadCharge {
                pid: 1,
                tid: 1,
                energy: Energy { cpu_uj: 6e6, carbon_g: 6e6 * g_per_uj },
                samples: 0,
                stacks: Vec::new(),
            }];
            registry.on_cycle(&attributed, &table);
        }
        let s = scrape(&registry);
        let host = value(&s, "joular_carbon_grams_total", "scope=\"host\"").unwrap();
        assert!((host - 2.0 * 10.0 * 400.0 / 3.6e6).abs() < 1e-12, "{host}");
        let process = value(&s, "joular_carbon_grams_total", "scope=\"process\"").unwrap();
        assert!((process - 2.0 * 6.0 * 400.0 / 3.6e6).abs() < 1e-12, "{process}");
    }

    #[test]
    fn the_energy_source_and_its_model_are_an_info_series() {
        let mut registry = MetricsRegistry::new(config(10));
        assert!(!registry.render().contains("joular_energy_source_info"), "absent until the source is open");
        registry.set_energy_source("model", "utilisation (Cloud Carbon Footprint) model: 0.45–2.02 W/vCPU");
        let s = scrape(&registry);
        let labels = "detail=\"utilisation (Cloud Carbon Footprint) model: 0.45–2.02 W/vCPU\"";
        assert_eq!(value(&s, "joular_energy_source_info", labels), Some(1.0), "{s:?}");
        assert_eq!(value(&s, "joular_energy_source_info", "source=\"model\""), Some(1.0), "{s:?}");
    }

    #[test]
    fn labels_carry_container_and_estimated_and_drops_accumulate_by_cause() {
        let table = FakeTable::default();
        let id = "d".repeat(64);
        table.spawn(3, "nginx \"edge\"", 1, Some(&id));
        let mut registry = MetricsRegistry::new(config(10));
        for n in 1..=2 {
            let mut report = cycle(n, 10e6, &[(3, 1e6)], &[]);
            report.sockets[0].estimated = true;
            report.sockets[0].dram_energy_uj = Some(2e6);
            report.drops.insert("samples".to_owned(), 5);
            registry.on_cycle(&AttributedCycle::of_report(report.clone()), &table);
        }
        let s = scrape(&registry);
        let process = format!("{{pid=\"3\",comm=\"nginx \\\"edge\\\"\",container=\"{id}\",estimated=\"true\"}}");
        assert_eq!(s.get(&format!("joular_process_energy_joules_total{process}")), Some(&2.0));
        assert_eq!(value(&s, "joular_host_energy_joules_total", "domain=\"dram\""), Some(4.0));
        assert_eq!(value(&s, "joular_host_energy_joules_total", "domain=\"package\",estimated=\"true\""), Some(20.0));
        assert_eq!(value(&s, "joular_samples_dropped_total", "cause=\"samples\""), Some(10.0));
        assert_eq!(value(&s, "joular_process_info", "exe=\"/usr/bin/nginx \\\"edge\\\"\""), Some(1.0));
    }

    #[test]
    fn negative_or_non_finite_cycle_values_never_lower_a_counter() {
        let table = FakeTable::default();
        table.spawn(2, "x", 1, None);
        let mut registry = MetricsRegistry::new(config(10));
        registry.on_cycle(&AttributedCycle::of_report(cycle(1, 10e6, &[(2, 5e6)], &[])), &table);
        let mut report = cycle(2, f64::NAN, &[(2, -3e6)], &[]);
        report.sockets[0].unattributed_uj = f64::NEG_INFINITY;
        registry.on_cycle(&AttributedCycle::of_report(report.clone()), &table);
        let s = scrape(&registry);
        assert_eq!(value(&s, "joular_process_energy_joules_total", "pid=\"2\""), Some(5.0));
        assert_eq!(value(&s, "joular_host_energy_joules_total", "package"), Some(10.0));
        assert_eq!(value(&s, "joular_unattributed_energy_joules_total", ""), Some(5.0));
        assert_eq!(value(&s, "joular_host_power_watts", ""), Some(0.0));
    }

    #[test]
    fn every_family_has_help_and_type() {
        let text = MetricsRegistry::new(RegistryConfig::default()).render();
        let families: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).collect();
        assert_eq!(families.len(), text.lines().filter(|l| l.starts_with("# HELP ")).count());
        for name in [
            "joular_cycles_total counter",
            "joular_host_energy_joules_total counter",
            "joular_host_power_watts gauge",
            "joular_unattributed_energy_joules_total counter",
            "joular_process_energy_joules_total counter",
            "joular_process_power_watts gauge",
            "joular_process_info gauge",
            "joular_exited_process_energy_joules_total counter",
            "joular_method_energy_joules_total counter",
            "joular_samples_dropped_total counter",
        ] {
            assert!(families.contains(&name), "{name} missing from {families:?}");
        }
    }

    #[test]
    fn vms_are_a_bounded_set_of_series_named_by_their_sanitized_name() {
        let mut registry = MetricsRegistry::new(RegistryConfig::default());
        assert!(!registry.render().contains("joular_vm_"), "no VM, no family");
        let vm = |i: usize| VmSeries { name: format!("vm{i}"), hypervisor: "qemu", energy_j: 2.5, power_w: 1.25 };
        registry.set_vms((0..MAX_VMS + 10).map(vm).collect());
        let text = registry.render();
        assert!(
            text.contains("joular_vm_energy_joules_total{vm=\"vm0\",hypervisor=\"qemu\",estimated=\"false\"} 2.5"),
            "{text}"
        );
        assert!(
            text.contains("joular_vm_power_watts{vm=\"vm0\",hypervisor=\"qemu\",estimated=\"false\"} 1.25"),
            "{text}"
        );
        assert_eq!(text.lines().filter(|l| l.starts_with("joular_vm_energy_joules_total{")).count(), MAX_VMS);
    }
}
