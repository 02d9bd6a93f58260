//! `joular-ebpf sweep`: runs the command once per value and repeat, each run a `record` of its
//! own (this binary as a child), so a run that fails or crashes cannot take the others down;
//! then fits, writes and prints. Bad input exits 2 before anything runs; a failed run is
//! reported, the others complete, and the sweep exits 1 at the end.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use joular_user::diff::Run;
use joular_user::safe_write::{self, parse_output_mode, Modes, OutDir};
use joular_user::sweep::analysis::{analyse, Energies, Measurement};
use joular_user::sweep::outputs::write_outputs;
use joular_user::sweep::params::{self, Param};
use joular_user::sweep::summary::Sweep;
use joular_user::sweep::table;

use super::errors::UsageError;
use super::paths::check_writable_fs;

/// Set by the first SIGINT or SIGTERM: the sweep stops after the run under way (whose `record`
/// got the terminal's Ctrl-C too, and ends its command) and writes what it has.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn catch_stop_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe; a child's
        // exec resets it to the default.
        unsafe { libc::signal(sig, on_stop as extern "C" fn(libc::c_int) as libc::sighandler_t) };
    }
}

/// Exit code of a sweep stopped by a signal, as a shell reports SIGINT.
const STOPPED_EXIT: i32 = 130;

/// Most runs per value: beyond it a typo is likelier than a plan.
const MAX_RUNS: usize = 1_000;
/// The longest `--pause`: an hour.
const MAX_PAUSE_S: f64 = 3600.0;
/// Where the runs' result trees go, under --output.
const RUNS_DIR: &str = "runs";

#[derive(Debug, Clone, clap::Args)]
// No `{n}` in this text: clap reads it as a line break.
#[command(after_help = "Each run is `joular-ebpf record --output DIR/runs/<setting>/run-<i> -- CMD`, with {NAME} in \
CMD replaced by the value; its output goes to run-<i>.log beside it. The runs go round-robin (every value once, \
then again), so a drift of the machine spreads over all values. Warm-up runs start the command unprofiled and \
are not counted. Every family (constant, logarithmic, linear, n log n, quadratic a + b·x², cubic a + b·x³, power law \
a + c·x^b, exponential a + c·b^x) is fitted by least squares on every run, in joules, and the one with the lowest \
AICc is chosen (a power law or exponential must beat the fixed shapes by 6); the runner-up is shown beside it. Methods are ranked by how much of the process's growth, from the \
smallest value to the largest, they carry.

Examples:
  sudo joular-ebpf sweep --param keylen=512,1024,2048,4096 -- java -cp app.jar Rsa {keylen}
  sudo joular-ebpf sweep --param-range disks=10:20:2 --runs 5 --warmup 1 -o hanoi -- java Hanoi {disks}
  sudo joular-ebpf sweep --param size=1000,10000 --param threads=1,2,4 -- java -jar app.jar --size={size} -t {threads}
  sudo joular-ebpf sweep --param batch=1,2,4,8 --record-arg=--frequency=499 -- ./bench {batch}

Ctrl-C (or SIGTERM) stops the sweep after the run under way and writes what the runs so far measured.

