//! `cargo xtask bench --overhead`: what profiling costs a busy JVM, measured as a user would see
//! it and side by side with the references, in one run.
//!
//! Each round starts a fresh `Throughput` JVM (two busy threads, one per CPU here; `--jvm-threads`)
//! for every mode:
//! alone, `joular-ebpf --pid`, `joular-ebpf --all`, bpftrace sampling user stacks at 100 Hz (the
//! eBPF floor: the same samples with nothing else done) and JFR `settings=profile`. A profiler
//! attaches 0.3 s after its JVM starts, as a user who just launched the JVM would; the JVM warms up
//! (JIT, profiler start-up), then counts its work over the measured window. Modes alternate within
//! a round, in an order that rotates between rounds, and each mode's throughput is divided by the
//! unprofiled run of the same round, so the slow drifts of a shared machine cancel out.
//!
//! `--from-start` times the JVM's whole run instead: no warm-up split, so the profiler's start-up,
//! its first HotSpot table reads and its first cycles all fall inside the measured window, where
//! they compete with the JVM for its two CPUs. It runs none, `--pid` and bpftrace only.
//!
//! `--devices` runs none, `--pid` and `--pid --devices cpu,network,disk` (the byte counters at
//! every system call's return, E-Surgeon's network and disk halves) side by side: what counting
//! bytes adds to the CPU-only profile.
//!
//! For the external profilers it also reports their CPU (start-up, measured window, whole run),
//! their peak and final RSS, and, from `kernel.bpf_stats_enabled`, the ns per run of each of their
//! eBPF programs over the measured window (a mean over every sample, a profiled thread's or
//! not). `joular-ebpf` runs with `--sampler-cost`, which adds one clock read a sample and prints
//! the distribution of its samples of the JVM over its whole run: the median is the budget's
//! figure.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use joular_tests::sampler_cost::SamplerCostLine;

use crate::bpf_stats::{BpfStats, ProgStats};
use crate::measure::{median, spread, task_cpu_seconds, vm_rss_kib, wait_rusage};

/// A profiler attaches this long after its JVM starts.
const ATTACH_AFTER_S: f64 = 0.3;
/// Busy threads of the bench's JVM: one per CPU of the 2-CPU machines it was made on, so a
/// profiler's own CPU comes out of the JVM's.
const DEFAULT_JVM_THREADS: u32 = 2;
/// bpftrace's own 100 Hz user-stack sampler: the same samples as ours, aggregated in the kernel.
const BPFTRACE_PROGRAM: &str = "profile:hz:100 { @[ustack] = count(); }";

#[derive(Debug, Clone)]
pub struct Options {
    pub rounds: usize,
    /// 0 with `--from-start`: the JVM's whole run is measured.
    pub warmup_s: f64,
    pub measure_s: f64,
    /// Run the JVMs with `-XX:+PreserveFramePointer` (the default) or without any flag.
    pub frame_pointers: bool,
    /// Busy threads of each JVM (`--jvm-threads`). Fewer than the CPUs leaves a profiler CPU
    /// of its own: what remains is its cost inside the JVM's threads (sampling, scheduler hooks).
    pub jvm_threads: u32,
    pub modes: Vec<Mode>,
}

impl Options {
    pub fn full() -> Self {
        Options {
            rounds: 5,
            warmup_s: 2.0,
            measure_s: 8.0,
            frame_pointers: true,
            jvm_threads: DEFAULT_JVM_THREADS,
            modes: Mode::ALL.to_vec(),
        }
    }

    /// For iteration: fewer and shorter rounds, no JFR.
    pub fn quick() -> Self {
        Options {
            rounds: 2,
            warmup_s: 1.5,
            measure_s: 4.0,
            frame_pointers: true,
            jvm_threads: DEFAULT_JVM_THREADS,
            modes: vec![Mode::Alone, Mode::Pid, Mode::All, Mode::Bpftrace],
        }
    }

    /// `--from-start`: the JVM's whole run (10 s) is measured, the profiler attaching 0.3 s in.
    pub fn from_start() -> Self {
        Options {
            rounds: 5,
            warmup_s: 0.0,
            measure_s: 10.0,
            frame_pointers: true,
            jvm_threads: DEFAULT_JVM_THREADS,
            modes: vec![Mode::Alone, Mode::Pid, Mode::Bpftrace],
        }
    }

    /// `--devices`: `--pid` with and without the byte counters.
    pub fn devices() -> Self {
        Options { modes: vec![Mode::Alone, Mode::Pid, Mode::PidDevices], ..Options::full() }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Alone,
    Pid,
    /// `--pid --devices cpu,network,disk`.
    PidDevices,
    All,
    Bpftrace,
    Jfr,
}

impl Mode {
    const ALL: [Mode; 5] = [Mode::Alone, Mode::Pid, Mode::All, Mode::Bpftrace, Mode::Jfr];

