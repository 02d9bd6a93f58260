//! Picking the energy source: `--energy-source` if given (no fallback: the user asked for
//! that one), else the first of powercap → perf → MSR → model that opens. The returned line
//! says what was chosen and why each earlier source was skipped, for printing at start.

use super::error::EnergyError;
use super::perf_pmu::{PerfOpener, SyscallOpener};
use super::{
    EnergyOptions, EnergySource, HostPowercapSource, ModelSource, MsrSource, PerfPmuSource, PowercapSource, SourceKind,
    Topology, VmPowerFileSource,
};

/// Opens the energy source for `opts` on this machine.
pub fn open_source(opts: &EnergyOptions, topo: &Topology) -> Result<(Box<dyn EnergySource>, String), EnergyError> {
    open_source_with(opts, topo, &SyscallOpener)
}

/// As [`open_source`], with the perf opener injectable for tests.
pub fn open_source_with(
    opts: &EnergyOptions,
    topo: &Topology,
    opener: &dyn PerfOpener,
) -> Result<(Box<dyn EnergySource>, String), EnergyError> {
    check_roots(opts)?;
    // A bad --tdp is a mistake even when a measured source wins: refuse it up front.
    if let Some(tdp_w) = opts.tdp_w.filter(|t| !(t.is_finite() && *t > 0.0)) {
        return Err(EnergyError::InvalidTdp { tdp_w });
    }
    if let Some(kind) = opts.source {
        let (source, detail) = open_one(kind, opts, topo, opener).map_err(|e| match vm_flag(opts) {
            Some(flag) => EnergyError::VmSourceUnavailable { flag, reason: Box::new(e) },
            None => EnergyError::Unavailable { kind, reason: Box::new(e) },
        })?;
        return Ok((source, format!("energy source: {kind}{detail} (chosen by --energy-source)")));
    }
    let mut skipped = Vec::new();
    for kind in SourceKind::AUTO_ORDER {
        match open_one(kind, opts, topo, opener) {
            Ok((source, detail)) => {
                let mut line = format!("energy source: {kind}{detail}");
                if !skipped.is_empty() {
                    line.push_str("; skipped ");
                    line.push_str(&skipped.join("; "));
                }
                return Ok((source, line));
            }
            // The model only fails on bad user input, which must not be skipped silently.
            Err(e) if kind == SourceKind::Model => return Err(e),
            Err(e) => skipped.push(format!("{kind}: {e}")),
        }
    }
    unreachable!("the model source ends the automatic order and either opens or errors")
}

/// The flag that asked for a VM's energy from its host, as the user gave it.
fn vm_flag(opts: &EnergyOptions) -> Option<String> {
    match (opts.source, &opts.powercap_root, &opts.vm_power_file) {
        (Some(SourceKind::Powercap), Some(root), _) => Some(format!("--powercap-root {}", root.display())),
        (Some(SourceKind::VmPowerFile), _, Some(path)) => {
            Some(format!("--energy-source vm-power-file:{}", path.display()))
        }
        _ => None,
    }
}

fn check_roots(opts: &EnergyOptions) -> Result<(), EnergyError> {
    let roots =
        [("sysfs", "--sysfs-root", "/sys", &opts.sysfs_root), ("procfs", "--proc-root", "/proc", &opts.proc_root)];
    for (what, flag, default, path) in roots {
        if !path.exists() {
            return Err(EnergyError::MissingRoot { what, flag, default, path: path.clone() });
        }
    }
    Ok(())
}