Exit code: 0 when every run succeeded, 1 when one failed (listed in sweep.csv and sweep.json), 2 for bad input, \
130 when stopped.")]
pub struct SweepArgs {
    /// A parameter and its values: NAME=V1,V2,... (numbers). Repeat for several parameters:
    /// each is swept in turn with the others at their first value, or every combination with
    /// --grid.
    #[arg(long = "param", value_name = "NAME=V1,V2,...")]
    pub param: Vec<String>,
    /// A parameter over a range: NAME=START:STOP:STEP (STOP included), after the --param ones.
    #[arg(long = "param-range", value_name = "NAME=START:STOP:STEP")]
    pub param_range: Vec<String>,
    /// Profiled runs per value.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub runs: usize,
    /// Unprofiled runs of the command before each value's first run (page cache, JIT caches,
    /// CPU frequency), as hyperfine's --warmup.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub warmup: usize,
    /// Seconds to wait before each profiled run after the first, so that what the previous run
    /// left the machine to do (the kernel frees the profiler's maps and the command's memory in
    /// the background) is over before the next run starts: on a 2-CPU machine it delayed the
    /// next JVM's JIT compilers and bent a linear method's curve into n log n. 0 runs back to
    /// back.
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    pub pause: f64,
    /// Run every combination of the parameters' values instead of one parameter at a time.
    #[arg(long)]
    pub grid: bool,
    /// A flag passed to every `record` as is, e.g. --record-arg=--frequency=499. Repeatable.
    #[arg(long = "record-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub record_args: Vec<String>,
    /// Methods under this share (%) of the process's energy over a parameter's runs are not
    /// fitted.
    #[arg(long, default_value_t = 1.0, value_name = "PCT")]
    pub min_share: f64,
    /// Methods shown in the table and charted in sweep.html, per parameter.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
    /// Directory for sweep.csv, sweep.json, sweep.html and the runs (in runs/); must not hold
    /// an earlier sweep's runs.
    #[arg(long, short, default_value = "joularjx-sweep", value_name = "DIR")]
    pub output: PathBuf,
    /// Permissions of the files written, in octal (as the other commands).
    #[arg(long, value_name = "MODE", value_parser = parse_output_mode)]
    pub output_mode: Option<u32>,
    /// The command, after `--`, with {NAME} where each parameter's value goes.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// The parameters, checked against the command, and every other flag.
fn validate(args: &SweepArgs) -> Result<Vec<Param>, String> {
    let mut params = Vec::new();
    for text in &args.param {
        params.push(params::parse_list(text)?);
    }
    for text in &args.param_range {
        params.push(params::parse_range(text)?);
    }
    params::check(&params, &args.command)?;
    if !(1..=MAX_RUNS).contains(&args.runs) {
        return Err(format!("--runs must be between 1 and {MAX_RUNS} (got {})", args.runs));
    }
    if !(args.pause.is_finite() && (0.0..=MAX_PAUSE_S).contains(&args.pause)) {
        return Err(format!("--pause {}: expected seconds between 0 and {MAX_PAUSE_S}, e.g. 1", args.pause));
    }
    if args.warmup > MAX_RUNS {
        return Err(format!("--warmup must be at most {MAX_RUNS} (got {})", args.warmup));
    }
    if !(args.min_share.is_finite() && (0.0..=100.0).contains(&args.min_share)) {
        return Err(format!("--min-share {}: expected a percentage between 0 and 100, e.g. 1", args.min_share));
    }
    if let Some(flag) = args.record_args.iter().find(|a| {
        let name = a.split('=').next().unwrap_or(a);
        matches!(name, "-o" | "--output" | "--") || a.starts_with("-o")
    }) {
        return Err(format!(
            "--record-arg {flag}: sweep chooses each run's --output itself (under its own --output): drop it"
        ));
    }
    safe_write::check_dir("--output", &args.output)?;
    check_writable_fs("--output", &args.output)?;
    if args.output.join(RUNS_DIR).exists() {
        return Err(format!(
            "--output {}: it holds an earlier sweep's runs/, whose results would mix with this one's: give a new directory",
            args.output.display()
        ));
    }
    Ok(params)
}

pub fn run(args: &SweepArgs) -> anyhow::Result<i32> {
    let params = validate(args).map_err(UsageError)?;
    let points = params::plan(&params, args.grid);
    let started = Instant::now();
    let modes = Modes::from_flag(args.output_mode);
    let out = OutDir::create_all(&args.output, modes)
        .map_err(|e| anyhow::anyhow!("--output {}: {e}", args.output.display()))?;
    let runs_dir =
        out.create_subdirs(RUNS_DIR).map_err(|e| anyhow::anyhow!("{}: {e}", out.join(RUNS_DIR).display()))?;
    let exe = std::env::current_exe().map_err(|e| anyhow::anyhow!("cannot find this program to run `record`: {e}"))?;
    let total = points.len() * args.runs;
    let mut measured = Vec::with_capacity(total);
    let mut children_s = 0.0;
    let mut paused_s = 0.0;
    catch_stop_signals();
    // Round-robin: round r runs every value once, so a slow drift of the machine (another
    // job's load, heat) spreads over all values instead of bending the curve.
    let labels: Vec<String> = points.iter().map(|pt| pt.label(&params)).collect();
    let commands: Vec<Vec<String>> = points.iter().map(|pt| pt.command(&params, &args.command)).collect();
    let mut dirs = Vec::with_capacity(points.len());
    for (point, label) in points.iter().zip(&labels) {
        dirs.push(runs_dir.create_subdirs(&point.slug(&params)).map_err(|e| anyhow::anyhow!("{label}: {e}"))?);
    }
    'rounds: for r in 1..=args.runs {
        for p in 0..points.len() {
            let (label, command, dir) = (&labels[p], &commands[p], &dirs[p]);
            for w in (1..=args.warmup).filter(|_| r == 1) {
                let t = Instant::now();
                let status = Command::new(&command[0])
                    .args(&command[1..])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                children_s += t.elapsed().as_secs_f64();
                if !status.as_ref().is_ok_and(|s| s.success()) {
                    errln!("joular-ebpf: warm-up {w} ({label}): {}", describe(&status));
                }
                if STOP.load(Ordering::Relaxed) {
                    errln!("joular-ebpf: stopped during a warm-up, after {} of {total} runs", measured.len());
                    break 'rounds;
                }
            }
            if !measured.is_empty() {
                paused_s += pause(args.pause);
                if STOP.load(Ordering::Relaxed) {
                    errln!("joular-ebpf: stopped after {} of {total} runs: writing what they measured", measured.len());
                    break 'rounds;
                }
            }
            let (outcome, seconds) = record_run(&exe, dir, r, &args.record_args, command);
            children_s += seconds;
            let done = measured.len() + 1;
            match &outcome {
                Ok(e) => errln!("joular-ebpf: run {done} of {total} ({label}): {:.2} J in {seconds:.1} s", e.process_j),
                Err(why) => errln!("joular-ebpf: run {done} of {total} ({label}): FAILED ({why}) in {seconds:.1} s"),
            }
            measured.push(Measurement { point: p, run: r, seconds, outcome });
            if STOP.load(Ordering::Relaxed) {
                errln!("joular-ebpf: stopped after {} of {total} runs: writing what they measured", measured.len());
                break 'rounds;
            }
        }
    }
    let after_runs = Instant::now();
    let analyses = analyse(&params, &points, &measured, args.min_share);
    let sweep = Sweep {
        command: &args.command,
        params: &params,
        points: &points,
        measured: &measured,
        analyses: &analyses,
        runs: args.runs,
        warmup: args.warmup,
        grid: args.grid,
    };
    for path in write_outputs(&out, &sweep, args.top)? {
        errln!("joular-ebpf: wrote {}", path.display());
    }
    out!("{}", table(&analyses, args.top));
    let failed = sweep.failed().count();
    let wall_s = started.elapsed().as_secs_f64();
    errln!(
        "joular-ebpf: {} runs ({failed} failed) in {wall_s:.1} s: {:.1} s in the runs, {paused_s:.1} s paused between them (--pause), {:.3} s beyond them (reading the runs, fitting, writing; {:.3} s of it after the last run)",
        measured.len(),
        children_s,
        wall_s - children_s - paused_s,
        after_runs.elapsed().as_secs_f64()
    );
    if STOP.load(Ordering::Relaxed) {
        return Ok(STOPPED_EXIT);
    }
    if failed > 0 {
        errln!("joular-ebpf: {failed} of {} runs failed: they are listed in sweep.csv and sweep.json", measured.len());
        return Ok(1);
    }
    Ok(0)
}

