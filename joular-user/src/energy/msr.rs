//! RAPL model-specific registers through `/dev/cpu/N/msr` (the `msr` module), read on the
//! first CPU of each socket. The energy fields are 32-bit and wrap every few minutes under
//! load, so a cycle must stay well under that (one wrap per read is handled).
//!
//! Intel (SDM vol. 4): MSR_RAPL_POWER_UNIT 0x606, MSR_PKG_ENERGY_STATUS 0x611,
//! MSR_DRAM_ENERGY_STATUS 0x619, MSR_PLATFORM_ENERGY_STATUS 0x64D (PP0 0x639 is a subset of the
//! package and not read). AMD family 17h+ (and Hygon): MSR_AMD_RAPL_POWER_UNIT 0xC0010299,
//! MSR_AMD_PKG_ENERGY_STATUS 0xC001029B (the per-core 0xC001029A is not read). Some Intel
//! servers count DRAM in a fixed 15.3 µJ unit rather than the package unit; powercap knows
//! which, so prefer it where it exists.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::cpuinfo::CpuInfo;
use super::domains::{Domain, DomainCounter, Domains, SocketDomains};
use super::error::{read_error, EnergyError, ROOT_HINT};
use super::{SourceKind, Topology};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Registers {
    vendor: &'static str,
    unit: u64,
    package: u64,
    dram: Option<u64>,
    psys: Option<u64>,
}

const INTEL: Registers =
    Registers { vendor: "Intel", unit: 0x606, package: 0x611, dram: Some(0x619), psys: Some(0x64D) };
const AMD: Registers = Registers { vendor: "AMD", unit: 0xC001_0299, package: 0xC001_029B, dram: None, psys: None };

/// The energy fields are the low 32 bits and wrap at 2^32 counts.
const ENERGY_RANGE: u64 = 1 << 32;

fn registers_for(vendor: &str, cpuinfo: &Path) -> Result<Registers, EnergyError> {
    match vendor {
        "GenuineIntel" => Ok(INTEL),
        "AuthenticAMD" | "HygonGenuine" => Ok(AMD),
        _ => Err(EnergyError::UnknownVendor { vendor: vendor.to_owned(), path: cpuinfo.to_owned() }),
    }
}

/// µJ per count from the unit register: bits 12:8 hold the energy status unit, 1/2^ESU J.
fn uj_per_count(unit_register: u64) -> f64 {
    let esu = (unit_register >> 8) & 0x1f;
    1e6 / (1u64 << esu) as f64
}

/// An open MSR device of one CPU.
#[derive(Debug)]
struct MsrFile {
    file: File,
    path: PathBuf,
}

impl MsrFile {
    fn open(dev_root: &Path, cpu: u32) -> Result<Self, EnergyError> {
        let path = dev_root.join(format!("cpu/{cpu}/msr"));
        match File::open(&path) {
            Ok(file) => Ok(Self { file, path }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(EnergyError::MsrMissing { path }),
            Err(e) => Err(read_error(path, e, ROOT_HINT)),
        }
    }

    /// The msr driver maps the register number to the file offset.
    fn read(&self, register: u64) -> Result<u64, EnergyError> {
        let mut buf = [0u8; 8];
        self.file.read_exact_at(&mut buf, register).map_err(|e| read_error(&self.path, e, ROOT_HINT))?;
        Ok(u64::from_le_bytes(buf))
    }
}

/// One energy status register of a CPU's device; the devices are shared by the domains of a
/// socket (and psys reads through the first socket's).
#[derive(Debug)]
pub struct Register {
    msr: Arc<MsrFile>,
    register: u64,
}

impl DomainCounter for Register {
    const KIND: SourceKind = SourceKind::Msr;

    fn read_count(&mut self) -> Result<u64, EnergyError> {
        Ok(self.msr.read(self.register)? & (ENERGY_RANGE - 1))
    }
}

fn open_register(msr: &Arc<MsrFile>, register: u64, uj_per_count: f64) -> Result<Domain<Register>, EnergyError> {
    Domain::open(Register { msr: Arc::clone(msr), register }, Some(ENERGY_RANGE), uj_per_count)
}

/// RAPL through the MSR devices: one register per domain, read on the first CPU of a socket.
pub type MsrSource = Domains<Register>;

impl MsrSource {
    pub fn open(
        dev_root: &Path,
        proc_root: &Path,
        topo: &Topology,
        dram: bool,
        psys: bool,
    ) -> Result<Self, EnergyError> {
        let cpuinfo_path = proc_root.join("cpuinfo");
        let vendor = CpuInfo::read(proc_root)?.vendor.unwrap_or_default();
        let regs = registers_for(&vendor, &cpuinfo_path)?;
        let unsupported = |domain| EnergyError::MsrDomainUnsupported { domain, vendor: regs.vendor };
        let dram_register = dram.then(|| regs.dram.ok_or_else(|| unsupported("dram"))).transpose()?;
        let psys_register = psys.then(|| regs.psys.ok_or_else(|| unsupported("psys"))).transpose()?;

        let mut sockets = Vec::with_capacity(topo.socket_count());
        // The first socket's device and unit, which the platform counter is read through.
        let mut first = None;
        for socket in topo.sockets() {
            let Some(&cpu) = topo.cpus_of(socket).first() else { continue };
            let msr = Arc::new(MsrFile::open(dev_root, cpu)?);
            let uj_per_count = uj_per_count(msr.read(regs.unit)?);
            let package = open_register(&msr, regs.package, uj_per_count)?;
            let dram = dram_register.map(|r| open_register(&msr, r, uj_per_count)).transpose()?;
            sockets.push(SocketDomains { socket, package, dram });
            first.get_or_insert((msr, uj_per_count));
        }
        let psys = match (psys_register, &first) {
            (Some(register), Some((msr, uj_per_count))) => Some(open_register(msr, register, *uj_per_count)?),
            _ => None,
        };
        Ok(Domains::new(sockets, psys))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::{CycleUtilisation, EnergySource};
    use std::fs::{self, OpenOptions};

    /// Writes `value` at offset `register` of a sparse fake `cpu/N/msr` file.
    fn set_msr(dev: &Path, cpu: u32, register: u64, value: u64) {
        let dir = dev.join(format!("cpu/{cpu}"));
        fs::create_dir_all(&dir).unwrap();
        let file = OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("msr")).unwrap();
        file.write_all_at(&value.to_le_bytes(), register).unwrap();
    }

