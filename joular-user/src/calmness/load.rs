//! Finds and reads a run's frequency trace: `frequencies.csv` in a run's `--output` directory,
//! or beside a process's `<pid>-<epochms>` directory (its `summary.json` says where, or why
//! there is none). Everything read is the user's input: bounded, and refused by name.

use std::path::{Path, PathBuf};

use super::trace::{parse_frequencies, FrequencyCycle, FREQUENCIES_FILE, MAX_FREQUENCIES_BYTES};
use crate::model::FrequencyRecording;
use crate::safe_write::{Modes, OutDir};

const SUMMARY_FILE: &str = "summary.json";
const MAX_SUMMARY_BYTES: u64 = 64 << 20;

/// The fields of a process's `summary.json` this reads (the rest is `output`'s to write).
#[derive(serde::Deserialize)]
struct SummaryFrequencies {
    #[serde(default)]
    cpu_frequencies: FrequencyRecording,
    #[serde(default)]
    start_epoch_ms: Option<u64>,
    #[serde(default)]
    end_epoch_ms: Option<u64>,
}

/// A process directory's run span, from its `summary.json`.
fn process_span(dir: &OutDir) -> Option<(u64, u64)> {
    let bytes = dir.read(SUMMARY_FILE, MAX_SUMMARY_BYTES).ok()?;
    let summary = serde_json::from_slice::<SummaryFrequencies>(&bytes).ok()?;
    Some((summary.start_epoch_ms?, summary.end_epoch_ms?))
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The run was recorded without CPU frequencies: the machine has none (most VMs).
    #[error("{}: {reason}: calmness cannot be computed", dir.display())]
    NoFrequencies { dir: PathBuf, reason: String },
    #[error("{}: not a joular-ebpf run (no {FREQUENCIES_FILE}, no summary.json)", dir.display())]
    NotARun { dir: PathBuf },
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: {reason}", path.display())]
    Parse { path: PathBuf, reason: String },
}

impl LoadError {
    /// The run exists and was read, and has no frequencies (the exit-2 "machine" case).
    pub fn is_no_frequencies(&self) -> bool {
        matches!(self, LoadError::NoFrequencies { .. })
    }
}

/// What a run without `frequencies.csv` says about it: the reason one of its processes'
/// `summary.json` gives, else that the file is missing.
fn why_none(dir: &OutDir) -> Option<String> {
    let mut dirs = vec![dir.try_clone().ok()?];
    if !dir.has_file(SUMMARY_FILE) {
        for entry in dir.entries().ok()?.into_iter().filter(|e| !e.is_file) {
            if let Some(sub) = entry.name.to_str().and_then(|n| dir.open_subdir(n).ok()) {
                dirs.push(sub);
            }
        }
    }
    let mut seen_summary = false;
    for d in dirs.iter().filter(|d| d.has_file(SUMMARY_FILE)) {
        seen_summary = true;
        let Ok(bytes) = d.read(SUMMARY_FILE, MAX_SUMMARY_BYTES) else { continue };
        let Ok(summary) = serde_json::from_slice::<SummaryFrequencies>(&bytes) else { continue };
        let FrequencyRecording { available, reason, .. } = summary.cpu_frequencies;
        if !available {
            return Some(if reason.is_empty() {
                "the run recorded no CPU frequency (recorded by a joular-ebpf without them)".to_owned()
            } else {
                reason
            });
        }
    }
    seen_summary.then(|| format!("no {FREQUENCIES_FILE} beside the run's summary.json"))
}

