//! Issue 6, periodic profile export: `serve --profile-dir` writes one host-wide pprof and folded
//! file per interval, placed atomically and rotated, that `go tool pprof` reads, whose energy
//! adds up to the threads' energy of the same cycles. Root, real eBPF, a real JVM, a fake 40 W
//! powercap; run by `cargo xtask test`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use joular_tests::*;

const HOST: &str = "test-host.1";
/// What the rotator makes of HOST in file names (`-` would be ambiguous after the time).
const HOST_IN_NAMES: &str = "test_host.1";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `(pprof files, folded files)` of this host, oldest first.
fn profile_files(dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut pprof = Vec::new();
    let mut folded = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some((epoch, rest)) = name.split_once('-') else { continue };
        if !epoch.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if rest == format!("{HOST_IN_NAMES}.pprof.gz") {
            pprof.push(path);
        } else if rest == format!("{HOST_IN_NAMES}.folded") {
            folded.push(path);
        }
    }
    pprof.sort();
    folded.sort();
    (pprof, folded)
}

/// Folded energy (µJ) per root frame (`<comm>-<pid>`), and the lines of one process.
fn folded_by_process(files: &[PathBuf]) -> (BTreeMap<String, f64>, Vec<String>) {
    let mut per_root = BTreeMap::new();
    let mut lines = Vec::new();
    for f in files {
        for line in std::fs::read_to_string(f).unwrap().lines() {
            let (stack, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad folded line {line:?}"));
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {line:?}"));
            let root = stack.split(';').next().unwrap().to_string();
            *per_root.entry(root).or_default() += value;
            lines.push(line.to_string());
        }
    }
    (per_root, lines)
}

fn go_pprof(args: &[&str], file: &Path, home: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(file)
        .env("HOME", home)
        .output()
        .expect("`go` must be installed (apt-get install golang-go)");
    assert!(out.status.success(), "go tool pprof {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn serve_writes_rotating_profiles_that_add_up_and_pprof_reads() {
    let rapl = FakePowercap::start(40.0);
    let jvm = Jvm::start("MethodSplit", &["60"], &["-XX:CompileCommand=dontinline,MethodSplit::*"]);
    std::thread::sleep(Duration::from_secs(2));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("profiles");
    let json = tmp.path().join("serve.jsonl");
    let results = tmp.path().join("results");
    std::fs::create_dir_all(&dir).unwrap();
    // Not this host's, or not ours at all: rotation must leave them alone.
    let foreign = ["1000-otherhost.folded", "notes.txt"].map(|n| dir.join(n));
    for f in &foreign {
        std::fs::write(f, "keep me\n").unwrap();
    }
    let listen = format!("127.0.0.1:{}", free_port());
    let root = rapl.sysfs_root();
    let out = profile(
        &[
            "serve",
            "--listen",
            &listen,
            "--duration",
            "7",
            "--sysfs-root",
            &root,
            "--json",
            json.to_str().unwrap(),
            "--output",
            results.to_str().unwrap(),
            "--profile-dir",
            dir.to_str().unwrap(),
            "--profile-interval",
            "2",
            "--profile-keep",
            "100",
            "--host-name",
            HOST,
        ],
        Duration::from_secs(120),
    );
    assert_success(&out);
    assert!(!results.exists(), "serve wrote a result tree without --results");

    let (pprof, folded) = profile_files(&dir);
    // 7 one-second cycles in 2 s intervals: 3 full intervals and the partial one flushed at exit.
    assert_eq!(pprof.len(), folded.len(), "{pprof:?} vs {folded:?}");
    assert!((3..=5).contains(&pprof.len()), "{} intervals: {pprof:?}", pprof.len());
    assert!(std::fs::read_dir(&dir).unwrap().flatten().all(|e| !e.file_name().to_string_lossy().ends_with(".tmp")));

    // Every interval's energy is the threads' energy of its cycles: over the run, both sum to
    // the same total (folded values are whole µJ; the run is ~280 J, so 0.1% is far above rounding).
    let cycles = read_jsonl(&json);
    let threads_uj: f64 = per_thread_sum(&cycles, "energy_uj").values().sum();
    let (per_root, lines) = folded_by_process(&folded);
    let folded_uj: f64 = per_root.values().sum();
    assert!(threads_uj > 1e6, "no energy in the run: {threads_uj} µJ");
    assert!(
        (folded_uj - threads_uj).abs() <= 1e-3 * threads_uj,
        "profiles hold {folded_uj} µJ, the cycles' threads {threads_uj} µJ"
    );
    // The JVM's share is its process energy, under its own root frame, down to its methods.
    let jvm_root = format!("java-{}", jvm.pid());
    let jvm_json_uj: f64 = cycles
        .iter()
        .flat_map(|c| c["processes"].as_array().unwrap().iter())
        .filter(|p| p["pid"].as_u64() == Some(jvm.pid() as u64))
        .map(|p| p["energy_uj"].as_f64().unwrap())
        .sum();
    let jvm_folded_uj =
        per_root.get(&jvm_root).copied().unwrap_or_else(|| panic!("no {jvm_root} root in {per_root:?}"));
    assert!(
        (jvm_folded_uj - jvm_json_uj).abs() <= 1e-3 * jvm_json_uj.max(1.0),
        "JVM: folded {jvm_folded_uj} µJ, JSON {jvm_json_uj} µJ; roots {per_root:?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with(&format!("{jvm_root};")) && l.contains("MethodSplit.alpha")),
        "no MethodSplit.alpha stack under {jvm_root}"
    );

    // A pprof reader sees the energy, the samples and the process labels.
    let newest = pprof.last().unwrap();
    let raw = go_pprof(&["-raw"], newest, tmp.path());
    assert!(raw.contains("energy/microjoules") && raw.contains("samples/count"), "{raw}");
    assert!(raw.contains(&format!("joular-ebpf host {HOST}")), "{raw}");
    let tags = go_pprof(&["-tags"], &pprof[pprof.len() / 2], tmp.path());
    assert!(tags.contains(&jvm.pid().to_string()) && tags.contains("java"), "{tags}");

    // Rotation: a second daemon keeping one interval prunes this host's older files only.
    let out = profile(
        &[
            "serve",
            "--listen",
            &listen,
            "--duration",
            "3",
            "--sysfs-root",
            &root,
            "--profile-dir",
            dir.to_str().unwrap(),
            "--profile-interval",
            "1",
            "--profile-keep",
            "1",
            "--host-name",
            HOST,
        ],
        Duration::from_secs(120),
    );
    assert_success(&out);
    let (pprof_after, folded_after) = profile_files(&dir);
    assert_eq!((pprof_after.len(), folded_after.len()), (1, 1), "{pprof_after:?} {folded_after:?}");
    assert!(pprof_after[0] > *newest, "the newest file is the one kept");
    for f in &foreign {
        assert_eq!(std::fs::read_to_string(f).unwrap(), "keep me\n", "{} was touched", f.display());
    }
}
