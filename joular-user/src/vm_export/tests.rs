use std::fs;
use std::os::unix::fs::symlink;

use super::*;
use crate::model::ProcessReport;

/// A fake /proc entry: `stat` (start tick 100) and `cmdline`.
fn write_proc(proc_root: &Path, pid: u32, args: &[&str]) {
    let dir = proc_root.join(pid.to_string());
    fs::create_dir_all(&dir).unwrap();
    let stat = format!("{pid} (x) R 1 {pid} {pid} 0 -1 4194304 0 0 0 0 5 1 0 0 20 0 1 0 100 1000 10\n");
    fs::write(dir.join("stat"), stat).unwrap();
    let cmdline: Vec<u8> = args.iter().flat_map(|a| a.bytes().chain([0])).collect();
    fs::write(dir.join("cmdline"), cmdline).unwrap();
}

fn process(pid: u32, exe: &str, energy_uj: f64) -> ProcessReport {
    ProcessReport { pid, exe: Some(exe.into()), energy_uj, ..Default::default() }
}

/// A one-second cycle with these processes.
fn cycle(processes: Vec<ProcessReport>) -> CycleReport {
    CycleReport { start_ns: 1_000_000_000, end_ns: 2_000_000_000, processes, ..Default::default() }
}

fn starts(pids: &[u32]) -> HashMap<u32, u32> {
    pids.iter().map(|&p| (p, 100)).collect()
}

fn read(path: PathBuf) -> String {
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).trim().to_owned()
}

struct Host {
    _dir: tempfile::TempDir,
    proc_root: PathBuf,
    out: PathBuf,
}

fn host() -> Host {
    let dir = tempfile::tempdir().unwrap();
    let proc_root = dir.path().join("proc");
    let out = dir.path().join("vms");
    write_proc(&proc_root, 10, &["/usr/bin/qemu-system-x86_64", "-name", "guest=web,debug-threads=on"]);
    write_proc(&proc_root, 11, &["java", "-jar", "app.jar", "-name", "guest=nope"]);
    Host { _dir: dir, proc_root, out }
}

fn export(h: &Host, range_uj: u64) -> VmEnergyExport {
    VmEnergyExport::open(&h.out, &h.proc_root, Modes::exact(0o644), range_uj, "powercap (measured, 1 socket(s))")
        .unwrap()
}

#[test]
fn a_vms_energy_is_its_processes_written_as_a_powercap_tree_and_watts() {
    let h = host();
    let mut vms = export(&h, DEFAULT_RANGE_UJ);
    let procs = vec![process(10, "/usr/bin/qemu-system-x86_64", 2_500_000.4), process(11, "/usr/bin/java", 9e6)];
    assert!(vms.on_cycle(&cycle(procs.clone()), &starts(&[10, 11]), &[]).is_empty());
    assert!(vms.on_cycle(&cycle(procs), &starts(&[10, 11]), &[]).is_empty());
    let vm = h.out.join("web");
    assert_eq!(read(vm.join("intel-rapl:0/energy_uj")), "5000000");
    assert_eq!(read(vm.join("intel-rapl:0/name")), "package-0");
    assert_eq!(read(vm.join("intel-rapl:0/max_energy_range_uj")), DEFAULT_RANGE_UJ.to_string());
    assert_eq!(read(vm.join("power_w")), "2.500");
    assert!(read(vm.join("energy_source")).starts_with("powercap"));
    // The Java process with a QEMU-looking argument is no VM.
    assert_eq!(fs::read_dir(&h.out).unwrap().count(), 1);
    let series = vms.series();
    assert_eq!(series.len(), 1);
    assert_eq!((series[0].name.as_str(), series[0].hypervisor), ("web", "qemu"));
    assert!((series[0].energy_j - 5.0).abs() < 1e-5 && (series[0].power_w - 2.5).abs() < 1e-5, "{series:?}");
    // A cycle the VM did not run in: power 0, counter unchanged.
    vms.on_cycle(&cycle(vec![]), &starts(&[]), &[]);
    assert_eq!(
        (read(vm.join("power_w")).as_str(), read(vm.join("intel-rapl:0/energy_uj")).as_str()),
        ("0.000", "5000000")
    );
}

#[test]
fn the_counter_wraps_and_survives_a_restart_of_serve() {
    let h = host();
    let qemu = || vec![process(10, "/usr/bin/qemu-system-x86_64", 700.0)];
    let energy = h.out.join("web/intel-rapl:0/energy_uj");
    {
        let mut vms = export(&h, 1_000);
        vms.on_cycle(&cycle(qemu()), &starts(&[10]), &[]);
        assert_eq!(read(energy.clone()), "700");
        vms.on_cycle(&cycle(qemu()), &starts(&[10]), &[]);
        assert_eq!(read(energy.clone()), "400");
    }
    // serve again: the counter goes on from what was written, never back to 0.
    let mut vms = export(&h, 1_000);
    vms.on_cycle(&cycle(vec![]), &starts(&[]), &[]);
    vms.on_cycle(&cycle(qemu()), &starts(&[10]), &[]);
    assert_eq!(read(energy), "100");
}

