//! Helpers of the `--devices` root tests (`devices_bytes.rs`, `devices_energy.rs`): a veth pair
//! in a namespace of its own and a peer that reads from it, a loop-mounted filesystem, runs of
//! the `NetWork` fixture under `record --devices`, and readers of their `--json` cycles and
//! `summary.json`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::*;

/// A veth pair whose far end is in a network namespace of its own, with private addresses;
/// deleted on drop (a panic too).
pub struct Veth {
    pub ns: String,
    pub host_if: String,
    pub peer_ip: String,
}

pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Veth {
    pub fn create() -> Self {
        let id = std::process::id() % 250 + 1;
        let veth =
            Veth { ns: format!("joular-dev-{id}"), host_if: format!("jdev{id}a"), peer_ip: format!("10.213.{id}.2") };
        let peer_if = format!("jdev{id}b");
        ip(&["netns", "add", &veth.ns]);
        ip(&["link", "add", &veth.host_if, "type", "veth", "peer", "name", &peer_if]);
        ip(&["link", "set", &peer_if, "netns", &veth.ns]);
        ip(&["addr", "add", &format!("10.213.{id}.1/24"), "dev", &veth.host_if]);
        ip(&["link", "set", &veth.host_if, "up"]);
        ip(&["netns", "exec", &veth.ns, "ip", "addr", "add", &format!("{}/24", veth.peer_ip), "dev", &peer_if]);
        ip(&["netns", "exec", &veth.ns, "ip", "link", "set", &peer_if, "up"]);
        ip(&["netns", "exec", &veth.ns, "ip", "link", "set", "lo", "up"]);
        veth
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        // Deleting the namespace deletes the pair's far end, and with it the pair.
        for args in [["netns", "del", &self.ns], ["link", "del", &self.host_if]] {
            let _ = Command::new("ip").args(args).stderr(Stdio::null()).status();
        }
    }
}

/// An interface no traffic goes through: one end of a veth pair whose two ends stay here, with
/// no address (this kernel has no `dummy` driver); deleted, with its peer, on drop.
pub struct Dummy {
    pub name: String,
}

impl Dummy {
    pub fn create() -> Self {
        let id = std::process::id() % 250 + 1;
        let name = format!("jidl{id}a");
        ip(&["link", "add", &name, "type", "veth", "peer", "name", &format!("jidl{id}b")]);
        ip(&["link", "set", &name, "up"]);
        Dummy { name }
    }
}

impl Drop for Dummy {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.name]).stderr(Stdio::null()).status();
    }
}

/// An interface's index in this network namespace.
pub fn ifindex(name: &str) -> u64 {
    let path = format!("/sys/class/net/{name}/ifindex");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")).trim().parse().unwrap()
}

/// Accepts one connection on `host` (port chosen by the kernel) and reads it to its end.
pub const PEER: &str = "import socket, sys
s = socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET)
s.bind((sys.argv[1], 0))
s.listen(1)
print('ready', s.getsockname()[1], flush=True)
c, _ = s.accept()
while c.recv(1 << 16):
    pass
";

/// A listener (in `netns` when given), killed on drop, and its port.
pub fn start_peer(netns: Option<&str>, host: &str) -> (KillOnDrop, u16) {
    let mut argv: Vec<&str> = match netns {
        Some(ns) => vec!["ip", "netns", "exec", ns, "python3"],
        None => vec!["python3"],
    };
    argv.extend(["-c", PEER, host]);
    let mut child = Command::new(argv[0]).args(&argv[1..]).stdout(Stdio::piped()).spawn().expect("start the peer");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("the peer's ready line");
    let port = line.trim().strip_prefix("ready ").and_then(|p| p.parse().ok());
    (KillOnDrop::new(child), port.unwrap_or_else(|| panic!("peer said {line:?}")))
}

pub struct DeviceRun {
    pub out: Output,
    pub cycles: Vec<Value>,
    /// The JVM's `summary.json`.
    pub summary: Value,
    pub _dir: tempfile::TempDir,
}

