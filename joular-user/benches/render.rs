//! End-of-run rendering for one hour of 1 s cycles, 200 threads, 50,000 distinct stacks.
//!
//! `cargo bench -p joular-user --bench render` prints the median of `Results::finish` (every
//! end-of-run file: JoularJX totals, folded, two SVGs, pprof, summary, raw profile and, as with
//! `--html`, report.html), a baseline measured in the same run (only writing the folded file
//! from the same totals), their ratio, the per-cycle cost, peak RSS (VmHWM), and report.html
//! alone (`report --format html` from the raw profile) with its size. Targets: finish < 5 s,
//! < 300 MB, report.html < 10 MB.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use joular_user::model::{CycleReport, Frame, FrameKind, Stack, ThreadReport, ThreadStack};
use joular_user::output::{MethodFilter, ReportArgs, ReportFormat, ResultsConfig, ThreadStacks};
use joular_user::stages::Results;

const CYCLES: u64 = 3600;
const THREADS: u32 = 200;
const DISTINCT_STACKS: usize = 50_000;
const STACKS_PER_THREAD: usize = DISTINCT_STACKS / THREADS as usize;
/// Stacks a thread hits in one cycle, 5 samples each: 100 Hz for a busy thread.
const STACKS_PER_CYCLE: usize = 20;
const FRAME_POOL: usize = 20_000;
const RUNS: usize = 3;
const PID: u32 = 4242;

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn frame(short: String, kind: FrameKind) -> Frame {
    let name = match kind {
        FrameKind::JavaJit | FrameKind::JavaInlined => {
            format!("void {short}(long, java.lang.Object)")
        }
        _ => short.clone(),
    };
    Frame { name: Arc::from(name), short: Arc::from(short), kind, line: None, raw_name: None }
}

/// A realistic mix: app and JDK JIT frames, some native, kernel on top of a few.
fn frame_pool() -> Vec<Frame> {
    (0..FRAME_POOL)
        .map(|i| match i % 10 {
            0..=3 => frame(format!("com.acme.svc{}.Handler{}.handle{}", i % 37, i % 101, i), FrameKind::JavaJit),
            4..=7 => frame(format!("java.util.concurrent.Impl{}.op{}", i % 53, i), FrameKind::JavaJit),
            8 => frame(format!("JVM_native_{i}"), FrameKind::Native),
            _ => frame(format!("ksys_call_{i}"), FrameKind::Kernel),
        })
        .collect()
}

fn stacks(pool: &[Frame], rng: &mut Rng) -> Vec<Stack> {
    let root = frame("java.lang.Thread.run".into(), FrameKind::JavaJit);
    (0..DISTINCT_STACKS)
        .map(|_| {
            let depth = 15 + rng.below(25);
            let mut frames = Vec::with_capacity(depth + 1);
            frames.push(root.clone());
            frames.extend((0..depth).map(|_| pool[rng.below(pool.len())].clone()));
            Arc::from(frames)
        })
        .collect()
}

fn cycle_input(n: u64, all: &[Stack], rng: &mut Rng) -> (CycleReport, Vec<ThreadStacks>) {
    let mut report = CycleReport {
        cycle: n,
        start_ns: n * 1_000_000_000,
        end_ns: (n + 1) * 1_000_000_000,
        end_epoch_ms: 1_700_000_000_000 + (n + 1) * 1000,
        ..CycleReport::default()
    };
    let mut stacks = Vec::with_capacity(THREADS as usize);
    for t in 0..THREADS {
        let tid = PID + 1 + t;
        report.threads.push(ThreadReport {
            pid: PID,
            tid,
            comm: format!("worker-{t}"),
            on_cpu_ns: 500_000_000,
            samples: (STACKS_PER_CYCLE * 5) as u64,
            energy_uj: 50_000.0 + rng.below(50_000) as f64,
            ..ThreadReport::default()
        });
        let own = &all[t as usize * STACKS_PER_THREAD..(t as usize + 1) * STACKS_PER_THREAD];
        let thread_stacks = (0..STACKS_PER_CYCLE)
            .map(|_| ThreadStack { stack: own[rng.below(own.len())].clone(), samples: 5 })
            .collect();
        stacks.push((PID, tid, thread_stacks));
    }
    (report, stacks)
}

