//! The bytes of `--devices network,disk`: what each thread and each call path sent, received,
//! read and wrote in a cycle (the kernel counts them per thread and user stack, see
//! `joular-ebpf/src/devices.rs`), and the run's totals per process for `summary.json`. Pure:
//! the symbolized byte counts in, the reports out. These are measured bytes; the device models
//! that turn them into joules are not here.

use std::collections::{BTreeMap, HashMap};

use crate::device_reports::{add_dev_bytes, add_if_bytes, DevFileBytes, DevNum, IfBytes};
pub use crate::device_reports::{DeviceBytes, DeviceReport, PathBytes, ThreadBytes};
use crate::model::{FrameReport, RawSample, Stack, ThreadReport};

/// One kernel byte count as drained: the thread and user stack it was taken at (`count` 0: it
/// is no CPU sample), its class and bytes.
#[derive(Debug, Clone)]
pub struct DeviceSample {
    pub sample: RawSample,
    pub class: u32,
    pub bytes: u64,
    /// A file's filesystem device, in the kernel's encoding, or a network device byte's
    /// interface index (`DeviceKey::dev`; 0: none).
    pub dev: u32,
}

/// A thread's bytes on one symbolized call path in one cycle.
#[derive(Debug, Clone)]
pub struct DevicePath {
    pub pid: u32,
    pub tid: u32,
    pub stack: Stack,
    pub bytes: DeviceBytes,
    /// The file bytes of `bytes` by their filesystem's device, when the kernel gave it.
    pub file_devices: Vec<DevFileBytes>,
    /// The network device bytes of `bytes` by interface, when the kernel gave it.
    pub net_devices: Vec<IfBytes>,
}

impl DevicePath {
    /// One byte count of `class` on `stack`, its file bytes on `dev` (the kernel's encoding)
    /// or its network device bytes through interface `dev`; `None` for a class this build does
    /// not know.
    pub fn of_count(pid: u32, tid: u32, stack: Stack, class: u32, bytes: u64, dev: u32) -> Option<Self> {
        let mut counted = DeviceBytes::default();
        counted.add_class(class, bytes).ok()?;
        let file_devices = match DevNum::from_kernel(dev) {
            Some(dev) if counted.file_read_bytes + counted.file_write_bytes > 0 => {
                vec![DevFileBytes { dev, read_bytes: counted.file_read_bytes, write_bytes: counted.file_write_bytes }]
            }
            _ => Vec::new(),
        };
        let (tx_bytes, rx_bytes) = (counted.net_device_tx_bytes, counted.net_device_rx_bytes);
        let net_devices = if dev != 0 && tx_bytes + rx_bytes > 0 {
            vec![IfBytes { ifindex: dev, tx_bytes, rx_bytes }]
        } else {
            Vec::new()
        };
        Some(DevicePath { pid, tid, stack, bytes: counted, file_devices, net_devices })
    }
}

fn frames_of(stack: &Stack) -> Vec<FrameReport> {
    stack.iter().map(FrameReport::from).collect()
}

/// The identity of a thread's call path across cycles: its frames' kinds, names and lines (the
/// run totals here, the writeback ledger and the split key paths by it).
pub(crate) type PathKey = (u32, u32, Vec<(String, Option<u32>)>);

pub(crate) fn path_key(pid: u32, tid: u32, frames: &[FrameReport]) -> PathKey {
    (pid, tid, frames.iter().map(|f| (format!("{:?}:{}", f.kind, f.name), f.line)).collect())
}

