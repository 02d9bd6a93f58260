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
use crate::device_reports::Device;

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
    /// `--devices network,disk`: its joules per device, in `Device::ALL` order.
    device_j: [f64; 2],
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
    /// `--devices network,disk`: each device's energy over the run (`Device::ALL` order) and
    /// whether its model said estimated; `None` until a cycle carries device energy (no
    /// `device` series with `--devices cpu`).
    devices: Option<[(f64, bool); 2]>,
    /// Per device (`Device::ALL` order): joules of processes aged out, and joules no profiled
    /// process's bytes account for. With the processes' series they sum to `devices`.
    exited_device_j: [f64; 2],
    unattributed_device_j: [f64; 2],
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
            devices: None,
            exited_device_j: [0.0; 2],
            unattributed_device_j: [0.0; 2],
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
        if !report.device_energy.is_empty() {
            let devices = self.devices.get_or_insert_with(Default::default);
            for d in &report.device_energy {
                let slot = Device::ALL.iter().position(|x| *x == d.device).expect("every device is in ALL");
                devices[slot].0 += joules(d.energy_uj);
                devices[slot].1 |= d.estimated;
                self.unattributed_device_j[slot] += joules(d.unattributed_uj);
            }
            for d in &report.device_energy {
                let slot = Device::ALL.iter().position(|x| *x == d.device).expect("every device is in ALL");
                for p in &d.processes {
                    let comm = report.processes.iter().find(|r| r.pid == p.pid).map_or("", |r| r.comm.as_str());
                    self.series_for(p.pid, comm, table, now_ns).device_j[slot] += joules(p.energy_uj);
                }
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
                if let Some(old) = self.processes.remove(&pid) {
                    self.retire(&old);
                }
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
                device_j: [0.0; 2],
            }
        })
    }

    /// A process's series is gone: its counters move into the exited ones, so every sum over
    /// processes, exited and unattributed still equals the machine's.
    fn retire(&mut self, series: &ProcessSeries) {
        self.exited_energy_j += series.energy_j;
        self.exited_carbon_g += series.carbon_g;
        for (exited, j) in self.exited_device_j.iter_mut().zip(series.device_j) {
            *exited += j;
        }
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
                    self.retire(&series);
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
        self.render_devices(&mut e, estimated);

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

    /// `--devices network,disk`: each process's energy per device, `device` one of `cpu`
    /// (the series of `joular_process_energy_joules_total` again), `network`, `disk`; and each
    /// device's energy on the machine.
    fn render_devices(&self, e: &mut Exposition, estimated: &str) {
        let Some(devices) = &self.devices else { return };
        let flag = |b: bool| if b { "true" } else { "false" };
        e.family(
            "joular_device_energy_joules_total",
            "Energy of each process per device: cpu (its share of the sockets'), network and disk (device models, split by bytes).",
            MetricKind::Counter,
        );
        for s in self.processes.values() {
            let labels = s.identity_and(&[("device", "cpu"), ("estimated", estimated)]);
            sample(e, "joular_device_energy_joules_total", &labels, s.energy_j);
            for (slot, device) in Device::ALL.iter().enumerate() {
                let labels = s.identity_and(&[("device", device.name()), ("estimated", flag(devices[slot].1))]);
                sample(e, "joular_device_energy_joules_total", &labels, s.device_j[slot]);
            }
        }
        e.family(
            "joular_host_device_energy_joules_total",
            "Energy of each device class on the machine (device models), processes' and unattributed.",
            MetricKind::Counter,
        );
        for (slot, device) in Device::ALL.iter().enumerate() {
            let labels = [("device", device.name()), ("estimated", flag(devices[slot].1))];
            e.sample("joular_host_device_energy_joules_total", &labels, devices[slot].0);
        }
        let parts = [
            (
                "joular_exited_process_device_energy_joules_total",
                "Device energy (network, disk) of processes that exited and whose own series were aged out.",
                &self.exited_device_j,
            ),
            (
                "joular_unattributed_device_energy_joules_total",
                "Device energy (network, disk) that no profiled process's bytes account for.",
                &self.unattributed_device_j,
            ),
        ];
        for (name, help, joules) in parts {
            e.family(name, help, MetricKind::Counter);
            for (slot, device) in Device::ALL.iter().enumerate() {
                let labels = [("device", device.name()), ("estimated", flag(devices[slot].1))];
                e.sample(name, &labels, joules[slot]);
            }
        }
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
mod tests;
