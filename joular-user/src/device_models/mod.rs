//! The device models of `--devices network,disk`: each cycle, the interfaces' and block
//! devices' counters from sysfs turned into modelled joules per unit (labelled estimated).
//! Readers take the sysfs root (`--sysfs-root`), so tests use fake trees. The split of those
//! joules by bytes is `attribution::device_split`.

pub mod disk;
pub mod figures;
pub mod nic;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::attribution::device_split::ClassReading;
use crate::device_reports::{Device, UnitEnergy};
use figures::UnitFigures;

pub const NETWORK_SOURCE: &str =
    "model: E-Surgeon eq. 9, idle W + W per Gbit/s moved per interface, datasheet figures (docs/devices.md)";
pub const DISK_SOURCE: &str =
    "model: idle W while idle + active W while busy (io_ticks) per block device, published figures (docs/devices.md)";

/// What the run models, and its overrides.
#[derive(Debug, Clone, Default)]
pub struct ModelOptions {
    pub sysfs_root: PathBuf,
    pub network: bool,
    pub disk: bool,
    pub nic_power: Vec<UnitFigures>,
    pub disk_power: Vec<UnitFigures>,
}

/// Checks what parsing could not: each override names a unit of this machine, and its class
/// is measured. The message names the flag and the fix.
pub fn check(opts: &ModelOptions) -> Result<(), String> {
    figures::check_unique("--nic-power", &opts.nic_power)?;
    figures::check_unique("--disk-power", &opts.disk_power)?;
    let checks = [
        ("--nic-power", "network", opts.network, &opts.nic_power, "class/net"),
        ("--disk-power", "disk", opts.disk, &opts.disk_power, "block"),
    ];
    for (flag, device, measured, overrides, dir) in checks {
        let Some(first) = overrides.first() else { continue };
        if !measured {
            return Err(format!(
                "{flag} {}: the {device} is not measured: add {device} to --devices (e.g. --devices cpu,{device}) or drop {flag}",
                first.name
            ));
        }
        let root = opts.sysfs_root.join(dir);
        for o in overrides {
            if !root.join(&o.name).exists() {
                let known = names_in(&root);
                return Err(format!(
                    "{flag} {}: no such device in {} (there: {}): name one of them",
                    o.name,
                    root.display(),
                    if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                ));
            }
        }
    }
    Ok(())
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    names.sort();
    names
}

/// The counters at the last cycle's end, per unit.
#[derive(Debug)]
pub struct DeviceModels {
    opts: ModelOptions,
    last_net: HashMap<String, u64>,
    last_disk: HashMap<String, disk::DiskStat>,
}

impl DeviceModels {
    /// Reads every unit's counters now: the first cycle counts from here.
    pub fn start(opts: ModelOptions) -> Self {
        let mut models = DeviceModels { opts, last_net: HashMap::new(), last_disk: HashMap::new() };
        drop(models.read(0.0));
        models
    }

    /// Each modelled class's units for the cycle of `d_s` seconds that ends now. A unit seen
    /// for the first time (it appeared during the run) counts from the next cycle.
    pub fn read(&mut self, d_s: f64) -> Vec<ClassReading> {
        let mut out = Vec::new();
        if self.opts.network {
            out.push(self.read_network(d_s));
        }
        if self.opts.disk {
            out.push(self.read_disk(d_s));
        }
        out
    }

    fn read_network(&mut self, d_s: f64) -> ClassReading {
        let mut units = Vec::new();
        let mut now = HashMap::new();
        for iface in nic::interfaces(&self.opts.sysfs_root, &self.opts.nic_power) {
            let Some(bytes) = iface.bytes() else { continue };
            now.insert(iface.name.clone(), bytes);
            let Some(&before) = self.last_net.get(&iface.name) else { continue };
            // A counter that went back (the interface was recreated) moved nothing we know of.
            let moved = bytes.saturating_sub(before);
            units.push(UnitEnergy {
                ifindex: iface.ifindex(),
                name: iface.name,
                model: iface.power.model.to_owned(),
                energy_uj: nic::energy_j(&iface.power, d_s, moved) * 1e6,
                bytes: moved,
                ..Default::default()
            });
        }
        self.last_net = now;
        ClassReading { device: Device::Network, source: NETWORK_SOURCE.into(), units }
    }

