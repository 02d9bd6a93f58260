//! Host-mode benchmarks (issue 6): profiler CPU with both CPUs busy across 100 processes and
//! 1,000 threads, and a memory soak of the `serve` daemon under process churn.
//!
//! The workload is this binary re-run as `xtask spin`: each thread alternates 1 ms of counting
//! with a 4 ms sleep, so the CPUs stay saturated and the scheduler switches often (the
//! sched_switch program's worst case), and each process prints how many iterations it did, the
//! throughput compared with and without the profiler.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::cgroup::{CgroupHandle, WorkloadCgroup};
use crate::measure::{median, rss_anon_kib, task_cpu_seconds, vm_rss_kib, wait_rusage};

const PROCESSES: usize = 100;
const THREADS_PER_PROCESS: usize = 10;
const ROUNDS: usize = 3;
const WORKLOAD_SECONDS: f64 = 20.0;
/// The profiler's steady state is measured between these instants after its start, away from
/// eBPF load and the end summary.
const STEADY_FROM_S: f64 = 5.0;
const STEADY_TO_S: f64 = 15.0;

/// `xtask spin THREADS SECONDS`: the workload process. Prints `iterations N`.
pub fn spin(threads: usize, seconds: f64) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut iterations = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let burst = Instant::now();
                    while burst.elapsed() < Duration::from_millis(1) {
                        for _ in 0..1000 {
                            iterations = std::hint::black_box(iterations + 1);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(4));
                }
                iterations
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    let total: u64 = workers.into_iter().map(|w| w.join().unwrap_or(0)).sum();
    println!("iterations {total}");
    Ok(())
}

fn spawn_spinner(threads: usize, seconds: f64, group: &CgroupHandle) -> anyhow::Result<Child> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["spin", &threads.to_string(), &seconds.to_string()]).stdout(Stdio::piped());
    group.add_on_exec(&mut cmd);
    cmd.spawn().context("starting a workload process")
}

fn workload(seconds: f64, group: &CgroupHandle) -> anyhow::Result<Vec<Child>> {
    (0..PROCESSES).map(|_| spawn_spinner(THREADS_PER_PROCESS, seconds, group)).collect()
}

fn iterations(children: Vec<Child>) -> anyhow::Result<u64> {
    let mut total = 0;
    for child in children {
        let out = child.wait_with_output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        total += text
            .lines()
            .find_map(|l| l.strip_prefix("iterations "))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .with_context(|| format!("no `iterations N` line from a workload process: {text}"))?;
    }
    Ok(total)
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `serve` at nice 0, as deployed. Deployed, the workload and the daemon each have a cgroup of their
/// own (pods, systemd units) and the kernel shares the CPUs between the groups; here the workload's
/// processes are put in a cgroup of their own ([`WorkloadCgroup`]) for the same reason. Without it,
/// 1,000 runnable threads next to a nice-0 daemon in one group would leave it a 1/1000 share and
/// stretch its 1 s cycles to several seconds.
fn serve(bin: &Path, duration_s: f64, profile_dir: &Path, log: &Path) -> anyhow::Result<Child> {
    Command::new(bin)
        .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port()?), "--duration", &duration_s.to_string()])
        .arg("--profile-dir")
        .arg(profile_dir)
        .args(["--profile-interval", "10"])
        .stdout(std::fs::File::create(log.with_extension("out"))?)
        .stderr(std::fs::File::create(log)?)
        .spawn()
        .context("starting joular-ebpf serve")
}

/// Cycles the daemon completed, from its end summary (`== joular-ebpf summary: N cycles, ...`).
fn cycles_done(log: &Path) -> Option<u64> {
    let out = std::fs::read_to_string(log.with_extension("out")).ok()?;
    out.lines().find_map(|l| l.strip_prefix("== joular-ebpf summary: "))?.split_whitespace().next()?.parse().ok()
}

