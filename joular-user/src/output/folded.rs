//! Energy-weighted folded stacks (`root;...;leaf value`, value in whole µJ), the input of
//! flamegraph.pl, inferno and speedscope.

use std::io::{BufWriter, Write};

use super::OutputError;
use crate::attribution::stacks::aggregate::PathGroup;
use crate::safe_write::OutDir;

/// Streams one line per path group (in path order); paths whose energy rounds to 0 µJ are
/// left out because folded counts are integers and a zero-width frame only adds noise.
pub fn write_folded(dir: &OutDir, name: &str, groups: &[PathGroup]) -> Result<(), OutputError> {
    let path = &dir.join(name);
    let file = dir.replace(name).map_err(|e| OutputError::io(path, e))?;
    let mut out = BufWriter::new(file);
    for group in groups {
        let energy_uj = group.energy_uj.round() as u64;
        if energy_uj > 0 {
            writeln!(out, "{} {energy_uj}", group.tree(false)).map_err(|e| OutputError::io(path, e))?;
        }
    }
    let file = out.into_inner().map_err(|e| OutputError::io(path, e.into_error()))?;
    file.commit().map_err(|e| OutputError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::stacks::aggregate::{path_groups, Scope};
    use crate::attribution::stacks::methods::StackRules;
    use crate::attribution::stacks::paths::PathStyle;
    use crate::attribution::stacks::thread_kind::ThreadKind;
    use crate::model::FrameKind;

    const JVM: StackRules = StackRules { jvm: true, native_frames: false };
    use crate::attribution::stacks::aggregate::StackTotal;
    use crate::attribution::stacks::methods::tests::{frame, java};
    use crate::attribution::stacks::methods::MethodFilter;
    use crate::safe_write::test_dir;
    use std::sync::Arc;

    #[test]
    fn lines_are_root_first_in_whole_microjoules() {
        let stacks = vec![
            StackTotal {
                carbon_g: 0.0,
                thread: ThreadKind::Application,
                stack: Arc::from(vec![java("com.acme.App.main"), frame("read", FrameKind::Native)]),
                energy_uj: 1234.6,
                samples: 3,
            },
            StackTotal {
                carbon_g: 0.0,
                thread: ThreadKind::Application,
                stack: Arc::from(vec![java("com.acme.App.main"), java("java.util.HashMap.get")]),
                energy_uj: 0.4,
                samples: 1,
            },
        ];
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("x.folded");
        let dir = test_dir(tmp.path());
        write_folded(&dir, "x.folded", &path_groups(&stacks, Scope::All, JVM, PathStyle::Graph)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "com.acme.App.main;read 1235\n");
        let filter = MethodFilter::parse("com.acme");
        write_folded(&dir, "x.folded", &path_groups(&stacks, Scope::App(&filter), JVM, PathStyle::Graph)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "com.acme.App.main 1235\n");
    }
}
