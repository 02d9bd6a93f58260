//! The records of `--devices network,disk` that reports carry: the bytes each thread and call
//! path moved (`DeviceReport`, counted by the kernel, see `attribution/devices.rs`), and each
//! device class's modelled energy and its split (`DeviceEnergy`, `attribution/device_split.rs`).
//!
//! Energy invariants, per cycle and device class (checked by
//! `DeviceEnergy::conservation_error_uj`): `energy_uj = Σ processes + unattributed_uj`, each
//! process = Σ its threads, each thread = Σ its paths, and no figure is negative.

use joular_ebpf::{
    CLASS_FILE_READ, CLASS_FILE_WRITE, CLASS_NET_DEVICE_RX, CLASS_NET_DEVICE_TX, CLASS_NET_LOCAL_RX, CLASS_NET_LOCAL_TX,
};
use serde::{Deserialize, Serialize};

use crate::frames::FrameReport;

/// Bytes by class. Network bytes through a device and over loopback or AF_UNIX (local: CPU
/// energy only) are apart; file bytes count at the read or write call (a write is charged when
/// the process writes, not when writeback later reaches the disk).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceBytes {
    pub net_device_tx_bytes: u64,
    pub net_device_rx_bytes: u64,
    pub net_local_tx_bytes: u64,
    pub net_local_rx_bytes: u64,
    pub file_read_bytes: u64,
    pub file_write_bytes: u64,
}

impl DeviceBytes {
    /// Adds `bytes` of a kernel class (`joular_ebpf::CLASS_*`); an unknown class (a newer
    /// kernel object) is returned, not counted.
    pub fn add_class(&mut self, class: u32, bytes: u64) -> Result<(), u32> {
        let slot = match class {
            CLASS_NET_DEVICE_TX => &mut self.net_device_tx_bytes,
            CLASS_NET_DEVICE_RX => &mut self.net_device_rx_bytes,
            CLASS_NET_LOCAL_TX => &mut self.net_local_tx_bytes,
            CLASS_NET_LOCAL_RX => &mut self.net_local_rx_bytes,
            CLASS_FILE_READ => &mut self.file_read_bytes,
            CLASS_FILE_WRITE => &mut self.file_write_bytes,
            other => return Err(other),
        };
        *slot = slot.saturating_add(bytes);
        Ok(())
    }

    pub fn add(&mut self, other: &DeviceBytes) {
        for (mine, theirs) in self.fields_mut().into_iter().zip(other.fields()) {
            *mine = mine.saturating_add(theirs);
        }
    }

    pub fn is_zero(&self) -> bool {
        self.fields().iter().all(|&b| b == 0)
    }

    pub(crate) fn fields(&self) -> [u64; 6] {
        [
            self.net_device_tx_bytes,
            self.net_device_rx_bytes,
            self.net_local_tx_bytes,
            self.net_local_rx_bytes,
            self.file_read_bytes,
            self.file_write_bytes,
        ]
    }

    fn fields_mut(&mut self) -> [&mut u64; 6] {
        [
            &mut self.net_device_tx_bytes,
            &mut self.net_device_rx_bytes,
            &mut self.net_local_tx_bytes,
            &mut self.net_local_rx_bytes,
            &mut self.file_read_bytes,
            &mut self.file_write_bytes,
        ]
    }

    pub(crate) fn total(&self) -> u64 {
        self.fields().iter().fold(0u64, |a, &b| a.saturating_add(b))
    }
}

/// A thread's bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadBytes {
    pub pid: u32,
    pub tid: u32,
    #[serde(default)]
    pub comm: String,
    #[serde(flatten)]
    pub bytes: DeviceBytes,
}

/// A block device number, as `/sys/block/*/dev` writes it (`major:minor`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DevNum {
    pub major: u32,
    pub minor: u32,
}

impl DevNum {
    /// From the kernel's internal encoding (`super_block.s_dev`: major << 20 | minor); 0 is no
    /// device.
    pub fn from_kernel(dev: u32) -> Option<Self> {
        (dev != 0).then_some(DevNum { major: dev >> 20, minor: dev & 0xf_ffff })
    }

    /// `8:1`, as in `/sys/block/sda/sda1/dev`.
    pub fn parse(text: &str) -> Option<Self> {
        let (major, minor) = text.trim().split_once(':')?;
        Some(DevNum { major: major.parse().ok()?, minor: minor.parse().ok()? })
    }
}

/// A path's file bytes on the filesystem of one device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevFileBytes {
    #[serde(flatten)]
    pub dev: DevNum,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// Adds `bytes` to `dev`'s entry of `list` (kept short: a path touches a few filesystems).