/// Sleeps `seconds` (`--pause`), in steps that Ctrl-C ends; returns the seconds slept.
fn pause(seconds: f64) -> f64 {
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(seconds);
    while !STOP.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= until {
            break;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(50)));
    }
    started.elapsed().as_secs_f64()
}

/// One profiled run into `dir/run-<i>`, its output in `dir/run-<i>.log`: its energies, or why
/// it gave none, and the seconds `record` took.
fn record_run(
    exe: &Path,
    dir: &OutDir,
    i: usize,
    record_args: &[String],
    command: &[String],
) -> (Result<Energies, String>, f64) {
    let started = Instant::now();
    let mut seconds = 0.0;
    let outcome = record_and_read(exe, dir, i, record_args, command, &mut seconds);
    if seconds == 0.0 {
        seconds = started.elapsed().as_secs_f64();
    }
    (outcome, seconds)
}

fn record_and_read(
    exe: &Path,
    dir: &OutDir,
    i: usize,
    record_args: &[String],
    command: &[String],
    record_s: &mut f64,
) -> Result<Energies, String> {
    let name = format!("run-{i}");
    let run_dir = dir.join(&name);
    let log_name = format!("{name}.log");
    let log = dir.create_stream(log_name.as_ref()).map_err(|e| format!("{}: {e}", dir.join(&log_name).display()))?;
    let log_err = log.try_clone().map_err(|e| format!("{log_name}: {e}"))?;
    let started = Instant::now();
    let status = Command::new(exe)
        .arg("record")
        .arg("--output")
        .arg(&run_dir)
        .args(record_args)
        .arg("--")
        .args(command)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .status();
    *record_s = started.elapsed().as_secs_f64();
    let see_log = format!("see {}", dir.join(&log_name).display());
    match status {
        Ok(s) if s.success() => {}
        other => return Err(format!("{}, {see_log}", describe(&other))),
    }
    let run = Run::read(&run_dir).map_err(|e| format!("{e}, {see_log}"))?;
    Ok(Energies::of_run(&run))
}

