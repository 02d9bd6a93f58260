//! Helpers for the root integration tests: the profiler binary, Java fixtures, /proc reads.
//! `cargo xtask test` builds the binary and the fixtures and passes their paths in
//! `JOULAR_BIN` and `JOULAR_JAVA_DIR`; without them the tests fail, they never skip.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod apps;
pub mod attack;
pub mod child;
pub mod devices;
pub mod fake_jvm;
pub mod fake_qemu;
pub mod java_stack;
pub mod jfr;
pub mod jfr_signals;
pub mod jni;
pub mod leaf_distance;
pub mod results;
pub mod sampler_cost;
pub mod statistical;
pub mod stderr_tap;
pub mod tmpfs;

pub use child::{await_ready, wait_with_rusage, KillOnDrop};
pub use jni::build_jni_library;
pub use results::{csv_rows, profile_outputs, result_dir, ProfiledRun};
pub use stderr_tap::StderrTap;

pub fn bin() -> PathBuf {
    let p = PathBuf::from(
        std::env::var_os("JOULAR_BIN").expect("JOULAR_BIN is not set: run these tests with `cargo xtask test`"),
    );
    assert!(p.exists(), "JOULAR_BIN={} does not exist: run `cargo xtask test`", p.display());
    p
}

pub fn java_dir() -> PathBuf {
    PathBuf::from(
        std::env::var_os("JOULAR_JAVA_DIR")
            .expect("JOULAR_JAVA_DIR is not set: run these tests with `cargo xtask test`"),
    )
}

/// The `java` launcher of a JDK: 17 is the system's; `cargo xtask test` installs 11, 21 and 25
/// and passes theirs in `JOULAR_JAVA_11`, `JOULAR_JAVA_21` and `JOULAR_JAVA_25`.
pub fn java_launcher(jdk: u32) -> String {
    if jdk == 17 {
        return "java".into();
    }
    let var = format!("JOULAR_JAVA_{jdk}");
    let p = std::env::var(&var).unwrap_or_else(|_| panic!("{var} is not set: run these tests with `cargo xtask test`"));
    assert!(std::path::Path::new(&p).exists(), "{var}={p} does not exist: run `cargo xtask test`");
    p
}

/// Java command line for a fixture class, with frame pointers kept.
pub fn java_cmd(class: &str, args: &[&str], jvm_flags: &[&str]) -> Vec<String> {
    java_cmd_on("java", class, args, jvm_flags)
}

/// [`java_cmd`] with another JDK's launcher.
pub fn java_cmd_on(java: &str, class: &str, args: &[&str], jvm_flags: &[&str]) -> Vec<String> {
    let mut flags = vec!["-XX:+PreserveFramePointer"];
    flags.extend_from_slice(jvm_flags);
    java_cmd_bare_on(java, class, args, &flags)
}