/// `record --devices DEVICES -- java NetWork ARGS` on a fake powercap, with `--json`.
pub fn record_network(devices: &str, args: &[&str]) -> DeviceRun {
    let rapl = FakePowercap::start(40.0);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.jsonl");
    let results = dir.path().join("results");
    let root = rapl.sysfs_root();
    let mut argv: Vec<String> =
        ["record", "--devices", devices, "--sysfs-root", &root, "--json"].iter().map(|s| s.to_string()).collect();
    argv.extend([json.display().to_string(), "--output".into(), results.display().to_string(), "--".into()]);
    argv.extend(java_cmd("NetWork", args, &[]));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = profile(&argv, Duration::from_secs(120));
    assert_success(&out);
    let summary = jvm_summary(&results);
    DeviceRun { out, cycles: read_jsonl(&json), summary, _dir: dir }
}

/// The `summary.json` of the process named `java` under `root`.
pub fn jvm_summary(root: &Path) -> Value {
    let dirs: Vec<PathBuf> = std::fs::read_dir(root).unwrap().flatten().map(|e| e.path()).collect();
    dirs.iter()
        .filter_map(|d| std::fs::read_to_string(d.join("summary.json")).ok())
        .map(|s| serde_json::from_str::<Value>(&s).unwrap())
        .find(|s| s["comm"] == "java")
        .unwrap_or_else(|| panic!("no java summary.json under {}: {dirs:?}", root.display()))
}

