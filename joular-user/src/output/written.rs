//! What one process's end-of-run files came to (`OutputFiles`), and the JoularJX `total/`
//! files of one view, which the CPU's tree and the device trees write alike.

use std::path::PathBuf;

use super::joularjx::{Kind, Period, RunDir};
use super::OutputError;
use crate::attribution::stacks::aggregate::{method_call_trees, method_totals, NamedTotal, Scope, StackTotal};
use crate::attribution::stacks::methods::{is_method_name, StackRules};
use crate::attribution::stacks::profile::FailedOutput;

/// The files written for one process.
#[derive(Debug, Clone, Default)]
pub struct OutputFiles {
    pub dir: PathBuf,
    pub files: Vec<PathBuf>,
    /// Files that could not be written (a full disk): the others were, and `summary.json` lists
    /// these.
    pub failed: Vec<FailedOutput>,
}

impl OutputFiles {
    /// Keeps `path` as written, or the failure: one file that cannot be written never stops the
    /// others.
    pub(super) fn keep(&mut self, path: PathBuf, result: Result<(), OutputError>) {
        match result {
            Ok(()) => self.files.push(path),
            Err(e) => self.failed.push(e.failed(OUTPUT_FLAG)),
        }
    }
}

/// The flag that asks for these files.
pub(super) const OUTPUT_FLAG: &str = "--output";

/// A view's JoularJX `total/` files of `stacks` (methods only: buckets and unnamed frames are
/// `unattributed`, in summary.json); returns every name's total, buckets included.
pub(super) fn write_totals(
    tree: &RunDir,
    stacks: &[StackTotal],
    scope: Scope,
    rules: StackRules,
    written: &mut OutputFiles,
) -> Vec<NamedTotal> {
    let methods_of = method_totals(stacks, scope, rules);
    let methods = methods_of.iter().filter(|m| is_method_name(&m.name)).map(|m| (&*m.name, m.energy_uj));
    written.keep(tree.file(scope, Period::Total, Kind::Methods), tree.write_total(scope, Kind::Methods, methods));
    let trees = tree.write_total(scope, Kind::CallTrees, method_call_trees(stacks, scope, rules));
    written.keep(tree.file(scope, Period::Total, Kind::CallTrees), trees);
    methods_of
}
