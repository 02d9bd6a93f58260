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
pub const RUN_FIX: &str = "pass result directories written by `joular-ebpf record` or `--pid` (their --output, or one \
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
    /// Exit 1 when the process or a method (with `:PREFIX`, only methods whose name starts with
    /// PREFIX) rose by more than PCT %, and by more than its uncertainty. Repeatable.
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
            let pct_of =
                |v: f64| if row.base > 0.0 { format!("{:.1}%", 100.0 * v / row.base) } else { "n/a".to_owned() };
            let _ = writeln!(
                verdicts,
                "joular-ebpf: --fail-if-increase {}{}: {} rose {} (uncertainty ±{} at {}% confidence)",
                gate.pct,
                gate.prefix.as_deref().map(|p| format!(":{p}")).unwrap_or_default(),
                row.name,
                joular_user::diff::pct_text(row.delta_pct),
                pct_of(row.uncertainty.unwrap_or(0.0)),
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
