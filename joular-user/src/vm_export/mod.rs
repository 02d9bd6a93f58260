//! `serve --vm-energy-dir DIR`: each virtual machine running on this host gets its attributed
//! energy written where its guest can read it, in the layouts the guest-side tools read:
//!
//! - `DIR/<vm-name>/intel-rapl:0/{name,energy_uj,max_energy_range_uj}`, Scaphandre's powercap
//!   tree for a QEMU guest: a monotonic counter in µJ that wraps at `max_energy_range_uj`, as
//!   RAPL's does (read in the guest by `joular-ebpf --powercap-root DIR/<vm-name>`);
//! - `DIR/<vm-name>/power_w`, the last cycle's watts, JoularJX's VM-mode file (read by
//!   `joular-ebpf --energy-source vm-power-file:DIR/<vm-name>/power_w`);
//! - `DIR/<vm-name>/energy_source`, what the host's figures are (its energy source line), so a
//!   guest can say whether the host measured or estimated.
//!
//! DIR is typically shared into the guests (virtiofs, 9p), so whoever may write it, and the VM
//! names (which the VM's command line chooses), are untrusted: names are sanitized and
//! bounded ([`identify`]), files are written through directory descriptors without following
//! links, a directory found in place must be ours, and every file is replaced atomically (a
//! temporary file renamed over it), so a reader never sees half a number.

mod counter;
mod identify;

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::collect::ThreadExit;
use crate::fleet::{ProcFs, ProcessTable};
// The series this export hands to the metrics registry, and the bound both keep.
pub use crate::fleet::metrics::{VmSeries, MAX_VMS};
use crate::model::CycleReport;
use crate::safe_write::{Modes, OutDir};

pub use counter::{ExportCounter, DEFAULT_RANGE_UJ};
pub use identify::{sanitize, vm_name, VmKind, MAX_VM_NAME_BYTES};

/// A VM's command line read at most (`/proc/<pid>/cmdline`).
const MAX_CMDLINE_BYTES: u64 = 64 << 10;
/// `energy_uj` read back at most: one number.
const MAX_COUNTER_FILE_BYTES: u64 = 64;
const ZONE: &str = "intel-rapl:0";

struct VmState {
    kind: VmKind,
    pid: u32,
    dir: OutDir,
    zone: OutDir,
    counter: ExportCounter,
    power_w: f64,
    /// The process still runs: its files are written each cycle.
    live: bool,
}

/// What a PID was found to be, for the process it held then (start tick).
type Identity = Option<(VmKind, String)>;

pub struct VmEnergyExport {
    root: OutDir,
    procs: ProcFs,
    proc_root: PathBuf,
    range_uj: u64,
    /// The host's energy source line, written beside each VM's counter.
    source_line: String,
    /// PID → (start tick, what it is), so a command line is read once per process.
    seen: HashMap<u32, (u32, Identity)>,
    vms: BTreeMap<String, VmState>,
    /// Names refused (over the cap, a directory not ours): warned once each, bounded.
    refused: BTreeMap<String, String>,
    /// Cycles' writes that failed (warned at the 1st, 2nd, 4th...).
    pub write_failures: u64,
}

impl VmEnergyExport {
    /// Opens (creating what is missing) the export directory with the safe-write rules of
    /// `--output`.
    pub fn open(dir: &Path, proc_root: &Path, modes: Modes, range_uj: u64, source_line: &str) -> io::Result<Self> {
        Ok(Self {
            root: OutDir::create_all(dir, modes)?,
            procs: ProcFs::new(proc_root.to_path_buf()),
            proc_root: proc_root.to_path_buf(),
            range_uj: range_uj.max(1),
            source_line: source_line.to_owned(),
            seen: HashMap::new(),
            vms: BTreeMap::new(),
            refused: BTreeMap::new(),
            write_failures: 0,
        })
    }

