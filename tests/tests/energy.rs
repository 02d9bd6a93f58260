//! Issue 3 acceptance: a fake powercap tree advancing at a known 40 W, a real JVM with a 100%
//! and a ~30% thread, and the real profiler. Run as root by `cargo xtask test`.

use std::time::Duration;

use joular_tests::*;

const POWER_W: f64 = 40.0;

/// A fake powercap at POWER_W, a JVM with a 100% and a 30% thread, and a scratch directory.
fn duty_cycle_under_fake_rapl() -> (FakePowercap, Jvm, tempfile::TempDir) {
    let rapl = FakePowercap::start(POWER_W);
    let jvm = Jvm::start("DutyCycle", &["20", "1.0", "0.3"], &[]);
    (rapl, jvm, tempfile::tempdir().unwrap())
}

#[test]
fn energy_matches_power_times_time_and_follows_cpu_time_and_is_conserved() {
    statistical::two_attempts("energy follows on-CPU time (eBPF)", ebpf_attempt);
}

/// One attempt; conservation is an invariant, the ratio of two threads' energies to their
/// on-CPU times a statistical bar (see `the_procfs_cpu_time_path_attributes_energy_too`).
fn ebpf_attempt() {
    let (rapl, jvm, dir) = duty_cycle_under_fake_rapl();
    let json = dir.path().join("e.jsonl");
    let pid = jvm.pid().to_string();
    let root = rapl.sysfs_root();
    let out = profile(
        &["--pid", &pid, "--duration", "4", "--json", json.to_str().unwrap(), "--sysfs-root", &root],
        Duration::from_secs(60),
    );
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("energy source: powercap"), "powercap not chosen: {err}");
    let cycles = read_jsonl(&json);
    assert!(cycles.len() >= 3);

    // Total energy = power × time (±3%), over the cycles' own clock.
    let mut energy_uj = 0.0;
    let mut secs = 0.0;
    for c in &cycles {
        let sockets = c["sockets"].as_array().unwrap();
        assert_eq!(sockets.len(), 1);
        assert_eq!(sockets[0]["source"], "powercap");
        assert_eq!(sockets[0]["estimated"], false);
        energy_uj += sockets[0]["energy_uj"].as_f64().unwrap();
        secs += (c["end_ns"].as_u64().unwrap() - c["start_ns"].as_u64().unwrap()) as f64 / 1e9;
    }
    let expected_uj = POWER_W * secs * 1e6;
    assert!(
        (energy_uj - expected_uj).abs() <= 0.03 * expected_uj,
        "energy {energy_uj} µJ vs {expected_uj} µJ (40 W × {secs} s)"
    );

    // Conservation each cycle, exact up to rounding; nothing negative.
    for c in &cycles {
        let s = &c["sockets"][0];
        let threads: f64 = c["threads"].as_array().unwrap().iter().map(|t| t["energy_uj"].as_f64().unwrap()).sum();
        let processes: f64 = c["processes"].as_array().unwrap().iter().map(|p| p["energy_uj"].as_f64().unwrap()).sum();
        let (e, un) = (s["energy_uj"].as_f64().unwrap(), s["unattributed_uj"].as_f64().unwrap());
        assert!(
            (threads + un - e).abs() <= 1e-6 * e.max(1.0),
            "cycle {}: threads {threads} + unattributed {un} != {e}",
            c["cycle"]
        );
        assert!((processes - threads).abs() <= 1e-6 * e.max(1.0), "processes {processes} != threads {threads}");
        assert!(un >= 0.0 && c["threads"].as_array().unwrap().iter().all(|t| t["energy_uj"].as_f64().unwrap() >= 0.0));
    }

    // Thread energies follow their on-CPU time (±10%).
    let on_cpu = per_thread_sum(&cycles, "on_cpu_ns");
    let energy = per_thread_sum(&cycles, "energy_uj");
    let (busy, light) = (jvm.tid_of("busy") as u64, jvm.tid_of("light") as u64);
    let time_ratio = on_cpu[&busy] / on_cpu[&light];
    let energy_ratio = energy[&busy] / energy[&light];
    statistical::check((energy_ratio - time_ratio).abs() <= 0.10 * time_ratio, || {
        format!("energy ratio {energy_ratio} vs on-CPU ratio {time_ratio}")
    });
}

