//! `joular-ebpf calmness RUN_A RUN_B`: how alike two runs' CPU frequency distributions are
//! (jcarbon's calmness). `joular-ebpf calmness -- CMD`: runs CMD twice, observed only (its CPU
//! frequencies sampled each cycle, no eBPF) then profiled (`record`), and compares them. A run
//! or a machine without CPU frequencies is bad input (exit 2, saying why and what to do): a
//! calmness is never made up.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use joular_user::calmness::{
    calmness, cycle_rows, load_run, r_text, render_html, Calmness, FrequencyCycle, FrequencyReader, LoadError,
    CALMNESS_HTML_FILE, CALMNESS_JSON_FILE, FREQUENCIES_FILE, FREQUENCIES_HEADER,
};
use joular_user::safe_write::{self, parse_output_mode, Modes, OutDir};
use joular_user::stages::report::epoch_ms;

use super::errors::UsageError;
use super::paths::{check_root, check_writable_fs};

/// What to do when a run or the machine has no CPU frequency.
const NO_FREQUENCY_FIX: &str = "record both runs on a machine that exposes cpufreq (bare metal: \
`ls /sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq`; most VMs have none), or point \
--sysfs-root at a tree that has it";

#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Calmness (jcarbon) says how much a profiler disturbs the power state it measures: the CPU \
frequency distributions of two runs of the same work are compared. Frequencies are binned by the \
Freedman-Diaconis rule over both runs pooled; C_S(k) is the share of a run's (CPU, cycle) samples in bin k, \
C_T(t,k) the share of cycle t's CPUs in bin k; the spatial r is the Pearson correlation of the two runs' C_S, \
the temporal r that of their C_T over the cycles both have. 1 is calm (the same distribution); lower means \
the second run ran at other frequencies. Each run records frequencies.csv in its --output when the machine has \
cpufreq (summary.json `cpu_frequencies` says whether it did).

Examples:
  joular-ebpf calmness base/ profiled/
  sudo joular-ebpf calmness --duration 30 -- java -jar app.jar
  sudo joular-ebpf calmness -o calm/ -- ./bench.sh")]
pub struct CalmnessArgs {
    /// RUN_A RUN_B: two runs' --output directories (or a `<pid>-<epochms>` directory in each).
    /// Without them, give `-- CMD`.
    #[arg(num_args = 0..=2, value_name = "RUN")]
    pub runs: Vec<PathBuf>,
    /// The command to run twice, after `--`: once observed only, once profiled.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
    /// With `-- CMD`: stop each run after this many seconds (default: when CMD exits).
    #[arg(short, long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// With `-- CMD`: length of one cycle (how often frequencies are read), in seconds.
    #[arg(short, long, default_value_t = 1.0, value_name = "SECONDS")]
    pub interval: f64,
    /// Directory for calmness.json and calmness.html (and, with `-- CMD`, the two runs:
    /// observed/ and profiled/).
    #[arg(short, long, default_value = "joularjx-calmness", value_name = "DIR")]
    pub output: PathBuf,
    /// Print the table only; write no file (RUN_A RUN_B only).
    #[arg(long)]
    pub no_files: bool,
    /// With `-- CMD`: root of the sysfs tree whose cpufreq is read (both runs).
    #[arg(long, default_value = "/sys", value_name = "DIR")]
    pub sysfs_root: PathBuf,
    /// Permissions of the files written, in octal (as the other commands).
    #[arg(long, value_name = "MODE", value_parser = parse_output_mode)]
    pub output_mode: Option<u32>,
}

fn validate(args: &CalmnessArgs) -> Result<(), String> {
    match (args.runs.len(), args.command.is_empty()) {
        (2, true) | (0, false) => {}
        (0, true) => return Err("calmness needs two runs (calmness RUN_A RUN_B) or a command (calmness -- CMD)".into()),
        (_, false) => return Err("calmness takes two runs or `-- CMD`, not both".into()),
        (n, true) => return Err(format!("calmness needs two runs, RUN_A and RUN_B (got {n})")),
    }
    if let Some(d) = args.duration {
        if !(d > 0.0 && d.is_finite()) {
            return Err(format!("--duration must be a positive number of seconds (got {d})"));
        }
    }
    if !(0.1..=3_600.0).contains(&args.interval) {
        return Err(format!("--interval must be between 0.1 and 3600 s (got {})", args.interval));
    }
    if args.command.is_empty() && (args.duration.is_some() || args.sysfs_root != Path::new("/sys")) {
        return Err("--duration and --sysfs-root are for `calmness -- CMD`; two recorded runs are only read".into());
    }
    if args.no_files && !args.command.is_empty() {
        return Err("--no-files is for `calmness RUN_A RUN_B`: `-- CMD` writes its two runs into --output".into());
    }
    check_root("--sysfs-root", &args.sysfs_root)?;
    if !(args.no_files && args.command.is_empty()) {
        safe_write::check_dir("--output", &args.output)?;
        check_writable_fs("--output", &args.output)?;
    }
    Ok(())
}

