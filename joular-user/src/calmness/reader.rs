//! Each CPU's current frequency from cpufreq (`<sysfs>/devices/system/cpu/cpuN/cpufreq/
//! scaling_cur_freq`, kHz), read once per cycle for calmness. Whether the machine has cpufreq is
//! decided once, at open: most VMs have none, and then nothing is read per cycle.

use std::path::{Path, PathBuf};

use crate::energy::cpufreq::{cur_freq_path, read_khz};
use crate::model::CpuFrequency;

/// CPUs looked at: a bound on a hostile or broken tree, far above any machine made.
const MAX_CPUS: usize = 8_192;

/// The CPUs whose current frequency can be read.
#[derive(Debug, Clone, PartialEq)]
pub struct FrequencyReader {
    cpus: Vec<(u32, PathBuf)>,
}

impl FrequencyReader {
    /// `None` when no CPU under `sysfs_root` has a readable `scaling_cur_freq`.
    pub fn open(sysfs_root: &Path) -> Option<Self> {
        let cpu_dir = sysfs_root.join("devices/system/cpu");
        let mut cpus: Vec<(u32, PathBuf)> = std::fs::read_dir(&cpu_dir)
            .ok()?
            .filter_map(Result::ok)
            .take(MAX_CPUS)
            .filter_map(|e| {
                let name = e.file_name();
                let cpu: u32 = name.to_str()?.strip_prefix("cpu")?.parse().ok()?;
                Some((cpu, cur_freq_path(sysfs_root, cpu)))
            })
            .filter(|(_, path)| read_khz(path).is_some())
            .collect();
        cpus.sort_unstable_by_key(|(cpu, _)| *cpu);
        (!cpus.is_empty()).then_some(Self { cpus })
    }

    pub fn cpu_count(&self) -> usize {
        self.cpus.len()
    }

    /// Every CPU's frequency now; a CPU whose file cannot be read this time (taken offline)
    /// is left out of this reading rather than given a made-up value.
    pub fn read(&self) -> Vec<CpuFrequency> {
        self.cpus.iter().filter_map(|(cpu, path)| read_khz(path).map(|khz| CpuFrequency { cpu: *cpu, khz })).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write_freq(sysfs: &Path, cpu: u32, khz: &str) {
        let dir = sysfs.join(format!("devices/system/cpu/cpu{cpu}/cpufreq"));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("scaling_cur_freq"), khz).unwrap();
    }

    #[test]
    fn no_cpufreq_is_none_and_cpus_read_in_order() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(FrequencyReader::open(dir.path()), None, "no cpu directory at all");
        fs::create_dir_all(dir.path().join("devices/system/cpu/cpu0")).unwrap();
        assert_eq!(FrequencyReader::open(dir.path()), None, "CPUs without cpufreq (a VM)");
        write_freq(dir.path(), 10, "2400000\n");
        write_freq(dir.path(), 2, "800000\n");
        write_freq(dir.path(), 3, "garbage\n");
        fs::create_dir_all(dir.path().join("devices/system/cpu/cpufreq")).unwrap();
        let reader = FrequencyReader::open(dir.path()).unwrap();
        assert_eq!(reader.cpu_count(), 2);
        assert_eq!(
            reader.read(),
            vec![CpuFrequency { cpu: 2, khz: 800_000 }, CpuFrequency { cpu: 10, khz: 2_400_000 }]
        );
        fs::remove_file(dir.path().join("devices/system/cpu/cpu2/cpufreq/scaling_cur_freq")).unwrap();
        assert_eq!(reader.read(), vec![CpuFrequency { cpu: 10, khz: 2_400_000 }], "an unreadable CPU is left out");
    }
}