    fn write_cpuinfo(proc: &Path, vendor: &str) {
        fs::create_dir_all(proc).unwrap();
        fs::write(proc.join("cpuinfo"), format!("processor\t: 0\nvendor_id\t: {vendor}\n")).unwrap();
    }

    /// ESU 14 → 61.035 µJ per count (a common Intel value); 16 → 15.26 µJ (AMD).
    const INTEL_UNIT: u64 = 0x000A_0E03;
    const AMD_UNIT: u64 = 0x000A_1003;

    #[test]
    fn energy_unit_decoding() {
        assert!((uj_per_count(INTEL_UNIT) - 1e6 / 16384.0).abs() < 1e-12);
        assert!((uj_per_count(AMD_UNIT) - 1e6 / 65536.0).abs() < 1e-12);
    }

    #[test]
    fn intel_two_sockets_with_wrap_mid_run() {
        let dir = tempfile::tempdir().unwrap();
        let (dev, proc) = (dir.path().join("dev"), dir.path().join("proc"));
        write_cpuinfo(&proc, "GenuineIntel");
        // Socket 0 is CPUs {0, 2}, socket 1 is {1, 3}: the first CPU of each is read.
        let topo = Topology::from_pairs([(0, 0), (1, 1), (2, 0), (3, 1)]);
        for cpu in [0, 1] {
            set_msr(&dev, cpu, INTEL.unit, INTEL_UNIT);
        }
        // High bits above the 32-bit field must be ignored.
        set_msr(&dev, 0, INTEL.package, (7 << 32) | (u32::MAX as u64 - 99));
        set_msr(&dev, 1, INTEL.package, 1_000);
        let mut source = MsrSource::open(&dev, &proc, &topo, false, false).unwrap();
        set_msr(&dev, 0, INTEL.package, (7 << 32) | 400);
        set_msr(&dev, 1, INTEL.package, 1_250);
        let read = source.read(&CycleUtilisation::default()).unwrap();
        let unit = uj_per_count(INTEL_UNIT);
        assert_eq!(read.len(), 2);
        assert!((read[0].energy_uj - 500.0 * unit).abs() < 1e-6, "{read:?}");
        assert!((read[1].energy_uj - 250.0 * unit).abs() < 1e-6, "{read:?}");
        assert!(read.iter().all(|s| !s.flagged));
    }

    #[test]
    fn amd_reads_its_own_registers_and_refuses_dram() {
        let dir = tempfile::tempdir().unwrap();
        let (dev, proc) = (dir.path().join("dev"), dir.path().join("proc"));
        write_cpuinfo(&proc, "AuthenticAMD");
        let topo = Topology::from_pairs([(0, 0)]);
        set_msr(&dev, 0, AMD.unit, AMD_UNIT);
        set_msr(&dev, 0, AMD.package, 10);
        let mut source = MsrSource::open(&dev, &proc, &topo, false, false).unwrap();
        set_msr(&dev, 0, AMD.package, 65_546);
        let read = source.read(&CycleUtilisation::default()).unwrap()[0];
        assert!((read.energy_uj - 1e6).abs() < 1e-6, "{read:?}");
        let err = MsrSource::open(&dev, &proc, &topo, true, false).unwrap_err();
        assert!(err.to_string().contains("dram on AMD"), "{err}");
    }

    #[test]
    fn missing_device_hints_modprobe() {
        let dir = tempfile::tempdir().unwrap();
        write_cpuinfo(dir.path(), "GenuineIntel");
        let err = MsrSource::open(&dir.path().join("dev"), dir.path(), &Topology::from_pairs([(0, 0)]), false, false)
            .unwrap_err();
        assert!(err.to_string().contains("modprobe msr"), "{err}");
    }

    /// Root ignores file modes, so a directory stands in for an unreadable device: it opens,
    /// and the read fails (EISDIR), like a read the msr driver refuses.
    #[test]
    fn unreadable_device_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        write_cpuinfo(dir.path(), "GenuineIntel");
        let msr = dir.path().join("dev/cpu/0/msr");
        fs::create_dir_all(&msr).unwrap();
        let err = MsrSource::open(&dir.path().join("dev"), dir.path(), &Topology::from_pairs([(0, 0)]), false, false)
            .unwrap_err();
        assert!(err.to_string().contains(&msr.display().to_string()), "{err}");
    }

    #[test]
    fn unknown_vendor_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_cpuinfo(dir.path(), "CentaurHauls");
        let err = MsrSource::open(dir.path(), dir.path(), &Topology::from_pairs([(0, 0)]), false, false).unwrap_err();
        assert!(err.to_string().contains("CentaurHauls"), "{err}");
    }
}
