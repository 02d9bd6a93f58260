//! One cycle's device energy split over the profiled processes, their threads and call paths
//! by bytes (E-Surgeon eq. 13 and 14). Pure: the models' reading of the cycle and the
//! cycle's bytes in, a `DeviceEnergy` out.
//!
//! - Network: per interface, by the bytes each path moved through it (`net_device_tx/rx`,
//!   placed on an interface by the kernel from the socket's cached route; loopback and AF_UNIX
//!   cost CPU energy, never NIC energy). Bytes placed on no modelled interface count for each
//!   interface in proportion to its share of the machine's traffic. An interface's bytes
//!   beyond the profiled ones are unattributed; when the profiled bytes exceed them (the
//!   kernel counts at the call, the card sends a moment later) nothing is.
//! - Disk: per disk, by the file bytes read in the cycle on that disk's filesystems, at most
//!   the bytes the disk read (a read the page cache serves moves no device byte), plus the
//!   written bytes the disk's writeback covered (`writeback.rs`); the disk's other bytes are
//!   unattributed. A file's disk is its filesystem's device (`super_block.s_dev`) among the
//!   disk's own, its partitions' and the devices stacked on them; bytes on a device no
//!   modelled disk holds (an overlay or a network filesystem, a loop device not modelled)
//!   may be on any of them, and count for each.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};

use super::devices::{DeviceReport, PathBytes, PathKey};
use super::writeback::{key_of, WritePath, WritebackLedger};
use crate::device_reports::{
    DevFileBytes, DevNum, Device, DeviceEnergy, PathDeviceEnergy, ProcessDeviceEnergy, ThreadDeviceEnergy, UnitEnergy,
};

/// What a class's model read for one cycle, before any split.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassReading {
    pub device: Device,
    pub source: String,
    pub units: Vec<UnitEnergy>,
}

impl ClassReading {
    pub fn energy_uj(&self) -> f64 {
        self.units.iter().map(|u| u.energy_uj).sum()
    }

    pub fn unit_bytes(&self) -> u64 {
        self.units.iter().map(|u| u.bytes).sum()
    }

    /// The class's energy, all of it unattributed (a cycle without named bytes).
    pub fn unsplit(&self) -> DeviceEnergy {
        let energy_uj = self.energy_uj();
        DeviceEnergy {
            device: self.device,
            estimated: true,
            source: self.source.clone(),
            energy_uj,
            unattributed_uj: energy_uj,
            units: self.units.clone(),
            processes: Vec::new(),
            threads: Vec::new(),
            paths: Vec::new(),
        }
    }
}

/// Splits each cycle in order, and keeps the writeback ledger between them.
#[derive(Debug, Default)]
pub struct DeviceSplitter {
    pub ledger: WritebackLedger,
}

/// A path's bytes to split by (may be fractional: reads scaled to the device's), and the
/// energy they took.
struct Share {
    path: WritePath,
    bytes: f64,
    energy_uj: f64,
}

