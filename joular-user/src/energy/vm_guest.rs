//! Energy of a virtual machine measured on its host, read in the guest. The host's
//! `serve --vm-energy-dir` (or Scaphandre's qemu exporter) writes each VM's energy as a powercap
//! tree, shared into the guest (virtiofs/9p), and JoularJX's VM mode reads the VM's watts from a
//! file the host writes. In the guest the whole VM is one "socket": the host's figure is all of
//! the VM's CPUs together, split over the guest's threads as a socket's is.
//!
//! The files are the host's, or whoever can write the shared directory: they are read as any
//! file a target controls, through [`OutDir`] (no symlink followed below the root the user
//! named, regular files only, bounded in size), and their content is range-checked.

use std::io;
use std::path::{Path, PathBuf};

use super::domains::{Domain, DomainCounter, Domains, SocketDomains};
use super::error::{read_error, EnergyError};
use super::{CycleUtilisation, EnergySource, SocketEnergy, SourceKind};
use crate::safe_write::{Modes, OutDir};

/// A VM drawing more than this is a corrupt file, not a measurement.
const MAX_VM_POWER_W: f64 = 10_000.0;
/// A counter or watts file holds one number; sysfs reports its files as one page, so a tree
/// copied from a real `/sys/class/powercap` still reads.
const MAX_NUMBER_FILE_BYTES: u64 = 4096;
/// The zone the host writes: the VM as package 0 (Scaphandre's layout).
const ZONE: &str = "intel-rapl:0";
/// `serve --vm-energy-dir` writes its own energy source line beside each VM's figures; other
/// exporters write none.
const HOST_SOURCE_FILE: &str = "energy_source";
const MAX_HOST_SOURCE_BYTES: u64 = 4096;

/// What the host says its figures are, when it says (`None` for Scaphandre's trees and
/// JoularJX's files): one line, made printable, bounded.
fn host_source(dir: &OutDir) -> Option<String> {
    let bytes = dir.read(HOST_SOURCE_FILE, MAX_HOST_SOURCE_BYTES).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let line = text.lines().next().unwrap_or("").trim();
    (!line.is_empty()).then(|| crate::printable::printable(line).into_owned())
}

/// "measured on the host", or "ESTIMATED on the host" when the host's own source is its model;
/// with the host's source line when it gave one.
fn host_label(host_source: Option<&str>, what: String) -> String {
    match host_source {
        Some(line) if host_estimates(Some(line)) => format!("ESTIMATED on the host: {what}; the host's source: {line}"),
        Some(line) => format!("measured on the host: {what}; the host's source: {line}"),
        None => format!("measured on the host: {what}"),
    }
}

/// The host's figures come from its power model (`serve`'s line starts with the source's name).
fn host_estimates(host_source: Option<&str>) -> bool {
    host_source.is_some_and(|line| line.starts_with("model"))
}

/// Reads one small file of `dir` as a trimmed string.
fn read_number_file(dir: &OutDir, name: &str) -> Result<String, EnergyError> {
    let bytes = dir.read(name, MAX_NUMBER_FILE_BYTES).map_err(|e| read_error(dir.join(name), e, ""))?;
    Ok(String::from_utf8_lossy(&bytes).trim().to_owned())
}

/// The host's `intel-rapl:0/energy_uj` for this VM, in µJ.
#[derive(Debug)]
pub struct HostZoneFile {
    zone: OutDir,
}

impl DomainCounter for HostZoneFile {
    const KIND: SourceKind = SourceKind::Powercap;

    fn read_count(&mut self) -> Result<u64, EnergyError> {
        let content = read_number_file(&self.zone, "energy_uj")?;
        content.parse().map_err(|_| EnergyError::Parse { path: self.zone.join("energy_uj"), content, expected: "µJ" })
    }
}

/// `--energy-source powercap --powercap-root DIR`: the host's tree for this VM,
/// `DIR/intel-rapl:0/{name,energy_uj,max_energy_range_uj}`, as the guest's only socket.
#[derive(Debug)]
pub struct HostPowercapSource {
    counter: Domains<HostZoneFile>,
    root: PathBuf,
    host_source: Option<String>,
}

