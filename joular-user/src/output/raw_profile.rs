//! The raw profile (`profile.json` in each `<pid>-<epochms>` directory): the run summary and
//! every distinct stack with its energy and samples, frames stored once and referred to by
//! index. `joular-ebpf report` re-renders every output from it without running again.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::profile::{ProcessProfile, RunSummary, StackTotal};
use super::OutputError;
use crate::model::{Frame, FrameKind, Stack};

pub const RAW_PROFILE_FILE: &str = "profile.json";
const FORMAT: &str = "joular-ebpf-raw-profile";
const VERSION: u32 = 1;

#[derive(Serialize)]
struct FrameOut<'a> {
    name: &'a str,
    short: &'a str,
    kind: FrameKind,
}

#[derive(Serialize, Deserialize)]
struct RawStack {
    /// Indexes into `frames`, root first.
    frames: Vec<u32>,
    energy_uj: f64,
    samples: u64,
}

#[derive(Serialize)]
struct RawProfileOut<'a> {
    format: &'static str,
    version: u32,
    summary: &'a RunSummary,
    frames: Vec<FrameOut<'a>>,
    stacks: Vec<RawStack>,
}

#[derive(Deserialize)]
struct FrameIn {
    name: String,
    short: String,
    kind: FrameKind,
}

#[derive(Deserialize)]
struct RawProfileIn {
    format: String,
    version: u32,
    summary: RunSummary,
    frames: Vec<FrameIn>,
    stacks: Vec<RawStack>,
}

pub fn write_raw_profile(
    path: &Path,
    summary: &RunSummary,
    stacks: &[StackTotal],
) -> Result<(), OutputError> {
    let mut index: HashMap<&Frame, u32> = HashMap::new();
    let mut frames = Vec::new();
    let raw_stacks = stacks
        .iter()
        .map(|total| RawStack {
            frames: total
                .stack
                .iter()
                .map(|frame| {
                    *index.entry(frame).or_insert_with(|| {
                        frames.push(FrameOut {
                            name: &frame.name,
                            short: &frame.short,
                            kind: frame.kind,
                        });
                        frames.len() as u32 - 1
                    })
                })
                .collect(),
            energy_uj: total.energy_uj,
            samples: total.samples,
        })
        .collect();
    let out = RawProfileOut {
        format: FORMAT,
        version: VERSION,
        summary,
        frames,
        stacks: raw_stacks,
    };
    let file = File::create(path).map_err(|e| OutputError::io(path, e))?;
    let mut writer = BufWriter::new(file);
    serde_json::to_writer(&mut writer, &out).map_err(|e| OutputError::json(path, e))?;
    writer.flush().map_err(|e| OutputError::io(path, e))
}

pub fn read_raw_profile(path: &Path) -> Result<ProcessProfile, OutputError> {
    let file = File::open(path).map_err(|e| OutputError::io(path, e))?;
    let raw: RawProfileIn =
        serde_json::from_reader(BufReader::new(file)).map_err(|e| OutputError::json(path, e))?;
    if raw.format != FORMAT || raw.version != VERSION {
        return Err(OutputError::Format {
            path: path.to_owned(),
            reason: format!(
                "expected {FORMAT} version {VERSION}, found {} version {}",
                raw.format, raw.version
            ),
        });
    }
    let frames: Vec<Frame> = raw
        .frames
        .into_iter()
        .map(|f| Frame {
            name: Arc::from(f.name),
            short: Arc::from(f.short),
            kind: f.kind,
        })
        .collect();
    let mut stacks = Vec::with_capacity(raw.stacks.len());
    for raw_stack in raw.stacks {
        let stack: Option<Vec<Frame>> = raw_stack
            .frames
            .iter()
            .map(|&i| frames.get(i as usize).cloned())
            .collect();
        let stack: Stack = Arc::from(stack.ok_or_else(|| OutputError::Format {
            path: path.to_owned(),
            reason: format!("frame index out of range (only {} frames)", frames.len()),
        })?);
        stacks.push(StackTotal {
            stack,
            energy_uj: raw_stack.energy_uj,
            samples: raw_stack.samples,
        });
    }
    Ok(ProcessProfile {
        summary: raw.summary,
        stacks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::methods::tests::{frame, java};
    use crate::output::profile::ThreadTotal;

    #[test]
    fn round_trip_keeps_stacks_and_summary() {
        let summary = RunSummary {
            pid: 9,
            comm: "java".into(),
            filters: vec!["com.acme".into()],
            drops: [("samples".to_owned(), 3)].into(),
            threads: vec![ThreadTotal {
                tid: 10,
                comm: "worker".into(),
                energy_uj: 5.0,
                on_cpu_ns: 7,
                samples: 2,
            }],
            ..RunSummary::default()
        };
        let shared = java("com.acme.App.main");
        let stacks = vec![
            StackTotal {
                stack: Arc::from(vec![shared.clone(), frame("ksys_read", FrameKind::Kernel)]),
                energy_uj: 1.5,
                samples: 1,
            },
            StackTotal {
                stack: Arc::from(vec![shared]),
                energy_uj: 3.5,
                samples: 1,
            },
        ];
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(RAW_PROFILE_FILE);
        write_raw_profile(&path, &summary, &stacks).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text.matches("com.acme.App.main").count(),
            2,
            "frame stored once (name + short)"
        );
        let back = read_raw_profile(&path).unwrap();
        assert_eq!(back.summary, summary);
        assert_eq!(back.stacks, stacks);
    }

    #[test]
    fn bad_frame_index_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(RAW_PROFILE_FILE);
        let summary = serde_json::to_string(&RunSummary::default()).unwrap();
        std::fs::write(&path, format!(r#"{{"format":"{FORMAT}","version":1,"summary":{summary},"frames":[],"stacks":[{{"frames":[0],"energy_uj":1,"samples":1}}]}}"#)).unwrap();
        assert!(matches!(
            read_raw_profile(&path),
            Err(OutputError::Format { .. })
        ));
    }
}
