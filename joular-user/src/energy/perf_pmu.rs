//! The perf `power` PMU (`/sys/bus/event_source/devices/power`): the same RAPL counters as
//! powercap, read through `perf_event_open` on one CPU per socket (the PMU's `cpumask`).
//! The kernel accumulates the 32-bit hardware counter into 64 bits, so there is no wrap here.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::domains::{Domain, DomainCounter, Domains, SocketDomains};
use super::error::{read_error, EnergyError};
use super::files::{read_parsed, read_trimmed};
use super::{SourceKind, Topology};

/// One opened perf counter; `read_count` returns the raw accumulated count.
pub trait PerfCounter: Send {
    fn read_count(&mut self) -> io::Result<u64>;
}

/// Opens a system-wide counter of PMU `pmu_type`, event `config`, on `cpu`. Injectable so
/// tests run without perf or root.
pub trait PerfOpener {
    fn open(&self, pmu_type: u32, config: u64, cpu: u32) -> io::Result<Box<dyn PerfCounter>>;
}

/// The real opener: the `perf_event_open` syscall.
#[derive(Debug, Clone, Copy, Default)]
pub struct SyscallOpener;

/// `struct perf_event_attr` up to `config1` (PERF_ATTR_SIZE_VER0, 64 bytes): the kernel
/// accepts this older size and zero-fills the rest, and a counting PMU needs nothing newer.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttrV0 {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// Bitfield (disabled, inherit, exclude_*...): all clear = counting from open, all modes.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

struct FdCounter(File);

impl PerfCounter for FdCounter {
    fn read_count(&mut self) -> io::Result<u64> {
        let mut buf = [0u8; 8];
        self.0.read_exact(&mut buf)?;
        Ok(u64::from_ne_bytes(buf))
    }
}

impl PerfOpener for SyscallOpener {
    fn open(&self, pmu_type: u32, config: u64, cpu: u32) -> io::Result<Box<dyn PerfCounter>> {
        let attr = PerfEventAttrV0 {
            type_: pmu_type,
            size: std::mem::size_of::<PerfEventAttrV0>() as u32,
            config,
            ..Default::default()
        };
        let (pid, group_fd): (libc::pid_t, libc::c_int) = (-1, -1);
        // SAFETY: `attr` is a valid, initialised perf_event_attr of the size it declares and
        // outlives the call; the other arguments are plain integers.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttrV0,
                pid,
                cpu as libc::c_int,
                group_fd,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the syscall returned a new file descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
        Ok(Box::new(FdCounter(File::from(fd))))
    }
}

/// A PMU event: its `config` code and the factor turning counts into µJ.
#[derive(Debug, Clone, Copy, PartialEq)]
struct PmuEvent {
    config: u64,
    uj_per_count: f64,
}

fn read_event(pmu_dir: &Path, event: &'static str) -> Result<PmuEvent, EnergyError> {
    let base = pmu_dir.join("events").join(event);
    if !base.exists() {
        return Err(EnergyError::MissingPmuEvent { path: pmu_dir.to_owned(), event });
    }
    let spec = read_trimmed(&base, "")?;
    let config = parse_event_config(&spec).ok_or_else(|| EnergyError::Parse {
        path: base.clone(),
        content: spec,
        expected: "event=0x<hex>",
    })?;
    let scale_path = pmu_dir.join("events").join(format!("{event}.scale"));
    let scale: f64 = read_parsed(&scale_path, "", "a float scale")?;
    let unit_path = pmu_dir.join("events").join(format!("{event}.unit"));
    let unit = read_trimmed(&unit_path, "")?;
    if unit != "Joules" {
        return Err(EnergyError::Parse { path: unit_path, content: unit, expected: "Joules" });
    }
    Ok(PmuEvent { config, uj_per_count: scale * 1e6 })
}

/// `event=0x02` (terms may follow after commas) → 2.
fn parse_event_config(spec: &str) -> Option<u64> {
    let value = spec.split(',').find_map(|term| term.trim().strip_prefix("event="))?;
    match value.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => value.parse().ok(),
    }
}