/// A cycle's report from its symbolized byte counts; threads are named from the cycle's
/// thread reports (`threads`).
pub fn cycle_report(paths: &[DevicePath], threads: &[ThreadReport]) -> DeviceReport {
    let names: HashMap<u32, &str> = threads.iter().map(|t| (t.tid, t.comm.as_str())).collect();
    let mut by_thread: BTreeMap<(u32, u32), DeviceBytes> = BTreeMap::new();
    type ByPath = (Stack, DeviceBytes, Vec<DevFileBytes>, Vec<IfBytes>);
    let mut by_path: HashMap<(u32, u32, *const [crate::model::Frame]), ByPath> = HashMap::new();
    for p in paths {
        by_thread.entry((p.pid, p.tid)).or_default().add(&p.bytes);
        let row = by_path.entry((p.pid, p.tid, std::sync::Arc::as_ptr(&p.stack))).or_insert((
            p.stack.clone(),
            DeviceBytes::default(),
            Vec::new(),
            Vec::new(),
        ));
        row.1.add(&p.bytes);
        for d in &p.file_devices {
            add_dev_bytes(&mut row.2, *d);
        }
        for i in &p.net_devices {
            add_if_bytes(&mut row.3, *i);
        }
    }
    let mut report = DeviceReport {
        threads: by_thread
            .into_iter()
            .map(|((pid, tid), bytes)| ThreadBytes {
                pid,
                tid,
                comm: names.get(&tid).unwrap_or(&"").to_string(),
                bytes,
            })
            .collect(),
        paths: by_path
            .into_iter()
            .map(|((pid, tid, _), (stack, bytes, file_devices, net_devices))| PathBytes {
                pid,
                tid,
                frames: frames_of(&stack),
                bytes,
                file_devices,
                net_devices,
            })
            .collect(),
    };
    sort(&mut report);
    report
}

fn sort(report: &mut DeviceReport) {
    report.threads.sort_by_key(|t| (std::cmp::Reverse(t.bytes.total()), t.pid, t.tid));
    report.paths.sort_by(|a, b| b.bytes.total().cmp(&a.bytes.total()).then((a.pid, a.tid).cmp(&(b.pid, b.tid))));
}

/// One process's bytes over the run.
#[derive(Debug, Clone, Default)]
pub struct DeviceTotals {
    threads: BTreeMap<u32, ThreadBytes>,
    paths: HashMap<PathKey, PathBytes>,
}

impl DeviceTotals {
    /// Adds the cycle's rows of process `pid`.
    pub fn add(&mut self, pid: u32, cycle: &DeviceReport) {
        for t in cycle.threads.iter().filter(|t| t.pid == pid) {
            let total =
                self.threads.entry(t.tid).or_insert_with(|| ThreadBytes { pid, tid: t.tid, ..Default::default() });
            total.bytes.add(&t.bytes);
            if !t.comm.is_empty() {
                total.comm.clone_from(&t.comm);
            }
        }
        for p in cycle.paths.iter().filter(|p| p.pid == pid) {
            let total = self.paths.entry(path_key(p.pid, p.tid, &p.frames)).or_insert_with(|| PathBytes {
                bytes: DeviceBytes::default(),
                file_devices: Vec::new(),
                net_devices: Vec::new(),
                ..p.clone()
            });
            total.bytes.add(&p.bytes);
            for d in &p.file_devices {
                add_dev_bytes(&mut total.file_devices, *d);
            }
            for i in &p.net_devices {
                add_if_bytes(&mut total.net_devices, *i);
            }
        }
    }

