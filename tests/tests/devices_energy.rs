//! Issue 26 items 2 and 3: the device models' energy split over processes, threads and call
//! paths by the counted bytes, and written beside the CPU's (JoularJX trees, `summary.json`):
//! network energy on a veth made here, disk energy on a loop-mounted filesystem made here
//! (writeback included), bad model flags, and the CPU's energy left as it was. Root, real eBPF.
//! Helpers: `tests/src/devices.rs`.

use std::path::Path;
use std::time::Duration;

use joular_tests::devices::*;
use joular_tests::*;
use serde_json::Value;

#[test]
fn network_energy_goes_to_the_sending_method_and_loopback_gets_none() {
    let veth = Veth::create();
    // A second interface that carries nothing and draws 5 W: its joules are no one's.
    let idle = Dummy::create();
    let (_peer, port) = start_peer(Some(&veth.ns), &veth.peer_ip);
    let port = port.to_string();
    let unit = format!("class/net/{}", veth.host_if);
    let idle_unit = format!("class/net/{}", idle.name);
    let idle_power = format!("{}=5,0", idle.name);
    let units = [unit.as_str(), idle_unit.as_str(), "class/net/lo"];
    let flags = ["--nic-power", idle_power.as_str()];
    let run = record_energy("network", &units, &flags, "NetWork", &["net", &veth.peer_ip, &port, "67108864"], || {});
    let net = device_energy(&run.cycles, "network");
    // Per interface: what the processes got each cycle is at most the veth's joules, never
    // the idle interface's (a split per class would have given the JVM most of its 5 W).
    let unit_uj = |d: &Value, name: &str| -> f64 {
        d["units"].as_array().unwrap().iter().filter(|u| u["name"] == name).map(uj).sum()
    };
    let mut idle_uj = 0.0;
    for d in &net {
        let attributed = uj(d) - d["unattributed_uj"].as_f64().unwrap();
        let on_veth = unit_uj(d, &veth.host_if);
        assert!(attributed <= on_veth + 1e-3, "{attributed} µJ attributed, the veth had {on_veth}: {d:#}");
        idle_uj += unit_uj(d, &idle.name);
    }
    assert!(idle_uj > 1e6, "the idle interface was modelled ({idle_uj} µJ)");
    assert!(!net.is_empty(), "no network device_energy in --json");
    assert!(device_energy(&run.cycles, "disk").is_empty(), "--devices network models no disk");
    assert_conserved(&net);
    let names: Vec<&str> =
        net.iter().flat_map(|d| d["units"].as_array().unwrap()).map(|u| u["name"].as_str().unwrap()).collect();
    assert!(names.contains(&veth.host_if.as_str()), "the veth is a unit: {names:?}");
    assert!(!names.contains(&"lo"), "lo is no unit");
    let (all, on, computer) = attributed_j(&net, "NetWork.sendChunks", "computer");
    let total: f64 = net.iter().map(|d| uj(d)).sum::<f64>() / 1e6;
    let pid = run.summary["pid"].as_u64().unwrap();
    println!(
        "network fixture: CPU {:.3} J (JVM, of a fake 40 W package), network {total:.3} J (the veth and the idle interface), {all:.3} J to processes, {on:.3} J on NetWork.sendChunks",
        cpu_j(&run.cycles, pid)
    );
    assert!(all > 0.0, "no network energy attributed");
    assert!(
        on >= 0.95 * all,
        "{on} of {all} J on NetWork.sendChunks's path (>= 95%); elsewhere: {:#?}",
        off_path(&net, "NetWork.sendChunks")
    );
    assert_eq!(computer, 0.0, "the computing thread got network energy");
    assert_device_files(&run, pid);

    // Loopback: the same stream to 127.0.0.1 costs the JVM no NIC energy.
    let (_peer, port) = start_peer(None, "127.0.0.1");
    let port = port.to_string();
    let run = record_energy("network", &units, &[], "NetWork", &["net", "127.0.0.1", &port, "67108864"], || {});
    let net = device_energy(&run.cycles, "network");
    assert!(!net.is_empty());
    assert_conserved(&net);
    let (all, _, _) = attributed_j(&net, "NetWork.sendChunks", "computer");
    assert_eq!(all, 0.0, "loopback traffic got NIC energy");
}