/// What the fixture says it moved (`sent N` / `wrote N`).
pub fn fixture_bytes(out: &Output, word: &str) -> u64 {
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(word)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{word} N` line in the fixture's output:\n{stdout}"))
}

pub fn bytes(row: &Value, class: &str) -> u64 {
    row[format!("{class}_bytes")].as_u64().unwrap_or_else(|| panic!("no {class}_bytes in {row}"))
}

/// The thread named `comm`'s bytes of `class` (0 when it has no row: it moved none).
pub fn thread_bytes(devices: &Value, comm: &str, class: &str) -> u64 {
    devices["threads"].as_array().unwrap().iter().filter(|t| t["comm"] == comm).map(|t| bytes(t, class)).sum()
}

/// Asserts that at least 95% of the process's `classes` bytes are on call paths through
/// `method` down to `java.lang.Thread.run`.
pub fn assert_on_path(devices: &Value, method: &str, classes: &[&str]) {
    let (mut on, mut all) = (0u64, 0u64);
    let mut elsewhere = Vec::new();
    for p in devices["paths"].as_array().unwrap() {
        let n: u64 = classes.iter().map(|c| bytes(p, c)).sum();
        all += n;
        let names: Vec<&str> = p["frames"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
        if names.iter().any(|f| f.contains(method)) && names.iter().any(|f| f.contains("java.lang.Thread.run")) {
            on += n;
        } else if n > 0 {
            elsewhere.push((n, p["tid"].clone(), names.join(" > ")));
        }
    }
    assert!(all > 0, "no {classes:?} bytes at all: {devices}");
    elsewhere.sort_by_key(|e| std::cmp::Reverse(e.0));
    elsewhere.truncate(5);
    let share = on as f64 / all as f64;
    assert!(
        share >= 0.95,
        "{:.1}% of the {classes:?} bytes on {method}'s path (>= 95%); the largest elsewhere: {elsewhere:#?}",
        share * 100.0
    );
}

/// Sum over the `--json` cycles of a thread's bytes of `class`.
pub fn cycles_thread_bytes(cycles: &[Value], comm: &str, class: &str) -> u64 {
    cycles.iter().filter(|c| !c["devices"].is_null()).map(|c| thread_bytes(&c["devices"], comm, class)).sum()
}

pub fn assert_close(counted: u64, moved: u64, what: &str) {
    assert!(
        counted >= moved && counted as f64 <= moved as f64 * 1.02,
        "{what}: {counted} bytes counted, {moved} moved (0 to 2% over expected)"
    );
}

/// Loopback traffic to `host` is counted as local, none as a network device's.
pub fn assert_loopback_is_local(host: &str) {
    let (_peer, port) = start_peer(None, host);
    let port = port.to_string();
    let run = record_network("network", &["net", host, &port, "67108864"]);
    let sent = fixture_bytes(&run.out, "sent ");
    let devices = &run.summary["devices"];
    assert_close(thread_bytes(devices, "sender", "net_local_tx"), sent, &format!("{host}: sender's net_local_tx"));
    let device_bytes: u64 = devices["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| bytes(t, "net_device_tx") + bytes(t, "net_device_rx"))
        .sum();
    assert_eq!(device_bytes, 0, "{host}: loopback counted as a network device's: {devices}");
    assert_on_path(devices, "NetWork.sendChunks", &["net_local_tx", "net_local_rx"]);
}

/// Whether a program named `joular_sys_exit` is loaded while `record --devices DEVICES` runs
/// (looked at once the run says it is profiling: everything is loaded then), and its stderr.
/// Only programs loaded after the run started count: a program of the test before may still
/// be listed for a moment after its profiler exited (the kernel frees it afterwards). The
/// machine-wide check failed so once in a local CI run of 9ed9457, after the `--devices
/// network` test, where `--devices cpu` had loaded no byte counter in every run before.
pub fn byte_counter_loaded(devices: &str) -> (bool, String) {
    let before = loaded_programs();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let mut child = Command::new(bin())
        .args(["record", "--devices", devices, "--output", results.to_str().unwrap(), "--", "sleep", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start joular-ebpf");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut head = String::new();
    while !head.contains("joular-ebpf: profiling") {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).expect("read stderr") > 0, "no profiling line: {head}");
        head.push_str(&line);
    }
    let new: Vec<(u64, String)> = loaded_programs().into_iter().filter(|p| !before.contains(p)).collect();
    let rest = drain(Some(stderr));
    let out = wait_bounded(child, Duration::from_secs(60));
    assert_success(&out);
    head.push_str(&String::from_utf8_lossy(&rest.join().unwrap()));
    assert!(new.iter().any(|(_, name)| name == "joular_sample"), "the profiler is not loaded? {new:?}");
    (new.iter().any(|(_, name)| name == "joular_sys_exit"), head)
}

/// Every BPF program loaded now: id and name (`bpftool -j prog show`).
fn loaded_programs() -> Vec<(u64, String)> {
    let out = Command::new("bpftool").args(["-j", "prog", "show"]).output().expect("run bpftool");
    assert!(out.status.success(), "bpftool prog show: {}", String::from_utf8_lossy(&out.stderr));
    let progs: Value = serde_json::from_slice(&out.stdout).expect("bpftool's JSON");
    progs
        .as_array()
        .expect("a list of programs")
        .iter()
        .filter_map(|p| Some((p["id"].as_u64()?, p["name"].as_str().unwrap_or_default().to_owned())))
        .collect()
}

/// `record --devices DEVICES FLAGS -- java CLASS ARGS` with `--json`, on a fake sysfs whose
/// powercap package draws 40 W and whose only units are the real `units` (`class/net/veth0`,
/// `block/loop3`: links into /sys), so other processes' traffic on the machine's own disks and
/// interfaces stays out of the test; while it runs, `during` runs on this thread.
pub fn record_energy(
    devices: &str,
    units: &[&str],
    flags: &[&str],
    class: &str,
    args: &[&str],
    during: impl FnOnce(),
) -> DeviceRun {
    let rapl = FakePowercap::start(40.0);
    for unit in units {
        let link = rapl.root.path().join(unit);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(Path::new("/sys").join(unit), &link).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.jsonl");
    let results = dir.path().join("results");
    let root = rapl.sysfs_root();
    let mut argv: Vec<String> =
        ["record", "--devices", devices, "--sysfs-root", &root].iter().map(|s| s.to_string()).collect();
    argv.extend(flags.iter().map(|s| s.to_string()));
    argv.extend(["--json".into(), json.display().to_string(), "--output".into(), results.display().to_string()]);
    argv.push("--".into());
    argv.extend(java_cmd(class, args, &[]));
    let child = Command::new(bin())
        .args(&argv)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start joular-ebpf");
    during();
    let out = wait_bounded(child, Duration::from_secs(90));
    assert_success(&out);
    let summary = jvm_summary(&results);
    DeviceRun { out, cycles: read_jsonl(&json), summary, _dir: dir }
}

/// Each cycle's `device_energy` entry of `device`.
pub fn device_energy<'a>(cycles: &'a [Value], device: &str) -> Vec<&'a Value> {
    cycles
        .iter()
        .flat_map(|c| c["device_energy"].as_array().into_iter().flatten())
        .filter(|d| d["device"] == device)
        .collect()
}