pub fn add_dev_bytes(list: &mut Vec<DevFileBytes>, bytes: DevFileBytes) {
    match list.iter_mut().find(|d| d.dev == bytes.dev) {
        Some(d) => {
            d.read_bytes = d.read_bytes.saturating_add(bytes.read_bytes);
            d.write_bytes = d.write_bytes.saturating_add(bytes.write_bytes);
        }
        None => {
            list.push(bytes);
            list.sort_by_key(|d| d.dev);
        }
    }
}

/// A path's bytes through one network interface: the one its socket's route left by, as an
/// index in the profiler's network namespace (`/sys/class/net/*/ifindex`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IfBytes {
    pub ifindex: u32,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
}

/// Adds `bytes` to its interface's entry of `list` (kept short: a path uses a few interfaces).
pub fn add_if_bytes(list: &mut Vec<IfBytes>, bytes: IfBytes) {
    match list.iter_mut().find(|i| i.ifindex == bytes.ifindex) {
        Some(i) => {
            i.tx_bytes = i.tx_bytes.saturating_add(bytes.tx_bytes);
            i.rx_bytes = i.rx_bytes.saturating_add(bytes.rx_bytes);
        }
        None => {
            list.push(bytes);
            list.sort_by_key(|i| i.ifindex);
        }
    }
}

/// A thread's bytes on one call path (frames root first, named as the CPU stacks are).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathBytes {
    pub pid: u32,
    pub tid: u32,
    pub frames: Vec<FrameReport>,
    #[serde(flatten)]
    pub bytes: DeviceBytes,
    /// The file bytes by the device their filesystem is on (`file_read_bytes` and
    /// `file_write_bytes` split; bytes whose device the kernel did not give are in no entry).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub file_devices: Vec<DevFileBytes>,
    /// The network device bytes by interface (`net_device_tx_bytes` and `_rx_bytes` split;
    /// bytes whose interface the kernel did not give are in no entry).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net_devices: Vec<IfBytes>,
}

/// `--json` `devices` of a cycle, `summary.json` `devices` of a run: bytes per thread and per
/// call path, each list busiest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceReport {
    pub threads: Vec<ThreadBytes>,
    pub paths: Vec<PathBytes>,
}

/// A device class besides the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    Network,
    Disk,
}

impl Device {
    pub const ALL: [Device; 2] = [Device::Network, Device::Disk];

    /// The name in file paths, JSON and Prometheus' `device` label.
    pub fn name(self) -> &'static str {
        match self {
            Device::Network => "network",
            Device::Disk => "disk",
        }
    }
}

/// One measured unit of a class (a network interface, a block device) in one cycle.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnitEnergy {
    /// `eth0`, `nvme0n1`.
    pub name: String,
    /// What the model took for it: `"intel-i350"`, `"nvme"`, `"--nic-power"`...
    pub model: String,
    pub energy_uj: f64,
    /// Bytes it moved in the cycle (interface statistics, block device sectors × 512).
    pub bytes: u64,
    /// Time it was busy in the cycle (block devices' io_ticks; 0 for interfaces).
    #[serde(default)]
    pub busy_ms: u64,
    /// A disk's bytes read and written in the cycle (`bytes` is their sum).
    #[serde(default)]
    pub read_bytes: u64,
    #[serde(default)]
    pub written_bytes: u64,
    /// A disk's device numbers: its own, its partitions' and the devices stacked on them
    /// (device mapper, md): a file on any of them is on this disk.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DevNum>,
    /// An interface's index (`/sys/class/net/<name>/ifindex`): the bytes the kernel placed on
    /// it are its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifindex: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessDeviceEnergy {
    pub pid: u32,
    pub energy_uj: f64,
    /// The bytes its share was taken by.
    pub bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadDeviceEnergy {
    pub pid: u32,
    pub tid: u32,
    #[serde(default)]
    pub comm: String,
    pub energy_uj: f64,
    pub bytes: u64,
}

/// A thread's energy on one call path (frames root first, named as the CPU stacks are).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathDeviceEnergy {
    pub pid: u32,
    pub tid: u32,
    pub frames: Vec<FrameReport>,
    pub energy_uj: f64,
    pub bytes: u64,
}

