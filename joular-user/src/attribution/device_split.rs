//! One cycle's device energy split over the profiled processes, their threads and call paths
//! by bytes (E-Surgeon eq. 13 and 14). Pure: the models' reading of the cycle and the
//! cycle's bytes in, a `DeviceEnergy` out.
//!
//! - Network: by the bytes each path moved through a network device (`net_device_tx/rx`;
//!   loopback and AF_UNIX cost CPU energy, never NIC energy). The interfaces' bytes beyond
//!   the profiled ones are unattributed; when the profiled bytes exceed them (the kernel
//!   counts at the call, the card sends a moment later) nothing is.
//! - Disk: by the file bytes read in the cycle, at most the bytes the devices read (a read
//!   the page cache serves moves no device byte), plus the written bytes the cycle's
//!   writeback covered (`writeback.rs`); the devices' other bytes are unattributed.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

use super::devices::DeviceReport;
use super::devices::PathKey;
use super::writeback::{key_of, WritePath, WritebackLedger};
use crate::device_reports::{
    Device, DeviceEnergy, PathDeviceEnergy, ProcessDeviceEnergy, ThreadDeviceEnergy, UnitEnergy,
};

/// What a class's model read for one cycle, before any split.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassReading {
    pub device: Device,
    pub source: String,
    pub units: Vec<UnitEnergy>,
    /// Disk: the units' bytes read and written (network: 0, the units' `bytes` serve).
    pub read_bytes: u64,
    pub written_bytes: u64,
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

/// A path's bytes to split by (may be fractional: reads scaled to the device's).
struct Share {
    path: WritePath,
    bytes: f64,
}

impl DeviceSplitter {
    /// The class's energy of the cycle ending at `end_ns`, split by `bytes` (the cycle's
    /// named bytes; `None` when it was written before its symbols: all unattributed, and its
    /// writes never reach the ledger).
    pub fn split(&mut self, reading: &ClassReading, bytes: Option<&DeviceReport>, end_ns: u64) -> DeviceEnergy {
        let Some(report) = bytes else { return reading.unsplit() };
        let comm: BTreeMap<(u32, u32), &str> =
            report.threads.iter().map(|t| ((t.pid, t.tid), t.comm.as_str())).collect();
        let path_of = |p: &super::devices::PathBytes| WritePath {
            pid: p.pid,
            tid: p.tid,
            comm: comm.get(&(p.pid, p.tid)).unwrap_or(&"").to_string(),
            frames: p.frames.clone(),
        };
        let (shares, unit_bytes) = match reading.device {
            Device::Network => {
                let shares = report
                    .paths
                    .iter()
                    .map(|p| Share {
                        path: path_of(p),
                        bytes: (p.bytes.net_device_tx_bytes + p.bytes.net_device_rx_bytes) as f64,
                    })
                    .collect();
                (shares, reading.unit_bytes() as f64)
            }
            Device::Disk => {
                let read_total: u64 = report.paths.iter().map(|p| p.bytes.file_read_bytes).sum();
                let scale =
                    if read_total == 0 { 0.0 } else { (reading.read_bytes as f64 / read_total as f64).min(1.0) };
                let mut shares: Vec<Share> = report
                    .paths
                    .iter()
                    .map(|p| Share { path: path_of(p), bytes: p.bytes.file_read_bytes as f64 * scale })
                    .collect();
                for p in &report.paths {
                    self.ledger.push(path_of(p), p.bytes.file_write_bytes, end_ns);
                }
                for (path, n) in self.ledger.cover(reading.written_bytes, end_ns) {
                    shares.push(Share { path: (*path).clone(), bytes: n as f64 });
                }
                (shares, (reading.read_bytes + reading.written_bytes) as f64)
            }
        };
        split_by(reading, shares, unit_bytes)
    }
}

/// `E · share / max(unit bytes, Σ shares)` to each path; threads and processes are the sums.
fn split_by(reading: &ClassReading, shares: Vec<Share>, unit_bytes: f64) -> DeviceEnergy {
    let mut out = reading.unsplit();
    let profiled: f64 = shares.iter().map(|s| s.bytes).sum();
    let denominator = unit_bytes.max(profiled);
    if profiled <= 0.0 || out.energy_uj <= 0.0 {
        return out;
    }
    let mut paths: Vec<PathDeviceEnergy> = Vec::new();
    let mut path_row: HashMap<PathKey, usize> = HashMap::new();
    let mut threads: BTreeMap<(u32, u32), ThreadDeviceEnergy> = BTreeMap::new();
    for s in shares.into_iter().filter(|s| s.bytes > 0.0) {
        let energy_uj = out.energy_uj * s.bytes / denominator;
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
        PathBytes { pid, tid, frames: frames(names), bytes }
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
        UnitEnergy { name: name.into(), model: "test".into(), energy_uj, bytes, busy_ms: 0 }
    }

    fn network(energy_uj: f64, bytes: u64) -> ClassReading {
        ClassReading {
            device: Device::Network,
            source: "model".into(),
            units: vec![unit("eth0", energy_uj, bytes)],
            read_bytes: 0,
            written_bytes: 0,
        }
    }

    fn disk(energy_uj: f64, read: u64, written: u64) -> ClassReading {
        ClassReading {
            device: Device::Disk,
            source: "model".into(),
            units: vec![unit("sda", energy_uj, read + written)],
            read_bytes: read,
            written_bytes: written,
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
}