#[test]
fn bad_energy_input_gets_clear_errors() {
    let out = profile(&["--all", "--duration", "1", "--sysfs-root", "/nonexistent/sys"], Duration::from_secs(20));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/sys"), "{err}");
    let out = profile(&["--all", "--duration", "1", "--energy-source", "model", "--tdp", "0"], Duration::from_secs(20));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).to_lowercase().contains("tdp"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The ratio of the two threads' energies follows the ratio of their jiffies within 10%, a
/// statistical bar: a socket's joules of a cycle are shared over all that ran on it, so a
/// jiffy of the 30% thread is worth less in the cycles where it ran more, and jiffies are
/// counted whole. One CI run of 4 s missed it once (energy 4.17 against jiffies 3.74).
#[test]
fn the_procfs_cpu_time_path_attributes_energy_too() {
    statistical::two_attempts("energy follows jiffies (procfs)", procfs_attempt);
}

fn procfs_attempt() {
    let (rapl, jvm, dir) = duty_cycle_under_fake_rapl();
    let json = dir.path().join("p.jsonl");
    let (pid, root) = (jvm.pid().to_string(), rapl.sysfs_root());
    let out = profile(
        &[
            "--pid",
            &pid,
            "--duration",
            "4",
            "--cpu-time",
            "procfs",
            "--json",
            json.to_str().unwrap(),
            "--sysfs-root",
            &root,
        ],
        Duration::from_secs(60),
    );
    assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("CPU time from /proc jiffies"));
    let cycles = read_jsonl(&json);
    for c in &cycles {
        let s = &c["sockets"][0];
        let threads: f64 = c["threads"].as_array().unwrap().iter().map(|t| t["energy_uj"].as_f64().unwrap()).sum();
        let (e, un) = (s["energy_uj"].as_f64().unwrap(), s["unattributed_uj"].as_f64().unwrap());
        assert!(
            (threads + un - e).abs() <= 1e-6 * e.max(1.0) && un >= 0.0,
            "cycle {}: {threads} + {un} != {e}",
            c["cycle"]
        );
    }
    let on_cpu = per_thread_sum(&cycles, "on_cpu_ns");
    let energy = per_thread_sum(&cycles, "energy_uj");
    let (busy, light) = (jvm.tid_of("busy") as u64, jvm.tid_of("light") as u64);
    assert!(
        on_cpu[&busy] > on_cpu[&light] && on_cpu[&light] > 0.0,
        "jiffies: busy {} light {}",
        on_cpu[&busy],
        on_cpu[&light]
    );
    let (tr, er) = (on_cpu[&busy] / on_cpu[&light], energy[&busy] / energy[&light]);
    statistical::check((er - tr).abs() <= 0.10 * tr, || format!("energy ratio {er} vs jiffies ratio {tr}"));
    let samples: f64 = per_thread_sum(&cycles, "samples").values().sum();
    assert!(samples > 100.0, "the sampler still runs on the procfs path");
}

/// A counter that cannot be read for a while (here: `energy_uj` gone for ~1.5 s) costs those
/// cycles their energy, with a warning, and the run goes on; the counter's next reading covers
/// the whole gap, so no energy is lost over the run.
#[test]
fn a_failed_energy_read_mid_run_skips_the_cycle_and_loses_no_energy() {
    let (rapl, jvm, dir) = duty_cycle_under_fake_rapl();
    let json = dir.path().join("e.jsonl");
    let pid = jvm.pid().to_string();
    let root = rapl.sysfs_root();
    let child = std::process::Command::new(bin())
        .args(["--pid", &pid, "--duration", "7", "--json", json.to_str().unwrap(), "--sysfs-root", &root])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(3500));
    rapl.set_outage(true);
    std::thread::sleep(Duration::from_millis(1500));
    rapl.set_outage(false);
    let out = wait_bounded(child, Duration::from_secs(60));
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("energy not read this cycle"), "no warning about the failed read: {err}");

    let cycles = read_jsonl(&json);
    let socket_uj = |c: &serde_json::Value| -> f64 {
        c["sockets"].as_array().unwrap().iter().map(|s| s["energy_uj"].as_f64().unwrap()).sum()
    };
    assert!(cycles.iter().any(|c| socket_uj(c) == 0.0), "no cycle went without energy: the outage was not seen");
    let mut energy_uj = 0.0;
    let mut secs = 0.0;
    for c in &cycles {
        let threads: f64 = c["threads"].as_array().unwrap().iter().map(|t| t["energy_uj"].as_f64().unwrap()).sum();
        let un: f64 = c["sockets"].as_array().unwrap().iter().map(|s| s["unattributed_uj"].as_f64().unwrap()).sum();
        let e = socket_uj(c);
        assert!(
            (threads + un - e).abs() <= 1e-6 * e.max(1.0),
            "cycle {}: threads {threads} + unattributed {un} != {e}",
            c["cycle"]
        );
        energy_uj += e;
        secs += (c["end_ns"].as_u64().unwrap() - c["start_ns"].as_u64().unwrap()) as f64 / 1e9;
    }
    let expected_uj = POWER_W * secs * 1e6;
    assert!(
        (energy_uj - expected_uj).abs() <= 0.03 * expected_uj,
        "energy {energy_uj} µJ vs {expected_uj} µJ (40 W × {secs} s)"
    );
}
