//! Real applications from Debian under a bounded loopback load, profiled by joular-ebpf `--pid`
//! while JFR records in the same JVM, and the figures that compare the two: Jetty 9.4
//! (`jetty9`) serving a JSP under `wrk`, H2 2.1 (`libh2-java`) under two JDBC threads, and a
//! CPU fixture. `cargo xtask test` and `cargo xtask compare-jfr` install the packages.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::java_stack::{is_java, short};
use crate::jfr::{
    cpu_time_samples, execution_samples, jdk_tool, sampling_settings, timed_execution_samples, CpuTimeSample,
    JfrSample, TimedSample,
};
use crate::jfr_signals::{by_thread_state, ByThreadState, SignalWatch, Signals};
use crate::leaf_distance::{count_leaves, pooled_p95_pp, split_half_pp, top_distance, Reference, TOP_METHODS};
use crate::{await_ready, java_dir, java_launcher, profile_outputs, KillOnDrop};

pub const JETTY_HOME: &str = "/usr/share/jetty9";
pub const H2_JAR: &str = "/usr/share/java/h2.jar";
/// Methods a Java thread's stack starts from: a thread's `run`, a launcher's `main`.
const THREAD_ROOTS: [&str; 4] = [
    "java.lang.Thread.run",
    "java.lang.Thread.runWith",
    "java.util.concurrent.ForkJoinWorkerThread.run",
    "jdk.internal.misc.InnocuousThread.run",
];
/// JFR's samples every 2 ms: `settings=profile` samples every 10 ms, and a web server's
/// threads are in Java code a third of the time: some 300 samples in 15 s, whose split-half
/// noise (near 20 pp) would hide any disagreement.
const JFR_SAMPLE_PERIOD_MS: u32 = 2;
/// The first JDK with `jdk.CPUTimeSample` (JEP 509, experimental, Linux).
const CPU_TIME_SAMPLES_SINCE_JDK: u32 = 25;

/// The JSP Jetty serves: string formatting, hashing and a map, the kind of work a page does.
const JSP: &str = r#"<%@ page contentType="text/plain" %><%
  StringBuilder text = new StringBuilder();
  long sum = 0;
  for (int i = 0; i < 2000; i++) { sum += Integer.toString(i * 31).hashCode(); }
  java.util.Map<String, Integer> items = new java.util.HashMap<>();
  for (int i = 0; i < 200; i++) { items.put("item-" + i, i); }
  text.append("sum=").append(sum).append(" items=").append(items.size());
%><%= text %>
"#;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum App {
    #[default]
    Jetty,
    H2,
    Cpu,
}

impl App {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "jetty" => Some(App::Jetty),
            "h2" => Some(App::H2),
            "cpu" => Some(App::Cpu),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            App::Jetty => "jetty",
            App::H2 => "h2",
            App::Cpu => "cpu",
        }
    }
}

/// One comparison run: the application warms up for `warmup_s` under its load, then
/// joular-ebpf profiles it for `window_s` while JFR records the same window.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub app: App,
    pub jdk: u32,
    pub warmup_s: u64,
    pub window_s: u64,
    pub frequency_hz: u32,
    /// JVM flags besides JFR's (none for the acceptance runs; `-XX:+DebugNonSafepoints` to
    /// tell inlining granularity from other causes).
    pub jvm_flags: Vec<String>,
    /// Where to keep the run's raw material for a closer look: our `--json` cycles
    /// (`cycles.jsonl`), `summary.json` and JFR's recording (`<app>.jfr`).
    pub keep: Option<PathBuf>,
}

