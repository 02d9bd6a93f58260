//! The disk model: a block device draws its idle power while idle and its active power while
//! busy, so a cycle of `d` seconds with `busy` of them busy costs
//! `idle_w·(d − busy) + active_w·busy` joules. Busy time is the delta of io_ticks (field 10 of
//! `/sys/block/DEV/stat`), bytes the sectors read and written × 512. Figures per class (HDD
//! when `queue/rotational` is 1, NVMe by name, SATA SSD otherwise); sources in docs/devices.md.

use std::path::{Path, PathBuf};

use super::figures::UnitFigures;
use crate::device_reports::DevNum;

#[derive(Debug, Clone, PartialEq)]
pub struct DiskPower {
    /// `hdd`, `sata-ssd`, `nvme`, `--disk-power`.
    pub model: &'static str,
    pub idle_w: f64,
    pub active_w: f64,
}

/// Seagate Barracuda 7200.7 SATA product manual (rev. N), table 4: idle 7.5 W, operating 12.0 W.
pub const HDD: DiskPower = DiskPower { model: "hdd", idle_w: 7.5, active_w: 12.0 };
/// Samsung 850 PRO (Tom's Hardware review): idle up to 0.4 W (Samsung's figure), about 3 W at
/// its peak (1 TB model).
pub const SATA_SSD: DiskPower = DiskPower { model: "sata-ssd", idle_w: 0.4, active_w: 3.0 };
/// Samsung 970 EVO Plus 1 TB specification: idle 30 mW, write 6.0 W (read 5.5 W).
pub const NVME: DiskPower = DiskPower { model: "nvme", idle_w: 0.03, active_w: 6.0 };

/// Devices whose I/O lands on a device below them (or in memory): counting them too would
/// count the same bytes twice, so they are units only when `--disk-power` names them.
const STACKED_PREFIXES: &[&str] = &["loop", "dm-", "md", "zram", "ram", "nbd", "rbd", "drbd", "bcache", "zd"];

/// Joules of a cycle of `d_s` seconds, `busy_s` of them busy (at most `d_s`).
pub fn energy_j(p: &DiskPower, d_s: f64, busy_s: f64) -> f64 {
    let busy_s = busy_s.clamp(0.0, d_s.max(0.0));
    p.idle_w * (d_s - busy_s).max(0.0) + p.active_w * busy_s
}

/// A block device's counters since boot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStat {
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub io_ticks_ms: u64,
}

/// `/sys/block/DEV/stat`: fields 3 and 7 are sectors read and written (512 bytes each,
/// whatever the device's own sector size), field 10 the milliseconds it had I/O in flight.
pub fn parse_stat(text: &str) -> Option<DiskStat> {
    let f: Vec<u64> = text.split_whitespace().take(10).map(|w| w.parse().ok()).collect::<Option<_>>()?;
    (f.len() == 10).then(|| DiskStat {
        read_bytes: f[2].saturating_mul(512),
        written_bytes: f[6].saturating_mul(512),
        io_ticks_ms: f[9],
    })
}

#[derive(Debug, Clone)]
pub struct BlockDevice {
    pub name: String,
    pub power: DiskPower,
    dir: PathBuf,
}

impl BlockDevice {
    pub fn stat(&self) -> Option<DiskStat> {
        parse_stat(&std::fs::read_to_string(self.dir.join("stat")).ok()?)
    }

    /// The device numbers a file on this disk can have (`super_block.s_dev`): the disk's own,
    /// its partitions', and those of the devices stacked on either (`holders/`: device
    /// mapper, md), to [`MAX_HOLDER_DEPTH`] levels. Sorted, without repeats.
    pub fn device_numbers(&self) -> Vec<DevNum> {
        let block = self.dir.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut out = Vec::new();
        let mut dirs = vec![self.dir.clone()];
        // Partitions are subdirectories with a `partition` file (`sda/sda1/partition`).
        for e in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            if e.path().join("partition").is_file() {
                dirs.push(e.path());
            }
        }
        for _ in 0..=MAX_HOLDER_DEPTH {
            let mut holders = Vec::new();
            for dir in dirs.drain(..) {
                if let Some(dev) = std::fs::read_to_string(dir.join("dev")).ok().and_then(|t| DevNum::parse(&t)) {
                    out.push(dev);
                }
                for h in std::fs::read_dir(dir.join("holders")).into_iter().flatten().flatten() {
                    holders.push(block.join(h.file_name()));
                }
            }
            dirs = holders;
        }
        out.sort();
        out.dedup();
        out
    }
}

/// How many levels of stacked devices are followed (a partition's LVM volume, a dm-crypt on it).
const MAX_HOLDER_DEPTH: usize = 3;

/// Whether `name` is stacked on other devices: a known kind, or one with `slaves/`.
fn stacked(dir: &Path, name: &str) -> bool {
    STACKED_PREFIXES.iter().any(|p| name.starts_with(p))
        || std::fs::read_dir(dir.join("slaves")).is_ok_and(|mut d| d.next().is_some())
}