fn load(name: &str, path: &Path) -> Result<Vec<FrequencyCycle>, UsageError> {
    load_run(path).map_err(|e| {
        let fix = match &e {
            LoadError::NoFrequencies { .. } => NO_FREQUENCY_FIX,
            _ => "pass the --output directory of a joular-ebpf run (or one `<pid>-<epochms>` in it)",
        };
        UsageError(format!("calmness {name} {e}: {fix}"))
    })
}

pub fn run(args: &CalmnessArgs) -> anyhow::Result<i32> {
    validate(args).map_err(UsageError)?;
    if !args.command.is_empty() {
        return run_command(args);
    }
    let a = load("RUN_A", &args.runs[0])?;
    let b = load("RUN_B", &args.runs[1])?;
    let names = (args.runs[0].display().to_string(), args.runs[1].display().to_string());
    report(args, &calm(&names.0, &a, &names.1, &b)?, !args.no_files)
}

fn calm(name_a: &str, a: &[FrequencyCycle], name_b: &str, b: &[FrequencyCycle]) -> anyhow::Result<Calmness> {
    Ok(calmness((name_a, a), (name_b, b))?)
}

/// Prints the table and, if asked, writes calmness.json and calmness.html.
fn report(args: &CalmnessArgs, c: &Calmness, files: bool) -> anyhow::Result<i32> {
    if files {
        let dir = OutDir::create_all(&args.output, Modes::from_flag(args.output_mode))
            .with_context(|| format!("--output {}", args.output.display()))?;
        let json = serde_json::to_vec_pretty(c)?;
        let html = render_html(c).map_err(anyhow::Error::msg)?;
        for (name, bytes) in [(CALMNESS_JSON_FILE, json), (CALMNESS_HTML_FILE, html.into_bytes())] {
            let mut file = dir.replace(name).with_context(|| format!("--output {}", dir.join(name).display()))?;
            file.write_all(&bytes)
                .and_then(|()| file.commit())
                .with_context(|| format!("writing {}", dir.join(name).display()))?;
            errln!("joular-ebpf: wrote {}", dir.join(name).display());
        }
    }
    out!("{}", table(c));
    Ok(0)
}

/// The result as the terminal shows it.
pub fn table(c: &Calmness) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "calmness (jcarbon) of B against A");
    let _ = writeln!(
        t,
        "  A: {} ({} cycles, {} samples, mean {:.0} MHz)",
        c.a.name,
        c.a.cycles,
        c.a.samples,
        c.a.mean_khz / 1e3
    );
    let _ = writeln!(
        t,
        "  B: {} ({} cycles, {} samples, mean {:.0} MHz)",
        c.b.name,
        c.b.cycles,
        c.b.samples,
        c.b.mean_khz / 1e3
    );
    let _ = writeln!(t, "  spatial r (Pearson of C_S):  {}", r_text(c.spatial_pearson));
    let _ = writeln!(
        t,
        "  temporal r (Pearson of C_T): {} over the first {} cycles",
        r_text(c.temporal_pearson),
        c.temporal_cycles
    );
    let _ = writeln!(
        t,
        "  {} bins, {}: IQR {:.0} kHz over {} samples",
        c.bins.count(),
        c.bins.rule,
        c.bins.iqr_khz,
        c.bins.samples
    );
    for note in &c.notes {
        let _ = writeln!(t, "  note: {note}");
    }
    let _ = writeln!(t, "\n  {:>21}  {:>8}  {:>8}", "bin (MHz)", "A C_S", "B C_S");
    let e = &c.bins.edges_khz;
    for k in 0..c.bins.count() {
        let _ = writeln!(
            t,
            "  {:>9.0} - {:>9.0}  {:>7.1}%  {:>7.1}%",
            e[k] / 1e3,
            e[k + 1] / 1e3,
            100.0 * c.a.spatial[k],
            100.0 * c.b.spatial[k]
        );
    }
    t
}

/// `calmness -- CMD`: observed only, then profiled, then compared.
fn run_command(args: &CalmnessArgs) -> anyhow::Result<i32> {
    // Before anything runs: without cpufreq there is nothing to compare.
    let Some(reader) = FrequencyReader::open(&args.sysfs_root) else {
        return Err(UsageError(format!(
            "calmness: this machine exposes no CPU frequency (no cpufreq in {}/devices/system/cpu/cpu*/cpufreq): calmness cannot be computed: {NO_FREQUENCY_FIX}",
            args.sysfs_root.display()
        ))
        .into());
    };
    let modes = Modes::from_flag(args.output_mode);
    let root =
        OutDir::create_all(&args.output, modes).with_context(|| format!("--output {}", args.output.display()))?;
    let observed_dir =
        root.subdir("observed").with_context(|| format!("--output {}", root.join("observed").display()))?;
    errln!(
        "joular-ebpf: calmness: run 1 of 2, observed only (CPU frequencies, no profiling): {}",
        args.command.join(" ")
    );
    let observed_code = observe(args, &reader, &observed_dir)?;
    let profiled = root.join("profiled");
    errln!("joular-ebpf: calmness: run 2 of 2, profiled (joular-ebpf record): {}", args.command.join(" "));
    let profiled_code = record(args, &profiled)?;
    if observed_code != profiled_code {
        errln!(
            "joular-ebpf: warning: the command exited {observed_code} observed and {profiled_code} profiled: the runs may not have done the same work"
        );
    }
    let a = load("observed run", observed_dir.path())?;
    let b = load("profiled run", &profiled)?;
    report(args, &calm("observed", &a, "profiled", &b)?, true)
}