    /// Adds one cycle: every VM process's attributed energy to its counter, and rewrites the
    /// files of every running VM. Returns warnings to print (each cause once per VM name).
    pub fn on_cycle(&mut self, report: &CycleReport, starts: &HashMap<u32, u32>, exits: &[ThreadExit]) -> Vec<String> {
        let mut warnings = Vec::new();
        let duration_s = report.end_ns.saturating_sub(report.start_ns) as f64 / 1e9;
        let mut energy_by_vm: HashMap<String, f64> = HashMap::new();
        for p in &report.processes {
            let start = starts.get(&p.pid).copied().unwrap_or(0);
            let Some((kind, name)) = self.identify(p.pid, start, p.exe.as_deref()) else { continue };
            let Some(name) = self.track(kind, name, p.pid, &mut warnings) else { continue };
            *energy_by_vm.entry(name).or_default() += p.energy_uj;
        }
        for (name, vm) in self.vms.iter_mut().filter(|(_, vm)| vm.live) {
            let energy_uj = energy_by_vm.get(name).copied().unwrap_or(0.0);
            vm.counter.add(energy_uj);
            vm.power_w = if duration_s > 0.0 { energy_uj.max(0.0) * 1e-6 / duration_s } else { 0.0 };
            let written = write_number(&vm.zone, "energy_uj", &vm.counter.value_uj().to_string())
                .and_then(|()| write_number(&vm.dir, "power_w", &format!("{:.3}", vm.power_w)));
            if written.is_err() {
                self.write_failures += 1;
            }
            if let (Err(e), true) = (written, self.write_failures.is_power_of_two()) {
                warnings.push(format!("VM {name}: cannot write its energy under {}: {e}", vm.dir.path().display()));
            }
        }
        // After the write: a VM's last cycle counts.
        for e in exits.iter().filter(|e| e.process_ended) {
            self.seen.remove(&e.pid);
            for vm in self.vms.values_mut().filter(|vm| vm.live && vm.pid == e.pid) {
                vm.live = false;
                vm.power_w = 0.0;
                // The last power it drew is over; its counter stays where it is.
                let _ = write_number(&vm.dir, "power_w", "0");
            }
        }
        warnings
    }

    /// Every exported VM, for Prometheus.
    pub fn series(&self) -> Vec<VmSeries> {
        self.vms
            .iter()
            .map(|(name, vm)| VmSeries {
                name: name.clone(),
                hypervisor: vm.kind.as_str(),
                energy_j: vm.counter.total_uj() * 1e-6,
                power_w: vm.power_w,
            })
            .collect()
    }

    /// What PID `pid` is, read once per process: a hypervisor by its executable, then its
    /// name from its command line. A PID that changed hands during the read names nothing.
    fn identify(&mut self, pid: u32, start: u32, exe: Option<&str>) -> Identity {
        if let Some((seen_start, identity)) = self.seen.get(&pid) {
            if *seen_start == start {
                return identity.clone();
            }
        }
        let identity = exe.and_then(VmKind::of_executable).and_then(|kind| {
            let cmdline = read_cmdline(&self.proc_root, pid)?;
            let same = self.procs.start_ticks(pid).is_some_and(|t| start == 0 || t as u32 == start);
            same.then(|| (kind, vm_name(kind, &cmdline, pid)))
        });
        self.seen.insert(pid, (start, identity.clone()));
        identity
    }

