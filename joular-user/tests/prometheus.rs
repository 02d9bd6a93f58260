//! A real Prometheus (Debian's `prometheus`) scrapes the exporter on loopback; through its HTTP API
//! the test checks that a busy process's energy grows and that processes + exited + unattributed
//! add up to the host's energy within 1%.
//!
//! The exporter under test is, by default, the library's `MetricsServer` fed with cycles built from a
//! busy child's real /proc CPU time and a constant-power fake energy source. With
//! `JOULAR_EBPF_BIN=<path to joular-ebpf>` it is that binary (`serve --listen`, root needed) instead;
//! the assertions are the same.
//!
//! Needs `prometheus` on PATH (`apt-get install -y prometheus`): without it the test fails.

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use joular_user::fleet::{MetricsRegistry, MetricsServer, ProcFs, RegistryConfig};
use joular_user::model::{CycleReport, ProcessReport, SocketReport};

const FAKE_HOST_POWER_W: f64 = 40.0;
const CYCLE: Duration = Duration::from_millis(500);
const DEADLINE: Duration = Duration::from_secs(60);
const CLOCK_TICK_NS: u64 = 10_000_000;

/// A child process killed (and reaped) when dropped.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(program: &str, args: &[&str]) -> ChildGuard {
    let child = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    ChildGuard(child)
}

fn free_loopback_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `(utime + stime)` in ns from `/proc/<pid>/stat`, `None` once the process is gone.
fn cpu_time_ns(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_comm.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) * CLOCK_TICK_NS)
}

fn online_cpus() -> u64 {
    let stat = fs::read_to_string("/proc/stat").unwrap();
    let cpus = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    cpus as u64
}

/// Cycle reports of a one-socket host drawing constant power, split among `pids` by their share of
/// the machine's CPU time; the rest is unattributed.
struct SyntheticHost {
    pids: Vec<u32>,
    cpus: u64,
    last_cpu_ns: HashMap<u32, u64>,
    last: Instant,
    started: Instant,
    cycle: u64,
}

impl SyntheticHost {
    fn new(pids: Vec<u32>) -> Self {
        let last_cpu_ns = pids
            .iter()
            .filter_map(|&p| Some((p, cpu_time_ns(p)?)))
            .collect();
        let now = Instant::now();
        Self {
            pids,
            cpus: online_cpus(),
            last_cpu_ns,
            last: now,
            started: now,
            cycle: 0,
        }
    }

    fn next_cycle(&mut self) -> CycleReport {
        let now = Instant::now();
        let elapsed_ns = (now - self.last).as_nanos() as u64;
        self.last = now;
        self.cycle += 1;
        let host_uj = FAKE_HOST_POWER_W * elapsed_ns as f64 * 1e-3;
        let capacity_ns = (self.cpus * elapsed_ns).max(1) as f64;
        let mut processes = Vec::new();
        for &pid in &self.pids {
            let Some(cpu_ns) = cpu_time_ns(pid) else {
                continue;
            };
            let before = self.last_cpu_ns.insert(pid, cpu_ns).unwrap_or(cpu_ns);
            let on_cpu_ns = cpu_ns.saturating_sub(before);
            let energy_uj = host_uj * (on_cpu_ns as f64 / capacity_ns).min(1.0);
            let power_w = energy_uj * 1e3 / elapsed_ns.max(1) as f64;
            processes.push(ProcessReport {
                pid,
                comm: String::new(),
                energy_uj,
                power_w,
                on_cpu_ns,
            });
        }
        let taken_uj: f64 = processes.iter().map(|p| p.energy_uj).sum();
        let end_ns = (now - self.started).as_nanos() as u64;
        CycleReport {
            cycle: self.cycle,
            start_ns: end_ns - elapsed_ns,
            end_ns,
            end_epoch_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64,
            sockets: vec![SocketReport {
                socket: 0,
                energy_uj: host_uj,
                source: "model".to_owned(),
                estimated: true,
                unattributed_uj: (host_uj - taken_uj).max(0.0),
                power_w: FAKE_HOST_POWER_W,
                ..SocketReport::default()
            }],
            processes,
            ..CycleReport::default()
        }
    }
}

enum Exporter {
    Synthetic {
        stop: Arc<AtomicBool>,
        feeder: Option<JoinHandle<()>>,
        _runtime: tokio::runtime::Runtime,
    },
    Binary {
        _child: ChildGuard,
    },
}

impl Exporter {
    fn start(watched: Vec<u32>) -> (Self, SocketAddr) {
        match std::env::var_os("JOULAR_EBPF_BIN") {
            Some(bin) => Self::start_binary(&bin.to_string_lossy()),
            None => Self::start_synthetic(watched),
        }
    }