/// What the two profilers saw of the same window.
#[derive(Debug, Clone, Default)]
pub struct Comparison {
    /// joular-ebpf: samples of the application's threads (not the JIT, GC or JVM threads).
    pub ours_samples: u64,
    pub ours_rooted_share: f64,
    pub ours_no_java_share: f64,
    /// summary.json `jvm.native.percent`: application threads' energy with no Java frame.
    pub native_energy_percent: f64,
    /// Our samples in Java code (see [`in_java_leaf`]), JFR's definition of an execution sample.
    pub ours_in_java_samples: u64,
    pub jfr_samples: u64,
    pub jfr_rooted_share: f64,
    pub jfr_truncated: u64,
    /// Half the L1 distance, in percentage points, between the leaf-method shares over the
    /// union of both top-15 lists: ours against JFR, and (JFR's own noise) between random
    /// halves of JFR's samples ([`split_half_pp`]).
    pub leaf_distance_pp: f64,
    pub jfr_split_half_pp: f64,
    /// How far apart the two sides' leaf methods come by chance alone: the 95th percentile of
    /// the distance when both sides' samples are pooled and dealt out again at random in the
    /// same numbers ([`pooled_p95_pp`]). A distance past it is a difference between the two
    /// profilers, not noise.
    pub jfr_pooled_p95_pp: f64,
    /// JDK 25+: the same against JFR's CPU-time samples of application threads running Java
    /// code, those JFR took where the thread was (not at its next safepoint).
    pub cpu_time: Option<Reference>,
    /// JDK 11-21: JFR's execution samples of application threads by where the thread was when
    /// JFR signalled it (see `jfr_signals`): how much of the distance from JFR is JFR's own.
    pub by_thread_state: Option<ByThreadState>,
    /// (method, our share %, JFR's share %) over the union of both top-15 lists.
    pub top: Vec<(String, f64, f64)>,
    /// Where our application stacks that do not reach a thread root stop: (the root frame
    /// the walk ended on, the outermost Java method, the leaf frame), with their samples.
    pub unrooted: Vec<(String, u64)>,
    /// summary.json `java_unwinder` (which unwinder, `DebugNonSafepoints` as the JVM had it).
    pub java_unwinder: Value,
    /// Per cycle: the share of the application threads' samples that reach a thread root (the
    /// first cycle is the one the profiler loads the JVM's tables and native unwind rows in).
    pub rooted_by_cycle: Vec<f64>,
    /// Per cycle: its three largest losses, by the frame their stacks start from (a
    /// `[truncated: <cause>]` root, or the native frame of a stack with no Java frame).
    pub losses_by_cycle: Vec<Vec<(String, u64)>>,
}

impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "joular-ebpf: {} application-thread samples, {:.1}% reach a thread root, {:.1}% have no Java frame; \
             native without a Java caller {:.2}% of the process's energy",
            self.ours_samples,
            100.0 * self.ours_rooted_share,
            100.0 * self.ours_no_java_share,
            self.native_energy_percent
        )?;
        writeln!(
            f,
            "JFR: {} execution samples, {:.1}% reach a thread root ({} cut at JFR's depth limit)",
            self.jfr_samples,
            100.0 * self.jfr_rooted_share,
            self.jfr_truncated
        )?;
        writeln!(
            f,
            "top-{TOP_METHODS} leaf methods ({} of our samples in Java code): {:.1} pp from JFR; JFR's split-half noise {:.1} pp; \
             both pooled and dealt out again, 95% of deals within {:.1} pp",
            self.ours_in_java_samples, self.leaf_distance_pp, self.jfr_split_half_pp, self.jfr_pooled_p95_pp
        )?;
        if let Some(cpu) = &self.cpu_time {
            writeln!(
                f,
                "JFR CPU-time samples in Java code, not safepoint-biased: {}; top-{TOP_METHODS} leaf methods {:.1} pp from ours; \
                 their split-half noise {:.1} pp; both pooled and dealt out again, 95% of deals within {:.1} pp",
                cpu.samples, cpu.leaf_distance_pp, cpu.split_half_pp, cpu.pooled_p95_pp
            )?;
        }
        if let Some(s) = &self.by_thread_state {
            writeln!(f, "{s}")?;
        }
        writeln!(f, "java_unwinder: {}", self.java_unwinder)?;
        let cycles: Vec<String> = self.rooted_by_cycle.iter().map(|r| format!("{:.1}", 100.0 * r)).collect();
        writeln!(f, "thread root by cycle (%): {}", cycles.join(" "))?;
        for (i, (share, losses)) in self.rooted_by_cycle.iter().zip(&self.losses_by_cycle).enumerate() {
            if *share < 0.9 {
                let shown: Vec<String> = losses.iter().map(|(cause, n)| format!("{cause} x{n}")).collect();
                writeln!(f, "  cycle {i} ({:.1}%) lost: {}", 100.0 * share, shown.join(", "))?;
            }
        }
        for (method, ours, jfr) in &self.top {
            writeln!(f, "  {ours:5.1}% {jfr:5.1}%  {method}")?;
        }
        if !self.unrooted.is_empty() {
            writeln!(f, "where our stacks without a thread root stop (root frame | outermost Java | leaf):")?;
            for (stack, n) in &self.unrooted {
                writeln!(f, "  {n:6} {stack}")?;
            }
        }
        Ok(())
    }
}

