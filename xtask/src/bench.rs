//! Benchmarks. The overhead run alternates a busy JVM alone (baseline) and the same JVM under
//! the profiler at 100 Hz, several times, and prints medians and ratios from the same run:
//! machines are shared and noisy, so absolute numbers from another run mean little.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context as _};

use crate::run::{build_profiler, compile_java, is_root, root, status};

const ROUNDS: usize = 3;
const JVM_SECONDS: u32 = 10;
const JVM_THREADS: u32 = 2;

pub struct Selection {
    pub overhead_only: bool,
    pub host_only: bool,
    pub soak_only: bool,
    pub hotspot_only: bool,
    pub soak_s: Option<f64>,
}

pub fn run(sel: Selection) -> anyhow::Result<()> {
    if !is_root() {
        bail!("the overhead benchmark loads eBPF programs and needs root: run `sudo -E cargo xtask bench`");
    }
    crate::setup::ensure()?;
    let java = compile_java()?;
    if sel.hotspot_only {
        return crate::hotspot_bench::run(&java);
    }
    let bin = build_profiler()?;
    if !sel.host_only && !sel.soak_only {
        overhead(&bin, &java)?;
    }
    if !sel.soak_only {
        crate::host_bench::overhead(&bin)?;
    }
    if let Some(seconds) = sel.soak_s {
        crate::host_bench::soak(&bin, &java, seconds)?;
    }
    if !sel.overhead_only && !sel.host_only && !sel.soak_only {
        crate::hotspot_bench::run(&java)?;
        status(Command::new(env!("CARGO")).args(["bench", "-p", "jvm-symbols"]).current_dir(root()))?;
        status(Command::new(env!("CARGO")).args(["bench", "-p", "joular-user"]).current_dir(root()))?;
    }
    Ok(())
}

fn overhead(bin: &Path, java: &Path) -> anyhow::Result<()> {
    let mut base_ops = Vec::new();
    let mut prof_ops = Vec::new();
    let mut cpu_per_s = Vec::new();
    for round in 1..=ROUNDS {
        let ops = run_jvm(java, None)?.0;
        eprintln!("round {round}: baseline ops {ops}");
        base_ops.push(ops as f64);
        let (ops, profiler_cpu) = run_jvm(java, Some(bin))?;
        let (cpu_s, wall_s) = profiler_cpu.context("profiler did not run")?;
        eprintln!("round {round}: profiled ops {ops}, profiler CPU {cpu_s:.3} s over {wall_s:.2} s");
        prof_ops.push(ops as f64);
        cpu_per_s.push(cpu_s / wall_s);
    }
    let (b, p, c) = (median(&mut base_ops), median(&mut prof_ops), median(&mut cpu_per_s));
    println!("\n== overhead: busy JVM ({JVM_THREADS} threads, {JVM_SECONDS} s), 100 Hz, medians of {ROUNDS} ==");
    println!("JVM throughput alone       {b:>14.0} ops");
    println!("JVM throughput profiled    {p:>14.0} ops");
    println!("throughput ratio (prof/alone)  {:.4}", p / b);
    println!("profiler CPU per profiled second  {c:.4} s/s ({:.2}% of one CPU)", c * 100.0);
    Ok(())
}

/// Runs the Throughput JVM, optionally under the profiler; returns its ops and the
/// profiler's (user+sys CPU seconds, wall seconds).
fn run_jvm(java: &Path, profiler: Option<&Path>) -> anyhow::Result<(u64, Option<(f64, f64)>)> {
    let jvm = Command::new("java")
        .args(["-XX:+PreserveFramePointer", "-cp"])
        .arg(java)
        .args(["Throughput", &JVM_SECONDS.to_string(), &JVM_THREADS.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .context("starting java")?;
    let mut prof_result = None;
    if let Some(bin) = profiler {
        let started = Instant::now();
        let prof = Command::new(bin)
            .args(["--pid", &jvm.id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting the profiler")?;
        let cpu_s = wait_cpu_seconds(prof.id())?;
        prof_result = Some((cpu_s, started.elapsed().as_secs_f64()));
    }
    let out = jvm.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let ops = text
        .lines()
        .find_map(|l| l.strip_prefix("ops "))
        .and_then(|n| n.trim().parse().ok())
        .with_context(|| format!("no `ops N` line from the JVM: {text}"))?;
    Ok((ops, prof_result))
}

/// Waits for a child and returns its user+sys CPU seconds (wait4's rusage).
pub fn wait_cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child; pointers are valid.
    let r = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut ru) };
    if r < 0 {
        bail!("wait4: {}", std::io::Error::last_os_error());
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(tv(ru.ru_utime) + tv(ru.ru_stime))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}