    fn start_synthetic(watched: Vec<u32>) -> (Self, SocketAddr) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let registry = Arc::new(Mutex::new(MetricsRegistry::new(RegistryConfig::default())));
        let server = runtime
            .block_on(MetricsServer::bind("127.0.0.1:0".parse().unwrap()))
            .unwrap();
        let addr = server.local_addr();
        runtime.spawn(server.run(Arc::clone(&registry), std::future::pending()));

        let stop = Arc::new(AtomicBool::new(false));
        let feeder = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let table = ProcFs::new("/proc");
                let mut host = SyntheticHost::new(watched);
                while !stop.load(Ordering::Relaxed) {
                    thread::sleep(CYCLE);
                    let report = host.next_cycle();
                    registry.lock().unwrap().on_cycle(&report, &table);
                }
            })
        };
        (
            Exporter::Synthetic {
                stop,
                feeder: Some(feeder),
                _runtime: runtime,
            },
            addr,
        )
    }

    fn start_binary(bin: &str) -> (Self, SocketAddr) {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_loopback_port())
            .parse()
            .unwrap();
        let child = Command::new(bin)
            .args(["serve", "--listen", &addr.to_string()])
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
        let exporter = Exporter::Binary {
            _child: ChildGuard(child),
        };
        let start = Instant::now();
        while TcpStream::connect(addr).is_err() {
            assert!(start.elapsed() < DEADLINE, "{bin} never listened on {addr}");
            thread::sleep(Duration::from_millis(200));
        }
        (exporter, addr)
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        if let Exporter::Synthetic { stop, feeder, .. } = self {
            stop.store(true, Ordering::Relaxed);
            if let Some(feeder) = feeder.take() {
                let _ = feeder.join();
            }
        }
    }
}

/// A Prometheus on loopback with its own config and storage, killed when dropped.
struct Prometheus {
    _child: ChildGuard,
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
        let addr: SocketAddr = format!("127.0.0.1:{}", free_loopback_port())
            .parse()
            .unwrap();
        let log = dir.join("prometheus.log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("prometheus is required (apt-get install -y prometheus): {e}")
            });
        let prometheus = Prometheus {
            _child: ChildGuard(child),
            addr,
            log,
        };
        prometheus.wait_until(|p| p.get("/-/ready").0 == 200, "ready");
        prometheus
    }

    /// `(status, body)` of a GET. HTTP/1.0 so the reply is neither chunked nor kept alive.
    fn get(&self, path_and_query: &str) -> (u16, String) {
        let Ok(mut stream) = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)) else {
            return (0, String::new());
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            stream,
            "GET {path_and_query} HTTP/1.0\r\nHost: {}\r\n\r\n",
            self.addr
        )
        .unwrap();
        let mut reply = String::new();
        if stream.read_to_string(&mut reply).is_err() {
            return (0, String::new());
        }
        let status = reply
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = reply
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
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
                panic!(
                    "prometheus: not {what} after {DEADLINE:?}; log tail (newest first):\n{}",
                    tail.join("\n")
                );
            }
            thread::sleep(Duration::from_millis(250));
        }
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn prometheus_sees_busy_process_energy_grow_and_the_sums_match_the_host() {
    let busy = spawn("sh", &["-c", "while :; do :; done"]);
    let idle = spawn("sleep", &["600"]);
    let (busy_pid, idle_pid) = (busy.0.id(), idle.0.id());
    let (_exporter, target) = Exporter::start(vec![busy_pid, idle_pid]);
    let dir = tempfile::tempdir().unwrap();
    let prometheus = Prometheus::start(dir.path(), target);

    prometheus.wait_until(
        |p| p.query("up{job=\"joular\"} == 1").len() == 1,
        "scraping the exporter",
    );

    // The busy process's counter, labelled from its real /proc entry, grows from scrape to scrape.
    let busy_energy =
        format!("joular_process_energy_joules_total{{pid=\"{busy_pid}\",comm=\"sh\"}}");
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
    assert!(
        busy_power.len() == 1 && busy_power[0] > 0.0,
        "busy power {busy_power:?}"
    );
    assert!(
        idle_power.iter().all(|w| *w < busy_power[0] / 10.0),
        "idle {idle_power:?} busy {busy_power:?}"
    );

    // One scrape is one consistent snapshot, so the parts match the host at any instant.
    let parts = "sum(joular_process_energy_joules_total) \
                 + sum(joular_exited_process_energy_joules_total) \
                 + sum(joular_unattributed_energy_joules_total)";
    let host = "sum(joular_host_energy_joules_total{domain=\"package\"})";
    let ratio = prometheus.query(&format!("({parts}) / {host}"));
    assert_eq!(ratio.len(), 1, "{ratio:?}");
    assert!(
        (ratio[0] - 1.0).abs() <= 0.01,
        "(processes + exited + unattributed) / host = {}",
        ratio[0]
    );
    let host_j = prometheus.query(host);
    assert!(host_j[0] > 0.0, "host energy {host_j:?}");
}
