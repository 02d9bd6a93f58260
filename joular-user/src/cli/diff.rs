//! `joular-ebpf diff BASE NEW`: every run is read and checked before anything is compared, so
//! a missing or foreign directory is bad input (exit 2, naming it); a `--fail-if-increase`
//! that trips exits 1 (a CI gate), anything else 0.

use std::fmt::Write as _;
use std::path::PathBuf;

use joular_user::diff::{compare, expand, table, write_outputs, DiffOptions, Gate, Metric, Run};
use joular_user::safe_write::{self, parse_output_mode, Modes, OutDir};

use super::errors::UsageError;
use super::paths::check_writable_fs;

/// What to do about a run directory that cannot be read.
const RUN_FIX: &str = "pass result directories written by `joular-ebpf record` or `--pid` (their --output, or one \
`<pid>-<epochms>` in it), or a quoted glob of them ('base-*')";

#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:
  joular-ebpf diff base/ new/
  joular-ebpf diff 'runs/base-*' 'runs/new-*' --fail-if-increase 10
  joular-ebpf diff base/ new/ --fail-if-increase 20:com.acme.checkout --metric power")]
pub struct DiffArgs {
    /// The reference: a result directory, or a quoted glob of repeated runs ('base-*').
    pub base: String,
    /// The run(s) compared with it, as BASE.
    pub new: String,
    /// Compare joules (runs doing a fixed amount of work: `record`) or mean watts (runs of a
    /// fixed length: `--pid --duration`).
    #[arg(long, value_enum, default_value = "energy")]
    pub metric: Metric,
    /// Exit 1 when the process, or a method (with `:PREFIX`, a method whose name starts with
    /// PREFIX), rose by more than PCT % beyond its uncertainty. Repeatable.
    #[arg(long, value_name = "PCT[:METHOD_PREFIX]")]
    pub fail_if_increase: Vec<Gate>,
    /// Confidence of the flags, in %, over all the comparisons together.
    #[arg(long, default_value_t = 95.0, value_name = "PCT")]
    pub confidence: f64,
    /// Methods under this share of the process (%) on both sides are not compared.
    #[arg(long, default_value_t = 1.0, value_name = "PCT")]
    pub min_share: f64,
    /// Rows of the table.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Directory for diff.html, flamegraph-diff.svg and diff.json.
    #[arg(long, short, default_value = "joularjx-diff")]
    pub output: PathBuf,
    /// Print the table only; write no file.
    #[arg(long)]
    pub no_files: bool,
    /// Permissions of the files written, in octal (as the other commands).
    #[arg(long, value_name = "MODE", value_parser = parse_output_mode)]
    pub output_mode: Option<u32>,
}

fn validate(args: &DiffArgs) -> Result<(), String> {
    if !(args.confidence > 0.0 && args.confidence < 100.0) {
        return Err(format!("--confidence {}: expected a percentage between 0 and 100, e.g. 95", args.confidence));
    }
    if !(args.min_share.is_finite() && (0.0..=100.0).contains(&args.min_share)) {
        return Err(format!("--min-share {}: expected a percentage between 0 and 100, e.g. 1", args.min_share));
    }
    if !args.no_files {
        safe_write::check_dir("--output", &args.output)?;
        check_writable_fs("--output", &args.output)?;
    }
    Ok(())
}

/// Every run of one side, read.
fn side(name: &str, pattern: &str) -> Result<Vec<Run>, UsageError> {
    let paths = expand(pattern).map_err(|e| UsageError(format!("diff {name} {e}: {RUN_FIX}")))?;
    paths.iter().map(|p| Run::read(p).map_err(|e| UsageError(format!("diff {name} {e}: {RUN_FIX}")))).collect()
}