/// A run's frequency trace, non-empty.
pub fn load_run(path: &Path) -> Result<Vec<FrequencyCycle>, LoadError> {
    let modes = Modes::from_flag(None);
    let read = |dir: &Path| {
        OutDir::open_to_read(dir, modes).map_err(|source| LoadError::Read { path: dir.to_owned(), source })
    };
    let dir = read(path)?;
    // A process's directory: the trace is its run's, one level up.
    let holder = if !dir.has_file(FREQUENCIES_FILE) && dir.has_file(SUMMARY_FILE) {
        match path.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => read(parent)?,
            None => read(&path.join(".."))?,
        }
    } else {
        dir.try_clone().map_err(|source| LoadError::Read { path: path.to_owned(), source })?
    };
    if !holder.has_file(FREQUENCIES_FILE) {
        return Err(match why_none(&dir) {
            Some(reason) => LoadError::NoFrequencies { dir: path.to_owned(), reason },
            None => LoadError::NotARun { dir: path.to_owned() },
        });
    }
    let file = holder.join(FREQUENCIES_FILE);
    let bytes = holder
        .read(FREQUENCIES_FILE, MAX_FREQUENCIES_BYTES)
        .map_err(|source| LoadError::Read { path: file.clone(), source })?;
    let text =
        String::from_utf8(bytes).map_err(|_| LoadError::Parse { path: file.clone(), reason: "not UTF-8".into() })?;
    let trace = parse_frequencies(&text).map_err(|reason| LoadError::Parse { path: file.clone(), reason })?;
    if trace.is_empty() {
        return Err(LoadError::NoFrequencies {
            dir: path.to_owned(),
            reason: format!("{FREQUENCIES_FILE} holds no cycle (the run ended before its first cycle)"),
        });
    }
    // A later run into the same --output replaces the trace: a process's own trace overlaps
    // the time it ran, another run's does not.
    if let Some((start_ms, end_ms)) = process_span(&dir) {
        let first_ms = trace.iter().map(|c| c.start_epoch_ms).min().unwrap_or(0);
        let last_ms = trace.iter().map(|c| c.end_epoch_ms).max().unwrap_or(0);
        if last_ms < start_ms || first_ms > end_ms {
            return Err(LoadError::Parse {
                path: file,
                reason: format!(
                    "is another run's (its cycles span {first_ms}..{last_ms} ms, this process ran \
                     {start_ms}..{end_ms} ms): record each run into an --output of its own"
                ),
            });
        }
    }
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn a_run_dir_a_process_dir_and_a_run_without_frequencies() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("run");
        let process = run.join("42-1700000000000");
        fs::create_dir_all(&process).unwrap();
        let summary = |recording: FrequencyRecording| {
            serde_json::json!({ "pid": 42, "cpu_frequencies": recording, "threads": [] }).to_string()
        };
        fs::write(process.join(SUMMARY_FILE), summary(FrequencyRecording::default())).unwrap();
        let e = load_run(&run).unwrap_err();
        assert!(e.is_no_frequencies(), "{e}");
        let no_cpufreq =
            FrequencyRecording { reason: "this machine exposes no CPU frequency".into(), ..Default::default() };
        fs::write(process.join(SUMMARY_FILE), summary(no_cpufreq)).unwrap();
        for dir in [&run, &process] {
            let e = load_run(dir).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("{}: this machine exposes no CPU frequency: calmness cannot be computed", dir.display())
            );
        }
        fs::write(run.join(FREQUENCIES_FILE), "cycle,start_epoch_ms,end_epoch_ms,cpu,khz\n0,1,2,0,800000\n").unwrap();
        assert_eq!(load_run(&run).unwrap().len(), 1);
        assert_eq!(load_run(&process).unwrap().len(), 1, "from a process's directory, its run's trace");
        // The process ran at 1..2 ms; a trace of 5..6 ms is a later run's, refused by name.
        let ran = serde_json::json!({ "pid": 42, "start_epoch_ms": 1, "end_epoch_ms": 2, "threads": [] });
        fs::write(process.join(SUMMARY_FILE), ran.to_string()).unwrap();
        assert_eq!(load_run(&process).unwrap().len(), 1, "a trace over the process's run is its own");
        fs::write(run.join(FREQUENCIES_FILE), "cycle,start_epoch_ms,end_epoch_ms,cpu,khz\n0,5,6,0,800000\n").unwrap();
        let e = load_run(&process).unwrap_err();
        assert!(e.to_string().contains("is another run's"), "{e}");
        assert_eq!(load_run(&run).unwrap().len(), 1, "a run directory names no process to check against");
        let e = load_run(tmp.path()).unwrap_err();
        assert!(matches!(e, LoadError::NotARun { .. }), "{e}");
        fs::write(run.join(FREQUENCIES_FILE), "nonsense\n").unwrap();
        assert!(matches!(load_run(&run).unwrap_err(), LoadError::Parse { .. }));
    }
}