impl HostPowercapSource {
    /// `root` holds `intel-rapl:0`. A `name` other than `package-0` is refused; a tree without
    /// one is read as package 0; without `max_energy_range_uj` the counter is taken never to
    /// wrap (a step back is then flagged, never negative).
    pub fn open(root: &Path) -> Result<Self, EnergyError> {
        let no_tree = |e: io::Error| EnergyError::NoHostTree { path: root.to_owned(), why: e.to_string() };
        let root_dir = OutDir::open_to_read(root, Modes::for_caller()).map_err(no_tree)?;
        let zone = root_dir.open_subdir(ZONE).map_err(no_tree)?;
        if !zone.has_file("energy_uj") {
            return Err(no_tree(io::Error::new(io::ErrorKind::NotFound, format!("no {ZONE}/energy_uj file"))));
        }
        if zone.has_file("name") {
            let name = read_number_file(&zone, "name")?;
            if name != "package-0" {
                return Err(EnergyError::Parse { path: zone.join("name"), content: name, expected: "package-0" });
            }
        }
        let range = match zone.has_file("max_energy_range_uj") {
            true => {
                let content = read_number_file(&zone, "max_energy_range_uj")?;
                let path = zone.join("max_energy_range_uj");
                Some(content.parse::<u64>().ok().filter(|r| *r > 0).ok_or(EnergyError::Parse {
                    path,
                    content,
                    expected: "µJ, above 0",
                })?)
            }
            false => None,
        };
        let package = Domain::open(HostZoneFile { zone }, range, 1.0)?;
        let counter = Domains::new(vec![SocketDomains { socket: 0, package, dram: None }], None);
        Ok(Self { counter, root: root.to_owned(), host_source: host_source(&root_dir) })
    }
}

impl EnergySource for HostPowercapSource {
    fn kind(&self) -> SourceKind {
        SourceKind::Powercap
    }

    fn estimated(&self) -> bool {
        host_estimates(self.host_source.as_deref())
    }

    fn detail(&self) -> String {
        let what = format!("the whole VM's energy, read from the powercap tree {}", self.root.display());
        host_label(self.host_source.as_deref(), what)
    }

    fn read(&mut self, util: &CycleUtilisation) -> Result<Vec<SocketEnergy>, EnergyError> {
        self.counter.read(util)
    }
}

/// `--energy-source vm-power-file:PATH`: the VM's power in watts, one number the host rewrites
/// (JoularJX's VM mode). A cycle's energy is that power times the cycle's length.
#[derive(Debug)]
pub struct VmPowerFileSource {
    dir: OutDir,
    name: String,
    path: PathBuf,
    host_source: Option<String>,
}

impl VmPowerFileSource {
    /// Checks the file reads as watts now, so a wrong path fails before anything is loaded.
    pub fn open(path: &Path) -> Result<Self, EnergyError> {
        let bad_path = |why: String| EnergyError::NoVmPowerFile { path: path.to_owned(), why };
        let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
            return Err(bad_path("not a file name".into()));
        };
        let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
        let dir = OutDir::open_to_read(parent, Modes::for_caller()).map_err(|e| bad_path(e.to_string()))?;
        if !dir.has_file(name) {
            return Err(bad_path("no such regular file".into()));
        }
        let host_source = host_source(&dir);
        let source = Self { dir, name: name.to_owned(), path: path.to_owned(), host_source };
        source.power_w()?;
        Ok(source)
    }

    fn power_w(&self) -> Result<f64, EnergyError> {
        let content = read_number_file(&self.dir, &self.name)?;
        content.parse::<f64>().ok().filter(|w| w.is_finite() && (0.0..=MAX_VM_POWER_W).contains(w)).ok_or_else(|| {
            EnergyError::Parse { path: self.path.clone(), content, expected: "the VM's power in watts, 0 to 10000" }
        })
    }
}

impl EnergySource for VmPowerFileSource {
    fn kind(&self) -> SourceKind {
        SourceKind::VmPowerFile
    }

    fn estimated(&self) -> bool {
        host_estimates(self.host_source.as_deref())
    }

    fn detail(&self) -> String {
        host_label(
            self.host_source.as_deref(),
            format!("the whole VM's watts, read from {} each cycle", self.path.display()),
        )
    }