impl DeviceSplitter {
    /// The class's energy of the cycle ending at `end_ns`, split by `bytes` (the cycle's
    /// named bytes; `None` when it was written before its symbols: all unattributed, and its
    /// writes never reach the ledger).
    pub fn split(&mut self, reading: &ClassReading, bytes: Option<&DeviceReport>, end_ns: u64) -> DeviceEnergy {
        let Some(report) = bytes else { return reading.unsplit() };
        let comm: BTreeMap<(u32, u32), &str> =
            report.threads.iter().map(|t| ((t.pid, t.tid), t.comm.as_str())).collect();
        let path_of = |p: &PathBytes| WritePath {
            pid: p.pid,
            tid: p.tid,
            comm: comm.get(&(p.pid, p.tid)).unwrap_or(&"").to_string(),
            frames: p.frames.clone(),
        };
        let shares = match reading.device {
            Device::Network => {
                let held: HashSet<u32> = reading.units.iter().filter_map(|u| u.ifindex).collect();
                let machine_bytes = reading.unit_bytes() as f64;
                let mut shares = Vec::new();
                for unit in &reading.units {
                    // Bytes the kernel placed on no modelled interface (an unconnected socket,
                    // a route not cached yet, another namespace's interface) may have gone
                    // through any: each interface takes its part of the machine's traffic.
                    let unplaced_part = if machine_bytes > 0.0 {
                        unit.bytes as f64 / machine_bytes
                    } else {
                        1.0 / reading.units.len() as f64
                    };
                    let unit_shares: Vec<(WritePath, f64)> = report
                        .paths
                        .iter()
                        .filter_map(|p| {
                            let (on, unplaced) = on_interface(p, unit.ifindex, &held);
                            let n = on as f64 + unplaced as f64 * unplaced_part;
                            (n > 0.0).then(|| (path_of(p), n))
                        })
                        .collect();
                    shares.extend(weigh(unit.energy_uj, unit_shares, unit.bytes as f64));
                }
                shares
            }
            Device::Disk => {
                for p in &report.paths {
                    for (dev, n) in on_devices(p, |d| d.write_bytes, p.bytes.file_write_bytes) {
                        self.ledger.push(path_of(p), dev, n, end_ns);
                    }
                }
                let held: HashSet<DevNum> = reading.units.iter().flat_map(|u| u.devices.iter().copied()).collect();
                let mut shares = Vec::new();
                for unit in &reading.units {
                    // A device no unit holds may be on any of them.
                    let on_unit =
                        |dev: Option<DevNum>| dev.is_none_or(|d| unit.devices.contains(&d) || !held.contains(&d));
                    // Only the paths that read on this unit are copied out (once per unit).
                    let reads: Vec<(WritePath, f64)> = report
                        .paths
                        .iter()
                        .filter_map(|p| {
                            let on: u64 = on_devices(p, |d| d.read_bytes, p.bytes.file_read_bytes)
                                .filter(|(dev, _)| on_unit(*dev))
                                .map(|(_, n)| n)
                                .sum();
                            (on > 0).then(|| (path_of(p), on as f64))
                        })
                        .collect();
                    let read_total: f64 = reads.iter().map(|r| r.1).sum();
                    let scale = if read_total <= 0.0 { 0.0 } else { (unit.read_bytes as f64 / read_total).min(1.0) };
                    let mut unit_shares: Vec<(WritePath, f64)> =
                        reads.into_iter().map(|(path, n)| (path, n * scale)).collect();
                    for (path, n) in self.ledger.cover(unit.written_bytes, end_ns, on_unit) {
                        unit_shares.push(((*path).clone(), n as f64));
                    }
                    shares.extend(weigh(unit.energy_uj, unit_shares, (unit.read_bytes + unit.written_bytes) as f64));
                }
                shares
            }
        };
        split_by(reading, shares)
    }
}

/// A path's bytes of one direction by device: those the kernel placed on a device, then the
/// rest of `total` (placed on none) as `None`.
fn on_devices(
    p: &PathBytes,
    of: impl Fn(&DevFileBytes) -> u64,
    total: u64,
) -> impl Iterator<Item = (Option<DevNum>, u64)> + '_ {
    let placed: u64 = p.file_devices.iter().map(&of).sum();
    let placed_rows: Vec<(Option<DevNum>, u64)> = p.file_devices.iter().map(|d| (Some(d.dev), of(d))).collect();
    placed_rows.into_iter().chain(std::iter::once((None, total.saturating_sub(placed)))).filter(|(_, n)| *n > 0)
}

/// A path's network device bytes through interface `ifindex`, and those on no interface of
/// `held` (or on none the kernel gave).
fn on_interface(p: &PathBytes, ifindex: Option<u32>, held: &HashSet<u32>) -> (u64, u64) {
    let all = p.bytes.net_device_tx_bytes + p.bytes.net_device_rx_bytes;
    let (mut on, mut placed_held) = (0u64, 0u64);
    for i in &p.net_devices {
        if held.contains(&i.ifindex) {
            let n = i.tx_bytes + i.rx_bytes;
            placed_held += n;
            if ifindex == Some(i.ifindex) {
                on += n;
            }
        }
    }
    (on, all.saturating_sub(placed_held))
}