    fn read_disk(&mut self, d_s: f64) -> ClassReading {
        let mut reading = ClassReading { device: Device::Disk, source: DISK_SOURCE.into(), units: Vec::new() };
        let mut now = HashMap::new();
        for dev in disk::devices(&self.opts.sysfs_root, &self.opts.disk_power) {
            let Some(stat) = dev.stat() else { continue };
            now.insert(dev.name.clone(), stat);
            let Some(before) = self.last_disk.get(&dev.name) else { continue };
            let read = stat.read_bytes.saturating_sub(before.read_bytes);
            let written = stat.written_bytes.saturating_sub(before.written_bytes);
            let busy_ms = stat.io_ticks_ms.saturating_sub(before.io_ticks_ms).min((d_s * 1000.0).round() as u64);
            reading.units.push(UnitEnergy {
                devices: dev.device_numbers(),
                model: dev.power.model.to_owned(),
                energy_uj: disk::energy_j(&dev.power, d_s, busy_ms as f64 / 1000.0) * 1e6,
                bytes: read + written,
                busy_ms,
                read_bytes: read,
                written_bytes: written,
                name: dev.name,
                ifindex: None,
            });
        }
        self.last_disk = now;
        reading
    }
}

#[cfg(test)]
mod tests {
    use super::disk::tests::fake_disk;
    use super::nic::tests::fake_iface;
    use super::*;

    fn opts(root: &Path, network: bool, disk: bool) -> ModelOptions {
        ModelOptions { sysfs_root: root.to_owned(), network, disk, ..Default::default() }
    }

    #[test]
    fn a_cycle_models_each_unit_from_its_counters_deltas() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        fake_iface(r, "lo", None, 0, 0);
        fake_iface(r, "eth0", Some(("0x8086", "0x1521")), 1000, 0);
        fake_disk(r, "sda", "1", 0, 0, 0);
        fake_disk(r, "loop0", "0", 0, 0, 0);
        let mut m = DeviceModels::start(opts(r, true, true));
        // 2 s: eth0 moves 125 MB + 125 MB (2 Gbit), sda reads 8 sectors, writes 2048, busy 500 ms.
        fake_iface(r, "eth0", Some(("0x8086", "0x1521")), 125_001_000, 125_000_000);
        fake_disk(r, "sda", "1", 8, 2048, 500);
        fake_disk(r, "loop0", "0", 99, 99, 99);
        let classes = m.read(2.0);
        assert_eq!(classes.len(), 2);
        let net = &classes[0];
        assert_eq!((net.device, net.units.len(), net.units[0].name.as_str()), (Device::Network, 1, "eth0"));
        // 0.7 W · 2 s + 0.35 W per Gbit/s · 2 Gbit = 1.4 + 0.7 J.
        assert!((net.units[0].energy_uj - 2.1e6).abs() < 1e-3, "{:?}", net.units[0]);
        assert_eq!(net.units[0].bytes, 250_000_000);
        let disk = &classes[1];
        assert_eq!(disk.units.len(), 1, "loop0 is stacked: no unit without --disk-power");
        // 7.5 W · 1.5 s idle + 12 W · 0.5 s busy = 11.25 + 6 J.
        assert!((disk.units[0].energy_uj - 17.25e6).abs() < 1e-3);
        assert_eq!(
            (disk.units[0].read_bytes, disk.units[0].written_bytes, disk.units[0].busy_ms),
            (4096, 1 << 20, 500)
        );
        assert!(net.source.contains("docs/devices.md") && disk.source.starts_with("model"));
        // Only the classes asked for.
        let only = DeviceModels::start(opts(r, true, false)).read(1.0);
        assert_eq!(only.iter().map(|c| c.device).collect::<Vec<_>>(), [Device::Network]);
    }

    #[test]
    fn a_disk_power_override_makes_a_loop_device_a_unit_with_its_figures() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        fake_disk(r, "loop3", "0", 0, 0, 0);
        let mut o = opts(r, false, true);
        o.disk_power = vec![figures::parse_disk_power("loop3=1,3").unwrap()];
        check(&o).unwrap();
        let mut m = DeviceModels::start(o);
        fake_disk(r, "loop3", "0", 0, 8, 250);
        let disk = &m.read(1.0)[0];
        assert_eq!((disk.units[0].name.as_str(), disk.units[0].model.as_str()), ("loop3", "--disk-power"));
        // 1 W · 0.75 s + 3 W · 0.25 s.
        assert!((disk.units[0].energy_uj - 1.5e6).abs() < 1e-3);
    }

    #[test]
    fn overrides_of_absent_devices_or_unmeasured_classes_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        fake_disk(r, "sda", "1", 0, 0, 0);
        fake_iface(r, "eth0", None, 0, 0);
        let mut o = opts(r, true, false);
        o.disk_power = vec![figures::parse_disk_power("sda=1,2").unwrap()];
        let e = check(&o).unwrap_err();
        assert!(e.contains("--disk-power sda") && e.contains("--devices cpu,disk"), "{e}");
        o.disk = true;
        o.nic_power = vec![figures::parse_nic_power("eth9=1,2").unwrap()];
        let e = check(&o).unwrap_err();
        assert!(e.contains("--nic-power eth9") && e.contains("there: eth0"), "{e}");
        o.nic_power = vec![figures::parse_nic_power("eth0=1,2").unwrap()];
        check(&o).unwrap();
    }
}