pub fn uj(v: &Value) -> f64 {
    v["energy_uj"].as_f64().unwrap_or_else(|| panic!("no energy_uj in {v}"))
}

/// Energy conserved per cycle: the class = processes + unattributed, each process = its
/// threads, each thread = its paths, the class = its units; nothing negative; labelled estimated.
pub fn assert_conserved(entries: &[&Value]) {
    for d in entries {
        assert_eq!(d["estimated"], true, "{d}");
        let total = uj(d);
        let tol = 1e-6 * total.max(1.0);
        let processes: Vec<&Value> = d["processes"].as_array().unwrap().iter().collect();
        let threads: Vec<&Value> = d["threads"].as_array().unwrap().iter().collect();
        let paths: Vec<&Value> = d["paths"].as_array().unwrap().iter().collect();
        let unattributed = d["unattributed_uj"].as_f64().unwrap();
        let sum = |vs: &[&Value]| vs.iter().map(|v| uj(v)).sum::<f64>();
        assert!((total - unattributed - sum(&processes)).abs() <= tol, "class != processes + unattributed: {d}");
        let units: Vec<&Value> = d["units"].as_array().unwrap().iter().collect();
        assert!((total - sum(&units)).abs() <= tol, "class != its units: {d}");
        for p in &processes {
            let mine: Vec<&Value> = threads.iter().copied().filter(|t| t["pid"] == p["pid"]).collect();
            assert!((uj(p) - sum(&mine)).abs() <= tol, "process != its threads: {d}");
        }
        for t in &threads {
            let mine: Vec<&Value> =
                paths.iter().copied().filter(|x| x["pid"] == t["pid"] && x["tid"] == t["tid"]).collect();
            assert!((uj(t) - sum(&mine)).abs() <= tol, "thread != its paths: {d}");
        }
        let all = processes.iter().chain(&threads).chain(&paths).chain(&units).map(|v| uj(v));
        assert!(all.chain([total, unattributed]).all(|e| e >= 0.0), "a negative figure: {d}");
    }
}

