//! Issue 11 acceptance (items 1-2): the cycle never stalls on symbol work, and symbol memory
//! stays within `--max-symbol-mb`. Real JVMs, real eBPF, through the binary; run as root by
//! `cargo xtask test`.
//!
//! - A JVM whose attach socket never answers, and a JVM whose perf map is a FIFO (HotSpot blocks
//!   writing it, so its attach listener never answers again): under `serve`, every cycle lasts
//!   1 s ± 10%, every cycle of the run is in `--json`, and `/metrics` answers within 100 ms
//!   throughout.
//! - Three JVMs with ~200 MB perf maps: the profiler's peak RSS stays under the budget + 64 MB.
//!
//! Both run on the perf-map path (`--java-symbols perf-map`), the fallback for JVMs whose HotSpot
//! tables cannot be read: the default path never attaches nor reads a perf map.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use joular_tests::*;

const RUN_S: u64 = 12;
/// What a scrape may take while the loop or the symbol worker is busy.
const MAX_SCRAPE: Duration = Duration::from_millis(100);

/// The profiler, with its stderr collected by a thread.
struct Profiler {
    child: Child,
    stderr: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl Profiler {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(bin())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start joular-ebpf");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (pipe, text) = (child.stderr.take().unwrap(), Arc::clone(&stderr));
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut text = text.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
        Profiler { child, stderr, reader: Some(reader) }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The address `serve --listen 127.0.0.1:0` bound, from its first lines.
    fn metrics_addr(&self) -> SocketAddr {
        let t0 = Instant::now();
        loop {
            let text = self.stderr();
            if let Some(rest) = text.split("serving Prometheus metrics on http://").nth(1) {
                return rest.split('/').next().unwrap().parse().expect("an address");
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "serve never said where it listens:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the end (bounded); returns whether it succeeded and everything it printed.
    fn wait(mut self, timeout: Duration) -> (bool, String) {
        let t0 = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if t0.elapsed() > timeout {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("joular-ebpf did not finish within {timeout:?}:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        self.reader.take().unwrap().join().unwrap();
        (status.success(), self.stderr())
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Scrapes `/metrics` every ~100 ms until stopped or the endpoint is gone; returns each
/// scrape's latency, or what went wrong with it.
fn poll_metrics(addr: SocketAddr, stop: Arc<AtomicBool>) -> JoinHandle<Vec<Result<Duration, String>>> {
    std::thread::spawn(move || {
        let mut scrapes = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let t0 = Instant::now();
            let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(10)) else {
                // The run is over: the endpoint closed with it.
                break;
            };
            stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut reply = String::new();
            let outcome = stream
                .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
                .and_then(|()| stream.read_to_string(&mut reply));
            let took = t0.elapsed();
            let failed = !(outcome.is_ok() && reply.starts_with("HTTP/1.1 200 OK"));
            if stop.load(Ordering::Relaxed) || (failed && TcpStream::connect(addr).is_err()) {
                // Cut by the end of the run.
                break;
            }
            scrapes.push(match outcome {
                Ok(_) if reply.starts_with("HTTP/1.1 200 OK") && reply.contains("joular_cycles_total") => Ok(took),
                Ok(_) => Err(format!("after {took:?}: {reply}")),
                Err(e) => Err(format!("after {took:?}: {e}")),
            });
            std::thread::sleep(Duration::from_millis(100).saturating_sub(took));
        }
        scrapes
    })
}

/// Runs `serve` for RUN_S seconds while `/metrics` is scraped, then checks the cadence, the
/// JSON and the scrapes. Returns the profiler's stderr.
fn serve_keeps_its_cadence(what: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cycles.jsonl");
    let run_s = RUN_S.to_string();
    let profiler = Profiler::start(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--duration",
        &run_s,
        "--json",
        json.to_str().unwrap(),
        "--output",
        dir.path().join("results").to_str().unwrap(),
        // The attach protocol and perf maps are the fallback for JVMs whose HotSpot tables
        // cannot be read: it is the path that can block, so it is the one tested here.
        "--java-symbols",
        "perf-map",
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let poller = poll_metrics(profiler.metrics_addr(), Arc::clone(&stop));
    let (ok, stderr) = profiler.wait(Duration::from_secs(120));
    stop.store(true, Ordering::Relaxed);
    let scrapes = poller.join().expect("the scraper panicked");
    let cycles = read_jsonl(&json);
    let numbers: Vec<u64> = cycles.iter().map(|c| c["cycle"].as_u64().unwrap()).collect();
    let lengths_s: Vec<f64> =
        cycles.iter().map(|c| (c["end_ns"].as_u64().unwrap() - c["start_ns"].as_u64().unwrap()) as f64 / 1e9).collect();
    let failed: Vec<&String> = scrapes.iter().filter_map(|s| s.as_ref().err()).collect();
    let mut latencies: Vec<Duration> = scrapes.iter().filter_map(|s| s.as_ref().ok().copied()).collect();
    latencies.sort();
    let max = latencies.last().copied().unwrap_or_default();
    eprintln!("{what}: cycle lengths (s): {lengths_s:.3?}");
    eprintln!(
        "{what}: {} scrapes ({} failed), median {:?}, max {max:?}",
        scrapes.len(),
        failed.len(),
        latencies.get(latencies.len() / 2).copied().unwrap_or_default()
    );

    assert!(ok, "{what}: serve failed:\n{stderr}");
    assert_eq!(
        numbers,
        (0..RUN_S).collect::<Vec<_>>(),
        "{what}: one cycle per second of the run, all written:\n{stderr}"
    );
    assert!(
        lengths_s.iter().all(|s| (0.9..=1.1).contains(s)),
        "{what}: every cycle lasts 1 s ± 10%: {lengths_s:.3?}\n{stderr}"
    );
    assert!(failed.is_empty(), "{what}: scrapes failed: {failed:?}");
    assert!(latencies.len() as u64 >= RUN_S * 5, "{what}: scrapes all through the run: {}", latencies.len());
    assert!(max <= MAX_SCRAPE, "{what}: a scrape took {max:?} (over {MAX_SCRAPE:?}): {latencies:?}");
    stderr
}

#[test]
fn stall_a_jvm_whose_attach_socket_never_answers_holds_back_no_cycle() {
    let jvm = Jvm::start("SilentAttach", &["60"], &[]);
    let pid = jvm.pid();
    let stderr = serve_keeps_its_cadence("silent attach socket");
    // The slow path was taken: the JVM was asked for its map and did not answer.
    assert!(
        stderr.contains(&format!("JVM {pid}: attach command `Compiler.perfmap` timed out")),
        "the profiler never waited on the silent JVM:\n{stderr}"
    );
    drop(jvm);
}

/// `/tmp/perf-<pid>.map` as a FIFO, removed when dropped.
struct Fifo(PathBuf);

impl Fifo {
    fn plant(path: PathBuf) -> Self {
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path and a mode.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo {}", path.display());
        Fifo(path)
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn stall_a_fifo_perf_map_holds_back_no_cycle() {
    let jvm = Jvm::start("DutyCycle", &["60"], &[]);
    let pid = jvm.pid();
    // HotSpot opens its map for writing when asked to dump it: on a FIFO with no reader that
    // blocks its attach listener for good.
    let _fifo = Fifo::plant(PathBuf::from(format!("/tmp/perf-{pid}.map")));
    let stderr = serve_keeps_its_cadence("FIFO perf map");
    assert!(
        stderr.contains(&format!("JVM {pid}: attach command `Compiler.perfmap` timed out")),
        "the profiler never waited on the JVM stuck writing its map:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!("JVM {pid}: not reading its perf map")) && stderr.contains("not a regular file"),
        "the FIFO was not refused:\n{stderr}"
    );
    drop(jvm);
}

/// A planted perf map of about `mb` MB (HotSpot's format), removed when dropped.
struct PlantedMap(PathBuf);

impl PlantedMap {
    fn write(pid: u32, mb: u64) -> Self {
        let path = PathBuf::from(format!("/tmp/perf-{pid}.map"));
        let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let (mut written, mut i) = (0u64, 0u64);
        while written < mb << 20 {
            let line = format!(
                "{:#018x} 0x0000000000000100 java.lang.Object com.acme.service.pkg{}.Handler{}.method{i}(java.lang.String, int)\n",
                0x7f00_0000_0000u64 + i * 0x100,
                i % 97,
                i % 991
            );
            out.write_all(line.as_bytes()).unwrap();
            written += line.len() as u64;
            i += 1;
        }
        out.flush().unwrap();
        PlantedMap(path)
    }
}

impl Drop for PlantedMap {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix(field))?.trim().trim_end_matches("kB").trim().parse().ok()
}

#[test]
fn budget_three_jvms_with_200_mb_perf_maps_stay_within_max_symbol_mb() {
    const BUDGET_MB: u64 = 64;
    // Attach disabled: the profiler cannot have the maps rewritten, it reads the planted ones.
    let jvms: Vec<Jvm> = (0..3).map(|_| Jvm::start("DutyCycle", &["90"], &["-XX:+DisableAttachMechanism"])).collect();
    let _maps: Vec<PlantedMap> = jvms.iter().map(|j| PlantedMap::write(j.pid(), 200)).collect();
    let pids: Vec<String> = jvms.iter().map(|j| j.pid().to_string()).collect();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cycles.jsonl");
    let budget = BUDGET_MB.to_string();
    let profiler = Profiler::start(&[
        "--pid",
        &pids.join(","),
        "--duration",
        "10",
        "--java-symbols",
        "perf-map",
        "--max-symbol-mb",
        &budget,
        "--json",
        json.to_str().unwrap(),
        "--output",
        dir.path().join("results").to_str().unwrap(),
    ]);
    let pid = profiler.child.id();
    let mut peak_kib = 0;
    // A process that has exited (a zombie until reaped) has no memory lines any more.
    while let Some(kib) = status_kib(pid, "VmHWM:") {
        peak_kib = peak_kib.max(kib);
        std::thread::sleep(Duration::from_millis(100));
    }
    let (ok, stderr) = profiler.wait(Duration::from_secs(120));
    assert!(ok, "the run failed:\n{stderr}");
    eprintln!("peak RSS {} MB with --max-symbol-mb {BUDGET_MB} and 3 x 200 MB perf maps", peak_kib / 1024);
    assert!(peak_kib > 0, "the profiler's RSS was never read");
    assert!(peak_kib < (BUDGET_MB + 64) << 10, "peak RSS {} MB over the budget + 64 MB:\n{stderr}", peak_kib / 1024);
    for p in &pids {
        assert!(
            stderr.contains(&format!("JVM {p}: perf map"))
                && stderr.contains("is over this JVM's share of --max-symbol-mb"),
            "no warning for JVM {p}:\n{stderr}"
        );
    }
    assert!(
        stderr.contains(&format!("symbol memory budget (--max-symbol-mb {BUDGET_MB})")),
        "no end-of-run budget line:\n{stderr}"
    );
    // The entries left out are counted where losses are: the cycles' drops.
    let left_out: u64 =
        read_jsonl(&json).iter().filter_map(|c| c["drops"]["perf_map_entries_over_budget"].as_u64()).sum();
    assert!(left_out > 3_000_000, "most of the 3 x 1.7 M entries are counted as left out: {left_out}");
}