/// Runs `run` and compares. Panics (with the application's log) when a part cannot run.
pub fn compare(run: &Run) -> Comparison {
    let java = java_launcher(run.jdk);
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join(format!("{}.jfr", run.app.name()));
    let settings = dir.path().join("execution-samples.jfc");
    let cpu_time = run.jdk >= CPU_TIME_SAMPLES_SINCE_JDK;
    // Before the JVM starts, so that every thread of it has been seen switching.
    let watch = (!cpu_time).then(|| SignalWatch::start(dir.path()));
    std::fs::write(&settings, sampling_settings(JFR_SAMPLE_PERIOD_MS, cpu_time)).unwrap();
    let jfr_flag = format!(
        "-XX:StartFlightRecording=delay={}s,duration={}s,settings={},filename={}",
        run.warmup_s,
        run.window_s,
        settings.display(),
        recording.display()
    );
    // JFR's default depth (64) would cut a web server's stacks before their thread's root.
    let mut flags = vec!["-XX:FlightRecorderOptions=stackdepth=2048".to_string(), jfr_flag];
    flags.extend(run.jvm_flags.iter().cloned());
    let started = Instant::now();
    let app = launch(run, &java, &flags, dir.path());
    if let Some(left) = Duration::from_secs(run.warmup_s).checked_sub(started.elapsed()) {
        std::thread::sleep(left);
    }
    let (window, hz) = (run.window_s.to_string(), run.frequency_hz.to_string());
    let profiled = profile_outputs(app.jvm.pid(), &["--duration", &window, "--frequency", &hz]);
    await_file(&recording, Duration::from_secs(run.window_s + 30), &app.log);
    let jfr = execution_samples(&jdk_tool(&java, "jfr"), &recording);
    let cpu = cpu_time.then(|| cpu_time_samples(&jdk_tool(&java, "jfr"), &recording));
    let signals = watch.map(SignalWatch::finish);
    let timed = signals.as_ref().map(|_| timed_execution_samples(&jdk_tool(&java, "jfr"), &recording));
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(profiled.results.join("summary.json")).expect("summary.json in the result tree"),
    )
    .expect("summary.json is JSON");
    drop(app);
    if let Some(keep) = &run.keep {
        std::fs::create_dir_all(keep).unwrap_or_else(|e| panic!("{}: {e}", keep.display()));
        let copy = |from: &Path, to: &str| {
            std::fs::copy(from, keep.join(to)).unwrap_or_else(|e| panic!("keep {}: {e}", from.display()));
        };
        copy(&profiled.dir.path().join("run.jsonl"), "cycles.jsonl");
        copy(&profiled.results.join("summary.json"), "summary.json");
        copy(&recording, &format!("{}.jfr", run.app.name()));
        if signals.is_some() {
            copy(&dir.path().join("jfr-signals.txt"), "jfr-signals.txt");
        }
    }
    let by_state = timed.as_deref().zip(signals.as_ref());
    measure(&profiled.cycles, &summary, &jfr, cpu.as_deref(), by_state)
}

