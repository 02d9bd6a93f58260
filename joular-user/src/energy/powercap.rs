//! powercap (`/sys/class/powercap/intel-rapl:N[:M]`): the kernel's RAPL driver, on Intel and
//! AMD alike. Zones are matched by their `name` file, not their number, because numbering
//! differs between machines (psys often takes `intel-rapl:1`).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::domains::{Domain, DomainCounter, Domains, SocketDomains};
use super::error::{EnergyError, ROOT_HINT};
use super::files::{read_parsed, read_trimmed};
use super::{SourceKind, Topology};

/// One zone's `energy_uj`, in µJ.
#[derive(Debug)]
pub struct ZoneFile {
    energy_path: PathBuf,
}

impl DomainCounter for ZoneFile {
    const KIND: SourceKind = SourceKind::Powercap;

    fn read_count(&mut self) -> Result<u64, EnergyError> {
        read_parsed(&self.energy_path, ROOT_HINT, "µJ")
    }
}

/// A zone's counter, wrapped with its `max_energy_range_uj`.
fn open_zone(dir: &Path) -> Result<Domain<ZoneFile>, EnergyError> {
    let range_uj: u64 = read_parsed(&dir.join("max_energy_range_uj"), ROOT_HINT, "µJ")?;
    Domain::open(ZoneFile { energy_path: dir.join("energy_uj") }, Some(range_uj), 1.0)
}

/// RAPL through powercap: one zone file per domain.
pub type PowercapSource = Domains<ZoneFile>;

/// Zone directories by `name` content: `package-N` → socket N, `dram` → its parent's socket.
#[derive(Debug, Default)]
struct ZoneDirs {
    packages: BTreeMap<u32, PathBuf>,
    drams: BTreeMap<u32, PathBuf>,
    psys: Option<PathBuf>,
}

fn scan_zones(class_dir: &Path) -> Result<ZoneDirs, EnergyError> {
    let entries = fs::read_dir(class_dir).map_err(|_| EnergyError::NoPowercapZones { path: class_dir.to_owned() })?;
    let mut dirs: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.starts_with("intel-rapl:").then(|| (name, e.path()))
        })
        .collect();
    dirs.sort();
    // The package id of `intel-rapl:N`, so a `dram` subzone `intel-rapl:N:M` finds its socket.
    let mut package_of_zone: BTreeMap<String, u32> = BTreeMap::new();
    let mut zones = ZoneDirs::default();
    for (zone, path) in &dirs {
        let name = read_trimmed(&path.join("name"), ROOT_HINT)?;
        if let Some(socket) = name.strip_prefix("package-").and_then(|n| n.parse().ok()) {
            package_of_zone.insert(zone.clone(), socket);
            zones.packages.insert(socket, path.clone());
        } else if name == "psys" && zones.psys.is_none() {
            zones.psys = Some(path.clone());
        }
    }
    for (zone, path) in &dirs {
        let Some((parent, _)) = zone.rsplit_once(':').filter(|(p, _)| p.contains(':')) else { continue };
        if let Some(&socket) = package_of_zone.get(parent) {
            if read_trimmed(&path.join("name"), ROOT_HINT)? == "dram" {
                zones.drams.insert(socket, path.clone());
            }
        }
    }
    if zones.packages.is_empty() {
        return Err(EnergyError::NoPowercapZones { path: class_dir.to_owned() });
    }
    Ok(zones)
}

impl PowercapSource {
    pub fn open(sysfs_root: &Path, topo: &Topology, dram: bool, psys: bool) -> Result<Self, EnergyError> {
        let class_dir = sysfs_root.join("class/powercap");
        let mut zones = scan_zones(&class_dir)?;
        let mut sockets = Vec::with_capacity(topo.socket_count());
        for socket in topo.sockets() {
            let missing = |zone| EnergyError::MissingZone { zone, socket, path: class_dir.clone() };
            let package = open_zone(&zones.packages.remove(&socket).ok_or_else(|| missing("package"))?)?;
            let dram = match dram {
                true => Some(open_zone(&zones.drams.remove(&socket).ok_or_else(|| missing("dram"))?)?),
                false => None,
            };
            sockets.push(SocketDomains { socket, package, dram });
        }
        let psys = match (psys, zones.psys) {
            (true, Some(dir)) => Some(open_zone(&dir)?),
            (true, None) => return Err(EnergyError::MissingZone { zone: "psys", socket: 0, path: class_dir }),
            (false, _) => None,
        };
        Ok(Domains::new(sockets, psys))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::energy::{CycleUtilisation, EnergySource};

    /// Writes a zone directory `class/powercap/<zone>` with `name`, `energy_uj` and range.
    pub(crate) fn write_zone(sysfs: &Path, zone: &str, name: &str, energy_uj: u64, range_uj: u64) -> PathBuf {
        let dir = sysfs.join("class/powercap").join(zone);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("name"), format!("{name}\n")).unwrap();
        fs::write(dir.join("energy_uj"), format!("{energy_uj}\n")).unwrap();
        fs::write(dir.join("max_energy_range_uj"), format!("{range_uj}\n")).unwrap();
        dir.join("energy_uj")
    }