/// Runs CMD once with its CPU frequencies read every cycle into `dir/frequencies.csv`; returns
/// its exit code.
fn observe(args: &CalmnessArgs, reader: &FrequencyReader, dir: &OutDir) -> anyhow::Result<i32> {
    let mut file = dir
        .create_stream(FREQUENCIES_FILE.as_ref())
        .with_context(|| format!("{}", dir.join(FREQUENCIES_FILE).display()))?;
    writeln!(file, "{FREQUENCIES_HEADER}")?;
    let mut child = spawn(&args.command)?;
    let interval = Duration::from_secs_f64(args.interval);
    let start = Instant::now();
    let deadline = args.duration.map(|d| start + Duration::from_secs_f64(d));
    let mut cycle_start_ms = epoch_ms();
    let mut cycle = 0u64;
    let status = loop {
        let next = start + interval * (cycle as u32 + 1);
        // Wait for the cycle's end, or the command's.
        let ended = loop {
            if let Some(status) = child.try_wait()? {
                break Some(status);
            }
            let now = Instant::now();
            if now >= next || deadline.is_some_and(|d| now >= d) {
                break None;
            }
            std::thread::sleep((next - now).min(Duration::from_millis(20)));
        };
        let end_ms = epoch_ms();
        let cpus = reader.read();
        if !cpus.is_empty() {
            file.write_all(
                cycle_rows(&FrequencyCycle { cycle, start_epoch_ms: cycle_start_ms, end_epoch_ms: end_ms, cpus })
                    .as_bytes(),
            )?;
        }
        cycle += 1;
        cycle_start_ms = end_ms;
        if let Some(status) = ended {
            break status;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            // As `record --duration` does: the command is stopped at the end of the run.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            break child.wait()?;
        }
    };
    Ok(status.code().unwrap_or(128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)))
}

fn spawn(argv: &[String]) -> anyhow::Result<Child> {
    Command::new(&argv[0])
        .args(&argv[1..])
        .spawn()
        .with_context(|| format!("cannot run `{}` (is it installed and on PATH?)", argv[0]))
}

/// `joular-ebpf record` of CMD into `output`, as a child; returns its exit code.
fn record(args: &CalmnessArgs, output: &Path) -> anyhow::Result<i32> {
    let exe = std::env::current_exe().context("finding joular-ebpf's own executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("record").arg("--output").arg(output).arg("--sysfs-root").arg(&args.sysfs_root);
    cmd.arg("--interval").arg(args.interval.to_string());
    if let Some(d) = args.duration {
        cmd.arg("--duration").arg(d.to_string());
    }
    if let Some(mode) = args.output_mode {
        cmd.arg("--output-mode").arg(format!("{mode:o}"));
    }
    let status = cmd.arg("--").args(&args.command).status().context("running joular-ebpf record")?;
    Ok(status.code().unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::args::{Cli, Command as Sub};

    fn parse(argv: &[&str]) -> Result<CalmnessArgs, String> {
        let cli = Cli::try_parse_from(["joular-ebpf", "calmness"].iter().chain(argv)).map_err(|e| e.to_string())?;
        match cli.command {
            Some(Sub::Calmness(args)) => Ok(args),
            other => panic!("not calmness: {other:?}"),
        }
    }

    #[test]
    fn two_runs_or_a_command_and_flags_that_fit_them() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let out = out.to_str().unwrap();
        let args = parse(&["a", "b", "-o", out]).unwrap();
        assert_eq!((args.runs.len(), args.command.len()), (2, 0));
        validate(&args).unwrap();
        let args = parse(&["-o", out, "--duration", "5", "--", "java", "-jar", "app.jar"]).unwrap();
        assert_eq!(args.command, ["java", "-jar", "app.jar"]);
        validate(&args).unwrap();
        for (argv, want) in [
            (vec!["a"], "calmness needs two runs, RUN_A and RUN_B (got 1)"),
            (vec![], "calmness needs two runs (calmness RUN_A RUN_B) or a command (calmness -- CMD)"),
            (vec!["a", "b", "--", "true"], "calmness takes two runs or `-- CMD`, not both"),
            (vec!["a", "b", "--duration", "3"], "--duration and --sysfs-root are for `calmness -- CMD`"),
            (vec!["--no-files", "--", "true"], "--no-files is for `calmness RUN_A RUN_B`"),
            (vec!["--duration", "0", "--", "true"], "--duration must be a positive number of seconds (got 0)"),
        ] {
            let e = validate(&parse(&[&argv[..], &["-o", out]].concat()).unwrap()).unwrap_err();
            assert!(e.starts_with(want), "{argv:?}: {e}");
        }
        assert!(parse(&["a", "b", "c"]).is_err(), "at most two runs");
    }
}