/// A sysfs CPU list (`0,18` or `0-3,8`).
fn parse_cpu_list(list: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<u32>().ok()?..=b.parse::<u32>().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// An opened event on the CPU it counts on (named when a read fails).
pub struct OpenEvent {
    counter: Box<dyn PerfCounter>,
    cpu: u32,
}

impl DomainCounter for OpenEvent {
    const KIND: SourceKind = SourceKind::Perf;

    fn read_count(&mut self) -> Result<u64, EnergyError> {
        self.counter.read_count().map_err(|e| read_error(format!("perf power counter on cpu {}", self.cpu), e, ""))
    }
}

/// The kernel accumulates into 64 bits: the count never wraps.
fn open_event(
    opener: &dyn PerfOpener,
    pmu_type: u32,
    event: PmuEvent,
    cpu: u32,
) -> Result<Domain<OpenEvent>, EnergyError> {
    let perf_open = |source| EnergyError::PerfOpen { pmu_type, config: event.config, cpu, source };
    let mut counter = opener.open(pmu_type, event.config, cpu).map_err(perf_open)?;
    // The baseline read fails like the open: it is the descriptor's first use.
    let first = counter.read_count().map_err(perf_open)?;
    Ok(Domain::from_baseline(OpenEvent { counter, cpu }, first, None, event.uj_per_count))
}

/// RAPL through the perf power PMU: one event per domain, counted on a CPU of the socket.
pub type PerfPmuSource = Domains<OpenEvent>;

impl PerfPmuSource {
    pub fn open(
        sysfs_root: &Path,
        topo: &Topology,
        dram: bool,
        psys: bool,
        opener: &dyn PerfOpener,
    ) -> Result<Self, EnergyError> {
        let pmu_dir: PathBuf = sysfs_root.join("bus/event_source/devices/power");
        if !pmu_dir.exists() {
            return Err(EnergyError::NoPowerPmu { path: pmu_dir });
        }
        let pmu_type: u32 = read_parsed(&pmu_dir.join("type"), "", "a PMU type number")?;
        let mask_path = pmu_dir.join("cpumask");
        let mask = read_trimmed(&mask_path, "")?;
        let mask_cpus = parse_cpu_list(&mask).ok_or_else(|| EnergyError::Parse {
            path: mask_path.clone(),
            content: mask,
            expected: "a CPU list",
        })?;
        let package = read_event(&pmu_dir, "energy-pkg")?;
        let ram = dram.then(|| read_event(&pmu_dir, "energy-ram")).transpose()?;
        let platform = psys.then(|| read_event(&pmu_dir, "energy-psys")).transpose()?;

        let mut sockets = Vec::with_capacity(topo.socket_count());
        // The first socket's CPU, which the platform counter is read on.
        let mut first_cpu = None;
        for socket in topo.sockets() {
            let cpu = mask_cpus
                .iter()
                .copied()
                .find(|&c| topo.socket_of(c) == Some(socket))
                .ok_or_else(|| EnergyError::NoPmuCpu { path: mask_path.clone(), socket })?;
            sockets.push(SocketDomains {
                socket,
                package: open_event(opener, pmu_type, package, cpu)?,
                dram: ram.map(|e| open_event(opener, pmu_type, e, cpu)).transpose()?,
            });
            first_cpu.get_or_insert(cpu);
        }
        let psys = match (platform, first_cpu) {
            (Some(event), Some(cpu)) => Some(open_event(opener, pmu_type, event, cpu)?),
            _ => None,
        };
        Ok(Domains::new(sockets, psys))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::energy::{CycleUtilisation, EnergySource};
    use std::collections::HashMap;
    use std::fs;
    use std::sync::{Arc, Mutex};

    /// Counter values by (config, cpu), shared between the test and the opened counters.
    #[derive(Clone, Default)]
    pub(crate) struct FakeOpener {
        pub(crate) values: Arc<Mutex<HashMap<(u64, u32), u64>>>,
        pub(crate) opened: Arc<Mutex<Vec<(u32, u64, u32)>>>,
    }

    struct FakeCounter {
        values: Arc<Mutex<HashMap<(u64, u32), u64>>>,
        key: (u64, u32),
    }

    impl PerfCounter for FakeCounter {
        fn read_count(&mut self) -> io::Result<u64> {
            Ok(self.values.lock().unwrap().get(&self.key).copied().unwrap_or(0))
        }
    }

    impl PerfOpener for FakeOpener {
        fn open(&self, pmu_type: u32, config: u64, cpu: u32) -> io::Result<Box<dyn PerfCounter>> {
            self.opened.lock().unwrap().push((pmu_type, config, cpu));
            Ok(Box::new(FakeCounter { values: self.values.clone(), key: (config, cpu) }))
        }
    }

    impl FakeOpener {
        pub(crate) fn set(&self, config: u64, cpu: u32, count: u64) {
            self.values.lock().unwrap().insert((config, cpu), count);
        }
    }

    /// An opener that fails like an unprivileged perf_event_open.
    pub(crate) struct DeniedOpener;

    impl PerfOpener for DeniedOpener {
        fn open(&self, _: u32, _: u64, _: u32) -> io::Result<Box<dyn PerfCounter>> {
            Err(io::Error::from_raw_os_error(libc::EACCES))
        }
    }

    /// `scale` as the kernel writes it: 2^-32 J per count.
    pub(crate) const SCALE: f64 = 1.0 / 4_294_967_296.0;

    pub(crate) fn write_pmu(sysfs: &Path, cpumask: &str, events: &[(&str, u64)]) {
        let dir = sysfs.join("bus/event_source/devices/power");
        fs::create_dir_all(dir.join("events")).unwrap();
        fs::write(dir.join("type"), "23\n").unwrap();
        fs::write(dir.join("cpumask"), format!("{cpumask}\n")).unwrap();
        for (name, code) in events {
            fs::write(dir.join("events").join(name), format!("event={code:#04x}\n")).unwrap();
            fs::write(dir.join("events").join(format!("{name}.scale")), format!("{SCALE:e}\n")).unwrap();
            fs::write(dir.join("events").join(format!("{name}.unit")), "Joules\n").unwrap();
        }
    }

    #[test]
    fn parsers() {
        assert_eq!(parse_event_config("event=0x02"), Some(2));
        assert_eq!(parse_event_config("event=0x1b,umask=0x1"), Some(0x1b));
        assert_eq!(parse_event_config("umask=1"), None);
        assert_eq!(parse_cpu_list("0,18"), Some(vec![0, 18]));
        assert_eq!(parse_cpu_list("0-2,8\n"), Some(vec![0, 1, 2, 8]));
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn one_counter_per_socket_scaled_to_microjoules() {
        let dir = tempfile::tempdir().unwrap();
        write_pmu(dir.path(), "0,2", &[("energy-pkg", 2), ("energy-ram", 3)]);
        let topo = Topology::from_pairs([(0, 0), (1, 0), (2, 1), (3, 1)]);
        let opener = FakeOpener::default();
        opener.set(2, 0, 1 << 32);
        let mut source = PerfPmuSource::open(dir.path(), &topo, true, false, &opener).unwrap();
        let mut opened = opener.opened.lock().unwrap().clone();
        opened.sort();
        assert_eq!(opened, vec![(23, 2, 0), (23, 2, 2), (23, 3, 0), (23, 3, 2)]);
        // 2^32 counts of 2^-32 J = 1 J on socket 0's package; 2^31 counts = 0.5 J on socket 1's DRAM.
        opener.set(2, 0, 2 << 32);
        opener.set(3, 2, 1 << 31);
        let read = source.read(&CycleUtilisation::default()).unwrap();
        assert!((read[0].energy_uj - 1e6).abs() < 1e-6, "{read:?}");
        assert_eq!(read[1].dram_energy_uj, Some(0.5e6));
        assert!((read[1].energy_uj - 0.5e6).abs() < 1e-6);
    }

    #[test]
    fn psys_only_pmu_is_refused_for_want_of_energy_pkg() {
        // What this project's VMs expose: a power PMU with energy-psys and nothing else.
        let dir = tempfile::tempdir().unwrap();
        write_pmu(dir.path(), "0", &[("energy-psys", 5)]);
        let topo = Topology::from_pairs([(0, 0)]);
        let err = PerfPmuSource::open(dir.path(), &topo, false, false, &FakeOpener::default()).err().unwrap();
        assert!(err.to_string().contains("no energy-pkg event"), "{err}");
    }

    #[test]
    fn cpumask_without_a_socket_cpu_and_denied_open_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        write_pmu(dir.path(), "0", &[("energy-pkg", 2)]);
        let topo = Topology::from_pairs([(0, 0), (1, 1)]);
        let err = PerfPmuSource::open(dir.path(), &topo, false, false, &FakeOpener::default()).err().unwrap();
        assert!(matches!(err, EnergyError::NoPmuCpu { socket: 1, .. }), "{err}");
        let one = Topology::from_pairs([(0, 0)]);
        let err = PerfPmuSource::open(dir.path(), &one, false, false, &DeniedOpener).err().unwrap();
        assert!(err.to_string().contains("perf_event_paranoid"), "{err}");
    }

    #[test]
    fn counter_going_backwards_is_flagged() {
        let dir = tempfile::tempdir().unwrap();
        write_pmu(dir.path(), "0", &[("energy-pkg", 2)]);
        let opener = FakeOpener::default();
        opener.set(2, 0, 1_000);
        let mut source =
            PerfPmuSource::open(dir.path(), &Topology::from_pairs([(0, 0)]), false, false, &opener).unwrap();
        opener.set(2, 0, 10);
        let read = source.read(&CycleUtilisation::default()).unwrap()[0];
        assert!(read.flagged && read.energy_uj == 0.0);
    }
}