    fn set(path: &Path, energy_uj: u64) {
        fs::write(path, format!("{energy_uj}\n")).unwrap();
    }

    fn util() -> CycleUtilisation {
        CycleUtilisation::default()
    }

    #[test]
    fn two_sockets_matched_by_name_not_number() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path();
        // Socket 1's package sits at intel-rapl:2 and psys at intel-rapl:1, as on some laptops/servers.
        let p0 = write_zone(sys, "intel-rapl:0", "package-0", 1_000, 1_000_000);
        let p1 = write_zone(sys, "intel-rapl:2", "package-1", 5_000, 1_000_000);
        write_zone(sys, "intel-rapl:1", "psys", 0, 1_000_000);
        write_zone(sys, "intel-rapl:0:0", "core", 0, 1_000_000);
        let topo = Topology::from_pairs([(0, 0), (1, 1)]);
        let mut source = PowercapSource::open(sys, &topo, false, false).unwrap();
        set(&p0, 1_400);
        set(&p1, 5_900);
        let read = source.read(&util()).unwrap();
        assert_eq!(read.iter().map(|s| (s.socket, s.energy_uj)).collect::<Vec<_>>(), vec![(0, 400.0), (1, 900.0)]);
        assert!(read.iter().all(|s| !s.flagged && s.dram_energy_uj.is_none() && s.psys_energy_uj.is_none()));
    }

    #[test]
    fn wraparound_in_the_middle_of_a_run() {
        let dir = tempfile::tempdir().unwrap();
        let p0 = write_zone(dir.path(), "intel-rapl:0", "package-0", 990_000, 1_000_000);
        let topo = Topology::from_pairs([(0, 0)]);
        let mut source = PowercapSource::open(dir.path(), &topo, false, false).unwrap();
        let mut seen = Vec::new();
        for now in [995_000, 5_000, 25_000] {
            set(&p0, now);
            seen.push(source.read(&util()).unwrap()[0].energy_uj);
        }
        assert_eq!(seen, vec![5_000.0, 10_000.0, 20_000.0]);
    }

    #[test]
    fn dram_and_psys_are_opt_in_and_dram_joins_e_s() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path();
        let p0 = write_zone(sys, "intel-rapl:0", "package-0", 0, 1 << 40);
        let d0 = write_zone(sys, "intel-rapl:0:1", "dram", 0, 1 << 40);
        let ps = write_zone(sys, "intel-rapl:1", "psys", 0, 1 << 40);
        let topo = Topology::from_pairs([(0, 0)]);
        let mut without = PowercapSource::open(sys, &topo, false, false).unwrap();
        let mut with = PowercapSource::open(sys, &topo, true, true).unwrap();
        set(&p0, 700);
        set(&d0, 200);
        set(&ps, 1_500);
        let plain = without.read(&util()).unwrap()[0];
        let full = with.read(&util()).unwrap()[0];
        assert_eq!(plain.energy_uj, 700.0);
        assert_eq!(full.energy_uj, 900.0);
        assert_eq!(full.dram_energy_uj, Some(200.0));
        assert_eq!(full.psys_energy_uj, Some(1_500.0));
    }

    #[test]
    fn missing_tree_and_missing_socket_zone_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let topo = Topology::from_pairs([(0, 0), (1, 1)]);
        let err = PowercapSource::open(dir.path(), &topo, false, false).unwrap_err();
        assert!(matches!(err, EnergyError::NoPowercapZones { .. }), "{err}");
        write_zone(dir.path(), "intel-rapl:0", "package-0", 0, 100);
        let err = PowercapSource::open(dir.path(), &topo, false, false).unwrap_err();
        assert!(err.to_string().contains("package zone for socket 1"), "{err}");
        let err = PowercapSource::open(dir.path(), &Topology::from_pairs([(0, 0)]), true, false).unwrap_err();
        assert!(err.to_string().contains("dram zone for socket 0"), "{err}");
    }

    /// We run as root, so chmod cannot deny a read: a directory where `energy_uj` should be
    /// gives the same kind of failure (the open succeeds, the read fails) and the same path.
    #[test]
    fn unreadable_energy_uj_names_the_file_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let energy = write_zone(dir.path(), "intel-rapl:0", "package-0", 0, 100);
        fs::remove_file(&energy).unwrap();
        fs::create_dir(&energy).unwrap();
        let err = PowercapSource::open(dir.path(), &Topology::from_pairs([(0, 0)]), false, false).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&energy.display().to_string()) && msg.contains("run as root"), "{msg}");
    }

    #[test]
    fn backwards_counter_reading_beyond_range_is_flagged_as_zero() {
        let dir = tempfile::tempdir().unwrap();
        // A zone reporting a value beyond its own range, then a lower value: no wrap explains it.
        let p0 = write_zone(dir.path(), "intel-rapl:0", "package-0", 5_000, 1_000);
        let mut source = PowercapSource::open(dir.path(), &Topology::from_pairs([(0, 0)]), false, false).unwrap();
        set(&p0, 100);
        let read = source.read(&util()).unwrap()[0];
        assert!(read.flagged);
        assert_eq!(read.energy_uj, 0.0);
    }
}
