//! Issue 22, a busy disk: `serve --results` rewrites every live process's runtime files each
//! cycle. On a real disk that another process keeps busy (writes and fsyncs), those writes take
//! longer than a cycle; done on the cycle thread, they stretched 1 s cycles. Run as root by
//! `cargo xtask test busy_disk_`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use joular_tests::*;

/// Live processes, each woken five times a second (so each is charged, and its files rewritten,
/// every cycle).
const LIVE: usize = 150;
/// How long the busy disk is profiled.
const RUN: Duration = Duration::from_secs(14);

/// Bytes a second the loop device writes: a disk shared with others gives each little.
const DISK_WRITE_BPS: u64 = 4 << 20;
/// Dirty bytes the loop device may hold before its writers wait (its own limit, so no other
/// device of the host is slowed down).
const DISK_DIRTY_BYTES: u64 = 32 << 20;
/// The cgroup v1 rule that limits the writes of every task in the root group (all of them here,
/// the kernel's writeback and journal threads included) to one device.
const WRITE_BPS_RULE: &str = "/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device";

/// A real ext4 filesystem on a file-backed loop device, unmounted and detached when dropped.
struct LoopExt4 {
    image: tempfile::NamedTempFile,
    device: String,
    mount: tempfile::TempDir,
    throttled: bool,
}

impl LoopExt4 {
    fn create(size_mb: u64) -> Self {
        // On the host's disk (not a tmpfs), and with direct I/O: the loop device's writes reach
        // that disk, not the host's page cache.
        let image =
            tempfile::Builder::new().prefix("joular-busy-disk-").suffix(".img").tempfile_in("/var/tmp").unwrap();
        image.as_file().set_len(size_mb << 20).unwrap();
        let mkfs = Command::new("mkfs.ext4").args(["-q", "-F"]).arg(image.path()).status().unwrap();
        assert!(mkfs.success(), "mkfs.ext4 {}", image.path().display());
        let out =
            Command::new("losetup").args(["--find", "--show", "--direct-io=on"]).arg(image.path()).output().unwrap();
        assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
        let device = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let mount = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount").arg(&device).arg(mount.path()).status().unwrap();
        if !mounted.success() {
            let _ = Command::new("losetup").args(["-d", &device]).status();
            panic!("mount {device} on {}", mount.path().display());
        }
        LoopExt4 { image, device, mount, throttled: false }
    }

    fn path(&self) -> &Path {
        self.mount.path()
    }

    /// `major:minor` of the loop device.
    fn dev(&self) -> String {
        let rdev = std::os::unix::fs::MetadataExt::rdev(&std::fs::metadata(&self.device).unwrap());
        format!("{}:{}", libc::major(rdev), libc::minor(rdev))
    }

    /// Makes the device a slow, busy disk: it writes [`DISK_WRITE_BPS`] (the cgroup v1 blkio
    /// throttle), and a writer that dirties more than [`DISK_DIRTY_BYTES`] of it waits for it
    /// (the device's own strict dirty limit), as on a disk that cannot keep up.
    fn slow_down(&mut self) {
        let dev = self.dev();
        let bdi = Path::new("/sys/class/bdi").join(&dev);
        std::fs::write(WRITE_BPS_RULE, format!("{dev} {DISK_WRITE_BPS}"))
            .unwrap_or_else(|e| panic!("{WRITE_BPS_RULE}: {e} (the test needs the blkio throttle)"));
        self.throttled = true;
        for (file, value) in [("max_bytes", DISK_DIRTY_BYTES), ("strict_limit", 1)] {
            std::fs::write(bdi.join(file), value.to_string())
                .unwrap_or_else(|e| panic!("{}: {e}", bdi.join(file).display()));
        }
    }

    fn unthrottle(&mut self) {
        if std::mem::take(&mut self.throttled) {
            let dev = self.dev();
            let _ = std::fs::write(WRITE_BPS_RULE, format!("{dev} 0"));
            let bdi = Path::new("/sys/class/bdi").join(&dev);
            let _ = std::fs::write(bdi.join("strict_limit"), "0");
            let _ = std::fs::write(bdi.join("max_bytes"), "0");
        }
    }
}

