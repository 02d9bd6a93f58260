//! `joular-ebpf report DIR`: every raw profile is read and checked before anything is rendered,
//! so a missing, truncated, corrupt or foreign one is bad input (exit 2, naming the file).

use joular_user::output::{load_report, report, OutputError, ReportArgs};

use super::args::validate_report;
use super::errors::UsageError;

/// What to do about a result directory that cannot be read.
const REPORT_FIX: &str =
    "pass a result directory written by joular-ebpf (its --output, or one `<pid>-<epochms>` in it), or profile again";

pub fn run(args: &ReportArgs) -> anyhow::Result<i32> {
    validate_report(args).map_err(UsageError)?;
    let loaded = load_report(args).map_err(|e| UsageError(format!("report: {e}: {REPORT_FIX}")))?;
    if let Err(e) = report(args, loaded) {
        // The table goes last: a closed stdout ends the printing, not the run.
        if !is_broken_pipe(&e) {
            return Err(e.into());
        }
    }
    Ok(0)
}

fn is_broken_pipe(e: &OutputError) -> bool {
    matches!(e, OutputError::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
}