pub fn run(args: &DiffArgs) -> anyhow::Result<i32> {
    validate(args).map_err(UsageError)?;
    let base = side("BASE", &args.base)?;
    let new = side("NEW", &args.new)?;
    let options =
        DiffOptions { metric: args.metric, confidence: args.confidence / 100.0, min_share_pct: args.min_share };
    let diff = compare(&base, &new, options);
    if !args.no_files {
        let modes = Modes::from_flag(args.output_mode);
        let dir = OutDir::create_all(&args.output, modes)
            .map_err(|e| anyhow::anyhow!("--output {}: {e}", args.output.display()))?;
        for path in write_outputs(&dir, &diff, &base, &new)? {
            errln!("joular-ebpf: wrote {}", path.display());
        }
    }
    let mut code = 0;
    let mut verdicts = String::new();
    for gate in &args.fail_if_increase {
        for row in gate.tripped(&diff) {
            code = 1;
            let sure = row.sure_increase_pct().unwrap_or(0.0);
            let _ = writeln!(
                verdicts,
                "joular-ebpf: --fail-if-increase {}{}: {} rose {} (at least {sure:+.1}% at {}% confidence)",
                gate.pct,
                gate.prefix.as_deref().map(|p| format!(":{p}")).unwrap_or_default(),
                row.name,
                joular_user::diff::pct_text(row.delta_pct),
                args.confidence,
            );
        }
    }
    // A closed stdout ends the printing, not the verdict.
    out!("{}", table(&diff, args.top));
    if !verdicts.is_empty() {
        errln!("{}", verdicts.trim_end());
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use clap::Parser;
    use joular_user::attribution::stacks::ThreadStacks;
    use joular_user::model::{CycleReport, Frame, FrameKind, SocketReport, Stack, ThreadReport, ThreadStack};
    use joular_user::output::{MethodFilter, ResultsConfig};
    use joular_user::stages::Results;

    use super::*;
    use crate::cli::args::{Cli, Command};
    use crate::cli::errors::{exit_code, one_line};

    /// A run of 10 cycles written by the result stage: `work` samples of 10 mJ per method and
    /// cycle, give or take one in ten cycles (so the bootstrap has a spread).
    fn write_run(dir: &Path, work: &[(&str, u64)]) {
        let java = |short: &str| Frame {
            name: Arc::from(format!("void {short}()")),
            short: Arc::from(short),
            kind: FrameKind::JavaJit,
            line: None,
            raw_name: None,
        };
        let mut results = Results::new(ResultsConfig {
            results_root: dir.to_owned(),
            write_files: true,
            filter: MethodFilter::default(),
            start_epoch_ms: 1_700_000_000_000,
            energy_source: "powercap".into(),
            estimated: false,
            report_stacks: false,
            evolution: true,
            runtime_call_trees: false,
            top_n: 10,
            native_frames: false,
            html: false,
            modes: Modes::for_caller(),
        })
        .unwrap();
        for n in 0..10u64 {
            let stacks: Vec<ThreadStack> = work
                .iter()
                .map(|(m, samples)| ThreadStack {
                    stack: Arc::from(vec![java("java.lang.Thread.run"), java(m)]) as Stack,
                    samples: samples + n % 3,
                })
                .collect();
            let energy_uj = stacks.iter().map(|s| s.samples).sum::<u64>() as f64 * 1e4;
            let mut report = CycleReport {
                cycle: n,
                start_ns: n * 1_000_000_000,
                end_ns: (n + 1) * 1_000_000_000,
                end_epoch_ms: 1_700_000_000_000 + (n + 1) * 1000,
                threads: vec![ThreadReport {
                    pid: 7,
                    tid: 8,
                    comm: "worker".into(),
                    energy_uj,
                    ..ThreadReport::default()
                }],
                sockets: vec![SocketReport {
                    socket: 0,
                    energy_uj,
                    source: "powercap".into(),
                    ..SocketReport::default()
                }],
                ..CycleReport::default()
            };
            let stacks: Vec<ThreadStacks> = vec![(7, 8, stacks)];
            results.on_cycle(&mut report, &stacks).unwrap();
        }
        results.finish().unwrap();
    }

    fn diff(args: &[&str]) -> anyhow::Result<i32> {
        let cli = Cli::try_parse_from(["joular-ebpf", "diff"].iter().chain(args)).unwrap();
        let Some(Command::Diff(args)) = cli.command else { panic!("not diff") };
        run(&args)
    }

    #[test]
    fn the_gate_exits_1_on_a_method_that_doubled_and_bad_runs_exit_2() {
        let tmp = tempfile::tempdir().unwrap();
        let path = |name: &str| tmp.path().join(name).display().to_string();
        write_run(&tmp.path().join("base"), &[("a.Shop.checkout", 100), ("a.Db.query", 50)]);
        write_run(&tmp.path().join("new"), &[("a.Shop.checkout", 100), ("a.Db.query", 100)]);
        let (base, new, out) = (path("base"), path("new"), path("out"));
        assert_eq!(diff(&[&base, &new, "--fail-if-increase", "20", "-o", &out]).unwrap(), 1);
        for file in ["diff.html", "flamegraph-diff.svg", "diff.json"] {
            assert!(tmp.path().join("out").join(file).is_file(), "{file}");
        }
        assert_eq!(diff(&[&base, &new, "--fail-if-increase", "20:a.Shop", "--no-files"]).unwrap(), 0);
        assert_eq!(diff(&[&base, &new, "--fail-if-increase", "20:a.Db", "--no-files"]).unwrap(), 1);
        assert_eq!(diff(&[&base, &new, "--fail-if-increase", "150", "--no-files"]).unwrap(), 0);
        assert_eq!(diff(&[&new, &base, "--fail-if-increase", "0", "--no-files"]).unwrap(), 0, "a decrease");
        // A glob of one run is that run.
        assert_eq!(diff(&[&path("bas*"), &path("ne?"), "--fail-if-increase", "20", "--no-files"]).unwrap(), 1);

        std::fs::create_dir(tmp.path().join("garbage")).unwrap();
        std::fs::write(tmp.path().join("garbage/profile.json"), "[1, 2").unwrap();
        for (bad, names) in [
            (path("missing"), "missing".to_owned()),
            (path("garbage"), "garbage/profile.json".to_owned()),
            (path("nothing-*"), "matches no directory".to_owned()),
        ] {
            let e = diff(&[&base, &bad, "--no-files"]).unwrap_err();
            let line = one_line(&e);
            assert_eq!(exit_code(&e), 2, "{line}");
            assert!(line.starts_with("diff NEW ") && line.contains(&names) && line.contains(RUN_FIX), "{line}");
        }
        let e = diff(&[&base, &new, "--confidence", "100", "--no-files"]).unwrap_err();
        assert_eq!((exit_code(&e), one_line(&e).starts_with("--confidence 100")), (2, true));
    }
}
