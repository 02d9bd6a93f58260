//! Output sinks. They consume only the attributed, symbolized `model` and never reach back
//! into the loader or the collectors.
//!
//! - `Results`: the session sink. Each cycle it splits thread energy over stacks by sample
//!   share, fills the cycle's `methods` and `threads[].stacks`, and rewrites the JoularJX
//!   runtime files and evolution rows; at the end it writes totals, folded stacks, flame
//!   graphs, pprof, `summary.json` and the raw profile, and returns the top-methods table.
//! - `IntervalProfile`: serve mode's per-interval, host-wide pprof and folded files.
//! - `report`: re-renders those outputs from a saved raw profile.

mod aggregate;
mod cycle_sums;
mod flamegraph;
mod folded;
mod html;
mod interval;
mod joularjx;
pub mod methods;
mod paths;
mod pprof;
mod pprof_proto;
mod profile;
mod raw_profile;
mod render;
mod report;
mod results;
mod retired_writer;
mod table;
pub mod thread_kind;
mod timeline;

use std::io;
use std::path::{Path, PathBuf};

pub use interval::IntervalProfile;
pub use joularjx::RESULT_DIR_NAME;
pub use methods::MethodFilter;
pub use profile::{FailedOutput, JvmShares, ProcessProfile, RunSummary, Share, StackTotal, ThreadTotal, Unattributed};
pub use raw_profile::{parse_raw_profile, read_raw_profile, write_raw_profile, RAW_PROFILE_FILE};
pub use render::OutputFiles;
pub use report::{load_report, report, report_to, LoadedReport, ReportArgs, ReportFormat};
pub use results::{FinishSummary, Results, ResultsConfig, ThreadStacks};
pub use retired_writer::{
    RetiredTree, RetiredTreeWriter, RetiredWrite, RetiredWriterEnd, Submitted, RETIRED_QUEUE_TREES,
    RETIRED_TREES_QUEUE_FULL, RETIRED_TREES_UNFINISHED,
};
pub use timeline::{ThreadSeries, Timeline};

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: {source}")]
    Json { path: PathBuf, source: serde_json::Error },
    #[error("{path}: {reason}")]
    Format { path: PathBuf, reason: String },
    #[error("no raw profile ({RAW_PROFILE_FILE}) in {0} or its subdirectories")]
    NoProfile(PathBuf),
}

impl OutputError {
    fn io(path: &Path, source: io::Error) -> Self {
        Self::Io { path: path.to_owned(), source }
    }

    /// This error as a failed output of `flag`: the file, and the cause without the file.
    pub fn failed(&self, flag: &str) -> FailedOutput {
        match self {
            Self::Io { path, source } => FailedOutput::new(flag, path, source),
            Self::Json { path, source } => FailedOutput::new(flag, path, source),
            Self::Format { path, reason } => FailedOutput::new(flag, path, reason),
            Self::NoProfile(path) => FailedOutput::new(flag, path, self),
        }
    }

    fn json(path: &Path, source: serde_json::Error) -> Self {
        Self::Json { path: path.to_owned(), source }
    }
}