    fn label(self) -> &'static str {
        match self {
            Mode::Alone => "none",
            Mode::Pid => "joular-ebpf --pid",
            Mode::PidDevices => "--pid +network,disk",
            Mode::All => "joular-ebpf --all",
            Mode::Bpftrace => "bpftrace 100 Hz ustack",
            Mode::Jfr => "JFR settings=profile",
        }
    }

    /// The profiler runs as a process of its own (its CPU and eBPF programs can be measured).
    fn external(self) -> bool {
        matches!(self, Mode::Pid | Mode::PidDevices | Mode::All | Mode::Bpftrace)
    }
}

/// One JVM run of one mode.
#[derive(Debug, Default)]
struct Run {
    ops: u64,
    profiler: Option<ProfilerFigures>,
}

#[derive(Debug, Default)]
struct ProfilerFigures {
    /// From launch to "profiling ..." (joular-ebpf) or "Attaching ..." (bpftrace): wall and CPU.
    startup_wall_s: Option<f64>,
    startup_cpu_s: Option<f64>,
    /// Share of one CPU over the JVM's measured window.
    window_cpu_share: f64,
    /// user+sys over the profiler's whole life (wait4), per second of its life.
    whole_cpu_share: f64,
    whole_cpu_s: f64,
    peak_rss_kib: f64,
    /// VmRSS at the end of the measured window.
    end_rss_kib: f64,
    /// eBPF programs over the measured window.
    programs: Vec<ProgStats>,
    /// joular-ebpf's `--sampler-cost` line (its whole run), if it printed one.
    sampler_cost: Option<SamplerCostLine>,
}

pub fn run(bin: &Path, java_dir: &Path, opts: &Options) -> anyhow::Result<()> {
    if opts.modes.contains(&Mode::Bpftrace) {
        crate::test::ensure_debian_packages(&[("bpftrace", "bpftrace")])?;
    }
    crate::test::ensure_debian_packages(&[("bpftool", "bpftool")])?;
    let stats = BpfStats::enable()?;
    let scratch = crate::host_bench::tempdir("overhead")?;
    let mut runs: Vec<(Mode, usize, Run)> = Vec::new();
    for round in 0..opts.rounds {
        // Rotate the order so no mode always runs first (JIT caches, page cache, thermal drift).
        let n = opts.modes.len();
        for i in 0..n {
            let mode = opts.modes[(i + round) % n];
            let run = one_run(mode, bin, java_dir, opts, &scratch, &stats)
                .with_context(|| format!("round {}, {}", round + 1, mode.label()))?;
            eprintln!(
                "round {} {:<24} ops {:>9}{}",
                round + 1,
                mode.label(),
                run.ops,
                run.profiler.as_ref().map(describe_run).unwrap_or_default()
            );
            runs.push((mode, round, run));
        }
    }
    print_table(&runs, opts);
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

fn describe_run(p: &ProfilerFigures) -> String {
    let sampler = p
        .programs
        .iter()
        .find(|s| s.kind == "perf_event")
        .map(|s| format!(", sampler {:.0} ns/run", s.ns_per_run()))
        .unwrap_or_default();
    let cost = p
        .sampler_cost
        .map(|c| format!(" (JVM samples: median {:.0}, p90 {:.0}, p99 {:.0} ns)", c.median_ns, c.p90_ns, c.p99_ns))
        .unwrap_or_default();
    format!(
        "  profiler: window {:.3}% CPU, whole run {:.3}% ({:.3} s), peak RSS {:.1} MiB{sampler}{cost}",
        p.window_cpu_share * 100.0,
        p.whole_cpu_share * 100.0,
        p.whole_cpu_s,
        p.peak_rss_kib / 1024.0
    )
}

fn jvm_command(mode: Mode, java_dir: &Path, opts: &Options, scratch: &Path) -> Command {
    let mut cmd = Command::new("java");
    if opts.frame_pointers {
        cmd.arg("-XX:+PreserveFramePointer");
    }
    if mode == Mode::Jfr {
        cmd.arg(format!("-XX:StartFlightRecording=settings=profile,filename={}", scratch.join("bench.jfr").display()));
    }
    cmd.arg("-cp")
        .arg(java_dir)
        .args(["Throughput", &opts.measure_s.to_string(), &opts.jvm_threads.to_string(), &opts.warmup_s.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd
}

fn profiler_command(mode: Mode, bin: &Path, jvm_pid: u32, scratch: &Path) -> Option<Command> {
    let mut cmd = match mode {
        Mode::Pid => {
            let mut c = Command::new(bin);
            c.args(["--pid", &jvm_pid.to_string(), "--sampler-cost"]);
            c
        }
        Mode::PidDevices => {
            let mut c = Command::new(bin);
            c.args(["--pid", &jvm_pid.to_string(), "--devices", "cpu,network,disk"]);
            c
        }
        Mode::All => {
            let mut c = Command::new(bin);
            c.arg("--all");
            c
        }
        Mode::Bpftrace => {
            let mut c = Command::new("bpftrace");
            c.args(["-e", BPFTRACE_PROGRAM]);
            c
        }
        Mode::Alone | Mode::Jfr => return None,
    };
    if matches!(mode, Mode::Pid | Mode::PidDevices | Mode::All) {
        cmd.arg("--output").arg(scratch.join("results"));
    }
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    Some(cmd)
}

/// Lines a child prints, with the instant each was read.
fn line_reader(out: impl std::io::Read + Send + 'static) -> mpsc::Receiver<(Instant, String)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send((Instant::now(), line)).is_err() {
                break;
            }
        }
    });
    rx
}

