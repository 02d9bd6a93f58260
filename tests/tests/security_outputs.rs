//! Issue 22, items 6 and 7: a full disk under `--json` must stop that output alone, and a name
//! a process chose must not break the documents it reaches. Each test performs the attack with
//! real processes and the real profiler: a small tmpfs that fills, and a process whose comm is an
//! escape sequence with markup (`prctl(PR_SET_NAME)`), profiled under `--pid --html` and `serve`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use joular_tests::tmpfs::Tmpfs;
use joular_tests::*;
use serde_json::Value;

/// The system interpreter (a pyenv shim would be the process profiled, not python).
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// 11 bytes (comm holds 15): an ANSI colour, then every character markup escapes.
const HOSTILE_COMM: &str = "\x1b[31m<a&\"'>";
/// What the documents show of it: the ESC as text, the rest escaped by each destination.
const SHOWN_COMM: &str = "\\x1b[31m<a&\"'>";

/// A process killed (and reaped) when dropped.
struct Spinner(KillOnDrop);

impl Spinner {
    /// A CPU-bound process named `comm` by `prctl(PR_SET_NAME)`, checked in /proc.
    fn named(comm: &str) -> Self {
        let script = "import ctypes, sys\n\
                      ctypes.CDLL(None).prctl(15, sys.argv[1].encode('latin-1'), 0, 0, 0)\n\
                      while True: pass\n";
        let child = Command::new(SYSTEM_PYTHON).args(["-c", script, comm]).spawn().expect("start python3");
        let spinner = Spinner(KillOnDrop::new(child));
        let path = format!("/proc/{}/comm", spinner.pid());
        let want = format!("{comm}\n").into_bytes();
        let start = Instant::now();
        while std::fs::read(&path).unwrap() != want {
            assert!(start.elapsed() < Duration::from_secs(10), "the name was not set: {:?}", std::fs::read(&path));
            std::thread::sleep(Duration::from_millis(20));
        }
        spinner
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The `<pid>-<ms>` directory of `pid` under `root`.
fn run_dir(root: &Path, pid: u32) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("{pid}-")))
        .collect();
    assert_eq!(dirs.len(), 1, "one run directory for {pid} under {}: {dirs:?}", root.display());
    dirs.into_iter().next().unwrap()
}

/// Parses a whole XML document with a strict parser (well-formed, only characters XML 1.0
/// allows; inferno's doctype names an external DTD, which is not fetched) and returns its text.
fn xml_texts(xml: &str, what: &str) -> Vec<String> {
    let options = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    let doc = roxmltree::Document::parse_with_options(xml, options)
        .unwrap_or_else(|e| panic!("{what} is not well-formed XML: {e}"));
    doc.descendants().filter(|n| n.is_text()).filter_map(|n| n.text()).map(str::to_owned).collect()
}

#[test]
fn output_attack_full_json_disk_stops_only_the_json_and_the_run_and_results_go_on() {
    let spinner = Spinner::named("outputs-spin");
    let pid = spinner.pid();
    let disk = Tmpfs::mount("size=64k");
    // Fill the tmpfs but one page: a few JSON lines fit, then the disk is full mid-line.
    std::fs::write(disk.path().join("filler"), vec![0u8; 60 << 10]).unwrap();
    let room = disk.available_bytes();
    assert!(room > 0 && room <= 4096, "{room} bytes left on the tmpfs");
    let json = disk.path().join("cycles.jsonl");
    let results = tempfile::tempdir().unwrap();
    let started = Instant::now();
    // Cycles of 0.2 s write about 40 lines of ~400 bytes: four times what fits.
    let out = profile(
        &[
            "--pid",
            &pid.to_string(),
            "--duration",
            "8",
            "--interval",
            "0.2",
            "--energy-source",
            "model",
            "--json",
            json.to_str().unwrap(),
            "--output",
            results.path().to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    let took = started.elapsed();
    let err = stderr(&out);

    assert_eq!(out.status.code(), Some(0), "exit code: the run and the other outputs succeeded\n{err}");
    assert!(
        took >= Duration::from_millis(7_800) && took < Duration::from_secs(20),
        "the run took {took:?}, not its 8 s\n{err}"
    );
    let warning = format!(
        "--json {}: No space left on device (os error 28); JSON output stopped, the run goes on",
        json.display()
    );
    assert_eq!(err.matches(&warning).count(), 1, "one warning naming the flag and the file expected\n{err}");
    assert!(
        err.contains("output(s) could not be written")
            && err.contains(&format!("  --json {}: No space left", json.display())),
        "the end of the run lists it\n{err}"
    );
    assert!(err.contains("stopping (duration reached)"), "{err}");

    let bytes = std::fs::read(&json).unwrap();
    assert!(
        bytes.ends_with(b"\n"),
        "the JSON file ends mid-line: {:?}",
        String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(80)..])
    );
    let lines: Vec<Value> = bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("every line is a whole report"))
        .collect();
    assert!(!lines.is_empty() && lines.len() < 35, "{} lines: the disk should have filled after a few", lines.len());
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["cycle"].as_u64(), Some(i as u64), "lines are the first cycles, in order");
    }

    // The result tree, on the healthy disk, is whole and says what failed.
    let dir = run_dir(results.path(), pid);
    for name in ["summary.json", "profile.json", "profile.pb.gz", "stacks-all.folded", "flamegraph-all.svg"] {
        assert!(dir.join(name).is_file(), "{name} missing in {}\n{err}", dir.display());
    }
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert!(summary["cycles"].as_u64().unwrap() >= 35, "cycles went on after the disk filled: {}", summary["cycles"]);
    let failed = summary["outputs_failed"].as_array().unwrap_or_else(|| panic!("no outputs_failed in {summary}"));
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["flag"], "--json");
    assert_eq!(failed[0]["path"], json.to_str().unwrap());
    assert_eq!(failed[0]["error"], "No space left on device (os error 28)");
    drop(spinner);
}

