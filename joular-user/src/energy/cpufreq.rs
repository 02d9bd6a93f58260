//! cpufreq's view of how fast each CPU runs (`cpuN/cpufreq/{scaling_cur_freq,cpuinfo_max_freq}`,
//! kHz), for the power model: a CPU held at half its top frequency does about half the
//! switching work per busy second. Most VMs have no cpufreq; then nothing is scaled.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::files::read_parsed;
use super::Topology;

/// Highest frequency believed (1 THz in kHz): a larger value is a broken file, not a CPU.
const MAX_KHZ: u64 = 1_000_000_000;

/// Where CPU `cpu`'s current frequency is, under `sysfs_root`.
pub fn cur_freq_path(sysfs_root: &Path, cpu: u32) -> PathBuf {
    sysfs_root.join(format!("devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq"))
}

/// A cpufreq frequency file's kHz; `None` when unreadable, 0 or past any CPU made.
pub fn read_khz(path: &Path) -> Option<u64> {
    read_parsed::<u64>(path, "", "kHz").ok().filter(|&khz| khz > 0 && khz <= MAX_KHZ)
}

/// The CPUs with cpufreq, by socket: where to read each one's current frequency, and its top.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuFreq {
    by_socket: BTreeMap<u32, Vec<(PathBuf, u64)>>,
}

impl CpuFreq {
    /// `None` when no CPU of the topology has a readable cpufreq directory.
    pub fn open(sysfs_root: &Path, topo: &Topology) -> Option<Self> {
        let mut by_socket: BTreeMap<u32, Vec<(PathBuf, u64)>> = BTreeMap::new();
        for socket in topo.sockets() {
            for &cpu in topo.cpus_of(socket) {
                let cur = cur_freq_path(sysfs_root, cpu);
                if let Some(max_khz) = cur.parent().and_then(|dir| read_khz(&dir.join("cpuinfo_max_freq"))) {
                    by_socket.entry(socket).or_default().push((cur, max_khz));
                }
            }
        }
        (!by_socket.is_empty()).then_some(Self { by_socket })
    }

    /// Mean of current/top frequency over the socket's CPUs, in [0, 1]; 1 (no scaling) for a
    /// socket without cpufreq or a CPU whose current frequency cannot be read this cycle.
    pub fn ratio(&self, socket: u32) -> f64 {
        let Some(cpus) = self.by_socket.get(&socket) else { return 1.0 };
        let sum: f64 = cpus
            .iter()
            .map(|(cur, max_khz)| read_khz(cur).map_or(1.0, |c| (c as f64 / *max_khz as f64).clamp(0.0, 1.0)))
            .sum();
        sum / cpus.len() as f64
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs;

    /// Writes `cpuN/cpufreq/{cpuinfo_max_freq,scaling_cur_freq}` under `sysfs`.
    pub(crate) fn write_cpufreq(sysfs: &Path, cpu: u32, cur_khz: u64, max_khz: u64) {
        let dir = sysfs.join(format!("devices/system/cpu/cpu{cpu}/cpufreq"));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("cpuinfo_max_freq"), format!("{max_khz}\n")).unwrap();
        fs::write(dir.join("scaling_cur_freq"), format!("{cur_khz}\n")).unwrap();
    }

    #[test]
    fn no_cpufreq_means_no_scaler() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(CpuFreq::open(dir.path(), &Topology::from_pairs([(0, 0)])), None);
    }

    #[test]
    fn ratio_is_the_mean_over_the_socket_and_one_where_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        write_cpufreq(dir.path(), 0, 1_000_000, 4_000_000);
        write_cpufreq(dir.path(), 1, 3_000_000, 4_000_000);
        write_cpufreq(dir.path(), 2, 2_000_000, 2_000_000);
        let topo = Topology::from_pairs([(0, 0), (1, 0), (2, 1), (3, 2)]);
        let freq = CpuFreq::open(dir.path(), &topo).unwrap();
        assert!((freq.ratio(0) - 0.5).abs() < 1e-12);
        assert_eq!(freq.ratio(1), 1.0);
        assert_eq!(freq.ratio(2), 1.0, "socket 2 has no cpufreq");
        fs::remove_file(dir.path().join("devices/system/cpu/cpu0/cpufreq/scaling_cur_freq")).unwrap();
        assert!((freq.ratio(0) - (1.0 + 0.75) / 2.0).abs() < 1e-12);
    }
}