impl Drop for LoopExt4 {
    fn drop(&mut self) {
        self.unthrottle();
        let _ = Command::new("umount").arg(self.mount.path()).status();
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
        let _ = self.image.as_file().set_len(0);
    }
}

/// Children killed when dropped.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A process that keeps the disk under `dir` busy, as a backup or a build does: a file written
/// over and over, 1 MiB at a time, as fast as the disk lets it.
fn busy_disk(dir: &Path) -> Child {
    let script = r#"
        my $f = shift;
        my $mb = "x" x (1 << 20);
        while (1) {
            open(my $out, ">", $f) or die "$f: $!";
            print $out $mb for 1 .. 256;
            close $out;
        }
    "#;
    Command::new("perl").args(["-e", script]).arg(dir.join("busy")).spawn().unwrap()
}

/// A process woken five times a second for a few µs of work, with no child (no fork per wake).
fn live_process() -> Child {
    Command::new("perl")
        .args(["-e", "while (1) { select(undef, undef, undef, 0.2); my $x = 0; $x += $_ for 1 .. 200 }"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// The run directory of `pid` under `results`, if any.
fn run_dir(results: &Path, pid: u32) -> Option<PathBuf> {
    std::fs::read_dir(results)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("{pid}-"))))
}

#[test]
fn busy_disk_serve_results_keeps_its_cadence_and_writes_every_live_process() {
    let mut disk = LoopExt4::create(1024);
    // The cycles' JSON lines on a tmpfs: what is measured is the result tree's writes.
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let (json, results) = (shm.path().join("serve.jsonl"), disk.path().join("results"));
    let live = Children((0..LIVE).map(|_| live_process()).collect());
    let listen = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let mut prof = Command::new(bin())
        .args(["serve", "--listen", &listen, "--results", "--json"])
        .arg(&json)
        .arg("--output")
        .arg(&results)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start joular-ebpf");
    let stderr = StderrTap::await_profiling(&mut prof, Duration::from_secs(60));
    disk.slow_down();
    let busy = Children(vec![busy_disk(disk.path())]);
    thread::sleep(RUN);
    // The end-of-run files are written at full speed: what is checked is the cadence, not how
    // long a throttled disk takes to take 150 trees.
    drop(busy);
    disk.unthrottle();
    // SAFETY: kill has no memory effects.
    unsafe { libc::kill(prof.id() as i32, libc::SIGINT) };
    let out = stderr.into_output(wait_bounded(prof, Duration::from_secs(60)));
    assert_success(&out);

    let cycles = read_jsonl(&json);
    let lengths_s: Vec<f64> =
        cycles.iter().map(|c| (c["end_ns"].as_u64().unwrap() - c["start_ns"].as_u64().unwrap()) as f64 / 1e9).collect();
    eprintln!("busy disk: {} live processes, cycles {lengths_s:.3?}", LIVE);
    assert!(cycles.len() >= 8, "only {} cycles in {RUN:?}", cycles.len());
    // Every cycle but the last, which ends at the interrupt.
    let mut full = lengths_s[..lengths_s.len() - 1].to_vec();
    full.sort_by(f64::total_cmp);
    let median_s = full[full.len() / 2];
    assert!((0.9..=1.1).contains(&median_s), "median cycle {median_s:.3} s, not 1 s: {lengths_s:.3?}");

    // Every live process has its tree: this cycle's power and the run's totals.
    let mut missing = Vec::new();
    for child in &live.0 {
        let pid = child.id();
        let complete = run_dir(&results, pid).is_some_and(|dir| {
            dir.join(format!("all/runtime/methods/joularJX-{pid}-all-methods-power.csv")).is_file()
                && dir.join("summary.json").is_file()
        });
        if !complete {
            missing.push(pid);
        }
    }
    assert!(missing.is_empty(), "{} of {LIVE} live processes lack their files: {missing:?}", missing.len());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("could not be written"), "{stderr}");
}
