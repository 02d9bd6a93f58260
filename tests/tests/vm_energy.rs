//! Issue 28: a VM's energy from its host, host and guest on one machine. `serve
//! --vm-energy-dir` profiles a process that presents itself as QEMU (guest `testvm`) on a fake
//! RAPL at a known power and writes its energy as Scaphandre's powercap tree; a second
//! joular-ebpf, "in the guest", reads that tree with `--powercap-root`. Run as root by
//! `cargo xtask test vm_energy`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use joular_tests::*;

/// Where the exported counter wraps: small enough to wrap in the test (the burning VM draws
/// 10 to 20 W of the fake socket's 40 W), larger than one cycle's energy (at most 40 W over a
/// 0.5 s cycle, 20 J), so a reader polling every 50 ms can never miss a whole wrap.
const RANGE_UJ: u64 = 25_000_000;
/// The most a poll can see added: one cycle at the socket's whole 40 W, and some slack for a
/// late cycle. A step back of the counter would read as a wrap of `RANGE_UJ` less the step.
const MAX_STEP_UJ: u64 = 21_000_000;
const POLL: Duration = Duration::from_millis(50);

/// A guest-side reader of `energy_uj`: what powercap readers do, plus the checks that the
/// counter never goes back (a step back would read as a wrap of almost the whole range).
struct Reader {
    path: std::path::PathBuf,
    last: u64,
    total_uj: u64,
    wraps: u32,
}

impl Reader {
    fn new(path: std::path::PathBuf, first: u64) -> Self {
        Self { path, last: first, total_uj: 0, wraps: 0 }
    }

    fn value(path: &Path) -> Option<u64> {
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    }

    fn poll(&mut self) {
        let Some(now) = Self::value(&self.path) else { return };
        assert!(now < RANGE_UJ, "energy_uj {now} beyond max_energy_range_uj {RANGE_UJ}");
        let delta = if now >= self.last {
            now - self.last
        } else {
            self.wraps += 1;
            RANGE_UJ - self.last + now
        };
        assert!(delta <= MAX_STEP_UJ, "energy_uj went from {} to {now}: backwards, not a wrap", self.last);
        self.total_uj += delta;
        self.last = now;
    }

    fn poll_for(&mut self, span: Duration) {
        let end = Instant::now() + span;
        while Instant::now() < end {
            self.poll();
            std::thread::sleep(POLL);
        }
        self.poll();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn serve(rapl: &FakePowercap, vm_dir: &Path, json: &Path) -> (Child, StderrTap) {
    let listen = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(bin())
        .args(["serve", "--listen", &listen, "--energy-source", "powercap", "--interval", "0.5"])
        .args(["--sysfs-root", &rapl.sysfs_root(), "--vm-energy-range-uj", &RANGE_UJ.to_string()])
        .arg("--vm-energy-dir")
        .arg(vm_dir)
        .arg("--json")
        .arg(json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let tap = StderrTap::await_profiling(&mut child, Duration::from_secs(60));
    (child, tap)
}

fn stop(child: Child, tap: StderrTap, sig: i32) -> std::process::Output {
    // SAFETY: a signal to our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let out = tap.into_output(wait_bounded(child, Duration::from_secs(60)));
    assert_success(&out);
    out
}

/// The process `pid`'s attributed energy over a run's cycles, µJ.
fn process_energy_uj(json: &Path, pid: u32) -> f64 {
    let cycles = read_jsonl(json);
    let of_pid = |c: &serde_json::Value| -> f64 {
        let procs = c["processes"].as_array().unwrap();
        procs.iter().filter(|p| p["pid"].as_u64() == Some(pid as u64)).map(|p| p["energy_uj"].as_f64().unwrap()).sum()
    };
    cycles.iter().map(of_pid).sum()
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < Duration::from_secs(30), "never: {what}");
        std::thread::sleep(POLL);
    }
}

#[test]
fn vm_energy_host_export_wraps_survives_restart_and_the_guest_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let vm_dir = dir.path().join("vms");
    let energy = vm_dir.join("testvm/intel-rapl:0/energy_uj");
    let rapl = FakePowercap::start(40.0);
    let qemu = fake_qemu::start(dir.path(), "testvm");