pub fn overhead(bin: &Path) -> anyhow::Result<()> {
    let scratch = tempdir("host-bench")?;
    let cgroup = WorkloadCgroup::create("host-bench")?;
    let group = cgroup.handle();
    let (mut base, mut prof, mut steady, mut total) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let b = iterations(workload(WORKLOAD_SECONDS, &group)?)?;
        eprintln!("round {round}: baseline {b} iterations");
        base.push(b as f64);

        let children = workload(WORKLOAD_SECONDS, &group)?;
        let started = Instant::now();
        let log = scratch.join("serve.log");
        let mut profiler = serve(bin, WORKLOAD_SECONDS - 2.0, &scratch.join("profiles"), &log)?;
        let pid = profiler.id();
        sleep_until(started, STEADY_FROM_S);
        let cpu_from = task_cpu_seconds(pid);
        sleep_until(started, STEADY_TO_S);
        let cpu_to = task_cpu_seconds(pid);
        let run_cpu = wait_rusage(pid)?.cpu_s;
        let wall = started.elapsed().as_secs_f64();
        let _ = profiler.wait();
        let p = iterations(children)?;
        let steady_share = (cpu_to - cpu_from) / (STEADY_TO_S - STEADY_FROM_S);
        eprintln!(
            "round {round}: profiled {p} iterations; profiler steady {:.2}% of one CPU, whole run {run_cpu:.3} CPU-s over {wall:.1} s, {} cycles of 1 s",
            steady_share * 100.0,
            cycles_done(&log).map_or("?".into(), |c| c.to_string())
        );
        prof.push(p as f64);
        steady.push(steady_share);
        total.push(run_cpu / wall);
    }
    let (b, p, s, t) = (median(&mut base), median(&mut prof), median(&mut steady), median(&mut total));
    println!(
        "\n== host mode: `serve` (nice 0) with {PROCESSES} processes x {THREADS_PER_PROCESS} threads busy on {} CPUs in their own cgroup, 100 Hz, medians of {ROUNDS} ==",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!("workload iterations alone         {b:>16.0}");
    println!("workload iterations profiled      {p:>16.0}");
    println!("throughput ratio (prof/alone)     {:.4}", p / b);
    println!("profiler CPU, steady state        {:.2}% of one CPU (target <= 1.5%)", s * 100.0);
    println!("profiler CPU, whole run           {:.2}% of one CPU (includes eBPF load and shutdown)", t * 100.0);
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// `serve` for `seconds` under churn (a short-lived process every 50 ms), with the 1,000-thread
/// workload and a JVM; samples RSS every 5 s and prints the slope after a 60 s warm-up.
pub fn soak(bin: &Path, java: &Path, seconds: f64) -> anyhow::Result<()> {
    if seconds < 120.0 {
        bail!("--soak needs at least 120 s (60 s of warm-up are not counted)");
    }
    let scratch = tempdir("soak")?;
    let cgroup = WorkloadCgroup::create("soak")?;
    let group = cgroup.handle();
    let children = workload(seconds + 5.0, &group)?;
    let mut jvm = Command::new("java")
        .args(["-XX:+PreserveFramePointer", "-cp"])
        .arg(java)
        .args(["Throughput", &format!("{}", seconds as u64 + 5), "1"])
        .stdout(Stdio::null())
        .spawn()
        .context("starting java")?;
    let log = scratch.join("serve.log");
    let started = Instant::now();
    let mut profiler = serve(bin, seconds, &scratch.join("profiles"), &log)?;
    let pid = profiler.id();
    let churn_stop = Arc::new(AtomicBool::new(false));
    // Process churn: a 2-thread, 20 ms process every 50 ms, reaped without waiting for it.
    let churn = {
        let stop = Arc::clone(&churn_stop);
        let group = group.clone();
        std::thread::spawn(move || {
            let (mut spawned, mut running) = (0u64, Vec::<Child>::new());
            let exe = std::env::current_exe().unwrap_or_default();
            while !stop.load(Ordering::Relaxed) {
                let mut cmd = Command::new(&exe);
                cmd.args(["spin", "2", "0.02"]).stdout(Stdio::null());
                group.add_on_exec(&mut cmd);
                if let Ok(c) = cmd.spawn() {
                    running.push(c);
                    spawned += 1;
                }
                running.retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
                std::thread::sleep(Duration::from_millis(50));
            }
            for mut c in running {
                let _ = c.wait();
            }
            spawned
        })
    };
    // Thread churn inside one long-lived process (this one): a 5 ms thread every 20 ms.
    let thread_churn = {
        let stop = Arc::clone(&churn_stop);
        std::thread::spawn(move || {
            let mut spawned = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let t = std::thread::spawn(|| {
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_millis(5) {
                        std::hint::spin_loop();
                    }
                });
                let _ = t.join();
                spawned += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            spawned
        })
    };
    // (seconds since start, KiB) points of the total and the anonymous RSS.
    let mut samples: Vec<(f64, f64)> = Vec::new();
    let mut anon: Vec<(f64, f64)> = Vec::new();
    while started.elapsed().as_secs_f64() < seconds - 1.0 {
        std::thread::sleep(Duration::from_secs(5));
        let t = started.elapsed().as_secs_f64();
        if let (Some(kib), Some(anon_kib)) = (vm_rss_kib(pid), rss_anon_kib(pid)) {
            samples.push((t, kib));
            anon.push((t, anon_kib));
            eprintln!("soak: {t:>5.0} s  RSS {:.1} MiB (anonymous {:.1} MiB)", kib / 1024.0, anon_kib / 1024.0);
        }
    }
    churn_stop.store(true, Ordering::Relaxed);
    let churned = churn.join().unwrap_or(0);
    let churned_threads = thread_churn.join().unwrap_or(0);
    let status = profiler.wait()?;
    let _ = jvm.wait();
    let _ = iterations(children);
    if !status.success() {
        bail!("serve failed ({status}); log: {}", log.display());
    }
    let warm: Vec<(f64, f64)> = samples.iter().copied().filter(|(t, _)| *t >= 60.0).collect();
    let slope_kib_per_s = slope(&warm);
    let first = warm.first().map_or(0.0, |s| s.1);
    let last = warm.last().map_or(0.0, |s| s.1);
    let max = samples.iter().map(|s| s.1).fold(0.0, f64::max);
    println!("\n== soak: `serve` for {seconds:.0} s, {PROCESSES}x{THREADS_PER_PROCESS} busy threads, a JVM, {churned} short-lived processes, {churned_threads} short-lived threads ==");
    println!(
        "RSS after warm-up {:.1} MiB, at the end {:.1} MiB, peak {:.1} MiB",
        first / 1024.0,
        last / 1024.0,
        max / 1024.0
    );
    println!(
        "RSS slope after 60 s: {:.1} KiB/min ({:.2}% of the warm RSS per hour)",
        slope_kib_per_s * 60.0,
        100.0 * slope_kib_per_s * 3600.0 / first.max(1.0)
    );
    // Allocator arenas grow in steps at load peaks, then flatten: the second half shows the trend.
    let half: Vec<(f64, f64)> = samples.iter().copied().filter(|(t, _)| *t >= seconds / 2.0).collect();
    println!("RSS slope over the second half: {:.1} KiB/min", slope(&half) * 60.0);
    // File pages of mapped binaries follow whatever else runs on the host; the anonymous part
    // is the profiler's own memory, so its slope is the one that tells a leak.
    let anon_warm: Vec<(f64, f64)> = anon.iter().copied().filter(|(t, _)| *t >= 60.0).collect();
    let anon_half: Vec<(f64, f64)> = anon.iter().copied().filter(|(t, _)| *t >= seconds / 2.0).collect();
    println!(
        "anonymous RSS after warm-up {:.1} MiB, at the end {:.1} MiB, peak {:.1} MiB; slope after 60 s {:.1} KiB/min, over the second half {:.1} KiB/min",
        anon_warm.first().map_or(0.0, |s| s.1) / 1024.0,
        anon_warm.last().map_or(0.0, |s| s.1) / 1024.0,
        anon.iter().map(|s| s.1).fold(0.0, f64::max) / 1024.0,
        slope(&anon_warm) * 60.0,
        slope(&anon_half) * 60.0
    );
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// Least-squares slope of `(x, y)`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

pub fn sleep_until(start: Instant, at_s: f64) {
    let elapsed = start.elapsed().as_secs_f64();
    if elapsed < at_s {
        std::thread::sleep(Duration::from_secs_f64(at_s - elapsed));
    }
}

pub fn tempdir(name: &str) -> anyhow::Result<PathBuf> {
    let dir = crate::run::target_dir().join(format!("xtask-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line_and_of_noise_free_flat_data() {
        let line: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 3.0 + 2.5 * i as f64)).collect();
        assert!((slope(&line) - 2.5).abs() < 1e-12);
        assert_eq!(slope(&[(0.0, 4.0), (1.0, 4.0), (2.0, 4.0)]), 0.0);
        assert_eq!(slope(&[(1.0, 4.0)]), 0.0);
    }
}
