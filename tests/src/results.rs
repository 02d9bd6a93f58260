//! A profiled run's outputs: its `--json` cycles, its stderr and the result tree the profiler
//! wrote for one process, and readers of the files in that tree.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::{assert_success, profile, read_jsonl, FakePowercap};

/// What one run wrote, in a temporary directory removed with it.
pub struct ProfiledRun {
    pub cycles: Vec<Value>,
    pub stderr: String,
    /// The process's `<pid>-<epochms>` result tree.
    pub results: PathBuf,
    pub dir: tempfile::TempDir,
}

/// Profiles `pid` on a fake 40 W powercap with `--json` and `--output` in a fresh temporary
/// directory, `extra` arguments after them; the run must succeed within two minutes.
pub fn profile_outputs(pid: u32, extra: &[&str]) -> ProfiledRun {
    let rapl = FakePowercap::start(40.0);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.jsonl");
    let out_dir = dir.path().join("results");
    let (pid_arg, root) = (pid.to_string(), rapl.sysfs_root());
    let mut args = vec![
        "--pid",
        &pid_arg,
        "--json",
        json.to_str().unwrap(),
        "--sysfs-root",
        &root,
        "--output",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = profile(&args, Duration::from_secs(120));
    assert_success(&out);
    ProfiledRun {
        cycles: read_jsonl(&json),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        results: result_dir(&out_dir, pid),
        dir,
    }
}

/// The `<pid>-<epochms>` result tree of `pid` under `root` (the `--output` directory).
pub fn result_dir(root: &Path, pid: u32) -> PathBuf {
    std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("{pid}-")))
        .unwrap_or_else(|| panic!("no {pid}-<epochms> directory in {}", root.display()))
}

/// `name,value` rows of a JoularJX CSV: name → value.
pub fn csv_rows(path: &Path) -> HashMap<String, f64> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|l| l.rsplit_once(','))
        .map(|(k, v)| (k.to_owned(), v.trim().parse().unwrap_or_else(|_| panic!("bad row {k},{v}"))))
        .collect()
}
