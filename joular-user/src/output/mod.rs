//! Writers. Each reads what the stack stage (`attribution::stacks`) built, through `Sink`, and
//! never changes what another reads; none reaches back into the loader or the collectors.
//!
//! - `ResultTree`: the JoularJX tree. Each cycle it rewrites the runtime files and evolution
//!   rows; when a process is retired or the run ends it writes totals, folded stacks, flame
//!   graphs, pprof, `summary.json`, the raw profile and `report.html`.
//! - `IntervalProfile`: serve mode's per-interval, host-wide pprof and folded files.
//! - `report`: re-renders those outputs from a saved raw profile.

mod cycle_devices;
mod cycle_files;
mod cycle_sums;
mod device_graphs;
mod device_tree;
mod flamegraph;
mod folded;
mod frequencies;
mod html;
mod interval;
mod jcarbon;
mod joularjx;
mod pprof;
mod pprof_proto;
mod raw_profile;
mod render;
mod render_set;
mod report;
mod result_tree;
mod retired_writer;
mod sink;
mod table;
mod written;

use std::io;
use std::path::{Path, PathBuf};

pub use crate::attribution::stacks::aggregate::StackTotal;
pub use crate::attribution::stacks::methods::MethodFilter;
pub use crate::attribution::stacks::profile::{
    FailedOutput, JvmShares, ProcessProfile, RunSummary, Share, ThreadTotal, Unattributed,
};
pub use crate::attribution::stacks::timeline::{ThreadSeries, Timeline};
pub use crate::attribution::stacks::ThreadStacks;
pub use frequencies::FrequencySink;
pub(crate) use html::method_series;
pub use interval::IntervalProfile;
pub use jcarbon::{jcarbon_signals, JCARBON_FILE};
pub use joularjx::RESULT_DIR_NAME;
pub use raw_profile::{parse_raw_profile, read_raw_profile, write_raw_profile, RAW_PROFILE_FILE};
pub use render::OutputFiles;
pub(crate) use report::find_profiles;
pub use report::{load_report, report, report_to, LoadedReport, ReportArgs, ReportFormat};
pub use result_tree::{ResultTree, ResultsConfig};
pub use retired_writer::{
    RetiredTree, RetiredTreeWriter, RetiredWrite, RetiredWriterEnd, Submitted, LIVE_FILES_QUEUE_FULL,
    LIVE_FILES_SUPERSEDED, RETIRED_QUEUE_TREES, RETIRED_TREES_QUEUE_FULL, RETIRED_TREES_UNFINISHED,
};
pub use sink::{BackgroundWrites, FinishSummary, Sink, SinkError};
pub use table::table;

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
