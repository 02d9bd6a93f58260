//! CPU → socket map: sysfs `cpuN/topology/physical_package_id`, falling back to the
//! `physical id` lines of /proc/cpuinfo.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::cpuinfo::CpuInfo;
use super::error::EnergyError;
use super::files::read_parsed;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Socket of each CPU, indexed by CPU number; `None` for numbers the machine lacks.
    socket_by_cpu: Vec<Option<u32>>,
    /// CPUs of each socket, ascending; keys are the kernel's package ids.
    cpus_by_socket: BTreeMap<u32, Vec<u32>>,
}

impl Topology {
    pub fn read(sysfs_root: &Path, proc_root: &Path) -> Result<Self, EnergyError> {
        if !sysfs_root.exists() {
            return Err(EnergyError::MissingRoot {
                what: "sysfs",
                flag: "--sysfs-root",
                default: "/sys",
                path: sysfs_root.to_owned(),
            });
        }
        let cpu_dir = sysfs_root.join("devices/system/cpu");
        let from_sysfs = read_sysfs_packages(&cpu_dir)?;
        if !from_sysfs.is_empty() {
            return Ok(Self::from_pairs(from_sysfs));
        }
        let cpuinfo = proc_root.join("cpuinfo");
        let info = CpuInfo::read(proc_root).ok().unwrap_or_default();
        if info.physical_ids.is_empty() {
            return Err(EnergyError::NoCpus { sysfs: cpu_dir, cpuinfo });
        }
        Ok(Self::from_pairs(info.physical_ids))
    }

    /// From `(cpu, socket)` pairs; tests and benchmarks build machines this way.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (u32, u32)>) -> Self {
        let mut socket_by_cpu = Vec::new();
        let mut cpus_by_socket: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (cpu, socket) in pairs {
            let index = cpu as usize;
            if socket_by_cpu.len() <= index {
                socket_by_cpu.resize(index + 1, None);
            }
            socket_by_cpu[index] = Some(socket);
            cpus_by_socket.entry(socket).or_default().push(cpu);
        }
        for cpus in cpus_by_socket.values_mut() {
            cpus.sort_unstable();
            cpus.dedup();
        }
        Self { socket_by_cpu, cpus_by_socket }
    }

    /// Every CPU on socket 0: a VM whose energy its host measures as a whole.
    pub fn as_one_socket(&self) -> Self {
        Self::from_pairs(self.socket_by_cpu.iter().enumerate().filter_map(|(cpu, s)| s.map(|_| (cpu as u32, 0))))
    }

    /// `None` for a CPU the topology does not know (hot-plugged after start): its time then
    /// lands in no socket, so its share of energy stays unattributed rather than misplaced.
    pub fn socket_of(&self, cpu: u32) -> Option<u32> {
        self.socket_by_cpu.get(cpu as usize).copied().flatten()
    }

    /// Socket ids, ascending.
    pub fn sockets(&self) -> impl Iterator<Item = u32> + '_ {
        self.cpus_by_socket.keys().copied()
    }

    pub fn socket_count(&self) -> usize {
        self.cpus_by_socket.len()
    }

    /// CPUs of one socket, ascending (empty for an unknown socket).
    pub fn cpus_of(&self, socket: u32) -> &[u32] {
        self.cpus_by_socket.get(&socket).map_or(&[], Vec::as_slice)
    }

    /// Largest CPU number plus one: the length of a CPU-indexed table.
    pub fn cpu_slots(&self) -> usize {
        self.socket_by_cpu.len()
    }
}

/// Offline CPUs have no `topology/` directory and are skipped: they draw no attributable energy.
fn read_sysfs_packages(cpu_dir: &Path) -> Result<Vec<(u32, u32)>, EnergyError> {
    let Ok(entries) = fs::read_dir(cpu_dir) else { return Ok(Vec::new()) };
    let mut pairs = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(cpu) = name.to_str().and_then(|n| n.strip_prefix("cpu")).and_then(|n| n.parse().ok()) else {
            continue;
        };
        let path = entry.path().join("topology/physical_package_id");
        if path.exists() {
            let socket: u32 = read_parsed(&path, "", "a package id")?;
            pairs.push((cpu, socket));
        }
    }
    Ok(pairs)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fake sysfs with `cpuN/topology/physical_package_id` for every `(cpu, socket)`.
    pub(crate) fn write_sysfs_topology(root: &Path, pairs: &[(u32, u32)]) {
        for (cpu, socket) in pairs {
            let dir = root.join(format!("devices/system/cpu/cpu{cpu}/topology"));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("physical_package_id"), format!("{socket}\n")).unwrap();
        }
    }

    #[test]
    fn two_sockets_from_sysfs() {
        let dir = tempfile::tempdir().unwrap();
        let pairs = [(0, 0), (1, 1), (2, 0), (3, 1)];
        write_sysfs_topology(dir.path(), &pairs);
        // cpufreq and cpuidle sit beside cpuN and must be ignored.
        fs::create_dir_all(dir.path().join("devices/system/cpu/cpufreq")).unwrap();
        let topo = Topology::read(dir.path(), dir.path()).unwrap();
        assert_eq!(topo.sockets().collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(topo.cpus_of(0), &[0, 2]);
        assert_eq!(topo.cpus_of(1), &[1, 3]);
        assert_eq!(topo.socket_of(3), Some(1));
        assert_eq!(topo.socket_of(9), None);
    }

    #[test]
    fn falls_back_to_cpuinfo_physical_id() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys");
        fs::create_dir_all(&sys).unwrap();
        let proc = dir.path().join("proc");
        fs::create_dir_all(&proc).unwrap();
        fs::write(proc.join("cpuinfo"), "processor : 0\nphysical id : 0\n\nprocessor : 1\nphysical id : 1\n").unwrap();
        let topo = Topology::read(&sys, &proc).unwrap();
        assert_eq!(topo.socket_of(1), Some(1));
        assert_eq!(topo.socket_count(), 2);
    }

    #[test]
    fn missing_sysfs_root_names_the_flag() {
        let err = Topology::read(&PathBuf::from("/nonexistent/sys"), Path::new("/proc")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/sys") && msg.contains("--sysfs-root"), "{msg}");
    }

    #[test]
    fn no_cpus_anywhere_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = Topology::read(dir.path(), dir.path()).unwrap_err();
        assert!(matches!(err, EnergyError::NoCpus { .. }), "{err}");
    }
}