/// Opens one source; the string is what the start-up line adds after its name.
fn open_one(
    kind: SourceKind,
    opts: &EnergyOptions,
    topo: &Topology,
    opener: &dyn PerfOpener,
) -> Result<(Box<dyn EnergySource>, String), EnergyError> {
    let measured = format!(" (measured, {} socket(s))", topo.socket_count());
    Ok(match kind {
        SourceKind::VmPowerFile => {
            let path = opts
                .vm_power_file
                .as_deref()
                .ok_or_else(|| EnergyError::NoVmPowerFile { path: Default::default(), why: "no path given".into() })?;
            let source = VmPowerFileSource::open(path)?;
            let detail = format!(" ({}; the VM is one socket)", source.detail());
            (Box::new(source), detail)
        }
        SourceKind::Powercap => match &opts.powercap_root {
            Some(root) => {
                let source = HostPowercapSource::open(root)?;
                let detail = format!(" ({}; the VM is one socket)", source.detail());
                (Box::new(source), detail)
            }
            None => (Box::new(PowercapSource::open(&opts.sysfs_root, topo, opts.dram, opts.psys)?), measured),
        },
        SourceKind::Perf => {
            (Box::new(PerfPmuSource::open(&opts.sysfs_root, topo, opts.dram, opts.psys, opener)?), measured)
        }
        SourceKind::Msr => {
            (Box::new(MsrSource::open(&opts.dev_root, &opts.proc_root, topo, opts.dram, opts.psys)?), measured)
        }
        SourceKind::Model => {
            let model = ModelSource::open(&opts.sysfs_root, &opts.proc_root, topo, opts.tdp_w, opts.idle_power_w)?;
            let detail = format!(" (ESTIMATED: {})", model.description());
            (Box::new(model), detail)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::energy::perf_pmu::tests::{write_pmu, FakeOpener};
    use crate::energy::powercap::tests::write_zone;
    use crate::energy::CycleUtilisation;
    use std::fs;
    use std::path::Path;

    fn opts(root: &Path) -> EnergyOptions {
        let opts = EnergyOptions {
            sysfs_root: root.join("sys"),
            proc_root: root.join("proc"),
            dev_root: root.join("dev"),
            ..Default::default()
        };
        fs::create_dir_all(&opts.sysfs_root).unwrap();
        fs::create_dir_all(&opts.proc_root).unwrap();
        fs::write(opts.proc_root.join("cpuinfo"), "processor : 0\nvendor_id : GenuineIntel\nmodel name : Test CPU\n")
            .unwrap();
        opts
    }

    fn one_socket() -> Topology {
        Topology::from_pairs([(0, 0)])
    }

    #[test]
    fn nothing_available_falls_to_the_model_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let (source, why) = open_source_with(&opts(dir.path()), &one_socket(), &FakeOpener::default()).unwrap();
        assert_eq!(source.kind(), SourceKind::Model);
        assert!(source.estimated());
        for part in
            ["model", "ESTIMATED", "Cloud Carbon Footprint", "W/vCPU", "powercap:", "perf:", "msr:", "modprobe msr"]
        {
            assert!(why.contains(part), "{part:?} missing from {why}");
        }
    }

    #[test]
    fn powercap_wins_when_present() {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(dir.path());
        write_zone(&o.sysfs_root, "intel-rapl:0", "package-0", 0, 1_000);
        write_pmu(&o.sysfs_root, "0", &[("energy-pkg", 2)]);
        let (source, why) = open_source_with(&o, &one_socket(), &FakeOpener::default()).unwrap();
        assert_eq!(source.kind(), SourceKind::Powercap);
        assert!(!why.contains("skipped"), "{why}");
    }

    /// Root cannot be denied a read by chmod: a directory in place of `energy_uj` fails the
    /// same way and must send selection on to the next source.
    #[test]
    fn unreadable_powercap_falls_back_to_perf() {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(dir.path());
        let energy = write_zone(&o.sysfs_root, "intel-rapl:0", "package-0", 0, 1_000);
        fs::remove_file(&energy).unwrap();
        fs::create_dir(&energy).unwrap();
        write_pmu(&o.sysfs_root, "0", &[("energy-pkg", 2)]);
        let (mut source, why) = open_source_with(&o, &one_socket(), &FakeOpener::default()).unwrap();
        assert_eq!(source.kind(), SourceKind::Perf);
        assert!(why.contains("energy_uj") && why.contains("run as root"), "{why}");
        assert_eq!(source.read(&CycleUtilisation::default()).unwrap().len(), 1);
    }

    #[test]
    fn forced_source_does_not_fall_back() {
        let dir = tempfile::tempdir().unwrap();
        let o = EnergyOptions { source: Some(SourceKind::Msr), ..opts(dir.path()) };
        let err = open_source_with(&o, &one_socket(), &FakeOpener::default()).err().unwrap();
        let msg = err.to_string();
        assert!(msg.contains("msr is not available") && msg.contains("modprobe msr"), "{msg}");
        let o = EnergyOptions { source: Some(SourceKind::Model), tdp_w: Some(50.0), ..opts(dir.path()) };
        let (source, why) = open_source_with(&o, &one_socket(), &FakeOpener::default()).unwrap();
        assert_eq!(source.kind(), SourceKind::Model);
        assert!(why.contains("--energy-source") && why.contains("--tdp 50"), "{why}");
    }

    #[test]
    fn bad_roots_and_bad_tdp_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let o = EnergyOptions { sysfs_root: dir.path().join("nope"), ..opts(dir.path()) };
        let err = open_source_with(&o, &one_socket(), &FakeOpener::default()).err().unwrap();
        assert!(err.to_string().contains("--sysfs-root"), "{err}");
        let o = EnergyOptions { tdp_w: Some(0.0), ..opts(dir.path()) };
        let err = open_source_with(&o, &one_socket(), &FakeOpener::default()).err().unwrap();
        assert!(matches!(err, EnergyError::InvalidTdp { .. }), "{err}");
    }

    #[test]
    fn the_hosts_export_and_the_watts_file_are_opened_when_asked_and_say_where_measured() {
        let dir = tempfile::tempdir().unwrap();
        let vm = dir.path().join("export/testvm");
        fs::create_dir_all(vm.join("intel-rapl:0")).unwrap();
        fs::write(vm.join("intel-rapl:0/energy_uj"), "10\n").unwrap();
        fs::write(vm.join("power_w"), "7.5\n").unwrap();
        let o =
            EnergyOptions { source: Some(SourceKind::Powercap), powercap_root: Some(vm.clone()), ..opts(dir.path()) };
        let (source, why) = open_source_with(&o, &one_socket(), &FakeOpener::default()).unwrap();
        assert_eq!((source.kind(), source.estimated()), (SourceKind::Powercap, false));
        assert!(why.contains("measured on the host") && why.contains("one socket"), "{why}");
        let o = EnergyOptions {
            source: Some(SourceKind::VmPowerFile),
            vm_power_file: Some(vm.join("power_w")),
            ..opts(dir.path())
        };
        let (mut source, why) = open_source_with(&o, &one_socket(), &FakeOpener::default()).unwrap();
        assert!(why.starts_with("energy source: vm-power-file (measured on the host"), "{why}");
        let util = CycleUtilisation::new(&[], &one_socket(), 1_000_000_000);
        assert_eq!(source.read(&util).unwrap()[0].energy_uj, 7.5e6);
        let o = EnergyOptions {
            source: Some(SourceKind::Powercap),
            powercap_root: Some(dir.path().join("export")),
            ..opts(dir.path())
        };
        let err = open_source_with(&o, &one_socket(), &FakeOpener::default()).err().unwrap();
        let msg = err.to_string();
        assert!(
            matches!(&err, EnergyError::VmSourceUnavailable { reason, .. } if matches!(**reason, EnergyError::NoHostTree { .. })),
            "{err}"
        );
        assert!(msg.starts_with("--powercap-root ") && !msg.contains("leave --energy-source out"), "{msg}");
        fs::write(vm.join("power_w"), "garbage\n").unwrap();
        let o = EnergyOptions {
            source: Some(SourceKind::VmPowerFile),
            vm_power_file: Some(vm.join("power_w")),
            ..opts(dir.path())
        };
        let msg = open_source_with(&o, &one_socket(), &FakeOpener::default()).err().unwrap().to_string();
        assert!(
            msg.starts_with("--energy-source vm-power-file:") && msg.contains("\"garbage\"") && msg.contains("watts"),
            "{msg}"
        );
    }

    #[test]
    fn a_vm_is_one_socket() {
        let topo = Topology::from_pairs([(0, 0), (1, 1), (3, 1)]);
        assert_eq!(topo.as_one_socket(), Topology::from_pairs([(0, 0), (1, 0), (3, 0)]));
    }
}