fn class_of(dir: &Path, name: &str) -> DiskPower {
    if name.starts_with("nvme") {
        return NVME;
    }
    match std::fs::read_to_string(dir.join("queue/rotational")).map(|s| s.trim() == "1") {
        Ok(true) => HDD,
        _ => SATA_SSD,
    }
}

/// The units of `<sysfs>/block`: every device not stacked on another, and any device
/// `overrides` names (loop devices included), with its figures.
pub fn devices(sysfs: &Path, overrides: &[UnitFigures]) -> Vec<BlockDevice> {
    let Ok(entries) = std::fs::read_dir(sysfs.join("block")) else { return Vec::new() };
    let mut found: Vec<BlockDevice> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            let dir = e.path();
            let power = match overrides.iter().find(|o| o.name == name) {
                Some(o) => DiskPower { model: "--disk-power", idle_w: o.a_w, active_w: o.b_w },
                None if stacked(&dir, &name) => return None,
                None => class_of(&dir, &name),
            };
            Some(BlockDevice { name, power, dir })
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A `/sys/block/NAME` with a stat line of `read`, `written` sectors and `ticks` ms.
    pub fn fake_disk(root: &Path, name: &str, rotational: &str, read: u64, written: u64, ticks: u64) {
        let dir = root.join("block").join(name);
        std::fs::create_dir_all(dir.join("queue")).unwrap();
        std::fs::write(dir.join("queue/rotational"), format!("{rotational}\n")).unwrap();
        let stat = format!("  10 0 {read} 5 20 1 {written} 7 0 {ticks} 40 0 0 0 0 0 0\n");
        std::fs::write(dir.join("stat"), stat).unwrap();
    }

    #[test]
    fn classes_stacked_devices_and_overrides() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        fake_disk(r, "sda", "1", 8, 16, 100);
        fake_disk(r, "sdb", "0", 0, 0, 0);
        fake_disk(r, "nvme0n1", "0", 0, 0, 0);
        for stacked in ["loop0", "loop1", "dm-0", "md127", "zram0", "nbd0"] {
            fake_disk(r, stacked, "0", 1, 1, 1);
        }
        fake_disk(r, "vdb", "0", 0, 0, 0);
        std::fs::create_dir_all(r.join("block/vdb/slaves/sdb")).unwrap();
        let over = [UnitFigures { name: "loop1".into(), a_w: 1.0, b_w: 2.0 }];
        let found = devices(r, &over);
        let names: Vec<(&str, &str)> = found.iter().map(|d| (d.name.as_str(), d.power.model)).collect();
        assert_eq!(names, [("loop1", "--disk-power"), ("nvme0n1", "nvme"), ("sda", "hdd"), ("sdb", "sata-ssd")]);
        assert_eq!(found[2].stat(), Some(DiskStat { read_bytes: 8 * 512, written_bytes: 16 * 512, io_ticks_ms: 100 }));
    }

    #[test]
    fn a_disk_holds_its_partitions_and_the_devices_stacked_on_them() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        fake_disk(r, "sda", "0", 0, 0, 0);
        fake_disk(r, "dm-0", "0", 0, 0, 0);
        fake_disk(r, "dm-1", "0", 0, 0, 0);
        fake_disk(r, "sdb", "0", 0, 0, 0);
        let write = |rel: &str, text: &str| {
            let path = r.join("block").join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("sda/dev", "8:0\n");
        write("sda/sda1/dev", "8:1\n");
        write("sda/sda1/partition", "1\n");
        write("sda/sda2/dev", "8:2\n");
        write("sda/sda2/partition", "2\n");
        // sda2 holds an LVM volume (dm-0), which holds a dm-crypt (dm-1).
        std::fs::create_dir_all(r.join("block/sda/sda2/holders/dm-0")).unwrap();
        write("dm-0/dev", "253:0\n");
        std::fs::create_dir_all(r.join("block/dm-0/holders/dm-1")).unwrap();
        write("dm-1/dev", "253:1\n");
        write("sdb/dev", "8:16\n");
        // A directory without `partition` is no partition (`sda/queue`, `sda/power`...).
        write("sda/power/dev", "1:1\n");
        let found = devices(r, &[]);
        let numbers = |name: &str| -> Vec<(u32, u32)> {
            let d = found.iter().find(|d| d.name == name).unwrap();
            d.device_numbers().iter().map(|n| (n.major, n.minor)).collect()
        };
        assert_eq!(numbers("sda"), [(8, 0), (8, 1), (8, 2), (253, 0), (253, 1)]);
        assert_eq!(numbers("sdb"), [(8, 16)]);
    }

    #[test]
    fn energy_is_idle_while_idle_and_active_while_busy() {
        // 7.5 W for 0.75 s idle and 12 W for 0.25 s busy.
        assert!((energy_j(&HDD, 1.0, 0.25) - (7.5 * 0.75 + 3.0)).abs() < 1e-12);
        // io_ticks can run past the cycle's length (counters read a little apart): capped.
        assert!((energy_j(&HDD, 1.0, 1.5) - 12.0).abs() < 1e-12);
        assert_eq!(parse_stat("1 2 3"), None);
        assert_eq!(parse_stat("1 2 3 4 5 6 7 8 9 x"), None);
    }
}