#[test]
fn disk_energy_goes_to_the_writing_method_when_writeback_writes_its_bytes() {
    // Writeback timing is the kernel's: a miss of the "charged later" check measures once more.
    statistical::two_attempts("disk_energy_goes_to_the_writing_method_when_writeback_writes_its_bytes", || {
        let fs = LoopFs::create();
        let file = fs.mount.path().join("moves.txt");
        let done = fs.mount.path().join("moves.txt.done");
        let power = format!("{}=1.0,3.0", fs.name());
        let file_s = file.to_str().unwrap().to_owned();
        let unit = format!("block/{}", fs.name());
        // The disk the JVM reads its own files from is a unit too, of 0 W: its reads are on
        // that disk's devices, so they take none of the loop device's energy, even in a cycle
        // when the loop device reads (something reads a new loop device ~3.6 s after mount).
        let java = sh(&["sh", "-c", "readlink -f \"$(command -v java)\""]);
        let own_disk = disk_of(Path::new(&java));
        let own_power = format!("{}=0,0", own_disk.trim_start_matches("block/"));
        let units = [unit.as_str(), own_disk.as_str()];
        let flags = ["--disk-power", &power, "--disk-power", &own_power];
        let run = record_energy("cpu,disk", &units, &flags, "HanoiDisk", &[&file_s, "20", "2"], || {
            // Writeback: once the moves are written and their cycle is over, the test syncs them
            // (the kernel would after dirty_expire_centisecs, 30 s).
            let start = std::time::Instant::now();
            while !done.exists() {
                assert!(start.elapsed() < Duration::from_secs(60), "Hanoi never finished writing");
                std::thread::sleep(Duration::from_millis(100));
            }
            std::thread::sleep(Duration::from_millis(1500));
            sh(&["sync", "-f", file.to_str().unwrap()]);
        });
        let wrote = fixture_bytes(&run.out, "wrote ");
        let disk = device_energy(&run.cycles, "disk");
        assert!(!disk.is_empty(), "no disk device_energy in --json");
        assert!(device_energy(&run.cycles, "network").is_empty(), "--devices cpu,disk models no network");
        assert_conserved(&disk);
        let units: Vec<(&str, &str)> = disk
            .iter()
            .flat_map(|d| d["units"].as_array().unwrap())
            .map(|u| (u["name"].as_str().unwrap(), u["model"].as_str().unwrap()))
            .collect();
        assert!(units.contains(&(fs.name(), "--disk-power")), "{} is a unit with its figures: {units:?}", fs.name());
        // The kernel gives each file byte its filesystem's device: the writer's are on the loop
        // device (`/sys/block/loopN/dev`), and on nothing else.
        let loop_dev = std::fs::read_to_string(format!("/sys/{unit}/dev")).unwrap().trim().to_owned();
        let mut writer_devices: Vec<String> = run
            .cycles
            .iter()
            .flat_map(|c| c["devices"]["paths"].as_array().into_iter().flatten())
            .filter(|p| {
                p["frames"].as_array().unwrap().iter().any(|f| f["name"].as_str().unwrap().contains("HanoiDisk.move"))
            })
            .flat_map(|p| p["file_devices"].as_array().into_iter().flatten())
            .filter(|d| d["write_bytes"].as_u64().unwrap() > 0)
            .map(|d| format!("{}:{}", d["major"], d["minor"]))
            .collect();
        writer_devices.sort();
        writer_devices.dedup();
        assert_eq!(writer_devices, [loop_dev], "the devices of HanoiDisk.move's written bytes");
        let (all, _, computer) = attributed_j(&disk, "HanoiDisk.move", "computer");
        let (mover, on) = thread_on_path_j(&disk, "mover", "HanoiDisk.move");
        let total: f64 = disk.iter().map(|d| uj(d)).sum::<f64>() / 1e6;
        let pid = run.summary["pid"].as_u64().unwrap();
        let cpu = cpu_j(&run.cycles, pid);
        println!(
            "disk fixture: CPU {cpu:.3} J (JVM, of a fake 40 W package), disk {all:.3} J (JVM; {total:.3} J the loop device), writer thread {mover:.3} J of which {on:.3} J on HanoiDisk.move; CPU/disk split of the JVM {:.1}% / {:.1}%",
            100.0 * cpu / (cpu + all),
            100.0 * all / (cpu + all)
        );
        // Each disk is split by the bytes on its own devices: the JVM's reads of its own files
        // (on its own disk, a unit of 0 W here) take none of the loop device's energy. When the
        // split was per class, 1 J of 2 J went to those reads in 3 of 17 runs.
        assert!(mover > 0.0, "the writing thread got no disk energy");
        assert!(
            on >= 0.95 * mover,
            "{on} of the writer's {mover} J on HanoiDisk.move's path (>= 95%); elsewhere: {:#?}; the writer's rows per cycle: {:#?}",
            off_path(&disk, "HanoiDisk.move"),
            thread_rows(&disk, "mover")
        );
        statistical::check(on >= 0.95 * all, || {
            format!(
                "{on} of the JVM's {all} J on HanoiDisk.move's path (>= 95%); elsewhere: {:#?}",
                off_path(&disk, "HanoiDisk.move")
            )
        });
        assert_eq!(computer, 0.0, "the computing thread got disk energy");
        // Writeback charged the writer: some cycle gives HanoiDisk.move disk energy though it wrote
        // nothing in it, and the bytes charged add up to what it wrote.
        let charged_later = run.cycles.iter().any(|c| {
            let wrote_now: u64 = c["devices"]["threads"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| t["comm"] == "mover")
                .map(|t| bytes(t, "file_write"))
                .sum();
            let disk_now = c["device_energy"].as_array().into_iter().flatten().filter(|d| d["device"] == "disk");
            wrote_now == 0 && disk_now.flat_map(|d| d["threads"].as_array().unwrap()).any(|t| t["comm"] == "mover")
        });
        // The kernel may also write the bytes back while they are being written (its background
        // threshold): then no cycle is left to charge later, and the test measures once more.
        statistical::check(charged_later, || {
            "no cycle charged the writer for bytes written back after its writes".into()
        });
        let charged_bytes: u64 = disk
            .iter()
            .flat_map(|d| d["threads"].as_array().unwrap())
            .filter(|t| t["comm"] == "mover")
            .map(|t| t["bytes"].as_u64().unwrap())
            .sum();
        assert!(
            charged_bytes as f64 >= 0.9 * wrote as f64,
            "the writer was charged for {charged_bytes} bytes written back of {wrote} it wrote"
        );
    });
}