#[test]
fn an_ended_vm_stops_and_its_name_resumes_with_the_next_process() {
    let h = host();
    let mut vms = export(&h, DEFAULT_RANGE_UJ);
    vms.on_cycle(&cycle(vec![process(10, "/usr/bin/qemu-system-x86_64", 1e6)]), &starts(&[10]), &[]);
    let exit = ThreadExit { pid: 10, tid: 10, comm: "qemu".into(), process_ended: true };
    vms.on_cycle(&cycle(vec![process(10, "/usr/bin/qemu-system-x86_64", 1e6)]), &starts(&[10]), &[exit]);
    assert_eq!(read(h.out.join("web/power_w")), "0");
    assert_eq!(read(h.out.join("web/intel-rapl:0/energy_uj")), "2000000");
    // Two VMs running under one name: the second is told apart by its PID.
    write_proc(&h.proc_root, 20, &["qemu-kvm", "-name", "web"]);
    write_proc(&h.proc_root, 21, &["qemu-kvm", "-name", "web"]);
    let both = vec![process(20, "/usr/libexec/qemu-kvm", 1e6), process(21, "/usr/libexec/qemu-kvm", 3e6)];
    vms.on_cycle(&cycle(both), &starts(&[20, 21]), &[]);
    assert_eq!(read(h.out.join("web/intel-rapl:0/energy_uj")), "3000000");
    assert_eq!(read(h.out.join("web-21/intel-rapl:0/energy_uj")), "3000000");
}

/// DIR is shared with the guests: a link or a directory planted at a VM's name is not
/// written through, and a counter that is not ours is not taken up.
#[test]
fn planted_links_foreign_directories_and_garbage_counters_are_refused() {
    let h = host();
    let target = tempfile::tempdir().unwrap();
    fs::create_dir_all(&h.out).unwrap();
    symlink(target.path(), h.out.join("web")).unwrap();
    let mut vms = export(&h, DEFAULT_RANGE_UJ);
    let qemu = || vec![process(10, "/usr/bin/qemu-system-x86_64", 1e6)];
    let warnings = vms.on_cycle(&cycle(qemu()), &starts(&[10]), &[]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("VM web: its energy is not exported"), "{warnings:?}");
    assert_eq!(fs::read_dir(target.path()).unwrap().count(), 0, "written through the link");
    // Refused once, warned once.
    assert!(vms.on_cycle(&cycle(qemu()), &starts(&[10]), &[]).is_empty());
    assert!(vms.series().is_empty());

    let h = host();
    fs::create_dir_all(h.out.join("web/intel-rapl:0")).unwrap();
    std::os::unix::fs::chown(h.out.join("web"), Some(65534), Some(65534)).unwrap();
    let warnings = export(&h, DEFAULT_RANGE_UJ).on_cycle(&cycle(qemu()), &starts(&[10]), &[]);
    assert!(warnings.len() == 1 && warnings[0].contains("belongs to uid 65534"), "{warnings:?}");
    assert!(!h.out.join("web/intel-rapl:0/energy_uj").exists());

    let h = host();
    fs::create_dir_all(h.out.join("web/intel-rapl:0")).unwrap();
    fs::write(h.out.join("web/intel-rapl:0/energy_uj"), "lots\n").unwrap();
    let warnings = export(&h, DEFAULT_RANGE_UJ).on_cycle(&cycle(qemu()), &starts(&[10]), &[]);
    assert!(warnings.len() == 1 && warnings[0].contains("remove the directory"), "{warnings:?}");
    assert_eq!(read(h.out.join("web/intel-rapl:0/energy_uj")), "lots");
}

#[test]
fn the_number_of_vms_is_bounded() {
    let h = host();
    let mut vms = export(&h, DEFAULT_RANGE_UJ);
    let pids: Vec<u32> = (1_000..1_000 + MAX_VMS as u32 + 5).collect();
    for &pid in &pids {
        write_proc(&h.proc_root, pid, &["qemu-kvm", "-name", &format!("vm{pid}")]);
    }
    let procs = pids.iter().map(|&pid| process(pid, "/usr/libexec/qemu-kvm", 1.0)).collect();
    let warnings = vms.on_cycle(&cycle(procs), &starts(&pids), &[]);
    assert_eq!((vms.series().len(), warnings.len()), (MAX_VMS, 5));
    assert!(warnings[0].contains(&format!("more than {MAX_VMS} VMs")), "{warnings:?}");
    assert_eq!(fs::read_dir(&h.out).unwrap().count(), MAX_VMS);
}

#[test]
fn a_pid_that_changed_hands_names_no_vm() {
    let h = host();
    let mut vms = export(&h, DEFAULT_RANGE_UJ);
    // The cycle's rows are of the process started at tick 99; /proc/10 now holds another.
    let starts: HashMap<u32, u32> = [(10, 99)].into();
    vms.on_cycle(&cycle(vec![process(10, "/usr/bin/qemu-system-x86_64", 1e6)]), &starts, &[]);
    assert!(vms.series().is_empty());
}
