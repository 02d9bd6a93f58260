//! A real Prometheus (Debian's `prometheus`) scrapes the exporter on loopback; through its HTTP API
//! the test checks that a busy process's energy grows and that processes + exited + unattributed
//! add up to the host's energy within 1%.
//!
//! The exporter is the real binary, `joular-ebpf serve` (root, eBPF), whose path
//! `cargo xtask test` passes in `JOULAR_BIN`.
//!
//! Needs `prometheus` on PATH (`apt-get install -y prometheus`): without it the test fails.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use joular_tests::KillOnDrop;

const DEADLINE: Duration = Duration::from_secs(60);

fn spawn(program: &str, args: &[&str]) -> KillOnDrop {
    let child = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    KillOnDrop::new(child)
}

fn free_loopback_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The real profiler: `joular-ebpf serve --all` on a free loopback port (root needed).
struct Exporter {
    _child: KillOnDrop,
}

impl Exporter {
    fn start() -> (Self, SocketAddr) {
        let bin = joular_tests::bin().display().to_string();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_loopback_port()).parse().unwrap();
        let child = Command::new(&bin)
            .args(["serve", "--listen", &addr.to_string()])
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
        let exporter = Exporter { _child: KillOnDrop::new(child) };
        let start = Instant::now();
        while TcpStream::connect(addr).is_err() {
            assert!(start.elapsed() < DEADLINE, "{bin} never listened on {addr}");
            thread::sleep(Duration::from_millis(200));
        }
        (exporter, addr)
    }
}

/// A Prometheus on loopback with its own config and storage, killed when dropped.
struct Prometheus {
    _child: KillOnDrop,
    addr: SocketAddr,
    log: std::path::PathBuf,
}

impl Prometheus {
    fn start(dir: &Path, target: SocketAddr) -> Self {
        let config = dir.join("prometheus.yml");
        fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: joular\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        // Not 9090: the Debian package may run its own service there.
        let addr: SocketAddr = format!("127.0.0.1:{}", free_loopback_port()).parse().unwrap();
        let log = dir.join("prometheus.log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("prometheus is required (apt-get install -y prometheus): {e}"));
        let prometheus = Prometheus { _child: KillOnDrop::new(child), addr, log };
        prometheus.wait_until(|p| p.get("/-/ready").0 == 200, "ready");
        prometheus
    }

    /// `(status, body)` of a GET. HTTP/1.0 so the reply is neither chunked nor kept alive.
    fn get(&self, path_and_query: &str) -> (u16, String) {
        let Ok(mut stream) = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)) else {
            return (0, String::new());
        };
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(stream, "GET {path_and_query} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).unwrap();
        let mut reply = String::new();
        if stream.read_to_string(&mut reply).is_err() {
            return (0, String::new());
        }
        let status = reply.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let body = reply.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
        (status, body)
    }

    /// Values of an instant query, one per series.
    fn query(&self, promql: &str) -> Vec<f64> {
        let (status, body) = self.get(&format!("/api/v1/query?query={}", percent_encode(promql)));
        assert_eq!(status, 200, "query {promql}: {body}");
        let reply: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(reply["status"], "success", "{body}");
        reply["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|series| series["value"][1].as_str().unwrap().parse().unwrap())
            .collect()
    }

    fn wait_until(&self, mut done: impl FnMut(&Self) -> bool, what: &str) {
        let start = Instant::now();
        while !done(self) {
            if start.elapsed() > DEADLINE {
                let log = fs::read_to_string(&self.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                panic!("prometheus: not {what} after {DEADLINE:?}; log tail (newest first):\n{}", tail.join("\n"));
            }
            thread::sleep(Duration::from_millis(250));
        }
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn prometheus_sees_busy_process_energy_grow_and_the_sums_match_the_host() {
    let busy = spawn("sh", &["-c", "while :; do :; done"]);
    let idle = spawn("sleep", &["600"]);
    let (busy_pid, idle_pid) = (busy.pid(), idle.pid());
    let (_exporter, target) = Exporter::start();
    let dir = tempfile::tempdir().unwrap();
    let prometheus = Prometheus::start(dir.path(), target);

    prometheus.wait_until(|p| p.query("up{job=\"joular\"} == 1").len() == 1, "scraping the exporter");

    // The busy process's counter, labelled from its real /proc entry, grows from scrape to scrape.
    let busy_energy = format!("joular_process_energy_joules_total{{pid=\"{busy_pid}\",comm=\"sh\"}}");
    let mut seen: Vec<f64> = Vec::new();
    prometheus.wait_until(
        |p| {
            if let [value] = p.query(&busy_energy)[..] {
                if seen.last().is_none_or(|last| value > *last) {
                    seen.push(value);
                }
            }
            seen.len() >= 3
        },
        "showing the busy process's energy grow",
    );
    assert!(seen[0] > 0.0, "{seen:?}");
    let busy_power = prometheus.query(&format!("joular_process_power_watts{{pid=\"{busy_pid}\"}}"));
    let idle_power = prometheus.query(&format!("joular_process_power_watts{{pid=\"{idle_pid}\"}}"));
    assert!(busy_power.len() == 1 && busy_power[0] > 0.0, "busy power {busy_power:?}");
    assert!(idle_power.iter().all(|w| *w < busy_power[0] / 10.0), "idle {idle_power:?} busy {busy_power:?}");

    // One scrape is one consistent snapshot, so the parts match the host at any instant.
    let parts = "sum(joular_process_energy_joules_total) \
                 + sum(joular_exited_process_energy_joules_total) \
                 + sum(joular_unattributed_energy_joules_total)";
    let host = "sum(joular_host_energy_joules_total{domain=\"package\"})";
    let ratio = prometheus.query(&format!("({parts}) / {host}"));
    assert_eq!(ratio.len(), 1, "{ratio:?}");
    assert!((ratio[0] - 1.0).abs() <= 0.01, "(processes + exited + unattributed) / host = {}", ratio[0]);
    let host_j = prometheus.query(host);
    assert!(host_j[0] > 0.0, "host energy {host_j:?}");
}
