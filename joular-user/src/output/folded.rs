//! Energy-weighted folded stacks (`root;...;leaf value`, value in whole µJ), the input of
//! flamegraph.pl, inferno and speedscope.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::aggregate::{call_tree_totals, Scope};
use super::profile::StackTotal;
use super::OutputError;

/// Folded lines sorted by path; paths whose energy rounds to 0 µJ are left out because
/// folded counts are integers and a zero-width frame only adds noise.
pub fn folded_lines(stacks: &[StackTotal], scope: Scope, annotate: bool) -> Vec<String> {
    let mut lines: Vec<String> = call_tree_totals(stacks, scope, annotate)
        .into_iter()
        .filter_map(|t| {
            let energy_uj = t.energy_uj.round() as u64;
            (energy_uj > 0).then(|| format!("{} {energy_uj}", t.name))
        })
        .collect();
    lines.sort_unstable();
    lines
}

pub fn write_folded(path: &Path, lines: &[String]) -> Result<(), OutputError> {
    let file = File::create(path).map_err(|e| OutputError::io(path, e))?;
    let mut out = BufWriter::new(file);
    for line in lines {
        writeln!(out, "{line}").map_err(|e| OutputError::io(path, e))?;
    }
    out.flush().map_err(|e| OutputError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FrameKind;
    use crate::output::methods::tests::{frame, java};
    use crate::output::methods::MethodFilter;
    use std::sync::Arc;

    #[test]
    fn lines_are_root_first_in_whole_microjoules() {
        let stacks = vec![
            StackTotal {
                stack: Arc::from(vec![java("com.acme.App.main"), frame("read", FrameKind::Native)]),
                energy_uj: 1234.6,
                samples: 3,
            },
            StackTotal {
                stack: Arc::from(vec![java("com.acme.App.main"), java("java.util.HashMap.get")]),
                energy_uj: 0.4,
                samples: 1,
            },
        ];
        assert_eq!(folded_lines(&stacks, Scope::All, false), ["com.acme.App.main;read 1235"]);
        let filter = MethodFilter::parse("com.acme");
        assert_eq!(folded_lines(&stacks, Scope::App(&filter), true), ["com.acme.App.main_[j] 1235"]);

        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("x.folded");
        write_folded(&path, &folded_lines(&stacks, Scope::All, false)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "com.acme.App.main;read 1235\n");
    }
}