/// A fixture's command line with only `jvm_flags`: no frame pointers unless asked for, as
/// JVMs in production run.
pub fn java_cmd_bare_on(java: &str, class: &str, args: &[&str], jvm_flags: &[&str]) -> Vec<String> {
    let mut v = vec![java.to_string()];
    v.extend(jvm_flags.iter().map(|s| s.to_string()));
    v.extend(["-cp".into(), java_dir().display().to_string(), class.into()]);
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// MethodSplit's flags for a split by method: no inlining, so each method keeps its frames,
/// and no echo of the compile command on stdout.
pub const METHOD_SPLIT_FLAGS: [&str; 2] = ["-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,MethodSplit::*"];

/// A running fixture JVM; killed on drop.
pub struct Jvm {
    pub child: KillOnDrop,
}

impl Jvm {
    /// Starts a fixture and waits for its `ready` line.
    pub fn start(class: &str, args: &[&str], jvm_flags: &[&str]) -> Self {
        Self::start_on("java", class, args, jvm_flags)
    }

    /// The MethodSplit fixture for 60 s, its methods kept apart ([`METHOD_SPLIT_FLAGS`]).
    pub fn method_split() -> Self {
        Self::start("MethodSplit", &["60"], &METHOD_SPLIT_FLAGS)
    }

    /// [`Jvm::start`] with another JDK's launcher.
    pub fn start_on(java: &str, class: &str, args: &[&str], jvm_flags: &[&str]) -> Self {
        Self::start_argv(class, java_cmd_on(java, class, args, jvm_flags))
    }

    /// [`Jvm::start_on`] with only `jvm_flags` (see [`java_cmd_bare_on`]).
    pub fn start_bare_on(java: &str, class: &str, args: &[&str], jvm_flags: &[&str]) -> Self {
        Self::start_argv(class, java_cmd_bare_on(java, class, args, jvm_flags))
    }

    /// [`Jvm::start`] in the working directory `cwd` (where attach trigger files go first).
    pub fn start_in(cwd: &std::path::Path, class: &str, args: &[&str], jvm_flags: &[&str]) -> Self {
        let argv = java_cmd(class, args, jvm_flags);
        Self::start_command(class, Command::new(&argv[0]).args(&argv[1..]).current_dir(cwd))
    }

    fn start_argv(class: &str, argv: Vec<String>) -> Self {
        Self::start_command(class, Command::new(&argv[0]).args(&argv[1..]))
    }

    fn start_command(class: &str, command: &mut Command) -> Self {
        let mut child = command.stdout(Stdio::piped()).spawn().expect("start java");
        await_ready(&mut child, &format!("fixture {class}"));
        Self { child: KillOnDrop::new(child) }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// tid of the thread with this name (fixtures name their workers).
    pub fn tid_of(&self, name: &str) -> u32 {
        thread_names(self.pid()).into_iter().find(|(_, n)| n == name).unwrap_or_else(|| panic!("no thread {name}")).0
    }
}

pub fn thread_names(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten() {
        let Ok(tid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Ok(c) = std::fs::read_to_string(e.path().join("comm")) {
            out.push((tid, c.trim_end().to_string()));
        }
    }
    out
}

/// utime + stime of one thread, in jiffies.
pub fn thread_jiffies(pid: u32, tid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).expect("task stat");
    let after = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields after the comm start at field 3 (state); utime is 14 and stime 15.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

pub fn ns_per_jiffy() -> u64 {
    // SAFETY: sysconf has no preconditions.
    1_000_000_000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64
}

/// Runs the profiler to completion (bounded) and returns its output.
pub fn profile(args: &[&str], timeout: Duration) -> Output {
    let child = Command::new(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start joular-ebpf");
    wait_bounded(child, timeout)
}

pub fn wait_bounded(mut child: Child, timeout: Duration) -> Output {
    // Read as it comes: a child whose output outgrows the pipe (64 KiB: the end summary of a host
    // run lists every process) would otherwise block on it and never exit.
    let (stdout, stderr) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() };
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let status = child.wait().expect("wait");
            let out = Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() };
            panic!(
                "joular-ebpf did not finish within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads `pipe` to its end on a thread of its own.
pub fn drain<R: std::io::Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

pub fn read_jsonl(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("valid JSON line"))
        .collect()
}

/// Sum of a numeric thread field over all cycles, per tid.
pub fn per_thread_sum(cycles: &[Value], field: &str) -> HashMap<u64, f64> {
    let mut m = HashMap::new();
    for c in cycles {
        for t in c["threads"].as_array().expect("threads array") {
            *m.entry(t["tid"].as_u64().unwrap()).or_insert(0.0) += t[field].as_f64().unwrap_or(0.0);
        }
    }
    m
}

pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "joular-ebpf failed ({})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fake powercap tree (one package zone, one socket holding every CPU) whose `energy_uj` a
/// background thread advances at a constant power, replaced atomically so readers never see
/// a partial write. Stops when dropped.
pub struct FakePowercap {
    pub root: tempfile::TempDir,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    outage: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakePowercap {
    pub fn start(power_w: f64) -> Self {
        let root = tempfile::tempdir().unwrap();
        let zone = root.path().join("class/powercap/intel-rapl:0");
        std::fs::create_dir_all(&zone).unwrap();
        std::fs::write(zone.join("name"), "package-0\n").unwrap();
        std::fs::write(zone.join("max_energy_range_uj"), "262143328850\n").unwrap();
        std::fs::write(zone.join("energy_uj"), "1000\n").unwrap();
        let cpus = std::thread::available_parallelism().unwrap().get();
        for cpu in 0..cpus {
            let topo = root.path().join(format!("devices/system/cpu/cpu{cpu}/topology"));
            std::fs::create_dir_all(&topo).unwrap();
            std::fs::write(topo.join("physical_package_id"), "0\n").unwrap();
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let outage = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (stop2, outage2, zone2) = (stop.clone(), outage.clone(), zone.clone());
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                if outage2.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::remove_file(zone2.join("energy_uj"));
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                let uj = 1000.0 + power_w * t0.elapsed().as_secs_f64() * 1e6;
                let tmp = zone2.join(".energy_uj.tmp");
                std::fs::write(&tmp, format!("{}\n", uj as u64)).unwrap();
                std::fs::rename(&tmp, zone2.join("energy_uj")).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Self { root, stop, outage, thread: Some(thread) }
    }

    /// While on, `energy_uj` is gone (reads fail), as when a sysfs read errors mid-run; the
    /// counter keeps advancing underneath and reappears at its true value.
    pub fn set_outage(&self, on: bool) {
        self.outage.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn sysfs_root(&self) -> String {
        self.root.path().display().to_string()
    }
}

impl Drop for FakePowercap {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