/// `energy · share / max(unit bytes, Σ shares)` to each share.
fn weigh(energy_uj: f64, shares: Vec<(WritePath, f64)>, unit_bytes: f64) -> Vec<Share> {
    let profiled: f64 = shares.iter().map(|s| s.1).sum();
    let denominator = unit_bytes.max(profiled);
    if profiled <= 0.0 || energy_uj <= 0.0 {
        return Vec::new();
    }
    shares
        .into_iter()
        .filter(|s| s.1 > 0.0)
        .map(|(path, bytes)| Share { energy_uj: energy_uj * bytes / denominator, path, bytes })
        .collect()
}

/// The shares summed per path, thread and process; the rest of the class's energy unattributed.
fn split_by(reading: &ClassReading, shares: Vec<Share>) -> DeviceEnergy {
    let mut out = reading.unsplit();
    if shares.is_empty() {
        return out;
    }
    let mut paths: Vec<PathDeviceEnergy> = Vec::new();
    let mut path_row: HashMap<PathKey, usize> = HashMap::new();
    let mut threads: BTreeMap<(u32, u32), ThreadDeviceEnergy> = BTreeMap::new();
    for s in shares {
        let energy_uj = s.energy_uj;
        let bytes = s.bytes.round() as u64;
        let t = threads.entry((s.path.pid, s.path.tid)).or_insert_with(|| ThreadDeviceEnergy {
            pid: s.path.pid,
            tid: s.path.tid,
            comm: String::new(),
            energy_uj: 0.0,
            bytes: 0,
        });
        if t.comm.is_empty() {
            t.comm.clone_from(&s.path.comm);
        }
        t.energy_uj += energy_uj;
        t.bytes += bytes;
        match path_row.entry(key_of(&s.path)) {
            Entry::Occupied(i) => {
                let p = &mut paths[*i.get()];
                p.energy_uj += energy_uj;
                p.bytes += bytes;
            }
            Entry::Vacant(v) => {
                v.insert(paths.len());
                paths.push(PathDeviceEnergy {
                    pid: s.path.pid,
                    tid: s.path.tid,
                    frames: s.path.frames,
                    energy_uj,
                    bytes,
                });
            }
        }
    }
    out.threads = threads.into_values().collect();
    let mut processes: BTreeMap<u32, ProcessDeviceEnergy> = BTreeMap::new();
    for t in &out.threads {
        let p = processes.entry(t.pid).or_insert(ProcessDeviceEnergy { pid: t.pid, energy_uj: 0.0, bytes: 0 });
        p.energy_uj += t.energy_uj;
        p.bytes += t.bytes;
    }
    out.processes = processes.into_values().collect();
    let attributed: f64 = out.processes.iter().map(|p| p.energy_uj).sum();
    out.unattributed_uj = (out.energy_uj - attributed).max(0.0);
    out.paths = paths;
    let busiest = |a: f64, b: f64| b.total_cmp(&a);
    out.processes.sort_by(|a, b| busiest(a.energy_uj, b.energy_uj).then(a.pid.cmp(&b.pid)));
    out.threads.sort_by(|a, b| busiest(a.energy_uj, b.energy_uj).then((a.pid, a.tid).cmp(&(b.pid, b.tid))));
    out.paths.sort_by(|a, b| busiest(a.energy_uj, b.energy_uj).then((a.pid, a.tid).cmp(&(b.pid, b.tid))));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::devices::{DeviceBytes, PathBytes, ThreadBytes};
    use crate::model::{FrameKind, FrameReport};

    fn frames(names: &[&str]) -> Vec<FrameReport> {
        names
            .iter()
            .map(|n| FrameReport { name: (*n).into(), kind: FrameKind::JavaJit, line: None, raw_name: None })
            .collect()
    }

    fn row(pid: u32, tid: u32, names: &[&str], set: impl Fn(&mut DeviceBytes)) -> PathBytes {
        let mut bytes = DeviceBytes::default();
        set(&mut bytes);
        PathBytes { pid, tid, frames: frames(names), bytes, file_devices: Vec::new(), net_devices: Vec::new() }
    }

    fn report(paths: Vec<PathBytes>) -> DeviceReport {
        let mut threads: Vec<ThreadBytes> = Vec::new();
        for p in &paths {
            if !threads.iter().any(|t| t.tid == p.tid) {
                threads.push(ThreadBytes { pid: p.pid, tid: p.tid, comm: format!("t{}", p.tid), ..Default::default() });
            }
        }
        DeviceReport { threads, paths }
    }

    fn unit(name: &str, energy_uj: f64, bytes: u64) -> UnitEnergy {
        UnitEnergy { name: name.into(), model: "test".into(), energy_uj, bytes, ..Default::default() }
    }

    fn network(energy_uj: f64, bytes: u64) -> ClassReading {
        ClassReading { device: Device::Network, source: "model".into(), units: vec![unit("eth0", energy_uj, bytes)] }
    }

    fn disk(energy_uj: f64, read: u64, written: u64) -> ClassReading {
        ClassReading {
            device: Device::Disk,
            source: "model".into(),
            units: vec![UnitEnergy {
                read_bytes: read,
                written_bytes: written,
                ..unit("sda", energy_uj, read + written)
            }],
        }
    }

    fn path_uj(e: &DeviceEnergy, tid: u32, last: &str) -> f64 {
        e.paths.iter().filter(|p| p.tid == tid && p.frames.last().unwrap().name == last).map(|p| p.energy_uj).sum()
    }

    #[test]
    fn network_energy_splits_by_device_bytes_and_the_rest_is_unattributed() {
        // 1000 µJ, the interfaces moved 1000 bytes: 600 on A.send (2 rows of one thread), 200
        // on B.recv, 300 over loopback (no NIC energy), 200 moved by others.
        let bytes = report(vec![
            row(1, 2, &["run", "A.send"], |b| b.net_device_tx_bytes = 500),
            row(1, 2, &["run", "A.send"], |b| b.net_device_rx_bytes = 100),
            row(1, 3, &["run", "B.recv"], |b| b.net_device_rx_bytes = 200),
            row(1, 4, &["run", "C.local"], |b| b.net_local_tx_bytes = 300),
            row(7, 8, &["main"], |b| b.file_write_bytes = 4096),
        ]);
        let e = DeviceSplitter::default().split(&network(1000.0, 1000), Some(&bytes), 0);
        assert!((path_uj(&e, 2, "A.send") - 600.0).abs() < 1e-9);
        assert!((path_uj(&e, 3, "B.recv") - 200.0).abs() < 1e-9);
        assert_eq!(path_uj(&e, 4, "C.local"), 0.0);
        assert!((e.unattributed_uj - 200.0).abs() < 1e-9);
        assert_eq!(e.processes.len(), 1, "process 7 moved no network byte");
        assert_eq!(e.processes[0].bytes, 800);
        assert_eq!(e.threads[0].comm, "t2");
        assert!(e.conservation_error_uj() < 1e-9);
        assert!(e.estimated);
    }

    fn on_if(mut p: PathBytes, ifindex: u32) -> PathBytes {
        let (tx_bytes, rx_bytes) = (p.bytes.net_device_tx_bytes, p.bytes.net_device_rx_bytes);
        p.net_devices = vec![crate::device_reports::IfBytes { ifindex, tx_bytes, rx_bytes }];
        p
    }

    /// Two interfaces, eth0 (ifindex 2: 2,000 µJ, 1,000 bytes) and eth1 (ifindex 3: 6,000 µJ,
    /// 1,000 bytes). Hand-checked: bytes placed on eth0 take only eth0's energy; bytes placed on
    /// no modelled interface take each interface's energy by its share of the traffic, which
    /// over both is the class's energy by the class's bytes.
    #[test]
    fn each_interface_s_energy_goes_to_the_bytes_placed_on_it() {
        let units = vec![
            UnitEnergy { ifindex: Some(2), ..unit("eth0", 2000.0, 1000) },
            UnitEnergy { ifindex: Some(3), ..unit("eth1", 6000.0, 1000) },
        ];
        let reading = ClassReading { device: Device::Network, source: "model".into(), units };
        let bytes = report(vec![
            on_if(row(1, 2, &["run", "A.send"], |b| b.net_device_tx_bytes = 500), 2),
            on_if(row(1, 3, &["run", "B.send"], |b| b.net_device_tx_bytes = 100), 9),
            row(1, 4, &["run", "C.recv"], |b| b.net_device_rx_bytes = 200),
        ]);
        let e = DeviceSplitter::default().split(&reading, Some(&bytes), 0);
        // eth0: 500 of its 1,000 bytes → 1,000 µJ.
        assert!((path_uj(&e, 2, "A.send") - 1000.0).abs() < 1e-9, "{e:#?}");
        // ifindex 9 is no unit: unplaced, as C's (no ifindex): half of each unit's traffic.
        // B: eth0 2000·50/1000 + eth1 6000·50/1000 = 100 + 300.
        assert!((path_uj(&e, 3, "B.send") - 400.0).abs() < 1e-9, "{e:#?}");
        // C: 2000·100/1000 + 6000·100/1000 = 800 = 8000 · 200/2000.
        assert!((path_uj(&e, 4, "C.recv") - 800.0).abs() < 1e-9, "{e:#?}");
        assert!((e.unattributed_uj - (8000.0 - 2200.0)).abs() < 1e-9);
        assert!(e.conservation_error_uj() < 1e-9);
        // The bytes are each path's own, whatever the interfaces they were split over.
        let bytes_of = |tid: u32| e.threads.iter().find(|t| t.tid == tid).unwrap().bytes;
        assert_eq!((bytes_of(2), bytes_of(3), bytes_of(4)), (500, 100, 200));
        // Per class, A would have taken 8000 · 500/2000 = 2,000 µJ, half of it eth1's.
    }

    #[test]
    fn profiled_bytes_beyond_the_interfaces_take_all_and_no_bytes_take_none() {
        let bytes = report(vec![
            row(1, 2, &["A.send"], |b| b.net_device_tx_bytes = 300),
            row(1, 3, &["B.send"], |b| b.net_device_tx_bytes = 100),
        ]);
        let e = DeviceSplitter::default().split(&network(80.0, 200), Some(&bytes), 0);
        assert!((path_uj(&e, 2, "A.send") - 60.0).abs() < 1e-9);
        assert!((path_uj(&e, 3, "B.send") - 20.0).abs() < 1e-9);
        assert_eq!(e.unattributed_uj, 0.0);
        let none = report(vec![row(1, 2, &["A.local"], |b| b.net_local_tx_bytes = 300)]);
        for e in [
            DeviceSplitter::default().split(&network(80.0, 200), Some(&none), 0),
            DeviceSplitter::default().split(&network(80.0, 200), None, 0),
        ] {
            assert_eq!((e.unattributed_uj, e.paths.len(), e.processes.len()), (80.0, 0, 0));
            assert_eq!(e.conservation_error_uj(), 0.0);
        }
    }

    #[test]
    fn disk_writes_are_charged_when_writeback_writes_them() {
        let mut s = DeviceSplitter::default();
        // Cycle 1: W.write dirties 3000 bytes, the device writes nothing; R.read reads 1000
        // bytes and the device reads 500 of them (the rest was cached): R gets 500 of 500.
        let c1 = report(vec![
            row(1, 2, &["W.write"], |b| b.file_write_bytes = 3000),
            row(1, 3, &["R.read"], |b| b.file_read_bytes = 1000),
        ]);
        let e = s.split(&disk(100.0, 500, 0), Some(&c1), 1);
        assert!((path_uj(&e, 3, "R.read") - 100.0).abs() < 1e-9);
        assert_eq!(path_uj(&e, 2, "W.write"), 0.0);
        assert_eq!(s.ledger.pending_bytes(), 3000);
        // Cycle 2: nothing profiled moves; writeback writes 2000 of W's bytes: all its energy.
        let e = s.split(&disk(100.0, 0, 2000), Some(&report(vec![])), 2);
        assert!((path_uj(&e, 2, "W.write") - 100.0).abs() < 1e-9);
        assert_eq!(e.unattributed_uj, 0.0);
        assert_eq!(s.ledger.pending_bytes(), 1000);
        // Cycle 3: W writes 500 more; the device writes 3000 bytes, which cover W's last 1000
        // and the 500 (the same path: one row); the other 1500 are someone else's.
        let c3 = report(vec![row(1, 2, &["W.write"], |b| b.file_write_bytes = 500)]);
        let e = s.split(&disk(30.0, 0, 3000), Some(&c3), 3);
        assert!((path_uj(&e, 2, "W.write") - 15.0).abs() < 1e-9);
        assert!((e.unattributed_uj - 15.0).abs() < 1e-9);
        assert_eq!(e.paths.len(), 1, "the same path's two ledger entries are one row");
        assert_eq!(e.paths[0].bytes, 1500);
        assert!(e.conservation_error_uj() < 1e-9);
        assert_eq!(s.ledger.pending_bytes(), 0);
        // A cycle whose reads the page cache served: all of it unattributed.
        let cached = report(vec![row(1, 3, &["R.read"], |b| b.file_read_bytes = 1 << 20)]);
        let e = s.split(&disk(10.0, 0, 0), Some(&cached), 4);
        assert_eq!((e.unattributed_uj, e.paths.len()), (10.0, 0));
    }

    #[test]
    fn processes_are_the_sum_of_threads_which_are_the_sum_of_paths() {
        let bytes = report(vec![
            row(1, 2, &["A.a"], |b| b.net_device_tx_bytes = 3),
            row(1, 2, &["A.b"], |b| b.net_device_tx_bytes = 7),
            row(1, 4, &["B.a"], |b| b.net_device_rx_bytes = 11),
            row(5, 6, &["C.a"], |b| b.net_device_tx_bytes = 13),
        ]);
        let e = DeviceSplitter::default().split(&network(1.0, 1 << 20), Some(&bytes), 0);
        assert_eq!(e.processes.iter().map(|p| p.bytes).collect::<Vec<_>>(), [21, 13]);
        assert_eq!(e.threads.len(), 3);
        assert!(e.conservation_error_uj() < 1e-12);
        assert!(e.unattributed_uj > 0.99);
    }

    #[test]
    fn each_disk_is_split_by_the_bytes_on_its_own_devices() {
        let (sda, sda1, loop0) =
            (DevNum { major: 8, minor: 0 }, DevNum { major: 8, minor: 1 }, DevNum { major: 7, minor: 0 });
        let on = |dev: DevNum, read: u64, write: u64| DevFileBytes { dev, read_bytes: read, write_bytes: write };
        // W writes 1000 bytes to a file on loop0; R reads 400 from a file on sda1 (a partition
        // of sda); U reads 100 whose device the kernel did not give (it may be on either).
        let mut w = row(1, 2, &["W.write"], |b| b.file_write_bytes = 1000);
        w.file_devices = vec![on(loop0, 0, 1000)];
        let mut r = row(1, 3, &["R.read"], |b| b.file_read_bytes = 400);
        r.file_devices = vec![on(sda1, 400, 0)];
        let u = row(1, 4, &["U.read"], |b| b.file_read_bytes = 100);
        let reading = ClassReading {
            device: Device::Disk,
            source: "model".into(),
            units: vec![
                UnitEnergy { read_bytes: 500, devices: vec![sda, sda1], ..unit("sda", 100.0, 500) },
                // loop0 read 4 KiB of its own (metadata): R's reads are on sda, and take none of it.
                UnitEnergy { read_bytes: 4096, written_bytes: 1000, devices: vec![loop0], ..unit("loop0", 50.0, 5096) },
            ],
        };
        let e = DeviceSplitter::default().split(&reading, Some(&report(vec![w, r, u])), 1);
        // sda: R's 400 and U's 100 of its 500 bytes read.
        assert!((path_uj(&e, 3, "R.read") - 80.0).abs() < 1e-9, "{e:#?}");
        // loop0: W's 1000 written bytes and U's 100 of its 5096 bytes.
        assert!((path_uj(&e, 2, "W.write") - 50.0 * 1000.0 / 5096.0).abs() < 1e-9);
        assert!((path_uj(&e, 4, "U.read") - (20.0 + 50.0 * 100.0 / 5096.0)).abs() < 1e-9);
        assert!((e.unattributed_uj - 50.0 * 3996.0 / 5096.0).abs() < 1e-9);
        assert!(e.conservation_error_uj() < 1e-9);
        assert_eq!(e.energy_uj, 150.0);
    }
}
