//! Issue 10 acceptance: a local user (`nobody`) and a container (a PID + mount namespace with
//! its own /tmp and JDK) attack the root profiler through everything a target controls. Each
//! test performs the attack for real, then checks that it failed and that the legitimate
//! result (Java method names) is still produced, or a clear error given. Attacks that involve
//! symlinks run under `fs.protected_symlinks=0` and `=1`. Run as root by `cargo xtask test`.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use joular_tests::attack::{as_nobody, open_dir, tag, Sysctl, NOBODY};
use joular_tests::*;

const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// The MethodSplit fixture's class, where a JVM of any user can load it.
fn classes() -> tempfile::TempDir {
    let dir = open_dir(false);
    std::fs::copy(java_dir().join("MethodSplit.class"), dir.path().join("MethodSplit.class")).unwrap();
    std::fs::set_permissions(dir.path().join("MethodSplit.class"), std::fs::Permissions::from_mode(0o644)).unwrap();
    dir
}

/// A fixture JVM run as `uid`, in `cwd`; killed on drop.
struct UserJvm {
    child: KillOnDrop,
    _classes: tempfile::TempDir,
}

impl UserJvm {
    fn start(uid: u32, cwd: &Path) -> Self {
        let classes = classes();
        let mut cmd = Command::new("java");
        cmd.args([
            "-XX:+PreserveFramePointer",
            "-XX:CompileCommand=quiet",
            "-XX:CompileCommand=dontinline,MethodSplit::*",
            "-cp",
        ])
        .arg(classes.path())
        .args(["MethodSplit", "60"])
        .current_dir(cwd)
        .stdout(Stdio::piped());
        if uid != 0 {
            cmd.uid(uid).gid(uid);
        }
        let mut child = cmd.spawn().unwrap();
        await_ready(&mut child, "fixture JVM");
        UserJvm { child: KillOnDrop::new(child), _classes: classes }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// The profiler's result of one run: exit status, stderr, JSON cycles, peak RSS.
struct Run {
    success: bool,
    stderr: String,
    cycles: Vec<serde_json::Value>,
    max_rss_kb: i64,
    elapsed: Duration,
}

/// Profiles `pid` for `seconds` as root, with results in a private directory.
fn profile_pid(pid: u32, seconds: u32) -> Run {
    profile_pid_with(pid, seconds, &[])
}

fn profile_pid_with(pid: u32, seconds: u32, extra: &[&str]) -> Run {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("cycles.jsonl");
    let started = Instant::now();
    let mut child = Command::new(bin())
        .args(["--pid", &pid.to_string(), "--duration", &seconds.to_string(), "--energy-source", "model"])
        .arg("--json")
        .arg(&json)
        .arg("--output")
        .arg(out.path().join("results"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reader = drain(child.stderr.take());
    let (status, max_rss_kb) = wait_with_rusage(&mut child, Duration::from_secs(seconds as u64 + 60));
    let stderr_bytes = reader.join().unwrap();
    assert!(
        !stderr_bytes.contains(&0x1b),
        "an escape sequence reached the terminal: {}",
        String::from_utf8_lossy(&stderr_bytes)
    );
    let cycles = if json.exists() { read_jsonl(&json) } else { Vec::new() };
    Run {
        success: status == 0,
        stderr: String::from_utf8_lossy(&stderr_bytes).into_owned(),
        cycles,
        max_rss_kb,
        elapsed: started.elapsed(),
    }
}

impl Run {
    /// Whether any sampled stack of `pid` holds a JIT-compiled MethodSplit method.
    fn has_java_names(&self) -> bool {
        self.cycles.iter().flat_map(|c| c["threads"].as_array().cloned().unwrap_or_default()).any(|t| {
            t["stacks"].as_array().into_iter().flatten().any(|s| {
                s["frames"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|f| f["kind"] == "java_jit" && f["name"].as_str().is_some_and(|n| n.contains("MethodSplit.")))
            })
        })
    }

    fn assert_ok_with_names(&self, what: &str) {
        assert!(self.success, "{what}: profiler failed\n{}", self.stderr);
        assert!(self.has_java_names(), "{what}: no Java method named\n{}", self.stderr);
    }
}

/// A "container": PID + mount namespace, its own tmpfs /tmp, and the host JDK seen through an
/// overlay where the container planted `bin/jcmd` (which would leave a marker on the host if
/// anyone ran it) and, per `release`, a hostile `release` file. Its JVM runs as nobody, and
/// the container plants a dead attach socket at `/tmp/.java_pid<nspid>` before we attach.
struct Container {
    child: Child,
    /// The JVM's pid as the host sees it.
    host_pid: u32,
    marker: PathBuf,
    _classes: tempfile::TempDir,
}

impl Container {
    fn start(release: &str) -> Self {
        let java = std::fs::canonicalize(
            String::from_utf8(Command::new("sh").args(["-c", "command -v java"]).output().unwrap().stdout)
                .unwrap()
                .trim(),
        )
        .unwrap();
        let jdk = java.parent().unwrap().parent().unwrap().to_path_buf();
        let tag = tag();
        let marker = PathBuf::from(format!("/var/tmp/joular-escaped-{tag}"));
        let classes = classes();
        let hostile_release = match release {
            "big" => "rm -f \"$JDK/release\"; truncate -s 3G \"$JDK/release\"",
            "kmsg" => "rm -f \"$JDK/release\"; ln -s /proc/kmsg \"$JDK/release\"",
            _ => "true",
        };
        let script = format!(
            r#"set -e
JDK={jdk}
mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir /tmp/.upper /tmp/.work
mount -t overlay overlay -o lowerdir="$JDK",upperdir=/tmp/.upper,workdir=/tmp/.work "$JDK"
printf '#!/bin/sh\necho escaped > {marker}\n' > "$JDK/bin/jcmd"
chmod 755 "$JDK/bin/jcmd"
{hostile_release}
cd /tmp
setpriv --reuid=65534 --regid=65534 --clear-groups "$JDK/bin/java" -XX:+PreserveFramePointer \
  -XX:CompileCommand=quiet -XX:CompileCommand=dontinline,MethodSplit::* -Djoular.tag={tag} \
  -cp {classes} MethodSplit 60 > /tmp/java.out &
JPID=$!
until grep -qs ready /tmp/java.out; do sleep 0.1; done
setpriv --reuid=65534 --regid=65534 --clear-groups {python} -c \
  "import socket; s = socket.socket(socket.AF_UNIX); s.bind('/tmp/.java_pid$JPID'); s.close()"
test -S /tmp/.java_pid$JPID
echo planted $JPID
wait
"#,
            jdk = jdk.display(),
            marker = marker.display(),
            classes = classes.path().display(),
            python = SYSTEM_PYTHON,
        );
        let mut child = Command::new("unshare")
            .args(["--pid", "--mount", "--fork", "--kill-child", "--propagation", "private", "sh", "-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.starts_with("planted") {
            line.clear();
            assert!(reader.read_line(&mut line).unwrap() > 0, "the container did not start its JVM");
        }
        let host_pid = find_pid_by_arg(&format!("-Djoular.tag={tag}")).expect("the container's JVM on the host");
        Container { child, host_pid, marker, _classes: classes }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.marker);
    }
}

fn find_pid_by_arg(arg: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        cmdline.split(|&b| b == 0).any(|a| a == arg.as_bytes()).then_some(pid)
    })
}

#[test]
fn a_container_cannot_make_the_profiler_run_its_jcmd_and_still_gets_its_java_methods_named() {
    for protected in [0, 1] {
        let _sysctl = Sysctl::set("fs.protected_symlinks", protected);
        let container = Container::start("normal");
        let run = profile_pid(container.host_pid, 5);
        assert!(!container.marker.exists(), "protected_symlinks={protected}: the container's jcmd ran on the host");
        // The dead socket it planted is its JVM's own: replaced, and the attach goes through.
        run.assert_ok_with_names(&format!("container, protected_symlinks={protected}"));
    }
}

#[test]
fn a_hostile_jdk_release_file_neither_exhausts_memory_nor_blocks_the_profiler() {
    for release in ["big", "kmsg"] {
        for protected in [0, 1] {
            let _sysctl = Sysctl::set("fs.protected_symlinks", protected);
            let container = Container::start(release);
            let run = profile_pid(container.host_pid, 3);
            let what = format!("release={release}, protected_symlinks={protected}");
            run.assert_ok_with_names(&what);
            assert!(run.elapsed < Duration::from_secs(30), "{what}: took {:?}", run.elapsed);
            assert!(run.max_rss_kb < 300 * 1024, "{what}: peak RSS {} kB", run.max_rss_kb);
            assert!(run.stderr.contains("release"), "{what}: the refusal is not said: {}", run.stderr);
        }
    }
}

#[test]
fn a_hard_linked_trigger_file_is_neither_truncated_nor_given_away() {
    // nobody may link a file it does not own only without protected_hardlinks.
    let _hardlinks = Sysctl::set("fs.protected_hardlinks", 0);
    let victim_dir = open_dir(false);
    let victim = victim_dir.path().join("secret");
    std::fs::write(&victim, "root's secret\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let cwd = open_dir(true);
    let jvm = UserJvm::start(NOBODY, cwd.path());
    as_nobody(&format!("ln {} {}/.attach_pid{}", victim.display(), cwd.path().display(), jvm.pid()));

    let run = profile_pid(jvm.pid(), 5);
    let meta = std::fs::metadata(&victim).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's secret\n", "the victim was truncated");
    assert_eq!((meta.uid(), meta.gid(), meta.mode() & 0o7777), (0, 0, 0o600), "the victim was handed over");
    run.assert_ok_with_names("hard-linked trigger");
}

/// A listener that records every connection and byte it gets, and answers with a flood of
/// terminal escape sequences and a 1 MB line.
const EVIL_LISTENER: &str = r#"
import os, socket, sys
path, log = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX)
s.bind(path)
os.chmod(path, 0o600)
s.listen(5)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    with open(log, "a") as f:
        f.write("accepted\n")
    c.settimeout(1)
    try:
        data = c.recv(4096)
    except OSError:
        data = b""
    with open(log, "a") as f:
        f.write("got %d bytes\n" % len(data))
    try:
        c.sendall(b"0\n" + b"\x1b[2J\x1b]0;pwned\x07" * 1000 + b"A" * 1000000 + b"\n")
    except OSError:
        pass
    c.close()
"#;

/// Starts [`EVIL_LISTENER`] as `uid` at `path`, logging to `log`.
fn evil_listener(uid: u32, path: &Path, log: &Path) -> Child {
    let mut cmd = Command::new(SYSTEM_PYTHON);
    cmd.args(["-c", EVIL_LISTENER]).arg(path).arg(log).stdout(Stdio::piped());
    if uid != 0 {
        cmd.uid(uid).gid(uid);
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "listening");
    child
}

#[test]
fn an_attach_socket_planted_by_another_user_is_never_talked_to() {
    for protected in [0, 1] {
        let _sysctl = Sysctl::set("fs.protected_symlinks", protected);
        // A root JVM; nobody plants a live socket at its attach path before the profiler comes.
        let jvm = Jvm::start("MethodSplit", &["60"], &[]);
        let socket = PathBuf::from(format!("/tmp/.java_pid{}", jvm.pid()));
        let logs = open_dir(true);
        let log = logs.path().join("listener.log");
        let _listener = KillOnDrop::new(evil_listener(NOBODY, &socket, &log));

        // Attach is the fallback for JVMs whose HotSpot tables cannot be read: force it.
        let run = profile_pid_with(jvm.pid(), 3, &["--java-symbols", "perf-map"]);
        assert!(run.success, "{}", run.stderr);
        let seen = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(seen.is_empty(), "protected_symlinks={protected}: the planted socket was contacted: {seen}");
        assert!(run.stderr.contains("refusing attach socket"), "no clear refusal: {}", run.stderr);
        assert!(run.stderr.contains("owned by uid 65534"), "{}", run.stderr);
        let _ = std::fs::remove_file(&socket);
    }
}

#[test]
fn a_symlinked_attach_socket_is_never_followed() {
    for protected in [0, 1] {
        let _sysctl = Sysctl::set("fs.protected_symlinks", protected);
        let jvm = Jvm::start("MethodSplit", &["60"], &[]);
        // A root service's socket (think of a container runtime's) that nobody points at.
        let service_dir = tempfile::tempdir().unwrap();
        let service = service_dir.path().join("service.sock");
        let log = service_dir.path().join("service.log");
        let _service = KillOnDrop::new(evil_listener(0, &service, &log));
        std::fs::set_permissions(service_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let link = PathBuf::from(format!("/tmp/.java_pid{}", jvm.pid()));
        as_nobody(&format!("ln -s {} {}", service.display(), link.display()));

        let run = profile_pid_with(jvm.pid(), 3, &["--java-symbols", "perf-map"]);
        assert!(run.success, "{}", run.stderr);
        let seen = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(seen.is_empty(), "protected_symlinks={protected}: the root service was contacted: {seen}");
        assert!(run.stderr.contains("refusing attach socket") && run.stderr.contains("symlink"), "{}", run.stderr);
        let _ = std::fs::remove_file(&link);
    }
}

#[test]
fn a_socket_of_the_jvm_user_served_by_another_process_gets_no_command() {
    // Same uid as the JVM, right mode: only the peer check (SO_PEERCRED) tells it is not the JVM.
    let cwd = open_dir(true);
    let jvm = UserJvm::start(NOBODY, cwd.path());
    let socket = PathBuf::from(format!("/tmp/.java_pid{}", jvm.pid()));
    let logs = open_dir(true);
    let log = logs.path().join("listener.log");
    let _listener = KillOnDrop::new(evil_listener(NOBODY, &socket, &log));

    let run = profile_pid_with(jvm.pid(), 3, &["--java-symbols", "perf-map"]);
    assert!(run.success, "{}", run.stderr);
    let seen = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !seen.lines().any(|l| l.starts_with("got ") && l != "got 0 bytes"),
        "a command was sent to an impostor: {seen}"
    );
    assert!(run.stderr.contains("not by the JVM"), "no clear refusal: {}", run.stderr);
    let _ = std::fs::remove_file(&socket);
}

/// The capabilities the profiler needs to profile a JVM of its own user, and nothing else
/// (see docs/deployment.md for what each is for): no CAP_SYS_PTRACE, no CAP_SETUID.
const LEAST_CAPS: &str = "cap_bpf,cap_perfmon,cap_dac_read_search,cap_syslog,cap_checkpoint_restore+ep";

#[test]
fn an_unprivileged_user_with_file_capabilities_profiles_its_own_jvm() {
    let setcap = Command::new("sh").args(["-c", "command -v setcap"]).output().unwrap();
    assert!(setcap.status.success(), "setcap missing: `cargo xtask test` installs libcap2-bin");
    let tools = open_dir(false);
    let profiler = tools.path().join("joular-ebpf");
    std::fs::copy(bin(), &profiler).unwrap();
    let st = Command::new("setcap").arg(LEAST_CAPS).arg(&profiler).status().unwrap();
    assert!(st.success(), "setcap {LEAST_CAPS} failed");

    let home = open_dir(true);
    let jvm = UserJvm::start(NOBODY, home.path());
    let json = home.path().join("cycles.jsonl");
    let out = Command::new(&profiler)
        .args(["--pid", &jvm.pid().to_string(), "--duration", "4", "--energy-source", "model"])
        .arg("--json")
        .arg(&json)
        .arg("--output")
        .arg(home.path().join("results"))
        .current_dir(home.path())
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "as nobody with {LEAST_CAPS}: {stderr}");
    let run = Run {
        success: true,
        stderr: stderr.into_owned(),
        cycles: read_jsonl(&json),
        max_rss_kb: 0,
        elapsed: Duration::ZERO,
    };
    run.assert_ok_with_names("unprivileged with file capabilities");
}