fn wait_for_line(
    rx: &mpsc::Receiver<(Instant, String)>,
    prefix: &str,
    timeout: Duration,
) -> anyhow::Result<(Instant, String)> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((at, line)) if line.starts_with(prefix) => return Ok((at, line)),
            Ok(_) => {}
            Err(_) => bail!("no line starting with {prefix:?} within {timeout:?}"),
        }
    }
}

fn one_run(
    mode: Mode,
    bin: &Path,
    java_dir: &Path,
    opts: &Options,
    scratch: &Path,
    stats: &BpfStats,
) -> anyhow::Result<Run> {
    let started = Instant::now();
    let mut jvm = jvm_command(mode, java_dir, opts, scratch).spawn().context("starting java")?;
    let jvm_lines = line_reader(jvm.stdout.take().context("java stdout")?);
    crate::host_bench::sleep_until(started, ATTACH_AFTER_S);
    let mut profiler = match profiler_command(mode, bin, jvm.id(), scratch) {
        Some(mut cmd) => Some(Watched::spawn(&mut cmd)?),
        None => None,
    };
    let window = Duration::from_secs_f64(opts.warmup_s + opts.measure_s + 30.0);
    wait_for_line(&jvm_lines, "measuring", window)?;
    let from = profiler.as_ref().map(|p| (Instant::now(), task_cpu_seconds(p.pid()), stats.snapshot_of(p.pid())));
    let (_, ops_line) = wait_for_line(&jvm_lines, "ops ", window)?;
    let to = profiler.as_ref().map(|p| {
        (Instant::now(), task_cpu_seconds(p.pid()), stats.snapshot_of(p.pid()), vm_rss_kib(p.pid()).unwrap_or(0.0))
    });
    let status = jvm.wait()?;
    if !status.success() {
        bail!("java exited with {status}");
    }
    let ops: u64 = ops_line["ops ".len()..].trim().parse().context("ops line")?;
    let figures = match (profiler.as_mut(), from, to) {
        (Some(p), Some((t0, cpu0, prog0)), Some((t1, cpu1, prog1, end_rss_kib))) => {
            // `--pid` stops by itself when its JVM exits; the others are stopped as a user would.
            if !matches!(mode, Mode::Pid | Mode::PidDevices) {
                p.interrupt();
            }
            let (whole_cpu_s, peak_rss_kib, life_s) = p.finish(Duration::from_secs(20))?;
            let (startup_wall_s, startup_cpu_s) = p.startup().unzip();
            let sampler_cost = p.sampler_cost();
            Some(ProfilerFigures {
                startup_wall_s,
                startup_cpu_s,
                window_cpu_share: (cpu1 - cpu0) / (t1 - t0).as_secs_f64(),
                whole_cpu_share: whole_cpu_s / life_s,
                whole_cpu_s,
                peak_rss_kib,
                end_rss_kib,
                programs: ProgStats::deltas(&prog0, &prog1),
                sampler_cost,
            })
        }
        _ => None,
    };
    debug_assert_eq!(figures.is_some(), mode.external());
    Ok(Run { ops, profiler: figures })
}