    pub fn report(&self) -> DeviceReport {
        let mut report = DeviceReport {
            threads: self.threads.values().cloned().collect(),
            paths: self.paths.values().cloned().collect(),
        };
        sort(&mut report);
        report
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use joular_ebpf::{CLASS_FILE_WRITE, CLASS_NET_DEVICE_RX, CLASS_NET_DEVICE_TX, CLASS_NET_LOCAL_TX};

    use super::*;
    use crate::model::{Frame, FrameKind};

    fn stack(names: &[&str]) -> Stack {
        Arc::from(names.iter().map(|n| Frame::new(FrameKind::JavaJit, *n, *n, None)).collect::<Vec<_>>())
    }

    #[test]
    fn classes_land_in_their_own_counters_and_an_unknown_class_is_refused() {
        let mut b = DeviceBytes::default();
        for class in 0..6 {
            b.add_class(class, 1 << class).unwrap();
        }
        assert_eq!(b.fields(), [1, 2, 4, 8, 16, 32]);
        assert_eq!(b.add_class(6, 5), Err(6));
        assert_eq!(b.total(), 63);
    }

    #[test]
    fn a_cycle_sums_per_thread_and_per_path_and_the_run_sums_cycles() {
        let send = stack(&["Thread.run", "NetWork.send"]);
        let write = stack(&["Thread.run", "NetWork.write"]);
        let bytes = |class, n| {
            let mut b = DeviceBytes::default();
            b.add_class(class, n).unwrap();
            b
        };
        let paths = vec![
            DevicePath {
                pid: 1,
                tid: 2,
                stack: send.clone(),
                bytes: bytes(CLASS_NET_DEVICE_TX, 100),
                file_devices: Vec::new(),
                net_devices: Vec::new(),
            },
            DevicePath {
                pid: 1,
                tid: 2,
                stack: send.clone(),
                bytes: bytes(CLASS_NET_DEVICE_RX, 5),
                file_devices: Vec::new(),
                net_devices: Vec::new(),
            },
            DevicePath {
                pid: 1,
                tid: 3,
                stack: write.clone(),
                bytes: bytes(CLASS_FILE_WRITE, 40),
                file_devices: Vec::new(),
                net_devices: Vec::new(),
            },
        ];
        let threads = vec![ThreadReport { pid: 1, tid: 2, comm: "sender".into(), ..Default::default() }];
        let cycle = cycle_report(&paths, &threads);
        assert_eq!(cycle.threads.len(), 2);
        assert_eq!(cycle.threads[0].comm, "sender");
        assert_eq!(cycle.threads[0].bytes.net_device_tx_bytes, 100);
        assert_eq!(cycle.threads[0].bytes.net_device_rx_bytes, 5);
        assert_eq!(cycle.threads[1].bytes.file_write_bytes, 40);
        assert_eq!(cycle.paths.len(), 2);
        assert_eq!(cycle.paths[0].frames.last().unwrap().name, "NetWork.send");
        let mut run = DeviceTotals::default();
        run.add(1, &cycle);
        run.add(1, &cycle);
        run.add(7, &cycle);
        let r = run.report();
        assert_eq!(r.threads[0].bytes.net_device_tx_bytes, 200);
        assert_eq!(r.paths.len(), 2);
        assert_eq!(r.paths[1].bytes.file_write_bytes, 80);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["threads"][0]["net_device_tx_bytes"], 200);
        assert_eq!(json["paths"][0]["frames"][1]["name"], "NetWork.send");
    }

    #[test]
    fn a_file_count_keeps_its_device_and_a_socket_count_none() {
        let stack: Stack = std::sync::Arc::from([]);
        let file = DevicePath::of_count(1, 2, stack.clone(), CLASS_FILE_WRITE, 40, 7 << 20 | 3).unwrap();
        assert_eq!(
            file.file_devices,
            [DevFileBytes { dev: DevNum { major: 7, minor: 3 }, read_bytes: 0, write_bytes: 40 }]
        );
        let socket = DevicePath::of_count(1, 2, stack.clone(), CLASS_NET_DEVICE_TX, 40, 0).unwrap();
        assert!(socket.file_devices.is_empty() && socket.net_devices.is_empty());
        assert_eq!(socket.bytes.net_device_tx_bytes, 40);
        assert!(DevicePath::of_count(1, 2, stack.clone(), 999, 40, 0).is_none(), "a class this build does not know");
        // A network device's bytes keep the interface the kernel gave; local bytes have none.
        let routed = DevicePath::of_count(1, 2, stack.clone(), CLASS_NET_DEVICE_RX, 30, 4).unwrap();
        assert_eq!(routed.net_devices, [IfBytes { ifindex: 4, tx_bytes: 0, rx_bytes: 30 }]);
        assert!(routed.file_devices.is_empty());
        let local = DevicePath::of_count(1, 2, stack.clone(), CLASS_NET_LOCAL_TX, 30, 4).unwrap();
        assert!(local.net_devices.is_empty());
        // Per path over a cycle, one entry per interface.
        let sent = DevicePath::of_count(1, 2, stack, CLASS_NET_DEVICE_TX, 10, 4).unwrap();
        let cycle = cycle_report(&[routed, sent], &[]);
        assert_eq!(cycle.paths[0].net_devices, [IfBytes { ifindex: 4, tx_bytes: 10, rx_bytes: 30 }]);
        let json = serde_json::to_value(&cycle).unwrap();
        assert_eq!(json["paths"][0]["net_devices"][0]["ifindex"], 4);
    }
}
