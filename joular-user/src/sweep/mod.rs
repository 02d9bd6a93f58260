//! `joular-ebpf sweep`: energy as a function of a parameter of the command. The command runs
//! over the parameter's values (`params`), each run recorded as `record` does and read back
//! as `diff` reads a run; a model is fitted per method and for the process (`fit`), the
//! methods are ranked by their part of the process's growth (`analysis`), and the results go
//! to `sweep.csv`, `sweep.json`, `sweep.html` (`outputs`, `html`) and the terminal (`table`).

pub mod analysis;
pub mod fit;
mod html;
pub mod outputs;
pub mod params;
pub mod summary;
mod table;

use std::path::PathBuf;

pub use table::table;

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("{path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Render(String),
}
