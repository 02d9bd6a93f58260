//! Issue 28: `serve --vm-energy-dir DIR` writes into a directory its guests may share. A user
//! who can write there (here `nobody`, in a sticky world-writable DIR) plants a symlink to
//! root's files at a VM's name, and a directory of their own at another's: neither is written
//! through or into, the run says so, and the VM next to them is still exported.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use joular_tests::attack::{as_nobody, sticky_dir, Victim};
use joular_tests::*;

#[test]
fn security_vm_energy_dir_planted_symlink_and_foreign_directory_are_not_followed() {
    let work = tempfile::tempdir().unwrap();
    let shared = sticky_dir();
    let dir = shared.path();
    let victim = Victim::new(&["energy_uj", "power_w"]);
    as_nobody(&format!("ln -s {} {}/linkedvm", victim.dir.display(), dir.display()));
    as_nobody(&format!("mkdir -p {0}/theirvm/intel-rapl:0 && chmod -R 777 {0}/theirvm", dir.display()));
    let rapl = FakePowercap::start(40.0);
    let _vms: Vec<KillOnDrop> =
        ["linkedvm", "theirvm", "goodvm"].iter().map(|name| fake_qemu::start(work.path(), name)).collect();
    let listen =
        format!("127.0.0.1:{}", std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    let mut serve = Command::new(bin())
        .args(["serve", "--listen", &listen, "--energy-source", "powercap", "--interval", "0.5"])
        .args(["--sysfs-root", &rapl.sysfs_root(), "--vm-energy-dir"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let tap = StderrTap::await_profiling(&mut serve, Duration::from_secs(60));
    let good = dir.join("goodvm/intel-rapl:0/energy_uj");
    let start = Instant::now();
    let counted = || std::fs::read_to_string(&good).ok().and_then(|t| t.trim().parse::<u64>().ok()).unwrap_or(0);
    while counted() == 0 {
        assert!(start.elapsed() < Duration::from_secs(30), "goodvm was never exported");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: a signal to our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) }, 0);
    let out = tap.into_output(wait_bounded(serve, Duration::from_secs(60)));
    assert_success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);

    victim.assert_untouched("a symlink planted at a VM's name");
    assert!(std::fs::symlink_metadata(dir.join("linkedvm")).unwrap().file_type().is_symlink());
    assert!(stderr.contains("VM linkedvm: its energy is not exported"), "{stderr}");
    assert!(stderr.contains("is a symlink"), "{stderr}");
    let theirs: Vec<_> = std::fs::read_dir(dir.join("theirvm/intel-rapl:0")).unwrap().collect();
    assert!(theirs.is_empty(), "written into nobody's directory: {theirs:?}");
    assert!(
        stderr.contains("VM theirvm: its energy is not exported") && stderr.contains("belongs to uid 65534"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("its energy is not exported").count(), 2, "warned once per VM: {stderr}");
}