fn config(dir: &std::path::Path, evolution: bool) -> ResultsConfig {
    ResultsConfig {
        results_root: dir.to_owned(),
        write_files: true,
        filter: MethodFilter::parse("com.acme"),
        start_epoch_ms: 1_700_000_000_000,
        energy_source: "model".into(),
        estimated: true,
        energy_detail: String::new(),
        carbon: None,
        report_stacks: false,
        evolution,
        runtime_call_trees: false,
        top_n: 20,
        native_frames: false,
        html: true,
        modes: joular_user::safe_write::Modes::for_caller(),
        cpu_frequencies: Default::default(),
    }
}

fn vm_hwm_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64()
}

/// Baseline: the folded file alone, from the same totals, with no aggregation by method.
fn write_folded_only(results: &Results, path: &std::path::Path) {
    let mut out = BufWriter::new(File::create(path).unwrap());
    for profile in results.profiles() {
        for total in &profile.stacks {
            let names: Vec<&str> = total.stack.iter().map(|f| &*f.short).collect();
            writeln!(out, "{} {}", names.join(";"), total.energy_uj.round() as u64).unwrap();
        }
    }
    out.flush().unwrap();
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let pool = frame_pool();
    let all = stacks(&pool, &mut rng);

    // One hour of cycles. Evolution files are off here (they cost file opens, not memory)
    // and measured on their own below.
    let mut results = Results::new(config(&tmp.path().join("hour"), false)).unwrap();
    let mut cycle_times = Vec::with_capacity(CYCLES as usize);
    let feed = Instant::now();
    for n in 0..CYCLES {
        let (mut report, stacks) = cycle_input(n, &all, &mut rng);
        let t = Instant::now();
        results.on_cycle(&mut report, &stacks).unwrap();
        cycle_times.push(t.elapsed());
    }
    let feed_s = feed.elapsed().as_secs_f64();
    let hwm_after_feed = vm_hwm_mb();
    let distinct = results.profiles()[0].stacks.len();

    let mut evolution = Results::new(config(&tmp.path().join("evolution"), true)).unwrap();
    let mut evolution_times = Vec::new();
    for n in 0..60 {
        let (mut report, stacks) = cycle_input(n, &all, &mut rng);
        let t = Instant::now();
        evolution.on_cycle(&mut report, &stacks).unwrap();
        evolution_times.push(t.elapsed());
    }

    let mut finish_times = Vec::with_capacity(RUNS);
    let mut baseline_times = Vec::with_capacity(RUNS);
    let mut table = String::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        write_folded_only(&results, &tmp.path().join("baseline.folded"));
        baseline_times.push(t.elapsed());
        let t = Instant::now();
        table = results.finish().unwrap().table;
        finish_times.push(t.elapsed());
    }
    let finish_s = median(finish_times);
    let baseline_s = median(baseline_times);
    let hwm = vm_hwm_mb();

    let run_dir = results.finish().unwrap().outputs[0].dir.clone();
    let html_bytes = std::fs::metadata(run_dir.join("report.html")).unwrap().len();
    let mut html_times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        joular_user::output::report_to(
            &ReportArgs {
                result_dir: run_dir.clone(),
                output: Some(tmp.path().join("html")),
                format: vec![ReportFormat::Html],
                top: 20,
                filter: None,
                native_frames: false,
                output_mode: None,
            },
            &mut Vec::new(),
        )
        .unwrap();
        html_times.push(t.elapsed());
    }

    println!("{}", table.lines().take(5).collect::<Vec<_>>().join("\n"));
    println!("input: {CYCLES} cycles x {THREADS} threads, {distinct} distinct stacks, {FRAME_POOL} frames");
    println!("per cycle (no evolution): median {:.2} ms; whole hour fed in {feed_s:.1} s", median(cycle_times) * 1e3);
    println!("per cycle (with evolution files): median {:.2} ms", median(evolution_times) * 1e3);
    println!("finish (all end-of-run outputs): median {finish_s:.3} s over {RUNS} runs (target < 5 s)");
    println!(
        "baseline (folded file only): median {baseline_s:.3} s; ratio finish/baseline {:.1}",
        finish_s / baseline_s
    );
    println!("peak RSS (VmHWM): {hwm_after_feed:.0} MB after the hour, {hwm:.0} MB after finish (target < 300 MB)");
    println!(
        "report.html: {:.2} MB (target < 10 MB); `report --format html` from the raw profile: median {:.3} s",
        html_bytes as f64 / 1e6,
        median(html_times)
    );
}