    fn read(&mut self, util: &CycleUtilisation) -> Result<Vec<SocketEnergy>, EnergyError> {
        // W · ns = nJ; / 1000 = µJ.
        let energy_uj = self.power_w()? * util.duration_ns as f64 / 1e3;
        Ok(vec![SocketEnergy { socket: 0, energy_uj, ..Default::default() }])
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::energy::Topology;

    fn cycle(duration_ns: u64) -> CycleUtilisation {
        CycleUtilisation::new(&[], &Topology::from_pairs([(0, 0)]), duration_ns)
    }

    fn write_vm_tree(root: &Path, name: Option<&str>, energy_uj: u64, range_uj: Option<u64>) -> PathBuf {
        let zone = root.join(ZONE);
        fs::create_dir_all(&zone).unwrap();
        if let Some(name) = name {
            fs::write(zone.join("name"), format!("{name}\n")).unwrap();
        }
        if let Some(range) = range_uj {
            fs::write(zone.join("max_energy_range_uj"), format!("{range}\n")).unwrap();
        }
        fs::write(zone.join("energy_uj"), format!("{energy_uj}\n")).unwrap();
        zone.join("energy_uj")
    }

    #[test]
    fn the_hosts_tree_is_the_vms_one_socket_and_wraps() {
        let dir = tempfile::tempdir().unwrap();
        let energy = write_vm_tree(dir.path(), Some("package-0"), 900, Some(1_000));
        let mut source = HostPowercapSource::open(dir.path()).unwrap();
        fs::write(&energy, "950\n").unwrap();
        assert_eq!(source.read(&cycle(1)).unwrap()[0].energy_uj, 50.0);
        // 950 → 1000 (50), then 0 → 100 (100).
        fs::write(&energy, "100\n").unwrap();
        let read = source.read(&cycle(1)).unwrap();
        assert_eq!((read.len(), read[0].socket, read[0].energy_uj, read[0].flagged), (1, 0, 150.0, false));
        assert!(!source.estimated());
        assert_eq!(source.kind(), SourceKind::Powercap);
        assert!(source.detail().contains("measured on the host"), "{}", source.detail());
    }

    #[test]
    fn without_max_energy_range_a_step_back_is_flagged_not_negative() {
        let dir = tempfile::tempdir().unwrap();
        let energy = write_vm_tree(dir.path(), None, 5, None);
        let mut source = HostPowercapSource::open(dir.path()).unwrap();
        fs::write(&energy, "25\n").unwrap();
        assert_eq!(source.read(&cycle(1)).unwrap()[0].energy_uj, 20.0);
        fs::write(&energy, "3\n").unwrap();
        let read = source.read(&cycle(1)).unwrap()[0];
        assert_eq!((read.energy_uj, read.flagged), (0.0, true));
        fs::write(&energy, "10\n").unwrap();
        assert_eq!(source.read(&cycle(1)).unwrap()[0].energy_uj, 7.0);
    }

    #[test]
    fn a_wrong_name_garbage_or_a_missing_tree_is_refused_with_the_fix() {
        let other = tempfile::tempdir().unwrap();
        write_vm_tree(other.path(), Some("psys"), 5, None);
        assert!(HostPowercapSource::open(other.path()).unwrap_err().to_string().contains("package-0"));
        let empty = tempfile::tempdir().unwrap();
        let err = HostPowercapSource::open(empty.path()).unwrap_err();
        assert!(matches!(err, EnergyError::NoHostTree { .. }) && err.to_string().contains("--vm-energy-dir"), "{err}");
        let zero_range = tempfile::tempdir().unwrap();
        write_vm_tree(zero_range.path(), None, 5, Some(0));
        assert!(HostPowercapSource::open(zero_range.path()).is_err());
        let garbage = tempfile::tempdir().unwrap();
        let energy = write_vm_tree(garbage.path(), None, 5, Some(1_000));
        let mut source = HostPowercapSource::open(garbage.path()).unwrap();
        fs::write(&energy, "lots\n").unwrap();
        assert!(source.read(&cycle(1)).unwrap_err().to_string().contains("lots"));
        fs::write(&energy, vec![b'1'; 5_000]).unwrap();
        assert!(source.read(&cycle(1)).unwrap_err().to_string().contains("over the limit"));
    }

    /// Whoever can write the shared directory may plant links: neither the zone directory nor
    /// its counter is followed.
    #[test]
    fn planted_symlinks_in_the_tree_are_not_followed() {
        let elsewhere = tempfile::tempdir().unwrap();
        write_vm_tree(elsewhere.path(), Some("package-0"), 5, Some(1_000));
        let linked_zone = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join(ZONE), linked_zone.path().join(ZONE)).unwrap();
        assert!(matches!(HostPowercapSource::open(linked_zone.path()), Err(EnergyError::NoHostTree { .. })));
        let linked_counter = tempfile::tempdir().unwrap();
        let energy = write_vm_tree(linked_counter.path(), None, 5, None);
        let mut source = HostPowercapSource::open(linked_counter.path()).unwrap();
        fs::remove_file(&energy).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join(ZONE).join("energy_uj"), &energy).unwrap();
        assert!(source.read(&cycle(1)).is_err());
    }

    #[test]
    fn the_power_file_gives_watts_times_the_cycle_and_refuses_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("power_w");
        fs::write(&path, "12.5\n").unwrap();
        let mut source = VmPowerFileSource::open(&path).unwrap();
        assert_eq!(source.read(&cycle(2_000_000_000)).unwrap()[0].energy_uj, 25e6);
        assert_eq!(source.kind().as_str(), "vm-power-file");
        assert!(source.detail().contains("measured on the host"), "{}", source.detail());
        for garbage in ["-3\n", "1e9\n", "NaN\n", "inf\n", "12 W\n", ""] {
            fs::write(&path, garbage).unwrap();
            assert!(source.read(&cycle(1)).unwrap_err().to_string().contains("watts"), "{garbage:?}");
        }
        fs::write(&path, vec![b'1'; 5_000]).unwrap();
        assert!(source.read(&cycle(1)).is_err());
        let err = VmPowerFileSource::open(&dir.path().join("missing")).unwrap_err();
        assert!(matches!(err, EnergyError::NoVmPowerFile { .. }), "{err}");
        let err = VmPowerFileSource::open(&dir.path().join("no-dir/power_w")).unwrap_err();
        assert!(matches!(err, EnergyError::NoVmPowerFile { .. }), "{err}");
        std::os::unix::fs::symlink(&path, dir.path().join("link")).unwrap();
        assert!(VmPowerFileSource::open(&dir.path().join("link")).is_err());
    }

    /// `serve --vm-energy-dir` says what its figures are: a host that estimates makes the
    /// guest's figures estimated too, and the line is shown made printable.
    #[test]
    fn the_hosts_own_source_line_is_passed_on() {
        let dir = tempfile::tempdir().unwrap();
        write_vm_tree(dir.path(), Some("package-0"), 5, Some(1_000));
        fs::write(dir.path().join("power_w"), "3\n").unwrap();
        let measured = HostPowercapSource::open(dir.path()).unwrap();
        assert!(!measured.estimated() && !measured.detail().contains("the host's source"), "{}", measured.detail());
        fs::write(dir.path().join(HOST_SOURCE_FILE), "powercap (measured, 1 socket(s))\n").unwrap();
        let measured = HostPowercapSource::open(dir.path()).unwrap();
        assert!(!measured.estimated());
        assert!(
            measured.detail().ends_with("; the host's source: powercap (measured, 1 socket(s))"),
            "{}",
            measured.detail()
        );
        fs::write(dir.path().join(HOST_SOURCE_FILE), "model (ESTIMATED: \x1b[31m CCF)\n").unwrap();
        for source in [
            Box::new(HostPowercapSource::open(dir.path()).unwrap()) as Box<dyn EnergySource>,
            Box::new(VmPowerFileSource::open(&dir.path().join("power_w")).unwrap()),
        ] {
            let detail = source.detail();
            assert!(source.estimated() && detail.starts_with("ESTIMATED on the host"), "{detail}");
            assert!(detail.contains("\\x1b[31m") && !detail.contains('\x1b'), "{detail}");
        }
    }
}
