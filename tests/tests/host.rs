//! Issue 6 acceptance: host mode while 200 short-lived processes come and go. Run as root by
//! `cargo xtask test`.

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use joular_tests::*;

#[test]
fn host_mode_counts_the_energy_of_200_short_lived_processes() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("h.jsonl");
    let prof = Command::new(bin())
        .args(["--all", "--duration", "6", "--json", json.to_str().unwrap(), "--output"])
        .arg(dir.path().join("results"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let mut pids = HashSet::new();
    for _ in 0..200 {
        // Each burns a few ms of CPU and exits.
        let mut c = Command::new("sh").args(["-c", "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done"]).spawn().unwrap();
        pids.insert(c.id() as u64);
        c.wait().unwrap();
    }
    let out = wait_bounded(prof, Duration::from_secs(60));
    assert_success(&out);
    let cycles = read_jsonl(&json);
    let mut seen = HashSet::new();
    for c in &cycles {
        for p in c["processes"].as_array().unwrap() {
            let pid = p["pid"].as_u64().unwrap();
            if pids.contains(&pid) && p["energy_uj"].as_f64().unwrap() > 0.0 {
                seen.insert(pid);
            }
        }
        let s = &c["sockets"][0];
        let procs: f64 = c["processes"].as_array().unwrap().iter().map(|p| p["energy_uj"].as_f64().unwrap()).sum();
        let (e, un) = (s["energy_uj"].as_f64().unwrap(), s["unattributed_uj"].as_f64().unwrap());
        assert!(
            (procs + un - e).abs() <= 1e-6 * e.max(1.0),
            "cycle {}: processes {procs} + unattributed {un} != {e}",
            c["cycle"]
        );
    }
    assert!(seen.len() >= 195, "only {} of the 200 short-lived processes got energy", seen.len());
}