#[test]
fn bad_device_model_flags_exit_2_naming_the_flag_the_value_and_the_fix() {
    let cases: &[(&[&str], &str)] = &[
        (&["--devices", "network", "--nic-power", "eth0=x,1"], "IFACE=IDLE_W,W_PER_GBPS"),
        (&["--devices", "disk", "--disk-power", "sda"], "DEV=IDLE_W,ACTIVE_W"),
        (&["--devices", "network", "--nic-power", "nosuchif0=1,1"], "nosuchif0"),
        (&["--devices", "cpu", "--disk-power", "loop0=1,1"], "--devices cpu,disk"),
    ];
    for (flags, says) in cases {
        let mut argv = vec!["record"];
        argv.extend_from_slice(flags);
        argv.extend(["--", "true"]);
        let out = profile(&argv, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        let flag = flags[2];
        assert!(err.contains(flag) && err.contains(says), "{flags:?}: {err}");
    }
}

#[test]
fn counting_bytes_leaves_the_cpu_energy_as_it_was() {
    // The same transfer over a veth pair with the CPU alone and with every byte counter. The
    // CPU's energy still adds up per cycle, and it splits between the threads as it did: the
    // computing thread's share of the process's CPU energy moves by no more than the run-to-run
    // spread (0.9 to 3.2 pp over 4 pairs of runs on a loaded 2-CPU VM). Absolute watts are not
    // compared: on a shared machine they follow the other load, not the profiler. The counters
    // cost about 2 µs per 8 KiB write, under 0.1% of the sender's CPU here.
    let veth = Veth::create();
    statistical::two_attempts("counting_bytes_leaves_the_cpu_energy_as_it_was", || {
        let share = |devices: &str| {
            let (_peer, port) = start_peer(Some(&veth.ns), &veth.peer_ip);
            let run = record_network(devices, &["net", &veth.peer_ip, &port.to_string(), "67108864"]);
            assert_cpu_energy_conserved(&run.cycles);
            thread_share(&run.summary, "computer")
        };
        let (cpu, all) = (share("cpu"), share("cpu,network,disk"));
        eprintln!("computer's share of the CPU energy: --devices cpu {cpu:.3}, cpu,network,disk {all:.3}");
        statistical::check((all - cpu).abs() <= 0.05, || {
            format!(
                "the computing thread has {:.1}% of the process's CPU energy with --devices cpu, {:.1}% with \
                 cpu,network,disk (bar: within 5 pp)",
                cpu * 100.0,
                all * 100.0
            )
        });
    });
}