#[test]
fn output_attack_comm_of_escapes_leaves_the_flame_graph_and_report_well_formed() {
    let spinner = Spinner::named(HOSTILE_COMM);
    let pid = spinner.pid();
    let results = tempfile::tempdir().unwrap();
    let out = profile(
        &[
            "--pid",
            &pid.to_string(),
            "--duration",
            "3",
            "--energy-source",
            "model",
            "--html",
            "--output",
            results.path().to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert_success(&out);
    let dir = run_dir(results.path(), pid);

    let svg = std::fs::read_to_string(dir.join("flamegraph-all.svg")).unwrap();
    assert!(!svg.contains('\x1b'), "raw ESC in the flame graph");
    let texts = xml_texts(&svg, "flamegraph-all.svg");
    let title = format!("Energy of pid {pid} ({SHOWN_COMM}), all frames");
    assert!(
        texts.contains(&title),
        "the title `{title}` is not in the flame graph: {:?}",
        &texts[..texts.len().min(12)]
    );

    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(!html.contains('\x1b'), "raw ESC in report.html");
    let shown = format!("Energy of \\x1b[31m&lt;a&amp;&quot;'&gt; (pid {pid})");
    assert!(
        html.contains(&format!("<title>{shown}</title>")),
        "report.html's title: {:?}",
        html.find("<title>").map(|at| &html[at..at + 90])
    );
    assert!(html.contains(&format!("<h1>{shown}</h1>")), "report.html's h1");
    // The flame graph inlined in the page is the same well-formed document.
    let inline = &html[html.find("<svg").unwrap()..html.rfind("</svg>").unwrap() + "</svg>".len()];
    assert!(xml_texts(inline, "the page's flame graph").contains(&title));
    drop(spinner);
}

/// `GET /metrics` over HTTP/1.0 (so the body ends with the connection).
fn scrape(addr: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).ok()?;
    let reply = String::from_utf8(reply).expect("metrics are UTF-8");
    let (head, body) = reply.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

#[test]
fn output_attack_comm_of_escapes_reaches_metrics_escaped_and_promtool_accepts_them() {
    let spinner = Spinner::named(HOSTILE_COMM);
    let pid = spinner.pid();
    let addr: SocketAddr =
        format!("127.0.0.1:{}", TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port())
            .parse()
            .unwrap();
    let mut serve = Command::new(bin())
        .args(["serve", "--listen", &addr.to_string(), "--energy-source", "model"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The comm label as the exposition writes it: the ESC as text, its backslash escaped.
    let label = r#"comm="\\x1b[31m<a&\"'>""#;
    let pid_label = format!("pid=\"{pid}\"");
    let start = Instant::now();
    let metrics = loop {
        if let Some(body) = scrape(addr).filter(|b| b.lines().any(|l| l.contains(&pid_label) && l.contains(label))) {
            break body;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = serve.kill();
            let out = serve.wait_with_output().unwrap();
            panic!(
                "no series of {pid} with {label} within 30 s; last scrape:\n{:?}\nstderr:\n{}",
                scrape(addr),
                stderr(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let _ = serve.kill();
    let _ = serve.wait();
    drop(spinner);

    assert!(!metrics.contains('\x1b'), "raw ESC in /metrics");
    let ours = metrics.lines().filter(|l| l.contains(&pid_label)).count();
    assert!(ours >= 3, "the process's series (energy, power, info): {ours}");
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("promtool is required (`cargo xtask test` installs prometheus): {e}"));
    promtool.stdin.take().unwrap().write_all(metrics.as_bytes()).unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}\n{}{}",
        checked.status,
        String::from_utf8_lossy(&checked.stdout),
        stderr(&checked)
    );
}
