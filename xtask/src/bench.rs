//! Benchmarks. Machines are shared and noisy, so every figure is a median over rounds that
//! alternate the compared modes within one run, printed as a ratio to a baseline measured in the
//! same run; absolute numbers from another run mean little.

use std::process::Command;

use anyhow::bail;

use crate::overhead;
use crate::run::{build_profiler, compile_java, is_root, root, status};

pub struct Selection {
    /// The side-by-side busy-JVM overhead benchmark (none, --pid, --all, bpftrace, JFR).
    pub overhead: Option<overhead::Options>,
    /// Host mode: 100 processes x 10 threads under `serve`.
    pub host: bool,
    /// The criterion hot-path benchmarks.
    pub criterion: bool,
    /// The HotSpot symbolization benchmark (cost per new Method* and per cycle).
    pub hotspot: bool,
    /// The serve-mode memory soak, for this many seconds.
    pub soak_s: Option<f64>,
    /// RSS of `--pid` on a busy JVM after this many seconds.
    pub rss_s: Option<f64>,
}

pub fn run(sel: Selection) -> anyhow::Result<()> {
    if !is_root() {
        bail!("the benchmarks load eBPF programs and need root: run `sudo -E cargo xtask bench`");
    }
    crate::setup::ensure()?;
    let java = compile_java()?;
    // JOULAR_BENCH_BIN measures another build of the profiler (e.g. an older commit's) with
    // this benchmark, for before/after figures taken the same way.
    let bin = match std::env::var_os("JOULAR_BENCH_BIN") {
        Some(path) => std::path::PathBuf::from(path),
        None => build_profiler()?,
    };
    if let Some(opts) = &sel.overhead {
        overhead::run(&bin, &java, opts)?;
    }
    if sel.host {
        crate::host_bench::overhead(&bin)?;
    }
    if let Some(seconds) = sel.rss_s {
        overhead::pid_rss(&bin, &java, seconds)?;
    }
    if let Some(seconds) = sel.soak_s {
        crate::host_bench::soak(&bin, &java, seconds)?;
    }
    if sel.hotspot {
        crate::hotspot_bench::run(&java)?;
    }
    if sel.criterion {
        status(Command::new(env!("CARGO")).args(["bench", "-p", "jvm-symbols"]).current_dir(root()))?;
        status(Command::new(env!("CARGO")).args(["bench", "-p", "joular-user"]).current_dir(root()))?;
    }
    Ok(())
}