/// A profiler process whose stderr is watched for the line that ends its start-up.
struct Watched {
    child: Child,
    launched: Instant,
    /// (wall, CPU) seconds from launch to the start-up line, filled by the watcher thread.
    startup: std::sync::Arc<std::sync::Mutex<Option<(f64, f64)>>>,
    /// Its `--sampler-cost` line, filled by the watcher thread.
    sampler_cost: std::sync::Arc<std::sync::Mutex<Option<SamplerCostLine>>>,
    /// The watcher thread, which ends at the profiler's stderr's end.
    watcher: Option<std::thread::JoinHandle<()>>,
}

impl Watched {
    fn spawn(cmd: &mut Command) -> anyhow::Result<Self> {
        let launched = Instant::now();
        let mut child = cmd.spawn().with_context(|| format!("starting {:?}", cmd.get_program()))?;
        let pid = child.id();
        let startup = std::sync::Arc::new(std::sync::Mutex::new(None));
        let slot = startup.clone();
        let sampler_cost = std::sync::Arc::new(std::sync::Mutex::new(None));
        let cost_slot = sampler_cost.clone();
        let lines = line_reader(child.stderr.take().context("profiler stderr")?);
        let watcher = std::thread::spawn(move || {
            for (at, line) in lines {
                if let (Some(cost), Ok(mut s)) = (SamplerCostLine::parse(&line), cost_slot.lock()) {
                    *s = Some(cost);
                }
                let started = line.starts_with("joular-ebpf: profiling") || line.starts_with("Attaching");
                if started && slot.lock().is_ok_and(|s| s.is_none()) {
                    if let Ok(mut s) = slot.lock() {
                        *s = Some(((at - launched).as_secs_f64(), task_cpu_seconds(pid)));
                    }
                }
            }
        });
        Ok(Watched { child, launched, startup, sampler_cost, watcher: Some(watcher) })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn startup(&self) -> Option<(f64, f64)> {
        self.startup.lock().ok().and_then(|s| *s)
    }

    /// Once the profiler has ended (`finish`): the line comes just before it exits, so the
    /// watcher is waited for, to the end of the profiler's stderr.
    fn sampler_cost(&mut self) -> Option<SamplerCostLine> {
        if let Some(watcher) = self.watcher.take() {
            let _ = watcher.join();
        }
        self.sampler_cost.lock().ok().and_then(|s| *s)
    }

    fn interrupt(&self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
    }

    /// Waits for the profiler to end (interrupting it after `grace`); returns its user+sys CPU
    /// seconds, peak RSS (KiB) and life (s).
    fn finish(&mut self, grace: Duration) -> anyhow::Result<(f64, f64, f64)> {
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if crate::measure::has_exited(self.child.id()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if !crate::measure::has_exited(self.child.id()) {
            self.interrupt();
        }
        let usage = wait_rusage(self.child.id())?;
        Ok((usage.cpu_s, usage.max_rss_kib, self.launched.elapsed().as_secs_f64()))
    }
}

fn print_table(runs: &[(Mode, usize, Run)], opts: &Options) {
    let baseline =
        |round: usize| runs.iter().find(|(m, r, _)| *m == Mode::Alone && *r == round).map(|(_, _, run)| run.ops as f64);
    println!(
        "\n== overhead: Throughput JVM, {} busy threads on {} CPUs{}, attach {ATTACH_AFTER_S} s after start, {}, {} rounds; medians [min-max] ==",
        opts.jvm_threads,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        if opts.frame_pointers { ", -XX:+PreserveFramePointer" } else { ", no JVM flags" },
        if opts.warmup_s > 0.0 {
            format!("{} s warm-up + {} s measured", opts.warmup_s, opts.measure_s)
        } else {
            format!("its whole {} s run measured (profiler start-up inside)", opts.measure_s)
        },
        opts.rounds
    );
    println!(
        "{:<24} {:>24} {:>18} {:>13} {:>13} {:>15} {:>13} {:>17} {:>13}",
        "mode",
        "throughput ratio",
        "start-up wall/CPU",
        "window CPU",
        "whole CPU",
        "peak/end RSS",
        "sampler",
        "JVM median/p99",
        "sched_switch"
    );
    for &mode in &opts.modes {
        let mine: Vec<&Run> = runs.iter().filter(|(m, _, _)| *m == mode).map(|(_, _, r)| r).collect();
        let mut ratios: Vec<f64> = runs
            .iter()
            .filter(|(m, _, _)| *m == mode)
            .filter_map(|(_, round, run)| baseline(*round).map(|b| run.ops as f64 / b))
            .collect();
        let ratio = if ratios.is_empty() {
            "-".to_string()
        } else {
            let (lo, hi) = spread(&ratios);
            format!("{:.4} [{lo:.4}-{hi:.4}]", median(&mut ratios))
        };
        let figures: Vec<&ProfilerFigures> = mine.iter().filter_map(|r| r.profiler.as_ref()).collect();
        if figures.is_empty() {
            println!("{:<24} {ratio:>24}", mode.label());
            continue;
        }
        let med = |f: &dyn Fn(&ProfilerFigures) -> Option<f64>| {
            let mut v: Vec<f64> = figures.iter().filter_map(|p| f(p)).collect();
            (!v.is_empty()).then(|| median(&mut v))
        };
        let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.3}%", v * 100.0));
        let startup = match (med(&|p| p.startup_wall_s), med(&|p| p.startup_cpu_s)) {
            (Some(w), Some(c)) => format!("{w:.2} s/{c:.3} s"),
            _ => "-".into(),
        };
        let rss = format!(
            "{:.1}/{:.1} MiB",
            med(&|p| Some(p.peak_rss_kib)).unwrap_or(0.0) / 1024.0,
            med(&|p| Some(p.end_rss_kib)).unwrap_or(0.0) / 1024.0
        );
        // The sampler is the one perf_event program; sched_switch is the one raw_tracepoint one.
        let prog = |kind: &str| {
            med(&|p| p.programs.iter().find(|s| s.kind == kind).filter(|s| s.runs > 0).map(ProgStats::ns_per_run))
                .map_or("-".into(), |ns| format!("{ns:.0} ns/run"))
        };
        // Each round's median (p99) bucket, by its low end; the median of those over the rounds.
        let cost = match (med(&|p| p.sampler_cost.map(|c| c.median_ns)), med(&|p| p.sampler_cost.map(|c| c.p99_ns))) {
            (Some(m), Some(p99)) => format!("{m:.0}/{p99:.0} ns"),
            _ => "-".into(),
        };
        println!(
            "{:<24} {ratio:>24} {startup:>18} {:>13} {:>13} {rss:>15} {:>13} {cost:>17} {:>13}",
            mode.label(),
            pct(med(&|p| Some(p.window_cpu_share))),
            pct(med(&|p| Some(p.whole_cpu_share))),
            prog("perf_event"),
            prog("raw_tracepoint"),
        );
    }
    println!("(CPU shares are of one CPU; \"window\" is the JVM's measured window, \"whole\" the profiler's life incl. start-up and exit)");
    println!(
        "(\"sampler\": bpf_stats' mean over every sample in the window; \"JVM median/p99\": --sampler-cost's samples \
         of the JVM over the profiler's whole run, each the low end of its 100 ns bucket, medians over the rounds)"
    );
}

/// `--rss SECONDS`: `joular-ebpf --pid` on a busy JVM for that long; prints its RSS over time, at
/// the end and at its peak (the target is the end figure after 10 minutes).
pub fn pid_rss(bin: &Path, java_dir: &Path, seconds: f64) -> anyhow::Result<()> {
    let scratch = crate::host_bench::tempdir("rss")?;
    let opts = Options { warmup_s: 0.0, measure_s: seconds + 10.0, ..Options::full() };
    let mut jvm =
        jvm_command(Mode::Alone, java_dir, &opts, &scratch).stdout(Stdio::null()).spawn().context("starting java")?;
    let started = Instant::now();
    crate::host_bench::sleep_until(started, ATTACH_AFTER_S);
    let mut cmd = profiler_command(Mode::Pid, bin, jvm.id(), &scratch).context("--pid profiler")?;
    cmd.args(["--duration", &seconds.to_string()]);
    let mut profiler = Watched::spawn(&mut cmd)?;
    let mut last_kib = 0.0;
    let mut next_print_s = 60.0;
    while !crate::measure::has_exited(profiler.pid()) {
        std::thread::sleep(Duration::from_secs(1));
        if let Some(kib) = vm_rss_kib(profiler.pid()) {
            last_kib = kib;
        }
        let t = started.elapsed().as_secs_f64();
        if t >= next_print_s {
            eprintln!("rss: {t:>5.0} s  {:.1} MiB", last_kib / 1024.0);
            next_print_s += 60.0;
        }
    }
    let (cpu_s, peak_kib, life_s) = profiler.finish(Duration::from_secs(20))?;
    let _ = jvm.kill();
    let _ = jvm.wait();
    println!("\n== RSS of joular-ebpf --pid on a busy JVM for {seconds:.0} s ==");
    println!(
        "RSS at the end {:.1} MiB (target <= 30 MiB), peak {:.1} MiB; CPU {:.3}% of one CPU over {life_s:.0} s",
        last_kib / 1024.0,
        peak_kib / 1024.0,
        100.0 * cpu_s / life_s
    );
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}
