//! `cargo xtask fuzz --seconds N`: runs every cargo-fuzz target in `fuzz/` for N seconds and
//! prints, per target, the coverage libFuzzer reached (`cov:` edges, `ft:` features), the
//! executions and any crash. A crash (or a hang, or a leak) fails the command; its input is in
//! `fuzz/artifacts/<target>/`. It installs what it needs: a nightly toolchain (sanitizers) and
//! `cargo-fuzz` from crates.io.
//!
//! The committed seeds (`fuzz/corpus/<target>/`) are only read: what libFuzzer finds goes to
//! `fuzz/target/corpus/<target>/` (ignored by git), which later runs start from.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context as _};

use crate::run::{output, root, status};

/// libFuzzer's per-input limit: an input that takes longer is a hang, reported like a crash.
const INPUT_TIMEOUT_S: u32 = 10;

struct Outcome {
    target: String,
    seconds: u64,
    /// The last libFuzzer status line (`#N DONE cov: .. ft: .. corp: ..`), trimmed.
    status: String,
    crashed: bool,
    artifacts: Vec<String>,
}

pub fn run(seconds: u64, only: Option<&str>) -> anyhow::Result<()> {
    if seconds == 0 {
        bail!("--seconds must be at least 1");
    }
    ensure_nightly()?;
    ensure_cargo_fuzz()?;
    let fuzz_dir = root().join("fuzz");
    let listed = output(Command::new("cargo").args(["+nightly", "fuzz", "list"]).current_dir(&fuzz_dir))
        .context("`cargo fuzz list` failed in fuzz/")?;
    let targets: Vec<String> = listed
        .lines()
        .map(str::trim)
        .filter(|t| !t.is_empty() && only.is_none_or(|o| t.contains(o)))
        .map(str::to_owned)
        .collect();
    if targets.is_empty() {
        bail!("no fuzz target matches {only:?}");
    }
    // One build for all targets; the eBPF object is not needed (and not built for sanitizers).
    status(fuzz_cmd(&fuzz_dir).arg("build").args(BUILD_FLAGS))?;
    let outcomes = run_targets(&fuzz_dir, &targets, seconds)?;
    eprintln!("\n== fuzzing: {seconds} s per target ==");
    for o in &outcomes {
        let verdict = if o.crashed { "CRASH" } else { "ok" };
        eprintln!("{:<14} {:>4} s  {verdict:<5}  {}", o.target, o.seconds, o.status);
        for a in &o.artifacts {
            eprintln!("{:<14}          input: {a} (replay: cd fuzz && cargo +nightly fuzz run {} {a})", "", o.target);
        }
    }
    let crashed: Vec<&str> = outcomes.iter().filter(|o| o.crashed).map(|o| o.target.as_str()).collect();
    if !crashed.is_empty() {
        bail!("fuzz targets crashed: {}", crashed.join(", "));
    }
    Ok(())
}

/// How the targets are built, for `build` and again for each `run` (which rebuilds on any
/// other flags). 16 codegen units, where cargo-fuzz's release default is 1: the build took
/// 4 min 25 s instead of 5 min 19 s on a 2-CPU machine, for 10-30% fewer executions a second
/// (attach_reply 33,058 against 36,060, raw_profile 4,771 against 6,798).
const BUILD_FLAGS: [&str; 3] = ["--debug-assertions", "--codegen-units", "16"];

/// Runs the targets, one per CPU at a time (each libFuzzer process is single-threaded), and
/// gives their outcomes in the targets' order.
fn run_targets(fuzz_dir: &Path, targets: &[String], seconds: u64) -> anyhow::Result<Vec<Outcome>> {
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get()).min(targets.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(target) = targets.get(i) else { break };
                let outcome = run_target(fuzz_dir, target, seconds);
                results.lock().expect("no worker panics holding it").push((i, outcome));
            });
        }
    });
    let mut results = results.into_inner().expect("no worker panicked");
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, outcome)| outcome).collect()
}

fn fuzz_cmd(fuzz_dir: &Path) -> Command {
    let mut cmd = Command::new("cargo");
    cmd.args(["+nightly", "fuzz"]).current_dir(fuzz_dir).env("JOULAR_SKIP_EBPF", "1");
    cmd
}

fn run_target(fuzz_dir: &Path, target: &str, seconds: u64) -> anyhow::Result<Outcome> {
    let work = fuzz_dir.join("target/corpus").join(target);
    let seeds = fuzz_dir.join("corpus").join(target);
    std::fs::create_dir_all(&work)?;
    std::fs::create_dir_all(&seeds)?;
    let artifacts_dir = fuzz_dir.join("artifacts").join(target);
    let before = list(&artifacts_dir);
    let log_path = fuzz_dir.join("target").join(format!("fuzz-{target}.log"));
    let log = std::fs::File::create(&log_path)?;
    eprintln!("== fuzz {target} for {seconds} s (log: {}) ==", log_path.display());
    let st = fuzz_cmd(fuzz_dir)
        .arg("run")
        .args(BUILD_FLAGS)
        .arg(target)
        .arg(&work)
        .arg(&seeds)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-timeout={INPUT_TIMEOUT_S}"))
        .arg("-print_final_stats=1")
        .stdout(Stdio::null())
        .stderr(log)
        .status()
        .with_context(|| format!("cannot run cargo fuzz for {target}"))?;
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let status_line = text
        .lines()
        .rev()
        .find(|l| l.contains(" cov: ") && l.contains(" ft: "))
        .map(|l| l.trim().to_owned())
        .unwrap_or_else(|| "no libFuzzer status line (see the log)".to_owned());
    let artifacts: Vec<String> = list(&artifacts_dir).into_iter().filter(|a| !before.contains(a)).collect();
    let crashed = !st.success() || !artifacts.is_empty();
    if crashed {
        // What libFuzzer said about it: the panic or sanitizer report.
        let report: Vec<&str> = text
            .lines()
            .skip_while(|l| {
                !(l.contains("panicked")
                    || l.contains("==ERROR")
                    || l.contains("deadly signal")
                    || l.contains("timeout"))
            })
            .take(30)
            .collect();
        eprintln!("{}", report.join("\n"));
    }
    Ok(Outcome { target: target.to_owned(), seconds, status: status_line, crashed, artifacts })
}

fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path().display().to_string()).collect();
    names.sort();
    names
}

fn ensure_nightly() -> anyhow::Result<()> {
    if output(Command::new("rustc").args(["+nightly", "--version"])).is_some() {
        return Ok(());
    }
    status(Command::new("rustup").args(["toolchain", "install", "nightly", "--profile", "minimal"]))
}

/// `cargo install cargo-fuzz` from crates.io, once (about a minute).
fn ensure_cargo_fuzz() -> anyhow::Result<()> {
    if output(Command::new("cargo").args(["fuzz", "--version"])).is_some() {
        return Ok(());
    }
    eprintln!("fuzz: installing cargo-fuzz from crates.io (about a minute)");
    status(Command::new(env!("CARGO")).args(["install", "cargo-fuzz", "--locked"]))
}