    // 1. The export follows the process's attributed energy, across wraps.
    let json1 = dir.path().join("serve1.jsonl");
    let (serve1, tap1) = serve(&rapl, &vm_dir, &json1);
    wait_for("testvm's energy_uj", || energy.exists());
    // A new VM's counter starts at 0: everything it counts is in the reader's total.
    let mut reader = Reader::new(energy.clone(), 0);
    let t0 = Instant::now();
    // power_w while the VM runs (the last cycle at shutdown may be too short for it to run).
    let mut watts = Vec::new();
    for _ in 0..7 {
        reader.poll_for(Duration::from_secs(1));
        watts.push(std::fs::read_to_string(vm_dir.join("testvm/power_w")).unwrap().trim().parse::<f64>().unwrap());
    }
    let out1 = stop(serve1, tap1, libc::SIGTERM);
    let run1_s = t0.elapsed().as_secs_f64();
    reader.poll();
    let stderr1 = String::from_utf8_lossy(&out1.stderr);
    let attributed1 = process_energy_uj(&json1, qemu.pid());
    let error1 = (reader.total_uj as f64 - attributed1) / attributed1;
    eprintln!(
        "run 1: exported {:.3} J ({} wraps), attributed to the VM's process {:.3} J (~{:.1} W): error {:+.4}%",
        reader.total_uj as f64 / 1e6,
        reader.wraps,
        attributed1 / 1e6,
        attributed1 / 1e6 / run1_s,
        100.0 * error1
    );
    assert!(attributed1 > 10e6, "the burning VM got only {attributed1} µJ:\n{stderr1}");
    assert!(error1.abs() < 0.02, "exported {} µJ vs attributed {attributed1} µJ", reader.total_uj);
    assert!(reader.wraps >= 1, "no wrap in {} µJ", reader.total_uj);
    watts.sort_by(f64::total_cmp);
    assert!(watts[3] > 1.0 && watts[6] <= 40.0 * 1.05, "power_w while burning: {watts:?}");

    // 2. serve again: the counter goes on from where it was.
    let before_restart = reader.total_uj;
    let json2 = dir.path().join("serve2.jsonl");
    let (serve2, tap2) = serve(&rapl, &vm_dir, &json2);
    let last = reader.last;
    wait_for("testvm's counter moving again", || Reader::value(&energy).is_some_and(|v| v != last));
    reader.poll_for(Duration::from_secs(1));

    // 3. The guest: its energy is exactly what the host exported while it ran. The VM is
    // stopped at the guest's start and end, so the counter stands still when the guest reads
    // it first and last (one host cycle to settle, two guest cycles to see it).
    fake_qemu::pause(&qemu, true);
    reader.poll_for(Duration::from_millis(1500));
    let at_guest_start = reader.total_uj;
    let guest_json = dir.path().join("guest.jsonl");
    let mut guest = Command::new(bin())
        .args(["--all", "--interval", "0.5", "--powercap-root"])
        .arg(vm_dir.join("testvm"))
        .arg("--json")
        .arg(&guest_json)
        .arg("--output")
        .arg(dir.path().join("guest-results"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let guest_tap = StderrTap::await_profiling(&mut guest, Duration::from_secs(60));
    reader.poll_for(Duration::from_millis(600));
    fake_qemu::pause(&qemu, false);
    reader.poll_for(Duration::from_secs(4));
    fake_qemu::pause(&qemu, true);
    reader.poll_for(Duration::from_millis(1500));
    let at_guest_end = reader.total_uj;
    let guest_out = stop(guest, guest_tap, libc::SIGINT);
    reader.poll_for(Duration::from_millis(600));
    assert_eq!(reader.total_uj, at_guest_end, "the counter moved while the VM was stopped");
    let guest_stderr = String::from_utf8_lossy(&guest_out.stderr);
    let guest_stdout = String::from_utf8_lossy(&guest_out.stdout);
    assert!(guest_stderr.contains("measured on the host"), "{guest_stderr}");
    assert!(guest_stderr.contains("the host's source: powercap"), "{guest_stderr}");
    assert!(guest_stdout.contains("measured on the host"), "{guest_stdout}");
    let guest_cycles = read_jsonl(&guest_json);
    let guest_uj: f64 = guest_cycles
        .iter()
        .flat_map(|c| c["sockets"].as_array().unwrap().iter().map(|s| s["energy_uj"].as_f64().unwrap()))
        .sum();
    assert!(guest_cycles.iter().all(|c| c["sockets"].as_array().unwrap().len() == 1), "the VM is one socket");
    let exported = (at_guest_end - at_guest_start) as f64;
    eprintln!(
        "guest: read {:.6} J over {} cycles, host exported {:.6} J meanwhile: error {:+.5}%",
        guest_uj / 1e6,
        guest_cycles.len(),
        exported / 1e6,
        100.0 * (guest_uj - exported) / exported
    );
    assert!(exported > 10e6, "the VM drew only {exported} µJ while the guest ran");
    // Whole µJ on both sides, read at instants the counter stood still: equal.
    assert!((guest_uj - exported).abs() <= 1.0, "guest {guest_uj} µJ vs exported {exported} µJ");

    // 4. Over both runs of serve, nothing lost and nothing counted twice at the restart.
    fake_qemu::pause(&qemu, false);
    let out2 = stop(serve2, tap2, libc::SIGTERM);
    reader.poll();
    let attributed2 = process_energy_uj(&json2, qemu.pid());
    let after_restart = (reader.total_uj - before_restart) as f64;
    let error2 = (after_restart - attributed2) / attributed2;
    eprintln!(
        "run 2: exported {:.3} J, attributed {:.3} J: error {:+.4}%",
        after_restart / 1e6,
        attributed2 / 1e6,
        100.0 * error2
    );
    assert!(
        error2.abs() < 0.02,
        "after the restart exported {after_restart} µJ vs attributed {attributed2} µJ:\n{}",
        String::from_utf8_lossy(&out2.stderr)
    );
}