/// The figures, from our `--json` cycles and summary.json and JFR's samples: its CPU-time
/// samples where the JDK has them, and where it has not, its execution samples with their
/// times and the signals JFR sent.
pub fn measure(
    cycles: &[Value],
    summary: &Value,
    jfr: &[JfrSample],
    cpu: Option<&[CpuTimeSample]>,
    by_state: Option<(&[TimedSample], &Signals)>,
) -> Comparison {
    let mut c = Comparison {
        native_energy_percent: summary["jvm"]["native"]["percent"].as_f64().unwrap_or(0.0),
        java_unwinder: summary["java_unwinder"].clone(),
        ..Comparison::default()
    };
    let (mut rooted, mut no_java) = (0, 0);
    let mut ours_leaves: HashMap<String, u64> = HashMap::new();
    let mut unrooted: BTreeMap<String, u64> = BTreeMap::new();
    for cycle in cycles {
        let (rooted_before, samples_before) = (rooted, c.ours_samples);
        let mut losses = BTreeMap::new();
        let counts = Counts { rooted: &mut rooted, no_java: &mut no_java, losses: &mut losses };
        measure_cycle(cycle, &mut c, counts, &mut ours_leaves, &mut unrooted);
        let samples = c.ours_samples - samples_before;
        c.rooted_by_cycle.push((rooted - rooted_before) as f64 / samples.max(1) as f64);
        let mut losses: Vec<(String, u64)> = losses.into_iter().collect();
        losses.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        losses.truncate(3);
        c.losses_by_cycle.push(losses);
    }
    c.ours_rooted_share = rooted as f64 / c.ours_samples.max(1) as f64;
    c.ours_no_java_share = no_java as f64 / c.ours_samples.max(1) as f64;
    let mut unrooted: Vec<(String, u64)> = unrooted.into_iter().collect();
    unrooted.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    unrooted.truncate(12);
    c.unrooted = unrooted;

    c.jfr_samples = jfr.len() as u64;
    c.jfr_truncated = jfr.iter().filter(|s| s.truncated).count() as u64;
    let jfr_rooted = jfr.iter().filter(|s| !s.truncated && s.methods.last().is_some_and(|m| is_thread_root(m))).count();
    c.jfr_rooted_share = jfr_rooted as f64 / jfr.len().max(1) as f64;
    let jfr_leaves: Vec<String> = jfr.iter().filter_map(|s| s.methods.first().map(|m| stable(m))).collect();
    let (distance, top) = top_distance(&ours_leaves, &count_leaves(&jfr_leaves));
    c.leaf_distance_pp = distance;
    c.top = top;
    c.jfr_split_half_pp = split_half_pp(&jfr_leaves);
    c.jfr_pooled_p95_pp = pooled_p95_pp(&ours_leaves, &jfr_leaves);
    c.cpu_time = cpu.map(|cpu| {
        let leaves: Vec<String> = cpu
            .iter()
            .filter(|s| is_application_thread(&s.thread))
            .filter_map(|s| s.in_java_unbiased().map(stable))
            .collect();
        Reference::of(&ours_leaves, &leaves)
    });
    c.by_thread_state = by_state.map(|(timed, signals)| {
        let application: Vec<TimedSample> = timed
            .iter()
            .filter(|s| is_application_thread(&s.thread))
            .map(|s| TimedSample { leaf: stable(&s.leaf), ..s.clone() })
            .collect();
        by_thread_state(&ours_leaves, &application, signals)
    });
    c
}

/// Counters one cycle adds to: samples reaching a thread root, samples with no Java frame
/// (both over the run), and this cycle's losses by the frame their stacks start from.
struct Counts<'a> {
    rooted: &'a mut u64,
    no_java: &'a mut u64,
    losses: &'a mut BTreeMap<String, u64>,
}

