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
    let hits: Vec<f64> =
        series.iter().filter(|(k, _)| k.split('{').next() == Some(name) && k.contains(with)).map(|(_, v)| *v).collect();
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
        let report = cycle(u64::from(n), 50e6, &[(100, 20e6 + f64::from(n)), (200 + n, 5e6), (200 + n - 1, 4e6)], &[]);
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
    let workers = previous.keys().filter(|k| k.starts_with("joular_process_energy") && k.contains("worker")).count();
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
    assert!(text.contains("joular_vm_power_watts{vm=\"vm0\",hypervisor=\"qemu\",estimated=\"false\"} 1.25"), "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("joular_vm_energy_joules_total{")).count(), MAX_VMS);
}

#[test]
fn device_energy_is_a_series_per_process_and_device_only_when_devices_run() {
    use crate::device_reports::{Device, DeviceEnergy, ProcessDeviceEnergy};
    let table = FakeTable::default();
    table.spawn(10, "java", 1, None);
    let mut registry = MetricsRegistry::new(config(5));
    let plain = cycle(1, 10e6, &[(10, 4e6)], &[]);
    registry.on_cycle(&AttributedCycle::of_report(plain.clone()), &table);
    let without = scrape(&registry);
    assert!(!without.keys().any(|k| k.contains("device")), "no device series with --devices cpu: {without:?}");
    let device = |device, process_uj: f64, unattributed_uj: f64| DeviceEnergy {
        device,
        estimated: true,
        source: "model".into(),
        energy_uj: process_uj + unattributed_uj,
        unattributed_uj,
        units: vec![],
        processes: vec![ProcessDeviceEnergy { pid: 10, energy_uj: process_uj, bytes: 1 }],
        threads: vec![],
        paths: vec![],
    };
    for n in 2..4 {
        let report = CycleReport {
            device_energy: vec![device(Device::Network, 1.5e6, 0.5e6), device(Device::Disk, 0.25e6, 0.0)],
            ..cycle(n, 10e6, &[(10, 4e6)], &[])
        };
        registry.on_cycle(&AttributedCycle::of_report(report), &table);
    }
    let series = scrape(&registry);
    let per =
        |device: &str| value(&series, "joular_device_energy_joules_total", &format!("device=\"{device}\"")).unwrap();
    // Hand-checked: cpu is the process's 3 × 4 J; network 2 × 1.5 J; disk 2 × 0.25 J.
    assert_eq!((per("cpu"), per("network"), per("disk")), (12.0, 3.0, 0.5));
    assert_eq!(per("cpu"), value(&series, "joular_process_energy_joules_total", "pid=\"10\"").unwrap());
    let host = |device: &str| {
        value(&series, "joular_host_device_energy_joules_total", &format!("device=\"{device}\"")).unwrap()
    };
    assert_eq!((host("network"), host("disk")), (4.0, 0.5));
    let devices: std::collections::BTreeSet<&str> = series
        .keys()
        .filter(|k| k.contains("device=\""))
        .map(|k| k.split("device=\"").nth(1).unwrap().split('"').next().unwrap())
        .collect();
    assert_eq!(devices.into_iter().collect::<Vec<_>>(), ["cpu", "disk", "network"], "a bounded label");
    assert_balanced(&series);
    let part = |series: &BTreeMap<String, f64>, name: &str, device: &str| {
        value(series, name, &format!("device=\"{device}\"")).unwrap()
    };
    let unattributed = "joular_unattributed_device_energy_joules_total";
    let exited = "joular_exited_process_device_energy_joules_total";
    assert_eq!((part(&series, unattributed, "network"), part(&series, unattributed, "disk")), (1.0, 0.0));
    assert_eq!((part(&series, exited, "network"), part(&series, exited, "disk")), (0.0, 0.0));
    assert_devices_balanced(&series);

    // The process exits and its series age out (5 cycles): its device joules move to exited.
    table.kill(10);
    for n in 4..11 {
        let network = DeviceEnergy { processes: vec![], ..device(Device::Network, 0.0, 0.25e6) };
        let report = CycleReport { device_energy: vec![network], ..cycle(n, 10e6, &[], &[]) };
        registry.on_cycle(&AttributedCycle::of_report(report), &table);
        assert_devices_balanced(&scrape(&registry));
    }
    let series = scrape(&registry);
    assert_eq!(value(&series, "joular_device_energy_joules_total", "pid=\"10\""), None, "aged out");
    assert_eq!((part(&series, exited, "network"), part(&series, exited, "disk")), (3.0, 0.5));
    assert_eq!(part(&series, unattributed, "network"), 1.0 + 7.0 * 0.25);
}

/// Per device: the machine's joules are the processes', the exited ones' and the unattributed.
fn assert_devices_balanced(series: &BTreeMap<String, f64>) {
    for device in ["network", "disk"] {
        let with = format!("device=\"{device}\"");
        let host = sum(series, "joular_host_device_energy_joules_total", &with);
        let parts = sum(series, "joular_device_energy_joules_total", &with)
            + sum(series, "joular_exited_process_device_energy_joules_total", &with)
            + sum(series, "joular_unattributed_device_energy_joules_total", &with);
        assert!((parts - host).abs() <= 1e-9 * host.max(1.0), "{device}: parts {parts} host {host}");
    }
}