fn describe(status: &std::io::Result<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => s.to_string(),
        },
        Err(e) => format!("could not start: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use super::*;
    use crate::cli::args::{Cli, Command};

    fn parse(args: &[&str]) -> SweepArgs {
        let cli = Cli::try_parse_from(["joular-ebpf", "sweep"].iter().chain(args)).unwrap();
        match cli.command {
            Some(Command::Sweep(s)) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_are_checked_before_anything_runs_and_name_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out").display().to_string();
        let args = parse(&["--param", "k=1,2", "--param-range", "n=1:3:1", "-o", &out, "--", "app", "{k}", "-n={n}"]);
        let params = validate(&args).unwrap();
        assert_eq!(args.pause, 1.0, "runs are a second apart unless told otherwise");
        assert_eq!(params.iter().map(|p| (&*p.name, p.values.len())).collect::<Vec<_>>(), [("k", 2), ("n", 3)]);
        for (extra, expect) in [
            (&["--runs", "0"][..], "--runs must be between 1 and 1000"),
            (&["--record-arg=--output=/x"], "--record-arg --output=/x: sweep chooses each run's --output"),
            (&["--record-arg=-o"], "--record-arg -o: "),
            (&["--min-share", "120"], "--min-share 120: "),
            (&["--pause=-1"], "--pause -1: expected seconds between 0 and 3600"),
            (&["--pause", "NaN"], "--pause NaN: "),
        ] {
            let mut all = extra.to_vec();
            all.extend(["--param", "k=1,2", "-o", &out, "--", "app", "{k}"]);
            let err = validate(&parse(&all)).unwrap_err();
            assert!(err.starts_with(expect), "{extra:?}: {err}");
        }
        // An earlier sweep's runs would be read with this one's.
        std::fs::create_dir_all(tmp.path().join("out/runs")).unwrap();
        let err = validate(&args).unwrap_err();
        assert!(err.contains("holds an earlier sweep's runs/"), "{err}");
    }

    #[test]
    fn a_pause_sleeps_its_seconds() {
        let slept = pause(0.12);
        assert!((0.12..0.5).contains(&slept), "slept {slept} s");
        assert!(pause(0.0) < 0.05);
    }

    #[test]
    fn the_help_shows_the_placeholders_of_its_examples() {
        let mut cli = Cli::command();
        let help = cli.find_subcommand_mut("sweep").unwrap().render_long_help().to_string();
        for example in ["Rsa {keylen}", "Hanoi {disks}", "./bench {batch}", "--size={size} -t {threads}"] {
            assert!(help.contains(example), "{example} in:\n{help}");
        }
    }
}