/// One `--json` cycle's application-thread stacks, added to the run's counts.
fn measure_cycle(
    cycle: &Value,
    c: &mut Comparison,
    counts: Counts<'_>,
    ours_leaves: &mut HashMap<String, u64>,
    unrooted: &mut BTreeMap<String, u64>,
) {
    for thread in cycle["threads"].as_array().unwrap() {
        if !is_application_thread(thread["comm"].as_str().unwrap_or("")) {
            continue;
        }
        for stack in thread["stacks"].as_array().unwrap() {
            let frames = stack["frames"].as_array().unwrap();
            let n = stack["samples"].as_u64().unwrap();
            c.ours_samples += n;
            let java: Vec<&Value> = frames.iter().filter(|f| is_java(f)).collect();
            let first = frames.first().and_then(|f| f["name"].as_str()).unwrap_or("?");
            match java.first() {
                None => {
                    *counts.no_java += n;
                    *counts.losses.entry(format!("no Java frame, from {first}")).or_default() += n;
                }
                Some(outermost) if is_thread_root(short(outermost)) => *counts.rooted += n,
                Some(outermost) => {
                    *counts.losses.entry(first.to_owned()).or_default() += n;
                    let name = |f: Option<&Value>| f.and_then(|f| f["name"].as_str()).unwrap_or("?").to_owned();
                    let leaf = frames.last().map(|f| if is_java(f) { short(f).to_owned() } else { name(Some(f)) });
                    let key = format!("{} | {} | {}", name(frames.first()), short(outermost), leaf.unwrap_or_default());
                    *unrooted.entry(key).or_default() += n;
                }
            }
            if let Some(leaf) = in_java_leaf(frames) {
                *ours_leaves.entry(stable(leaf)).or_default() += n;
                c.ours_in_java_samples += n;
            }
        }
    }
}

/// A method name without a hidden class's address (`Foo$$Lambda$14/0x0000000800c03000.run`
/// and `Foo$$Lambda/0x...run` both read `Foo$$Lambda.run`), so both profilers' names meet.
fn stable(method: &str) -> String {
    match method.split_once("$$Lambda") {
        Some((host, rest)) => format!("{host}$$Lambda{}", rest.find('.').map_or("", |i| &rest[i..])),
        None => method.to_owned(),
    }
}

fn is_thread_root(method: &str) -> bool {
    THREAD_ROOTS.contains(&method) || method.ends_with(".main")
}

/// The innermost Java method of a stack in Java code, as JFR takes an execution sample: its
/// leaf is a Java frame, or the kernel entered from one without a call (a page fault or an
/// interrupt, after which JFR's signal finds the thread in that frame). A stack in native code
/// (JNI, the JVM's runtime, a syscall through libc) is not: JFR's execution samples leave out
/// threads in native code and in the VM. Nor is one in a HotSpot stub (arraycopy, vtable...):
/// JFR drops those samples (`JfrGetCallTrace::find_top_frame` gives up on a stub frame or a
/// blob without a frame size).
fn in_java_leaf(frames: &[Value]) -> Option<&str> {
    let (i, leaf) = frames.iter().enumerate().rev().find(|(_, f)| is_java(f))?;
    frames[i + 1..].iter().all(|f| f["kind"] == "kernel").then(|| short(leaf))
}

/// Application threads, told from their names as joular-ebpf's `thread_kind` does: not the
/// JIT compiler, the collector, or the JVM's own service threads (JFR's included).
pub fn is_application_thread(comm: &str) -> bool {
    const JVM_PREFIXES: [&str; 28] = [
        "C1 Compiler",
        "C2 Compiler",
        "JVMCI",
        "Sweeper thread",
        "GC Thread#",
        "ParGC Thread#",
        "G1 ",
        "ZDriver",
        "ZDirector",
        "ZStat",
        "ZUncommitter",
        "ZUnmapper",
        "ZWorker",
        "RuntimeWorker#",
        "Shenandoah ",
        "CMS ",
        "GC task thread#",
        "VM Thread",
        "VM Periodic Tas",
        "Service Thread",
        "Monitor Deflati",
        "Notification Th",
        "Signal Dispatch",
        "Attach Listener",
        "Reference Handl",
        "Finalizer",
        "Common-Cleaner",
        "JFR ",
    ];
    !JVM_PREFIXES.iter().any(|p| comm.starts_with(p))
}

/// An application under its load; both are killed on drop.
pub struct Launched {
    pub jvm: KillOnDrop,
    _load: Option<KillOnDrop>,
    /// Where the application's stdout and stderr go (for failure messages).
    pub log: PathBuf,
}