/// Joules of `device` attributed over the run: (to every process, to paths through `method`
/// down to Thread.run, to the thread named `comm`).
pub fn attributed_j(entries: &[&Value], method: &str, comm: &str) -> (f64, f64, f64) {
    let (mut all, mut on, mut thread) = (0.0, 0.0, 0.0);
    for d in entries {
        all += d["processes"].as_array().unwrap().iter().map(uj).sum::<f64>();
        thread += d["threads"].as_array().unwrap().iter().filter(|t| t["comm"] == comm).map(uj).sum::<f64>();
        for p in d["paths"].as_array().unwrap() {
            let names: Vec<&str> =
                p["frames"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
            if names.iter().any(|f| f.contains(method)) && names.iter().any(|f| f.contains("java.lang.Thread.run")) {
                on += uj(p);
            }
        }
    }
    (all / 1e6, on / 1e6, thread / 1e6)
}

/// Joules of the thread named `comm` over the run, and of them on paths through `method`.
pub fn thread_on_path_j(entries: &[&Value], comm: &str, method: &str) -> (f64, f64) {
    let (mut thread, mut on) = (0.0, 0.0);
    for d in entries {
        let tids: Vec<&Value> =
            d["threads"].as_array().unwrap().iter().filter(|t| t["comm"] == comm).map(|t| &t["tid"]).collect();
        thread += d["threads"].as_array().unwrap().iter().filter(|t| t["comm"] == comm).map(uj).sum::<f64>();
        for p in d["paths"].as_array().unwrap().iter().filter(|p| tids.contains(&&p["tid"])) {
            if p["frames"].as_array().unwrap().iter().any(|f| f["name"].as_str().unwrap().contains(method)) {
                on += uj(p);
            }
        }
    }
    (thread / 1e6, on / 1e6)
}

/// Per device entry, the rows of the threads named `comm` and every path row of their tids
/// (µJ, tid, frames): what a failed share check was made of.
pub fn thread_rows(entries: &[&Value], comm: &str) -> Vec<String> {
    entries
        .iter()
        .map(|d| {
            let threads: Vec<&Value> = d["threads"].as_array().unwrap().iter().filter(|t| t["comm"] == comm).collect();
            let paths: Vec<String> = d["paths"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| threads.iter().any(|t| t["tid"] == p["tid"]))
                .map(|p| {
                    let names: Vec<&str> =
                        p["frames"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
                    format!("{} uJ tid {} {}", uj(p) as u64, p["tid"], names.join(" > "))
                })
                .collect();
            let rows: Vec<String> = threads.iter().map(|t| format!("tid {} {} uJ", t["tid"], uj(t) as u64)).collect();
            format!("threads {rows:?} energy {} uJ; paths {paths:#?}", uj(d) as u64)
        })
        .collect()
}

/// The largest paths (µJ, frames) not through `method`.
pub fn off_path(entries: &[&Value], method: &str) -> Vec<(u64, String)> {
    let mut off: Vec<(u64, String)> = entries
        .iter()
        .flat_map(|d| d["paths"].as_array().unwrap())
        .filter_map(|p| {
            let names: Vec<&str> =
                p["frames"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
            (!names.iter().any(|n| n.contains(method))).then(|| (uj(p) as u64, names.join(" > ")))
        })
        .collect();
    off.sort_by_key(|o| std::cmp::Reverse(o.0));
    off.truncate(5);
    off
}

/// The JVM's CPU joules over the run's cycles (its processes' rows).
pub fn cpu_j(cycles: &[Value], pid: u64) -> f64 {
    cycles
        .iter()
        .flat_map(|c| c["processes"].as_array().into_iter().flatten())
        .filter(|p| p["pid"].as_u64() == Some(pid))
        .map(uj)
        .sum::<f64>()
        / 1e6
}

/// Issue 26 item 3 on the real model: the JVM's `summary.json` `device_energy` holds the
/// network joules `--json` gave it, its JoularJX `network/` call trees put them on
/// NetWork.sendChunks (>= 95%), `total/` is CPU + network per method, and each cycle's
/// evolution and runtime files are there.
pub fn assert_device_files(run: &DeviceRun, pid: u64) {
    let dir = std::fs::read_dir(run._dir.path().join("results"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|d| d.file_name().unwrap().to_str().unwrap().starts_with(&format!("{pid}-")))
        .expect("the JVM's result directory");
    let rows = |rel: &str| -> Vec<(String, f64)> {
        let text = std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        text.lines().map(|l| l.rsplit_once(',').map(|(n, j)| (n.to_owned(), j.parse().unwrap())).unwrap()).collect()
    };
    let net = device_energy(&run.cycles, "network");
    let jvm_j: f64 = net
        .iter()
        .flat_map(|d| d["processes"].as_array().unwrap())
        .filter(|p| p["pid"].as_u64() == Some(pid))
        .map(uj)
        .sum::<f64>()
        / 1e6;
    let summary_j = run.summary["device_energy"]["network"]["energy_j"].as_f64().expect("summary.json device_energy");
    assert!((summary_j - jvm_j).abs() <= 1e-6 * jvm_j.max(1.0), "summary {summary_j} J vs --json {jvm_j} J");
    let trees = rows(&format!("network/all/total/calltrees/joularJX-{pid}-all-call-trees-energy.csv"));
    let in_trees: f64 = trees.iter().map(|t| t.1).sum();
    let sending: f64 = trees.iter().filter(|t| t.0.contains("NetWork.sendChunks")).map(|t| t.1).sum();
    assert!(sending >= 0.95 * in_trees && sending > 0.0, "{sending} of {in_trees} J on NetWork.sendChunks: {trees:?}");
    let methods = |tree: &str| rows(&format!("{tree}all/total/methods/joularJX-{pid}-all-methods-energy.csv"));
    let (cpu, network, total) = (methods(""), methods("network/"), methods("total/"));
    for (name, joules) in &total {
        let of = |rows: &[(String, f64)]| rows.iter().find(|r| &r.0 == name).map_or(0.0, |r| r.1);
        assert!((joules - of(&cpu) - of(&network)).abs() <= 2e-4, "total {name}: {joules} J");
    }
    // Each cycle's files, as the CPU's: the power over time of the method the network's run
    // totals rank first (in the all view the JDK's own write under NetWork.sendChunks), a row
    // per cycle it sent in, and the runtime file of the last cycle.
    let top = network.iter().max_by(|a, b| a.1.total_cmp(&b.1)).expect("network methods").0.clone();
    let evolution = ["network/all/evolution", "total/all/evolution"].map(|rel| {
        let files: Vec<String> = std::fs::read_dir(dir.join(rel))
            .unwrap_or_else(|e| panic!("{rel}: {e}"))
            .flatten()
            .map(|e| e.file_name().into_string().unwrap())
            .collect();
        let file = format!("joularJX-{pid}-{top}-evolution.csv");
        assert!(files.contains(&file), "no {file} in {rel}: {files:?}");
        rows(&format!("{rel}/{file}"))
    });
    let (sender, sender_total) = (&evolution[0], &evolution[1]);
    assert!(!sender.is_empty() && sender.iter().all(|(_, watts)| *watts > 0.0), "{sender:?}");
    let seconds: Vec<u64> = sender.iter().map(|(when, _)| when.parse().unwrap()).collect();
    assert!(seconds.windows(2).all(|w| w[0] <= w[1]), "rows in time order: {seconds:?}");
    // total's row at each time is the CPU's and the network's: never below the network's.
    for (when, watts) in sender {
        let total_w = sender_total.iter().find(|r| &r.0 == when).map(|r| r.1);
        assert!(total_w.is_some_and(|t| t + 1e-4 >= *watts), "total at {when}: {total_w:?} vs network {watts} W");
    }
    let runtime = format!("network/all/runtime/methods/joularJX-{pid}-all-methods-power.csv");
    assert!(dir.join(&runtime).is_file(), "{runtime}");
    // The graphs of the network's joules: the sender's path in its folded stacks.
    for file in ["network/flamegraph-all.svg", "network/profile.pb.gz", "total/flamegraph-all.svg"] {
        assert!(dir.join(file).is_file(), "{file}");
    }
    let folded = std::fs::read_to_string(dir.join("network/stacks-all.folded")).expect("network/stacks-all.folded");
    assert!(folded.lines().any(|l| l.contains("NetWork.sendChunks")), "{folded}");
}

/// An ext4 filesystem on a loop device over a file in /dev/shm (so its writes reach no other
/// disk), mounted on a temporary directory; all undone on drop.
pub struct LoopFs {
    pub image: PathBuf,
    pub device: String,
    pub mount: tempfile::TempDir,
}

pub fn sh(argv: &[&str]) -> String {
    let out = Command::new(argv[0]).args(&argv[1..]).output().unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert!(out.status.success(), "{argv:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl LoopFs {
    pub fn create() -> Self {
        let image = PathBuf::from(format!("/dev/shm/joular-hanoi-{}.img", std::process::id()));
        let mount = tempfile::tempdir().unwrap();
        let image_s = image.to_str().unwrap();
        sh(&["truncate", "-s", "256M", image_s]);
        let mut fs = LoopFs { image: image.clone(), device: String::new(), mount };
        // Inode tables and journal zeroed now, not by ext4lazyinit during the run: the device
        // then does no I/O of its own while the JVM starts.
        sh(&["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", image_s]);
        fs.device = sh(&["losetup", "-f", "--show", image_s]);
        sh(&["mount", &fs.device, fs.mount.path().to_str().unwrap()]);
        sh(&["sync", "-f", fs.mount.path().to_str().unwrap()]);
        std::thread::sleep(std::time::Duration::from_millis(1500));
        fs
    }

    /// `loop3` of `/dev/loop3`.
    pub fn name(&self) -> &str {
        self.device.trim_start_matches("/dev/")
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.mount.path()).status();
        if !self.device.is_empty() {
            let _ = Command::new("losetup").args(["-d", &self.device]).status();
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

/// `block/NAME` of the disk whose filesystem holds `path` (the disk, not its partition).
pub fn disk_of(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let sys = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).unwrap_or_else(|e| {
        panic!("{} is on device {major}:{minor}, which is no block device (/sys/dev/block: {e}): this test needs the JVM on a disk's filesystem, as on the CI machine", path.display())
    });
    let disk = if sys.join("partition").is_file() { sys.parent().unwrap().to_owned() } else { sys };
    format!("block/{}", disk.file_name().unwrap().to_str().unwrap())
}

/// A thread's share of its process's CPU energy over the run, from `summary.json`.
pub fn thread_share(summary: &Value, comm: &str) -> f64 {
    let uj: f64 = summary["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["comm"] == comm)
        .map(|t| t["energy_uj"].as_f64().unwrap())
        .sum();
    uj / summary["energy_uj"].as_f64().unwrap()
}

/// Per `--json` cycle, the CPU's energy is the threads' plus the unattributed: device energy
/// is never taken from it or added to it.
pub fn assert_cpu_energy_conserved(cycles: &[Value]) {
    for c in cycles {
        let sum = |key: &str, field: &str| -> f64 {
            c[key].as_array().unwrap().iter().map(|x| x[field].as_f64().unwrap()).sum()
        };
        let (socket, threads, unattributed) =
            (sum("sockets", "energy_uj"), sum("threads", "energy_uj"), sum("sockets", "unattributed_uj"));
        assert!(
            (threads + unattributed - socket).abs() <= 1e-6 * socket.max(1.0),
            "cycle {}: CPU threads {threads} + unattributed {unattributed} != sockets {socket}",
            c["cycle"]
        );
    }
}

/// Reads about 48 MiB from procfs, sysfs and a tmpfs file, then writes 8 MiB to a regular
/// file on disk (argv[1]).
pub const IN_MEMORY_READER: &str = "import os, sys
n = 0
with open('/dev/shm/joular-devices-test-%d' % os.getpid(), 'wb+') as f:
    f.write(b'x' * (1 << 20))
    for _ in range(16):
        f.seek(0)
        n += len(f.read())
    os.unlink(f.name)
while n < 48 << 20:
    for path in ('/proc/self/maps', '/proc/self/status', '/sys/kernel/btf/vmlinux'):
        with open(path, 'rb') as g:
            n += len(g.read(1 << 20))
with open(sys.argv[1], 'wb') as f:
    f.write(b'y' * (8 << 20))
print('read', n, flush=True)
";
