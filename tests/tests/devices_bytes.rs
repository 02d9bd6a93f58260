//! Issue 26 item 1: `--devices network,disk` counts each profiled thread's socket and file bytes
//! in the kernel, per call path, named as the CPU stacks are. A Java fixture moves a known
//! number of bytes from one thread while another only computes: over a veth pair to a peer in a
//! network namespace made here (a network device's bytes), by sendfile, over loopback (local
//! bytes), and through a BufferedWriter to a file. Root, real eBPF; the byte counts are exact,
//! not statistical. Helpers: `tests/src/devices.rs`.

use std::time::Duration;

use joular_tests::devices::*;
use joular_tests::*;
use serde_json::Value;

#[test]
fn a_network_device_s_bytes_go_to_the_sending_method_and_none_to_the_computing_thread() {
    let veth = Veth::create();
    let (_peer, port) = start_peer(Some(&veth.ns), &veth.peer_ip);
    let port = port.to_string();
    let run = record_network("network", &["net", &veth.peer_ip, &port, "67108864"]);
    let sent = fixture_bytes(&run.out, "sent ");
    let devices = &run.summary["devices"];
    assert!(devices.is_object(), "summary.json has no devices: {}", run.summary);
    assert_close(thread_bytes(devices, "sender", "net_device_tx"), sent, "sender's net_device_tx");
    assert_eq!(thread_bytes(devices, "sender", "net_local_tx"), 0, "a veth peer is no local traffic");
    for class in ["net_device_tx", "net_device_rx", "net_local_tx", "net_local_rx", "file_read", "file_write"] {
        assert_eq!(thread_bytes(devices, "computer", class), 0, "the computing thread moved no {class} byte");
    }
    assert_on_path(devices, "NetWork.sendChunks", &["net_device_tx", "net_device_rx"]);
    // The kernel placed the sent bytes on the veth, by its index here.
    let veth_index = ifindex(&veth.host_if);
    let on_veth: u64 = devices["paths"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["net_devices"].as_array().into_iter().flatten())
        .filter(|i| i["ifindex"].as_u64() == Some(veth_index))
        .map(|i| i["tx_bytes"].as_u64().unwrap())
        .sum();
    assert_close(on_veth, sent, "sent bytes placed on the veth");
    // The cycles say it too, and add up to the run.
    assert_eq!(
        cycles_thread_bytes(&run.cycles, "sender", "net_device_tx"),
        thread_bytes(devices, "sender", "net_device_tx")
    );
}

/// sendfile moves a file's bytes to a socket in the kernel, with no read or write call (a web
/// server's static files; a JVM's `FileChannel.transferTo`): they are counted at the call, on
/// the path that asked for them.
#[test]
fn bytes_sent_with_sendfile_go_to_the_sending_method() {
    let veth = Veth::create();
    let (_peer, port) = start_peer(Some(&veth.ns), &veth.peer_ip);
    let port = port.to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("static.bin");
    let run = record_network("network", &["sendfile", &veth.peer_ip, &port, "67108864", file.to_str().unwrap()]);
    let sent = fixture_bytes(&run.out, "sent ");
    assert_eq!(sent, 67_108_864);
    let devices = &run.summary["devices"];
    assert!(devices.is_object(), "summary.json has no devices: {}", run.summary);
    assert_close(thread_bytes(devices, "sender", "net_device_tx"), sent, "sender's net_device_tx by sendfile");
    for class in ["net_device_tx", "net_device_rx", "net_local_tx", "net_local_rx"] {
        assert_eq!(thread_bytes(devices, "computer", class), 0, "the computing thread moved no {class} byte");
    }
    assert_on_path(devices, "NetWork.sendFile", &["net_device_tx", "net_device_rx"]);
}

#[test]
fn loopback_bytes_are_local_not_a_network_device_s() {
    assert_loopback_is_local("127.0.0.1");
}

#[test]
fn ipv6_loopback_bytes_are_local_too() {
    assert_loopback_is_local("::1");
}

#[test]
fn file_bytes_written_through_a_buffered_writer_go_to_the_writing_method() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lines.txt");
    let run = record_network("disk", &["file", file.to_str().unwrap(), "100663296"]);
    let wrote = fixture_bytes(&run.out, "wrote ");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), wrote);
    let devices = &run.summary["devices"];
    assert_close(thread_bytes(devices, "writer", "file_write"), wrote, "writer's file_write");
    assert_eq!(thread_bytes(devices, "computer", "file_write"), 0, "the computing thread wrote nothing");
    assert_on_path(devices, "NetWork.writeLines", &["file_write"]);
    // `--devices disk` counts no socket byte.
    assert_eq!(thread_bytes(devices, "writer", "net_local_tx") + thread_bytes(devices, "writer", "net_device_tx"), 0);
}

#[test]
fn a_bad_devices_value_exits_2_naming_the_flag_and_the_values() {
    for bad in ["gpu", "cpu,gpu", "", "cpu,,disk"] {
        let out = profile(&["record", "--devices", bad, "--", "true"], Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--devices {bad:?}: {err}");
        assert!(err.contains("--devices") && err.contains("cpu, network, disk"), "--devices {bad:?}: {err}");
    }
}

#[test]
fn cpu_only_loads_no_byte_counter() {
    let (loaded, stderr) = byte_counter_loaded("cpu");
    assert!(!loaded, "--devices cpu loaded the byte counter");
    assert!(!stderr.contains("bytes per call path"), "{stderr}");
    let (loaded, stderr) = byte_counter_loaded("cpu,disk");
    assert!(loaded, "--devices cpu,disk did not load the byte counter: {stderr}");
    assert!(stderr.contains("bytes per call path from raw_syscalls:sys_exit"), "{stderr}");
}

// Issue 26 item 2: the device models' joules and their split by bytes (`--json`
// `device_energy`), on the machine's own /sys (the interfaces and block devices are real).

#[test]
fn files_kept_in_memory_move_no_disk_byte() {
    // procfs, sysfs and tmpfs files are regular files too: reading them is no disk I/O, and a
    // JVM reads /proc and cgroup files all the time.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let out_file = dir.path().join("written.bin");
    let results = dir.path().join("results");
    let argv = [
        "record",
        "--devices",
        "disk",
        "--output",
        results.to_str().unwrap(),
        "--",
        "python3",
        "-c",
        IN_MEMORY_READER,
        out_file.to_str().unwrap(),
    ];
    let out = profile(&argv, Duration::from_secs(120));
    assert_success(&out);
    let read = fixture_bytes(&out, "read ");
    assert!(read >= 48 << 20, "the reader read {read} bytes");
    let summary: Value = std::fs::read_dir(&results)
        .unwrap()
        .flatten()
        .filter_map(|d| std::fs::read_to_string(d.path().join("summary.json")).ok())
        .map(|s| serde_json::from_str(&s).unwrap())
        .find(|s: &Value| s["comm"] == "python3")
        .expect("python3's summary.json");
    let devices = &summary["devices"];
    let file_read: u64 = devices["threads"].as_array().unwrap().iter().map(|t| bytes(t, "file_read")).sum();
    let file_write: u64 = devices["threads"].as_array().unwrap().iter().map(|t| bytes(t, "file_write")).sum();
    // Python's own start-up reads a few hundred KiB of modules from disk; 48 MiB in memory
    // must not show.
    assert!(file_read < 4 << 20, "{file_read} file bytes read counted of {read} read from procfs, sysfs and tmpfs");
    assert_close(file_write, 8 << 20, "the disk file's bytes written");
}