fn launch(run: &Run, java: &str, flags: &[String], dir: &Path) -> Launched {
    let log = dir.join("app.log");
    let lifetime_s = run.warmup_s + run.window_s + 60;
    match run.app {
        App::Jetty => {
            let base = jetty_base(dir);
            let port = free_port();
            let jvm = Command::new(java)
                .with_parent_death_signal()
                .args(flags)
                .arg("-jar")
                .arg(format!("{JETTY_HOME}/start.jar"))
                .arg(format!("jetty.home={JETTY_HOME}"))
                .arg(format!("jetty.base={}", base.display()))
                .args(["--module=http,deploy,jsp", &format!("jetty.http.port={port}"), "jetty.http.host=127.0.0.1"])
                .stdout(std::fs::File::create(&log).unwrap())
                .stderr(std::fs::File::create(dir.join("app.err")).unwrap())
                .spawn()
                .expect("start Jetty");
            let jvm = KillOnDrop::new(jvm);
            await_http(port, Duration::from_secs(60), dir);
            let load = Command::new("wrk")
                .with_parent_death_signal()
                .args(["-t1", "-c4", &format!("-d{lifetime_s}s"), &format!("http://127.0.0.1:{port}/index.jsp")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start wrk (cargo xtask test installs it)");
            Launched { jvm, _load: Some(KillOnDrop::new(load)), log }
        }
        App::H2 | App::Cpu => {
            let (classpath, class, args) = match run.app {
                App::H2 => (format!("{}:{H2_JAR}", java_dir().display()), "H2Load", vec![lifetime_s.to_string()]),
                _ => (java_dir().display().to_string(), "InlineSplit", vec![lifetime_s.to_string(), "1".into()]),
            };
            let mut child = Command::new(java)
                .with_parent_death_signal()
                .args(flags)
                .args(["-cp", &classpath, class])
                .args(&args)
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap_or_else(|e| panic!("start {class}: {e}"));
            await_ready(&mut child, class);
            Launched { jvm: KillOnDrop::new(child), _load: None, log }
        }
    }
}

trait ParentDeathSignal {
    fn with_parent_death_signal(&mut self) -> &mut Self;
}

impl ParentDeathSignal for Command {
    /// The child is killed when the thread that started it ends: a comparison interrupted
    /// (Ctrl-C on `cargo xtask compare-jfr`) leaves no server running.
    fn with_parent_death_signal(&mut self) -> &mut Self {
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        unsafe {
            self.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            })
        }
    }
}

/// A Jetty base in `dir` whose root web application is [`JSP`].
fn jetty_base(dir: &Path) -> PathBuf {
    let base = dir.join("jetty-base");
    let root = base.join("webapps/root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("index.jsp"), JSP).unwrap();
    base
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until the JSP answers 200 (Jetty started and the page compiled).
fn await_http(port: u16, timeout: Duration, dir: &Path) {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            let request = "GET /index.jsp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
            let mut response = String::new();
            if s.write_all(request.as_bytes()).is_ok()
                && s.read_to_string(&mut response).is_ok()
                && response.starts_with("HTTP/1.1 200")
            {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let err = std::fs::read_to_string(dir.join("app.err")).unwrap_or_default();
    panic!("Jetty did not serve /index.jsp with 200 within {timeout:?}; its log:\n{err}");
}

/// Waits for JFR to write its recording (at the end of its duration).
fn await_file(path: &Path, timeout: Duration, log: &Path) {
    let start = Instant::now();
    let mut last = None;
    while start.elapsed() < timeout {
        let len = std::fs::metadata(path).map(|m| m.len()).ok();
        // Written once, when the recording stops; a size that holds for a beat is complete.
        if len.is_some_and(|l| l > 0) && len == last {
            return;
        }
        last = len;
        std::thread::sleep(Duration::from_millis(500));
    }
    let log = std::fs::read_to_string(log).unwrap_or_default();
    panic!("JFR wrote no recording at {} within {timeout:?}; the application's log:\n{log}", path.display());
}