    /// The name VM process `pid` is exported under, its directory opened (or made) at first
    /// sight. Two running VMs claiming one name: the later gets `<name>-<pid>`.
    fn track(&mut self, kind: VmKind, name: String, pid: u32, warnings: &mut Vec<String>) -> Option<String> {
        let name = match self.vms.get(&name) {
            Some(vm) if vm.live && vm.pid != pid => {
                let suffix = format!("-{pid}");
                let keep = MAX_VM_NAME_BYTES.saturating_sub(suffix.len()).min(name.len());
                format!("{}{suffix}", &name[..keep])
            }
            _ => name,
        };
        if let Some(vm) = self.vms.get_mut(&name) {
            if vm.pid == pid || !vm.live {
                // The same VM, or one that ended and started again under its name.
                vm.pid = pid;
                vm.kind = kind;
                vm.live = true;
                return Some(name);
            }
            return None;
        }
        if self.refused.contains_key(&name) {
            return None;
        }
        if self.vms.len() >= MAX_VMS {
            let ended = self.vms.iter().find(|(_, vm)| !vm.live).map(|(n, _)| n.clone());
            match ended {
                Some(ended) => drop(self.vms.remove(&ended)),
                None => {
                    self.refuse(&name, format!("more than {MAX_VMS} VMs are exported"), warnings);
                    return None;
                }
            }
        }
        match self.open_vm(kind, &name, pid) {
            Ok(vm) => {
                self.vms.insert(name.clone(), vm);
                Some(name)
            }
            Err(e) => {
                self.refuse(&name, e.to_string(), warnings);
                None
            }
        }
    }

    fn refuse(&mut self, name: &str, why: String, warnings: &mut Vec<String>) {
        if self.refused.len() < MAX_VMS {
            warnings.push(format!("VM {name}: its energy is not exported: {why}"));
            self.refused.insert(name.to_owned(), why);
        }
    }

    /// The VM's directory and zone, ours, and its counter resumed from what a reader last saw.
    fn open_vm(&self, kind: VmKind, name: &str, pid: u32) -> io::Result<VmState> {
        let dir = own_subdir(&self.root, name)?;
        let zone = own_subdir(&dir, ZONE)?;
        let previous_uj = match zone.has_file("energy_uj") {
            true => read_back(&zone)?,
            false => 0,
        };
        let counter = ExportCounter::resume(previous_uj, self.range_uj);
        write_number(&zone, "name", "package-0")?;
        write_number(&zone, "max_energy_range_uj", &counter.range_uj().to_string())?;
        write_number(&zone, "energy_uj", &counter.value_uj().to_string())?;
        write_number(&dir, "power_w", "0")?;
        write_number(&dir, "energy_source", &self.source_line)?;
        Ok(VmState { kind, pid, dir, zone, counter, power_w: 0.0, live: true })
    }
}

/// `name` below `parent`: made ours if missing; found in place, a directory of the caller's
/// (a symlink, anything but a directory, or someone else's directory is refused).
fn own_subdir(parent: &OutDir, name: &str) -> io::Result<OutDir> {
    let dir = match parent.open_subdir(name) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => parent.new_subdir(name)?,
        Err(e) => return Err(e),
    };
    let owner = dir.owner_uid()?;
    let me = nix::unistd::geteuid().as_raw();
    if owner != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} belongs to uid {owner}, not to this process (uid {me})", dir.path().display()),
        ));
    }
    Ok(dir)
}

/// The counter a reader last saw. Unreadable or not a number: the VM is not exported (starting
/// again from 0 would look to a reader like a wrap, a jump of almost the whole range).
fn read_back(zone: &OutDir) -> io::Result<u64> {
    let bytes = zone.read("energy_uj", MAX_COUNTER_FILE_BYTES)?;
    let text = String::from_utf8_lossy(&bytes);
    text.trim().parse().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} holds {:?}, not the counter written before: remove the directory to start it again",
                zone.join("energy_uj").display(),
                text.trim()
            ),
        )
    })
}

/// Replaces `name` with one line, atomically.
fn write_number(dir: &OutDir, name: &str, value: &str) -> io::Result<()> {
    let mut file = dir.replace(name)?;
    file.write_all(value.as_bytes())?;
    file.write_all(b"\n")?;
    file.commit()
}

fn read_cmdline(proc_root: &Path, pid: u32) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let file = std::fs::File::open(proc_root.join(pid.to_string()).join("cmdline")).ok()?;
    file.take(MAX_CMDLINE_BYTES).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

#[cfg(test)]
mod tests;