/// One device class's energy in one cycle: `--json`'s `device_energy[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceEnergy {
    pub device: Device,
    /// Always true today: every figure comes from a model (`source`).
    pub estimated: bool,
    /// The model and its figures' origin, for a reader: `"model: ... (docs/devices.md)"`.
    pub source: String,
    /// Every unit of the class together (µJ).
    pub energy_uj: f64,
    /// What no profiled process's bytes account for (µJ).
    pub unattributed_uj: f64,
    pub units: Vec<UnitEnergy>,
    /// Busiest first, as are `threads` and `paths`.
    pub processes: Vec<ProcessDeviceEnergy>,
    pub threads: Vec<ThreadDeviceEnergy>,
    pub paths: Vec<PathDeviceEnergy>,
}

impl DeviceEnergy {
    /// The largest gap between a level and the sum of the level below it (µJ), or the most
    /// negative figure's magnitude: 0 (to rounding) when the split conserves energy.
    pub fn conservation_error_uj(&self) -> f64 {
        let mut worst =
            (self.energy_uj - self.unattributed_uj - self.processes.iter().map(|p| p.energy_uj).sum::<f64>()).abs();
        for p in &self.processes {
            let threads: f64 = self.threads.iter().filter(|t| t.pid == p.pid).map(|t| t.energy_uj).sum();
            worst = worst.max((p.energy_uj - threads).abs());
        }
        for t in &self.threads {
            let paths: f64 = self.paths.iter().filter(|x| x.pid == t.pid && x.tid == t.tid).map(|x| x.energy_uj).sum();
            worst = worst.max((t.energy_uj - paths).abs());
        }
        let negatives = std::iter::once(self.energy_uj)
            .chain(std::iter::once(self.unattributed_uj))
            .chain(self.units.iter().map(|u| u.energy_uj))
            .chain(self.processes.iter().map(|p| p.energy_uj))
            .chain(self.threads.iter().map(|t| t.energy_uj))
            .chain(self.paths.iter().map(|x| x.energy_uj))
            .filter(|e| *e < 0.0)
            .fold(0.0f64, |w, e| w.max(-e));
        worst.max(negatives)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(process_uj: f64, thread_uj: f64) -> DeviceEnergy {
        DeviceEnergy {
            device: Device::Network,
            estimated: true,
            source: "model".into(),
            energy_uj: 10.0,
            unattributed_uj: 4.0,
            units: vec![],
            processes: vec![ProcessDeviceEnergy { pid: 1, energy_uj: process_uj, bytes: 6 }],
            threads: vec![ThreadDeviceEnergy { pid: 1, tid: 2, comm: String::new(), energy_uj: thread_uj, bytes: 6 }],
            paths: vec![PathDeviceEnergy { pid: 1, tid: 2, frames: vec![], energy_uj: 6.0, bytes: 6 }],
        }
    }

    #[test]
    fn a_conserving_split_has_no_error_and_a_gap_at_any_level_is_its_size() {
        assert_eq!(split(6.0, 6.0).conservation_error_uj(), 0.0);
        assert_eq!(split(7.0, 7.0).conservation_error_uj(), 1.0);
        assert_eq!(split(6.0, 5.5).conservation_error_uj(), 0.5);
        assert_eq!(Device::Disk.name(), "disk");
        assert_eq!(serde_json::to_value(Device::Network).unwrap(), "network");
    }

    #[test]
    fn device_numbers_read_as_sysfs_and_the_kernel_write_them() {
        use super::{add_dev_bytes, DevFileBytes, DevNum};
        assert_eq!(DevNum::parse("259:3\n"), Some(DevNum { major: 259, minor: 3 }));
        assert_eq!(DevNum::parse("8"), None);
        // MKDEV(253, 1) in the kernel: major << 20 | minor.
        assert_eq!(DevNum::from_kernel(253 << 20 | 1), Some(DevNum { major: 253, minor: 1 }));
        assert_eq!(DevNum::from_kernel(0), None);
        let (a, b) = (DevNum { major: 8, minor: 1 }, DevNum { major: 7, minor: 0 });
        let mut list = Vec::new();
        add_dev_bytes(&mut list, DevFileBytes { dev: a, read_bytes: 1, write_bytes: 2 });
        add_dev_bytes(&mut list, DevFileBytes { dev: b, read_bytes: 3, write_bytes: 0 });
        add_dev_bytes(&mut list, DevFileBytes { dev: a, read_bytes: 10, write_bytes: 20 });
        assert_eq!(
            list,
            [
                DevFileBytes { dev: b, read_bytes: 3, write_bytes: 0 },
                DevFileBytes { dev: a, read_bytes: 11, write_bytes: 22 }
            ]
        );
        let json = serde_json::to_value(list[1]).unwrap();
        assert_eq!(json, serde_json::json!({"major": 8, "minor": 1, "read_bytes": 11, "write_bytes": 22}));
    }
}
