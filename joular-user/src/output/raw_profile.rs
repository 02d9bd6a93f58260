//! The raw profile (`profile.json` in each `<pid>-<epochms>` directory): the run summary and
//! every distinct stack with its energy and samples, frames stored once and referred to by
//! index. `joular-ebpf report` re-renders every output from it without running again. With
//! `--devices network,disk`, `device_stacks` holds each device's stacks the same way (a key an
//! older reader ignores, so it never takes them for CPU stacks); their threads, model and
//! joules are in the summary's `device_energy`.

use std::collections::HashMap;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::OutputError;
use crate::attribution::stacks::aggregate::StackTotal;
use crate::attribution::stacks::device_run::{DeviceProfile, DeviceThreadTotal};
use crate::attribution::stacks::profile::{ProcessProfile, RunSummary};
use crate::attribution::stacks::thread_kind::ThreadKind;
use crate::attribution::stacks::timeline::{Timeline, MAX_BUCKETS};
use crate::device_reports::Device;
use crate::model::{Frame, FrameKind, Stack};
use crate::safe_write::OutDir;

pub const RAW_PROFILE_FILE: &str = "profile.json";
const FORMAT: &str = "joular-ebpf-raw-profile";
const VERSION: u32 = 1;

#[derive(Serialize)]
struct FrameOut<'a> {
    name: &'a str,
    short: &'a str,
    kind: FrameKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_name: Option<&'a str>,
}

#[derive(Serialize, Deserialize)]
struct RawStack {
    /// Indexes into `frames`, root first.
    frames: Vec<u32>,
    /// The kind of thread the stack was sampled in; absent for application threads (and in
    /// profiles written before thread kinds existed).
    #[serde(default, skip_serializing_if = "is_application")]
    thread: ThreadKind,
    energy_uj: f64,
    /// Grams of CO₂e; absent when the run had no carbon intensity.
    #[serde(default, skip_serializing_if = "is_zero")]
    carbon_g: f64,
    samples: u64,
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

fn is_application(kind: &ThreadKind) -> bool {
    *kind == ThreadKind::Application
}

/// One device's stacks (`ProcessProfile::devices`).
#[derive(Serialize, Deserialize)]
struct RawDeviceStacks {
    device: Device,
    stacks: Vec<RawStack>,
}

#[derive(Serialize)]
struct RawProfileOut<'a> {
    format: &'static str,
    version: u32,
    summary: &'a RunSummary,
    frames: Vec<FrameOut<'a>>,
    stacks: Vec<RawStack>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    device_stacks: Vec<RawDeviceStacks>,
    timeline: &'a Timeline,
}

#[derive(Deserialize)]
struct FrameIn {
    name: String,
    short: String,
    kind: FrameKind,
    #[serde(default)]
    line: Option<u32>,
    #[serde(default)]
    raw_name: Option<String>,
}

#[derive(Deserialize)]
struct RawProfileIn {
    format: String,
    version: u32,
    summary: RunSummary,
    frames: Vec<FrameIn>,
    stacks: Vec<RawStack>,
    #[serde(default)]
    device_stacks: Vec<RawDeviceStacks>,
    #[serde(default)]
    timeline: Timeline,
}

/// `total` as a raw stack, its frames added to `frames` once (`index`).
fn raw_stack<'a>(
    total: &'a StackTotal,
    index: &mut HashMap<&'a Frame, u32>,
    frames: &mut Vec<FrameOut<'a>>,
) -> RawStack {
    RawStack {
        frames: total
            .stack
            .iter()
            .map(|frame| {
                *index.entry(frame).or_insert_with(|| {
                    frames.push(FrameOut {
                        name: &frame.name,
                        short: &frame.short,
                        kind: frame.kind,
                        line: frame.line,
                        raw_name: frame.raw_name.as_deref(),
                    });
                    frames.len() as u32 - 1
                })
            })
            .collect(),
        thread: total.thread,
        energy_uj: total.energy_uj,
        carbon_g: total.carbon_g,
        samples: total.samples,
    }
}

pub fn write_raw_profile(dir: &OutDir, name: &str, profile: &ProcessProfile) -> Result<(), OutputError> {
    let (summary, stacks) = (&profile.summary, &profile.stacks);
    let mut index: HashMap<&Frame, u32> = HashMap::new();
    let mut frames = Vec::new();
    let raw_stacks = stacks.iter().map(|total| raw_stack(total, &mut index, &mut frames)).collect();
    let device_stacks = profile
        .devices
        .iter()
        .map(|d| RawDeviceStacks {
            device: d.device,
            stacks: d.stacks.iter().map(|total| raw_stack(total, &mut index, &mut frames)).collect(),
        })
        .collect();
    let out = RawProfileOut {
        format: FORMAT,
        version: VERSION,
        summary,
        frames,
        stacks: raw_stacks,
        device_stacks,
        timeline: &profile.timeline,
    };
    let path = &dir.join(name);
    let file = dir.replace(name).map_err(|e| OutputError::io(path, e))?;
    let mut writer = BufWriter::new(file);
    serde_json::to_writer(&mut writer, &out).map_err(|e| OutputError::json(path, e))?;
    let file = writer.into_inner().map_err(|e| OutputError::io(path, e.into_error()))?;
    file.commit().map_err(|e| OutputError::io(path, e))
}

/// A raw profile is a few MB for a long run; past this it is not one of ours.
const MAX_RAW_PROFILE_BYTES: u64 = 1 << 30;

/// Reads `name` in `dir` (a regular file, not followed if a symlink, at most 1 GiB).
pub fn read_raw_profile(dir: &OutDir, name: &str) -> Result<ProcessProfile, OutputError> {
    let path = &dir.join(name);
    let bytes = dir.read(name, MAX_RAW_PROFILE_BYTES).map_err(|e| OutputError::io(path, e))?;
    let text = String::from_utf8(bytes)
        .map_err(|e| OutputError::Format { path: path.clone(), reason: format!("not UTF-8 ({e})") })?;
    parse_raw_profile(&text, path)
}

/// Parses and checks a raw profile's text; `path` only names it in errors.
pub fn parse_raw_profile(text: &str, path: &Path) -> Result<ProcessProfile, OutputError> {
    let raw: RawProfileIn = serde_json::from_str(text).map_err(|e| json_error(path, text, e))?;
    if raw.format != FORMAT || raw.version != VERSION {
        return Err(OutputError::Format {
            path: path.to_owned(),
            reason: format!("expected {FORMAT} version {VERSION}, found {} version {}", raw.format, raw.version),
        });
    }
    validate(&raw).map_err(|reason| OutputError::Format { path: path.to_owned(), reason })?;
    let frames: Vec<Frame> = raw
        .frames
        .into_iter()
        .map(|f| Frame { raw_name: f.raw_name.map(Arc::from), ..Frame::new(f.kind, f.name, f.short, f.line) })
        .collect();
    let to_totals = |raw_stacks: Vec<RawStack>| -> Result<Vec<StackTotal>, OutputError> {
        let mut stacks = Vec::with_capacity(raw_stacks.len());
        for raw_stack in raw_stacks {
            let stack: Option<Vec<Frame>> = raw_stack.frames.iter().map(|&i| frames.get(i as usize).cloned()).collect();
            let stack: Stack = Arc::from(stack.ok_or_else(|| OutputError::Format {
                path: path.to_owned(),
                reason: format!("frame index out of range (only {} frames)", frames.len()),
            })?);
            stacks.push(StackTotal {
                stack,
                thread: raw_stack.thread,
                energy_uj: raw_stack.energy_uj,
                carbon_g: raw_stack.carbon_g,
                samples: raw_stack.samples,
            });
        }
        Ok(stacks)
    };
    let stacks = to_totals(raw.stacks)?;
    let mut devices = Vec::with_capacity(raw.device_stacks.len());
    for d in raw.device_stacks {
        let stacks = to_totals(d.stacks)?;
        // The model, joules and threads the summary says; a summary without them (edited by
        // hand) leaves the stacks' own sum.
        let said = raw.summary.device_energy.as_ref().and_then(|e| e.device(d.device));
        devices.push(DeviceProfile {
            device: d.device,
            estimated: said.is_none_or(|s| s.estimated),
            source: said.map(|s| s.source.clone()).unwrap_or_default(),
            energy_uj: said.map_or_else(|| stacks.iter().map(|s| s.energy_uj).sum(), |s| s.energy_j * 1e6),
            threads: said
                .map(|s| {
                    s.threads
                        .iter()
                        .map(|t| DeviceThreadTotal { tid: t.tid, comm: t.comm.clone(), energy_uj: t.energy_j * 1e6 })
                        .collect()
                })
                .unwrap_or_default(),
            stacks,
        });
    }
    Ok(ProcessProfile { summary: raw.summary, stacks, devices, timeline: raw.timeline })
}

/// Above this a value is corrupt, not measured: a 1 kW socket takes 30 years to reach 1e18 µJ.
const MAX_ENERGY_UJ: f64 = 1e18;
/// Counts stay exact in the `f64` sums and shares they feed.
const MAX_COUNT: u64 = 1 << 53;

/// Every number the outputs add up or divide by: a hand-edited or corrupt profile must not
/// render `inf` or negative percentages.
fn validate(raw: &RawProfileIn) -> Result<(), String> {
    let summary = &raw.summary;
    energy("summary.energy_uj", summary.energy_uj)?;
    energy("summary.socket_energy_uj", summary.socket_energy_uj)?;
    energy("summary.unattributed_uj", summary.unattributed_uj)?;
    if !(summary.duration_s.is_finite() && summary.duration_s >= 0.0) {
        return Err(format!(
            "summary.duration_s is {}: expected a finite, non-negative number of seconds",
            summary.duration_s
        ));
    }
    count("summary.samples", summary.samples)?;
    if let Some(c) = &summary.carbon {
        for (field, value) in [("grams", c.grams), ("host_grams", c.host_grams), ("mean_g_per_kwh", c.mean_g_per_kwh)] {
            energy(&format!("summary.carbon.{field}"), value)?;
        }
    }
    for (i, t) in summary.threads.iter().enumerate() {
        energy(&format!("summary.threads[{i}].energy_uj"), t.energy_uj)?;
        energy(&format!("summary.threads[{i}].carbon_g"), t.carbon_g)?;
        count(&format!("summary.threads[{i}].samples"), t.samples)?;
    }
    for (i, s) in raw.stacks.iter().enumerate() {
        energy(&format!("stacks[{i}].energy_uj"), s.energy_uj)?;
        energy(&format!("stacks[{i}].carbon_g"), s.carbon_g)?;
        count(&format!("stacks[{i}].samples"), s.samples)?;
    }
    for (d, device) in raw.device_stacks.iter().enumerate() {
        for (i, s) in device.stacks.iter().enumerate() {
            energy(&format!("device_stacks[{d}].stacks[{i}].energy_uj"), s.energy_uj)?;
            energy(&format!("device_stacks[{d}].stacks[{i}].carbon_g"), s.carbon_g)?;
            count(&format!("device_stacks[{d}].stacks[{i}].samples"), s.samples)?;
        }
    }
    if let Some(devices) = &summary.device_energy {
        for d in Device::ALL.iter().filter_map(|&d| devices.device(d)) {
            energy("summary.device_energy.*.energy_j (in µJ)", d.energy_j * 1e6)?;
            for t in &d.threads {
                energy("summary.device_energy.*.threads[].energy_j (in µJ)", t.energy_j * 1e6)?;
            }
        }
    }
    validate_timeline(&raw.timeline)
}

/// Charts divide by the timeline's widths and index its series together.
fn validate_timeline(t: &Timeline) -> Result<(), String> {
    let buckets = t.covered_s.len();
    if buckets > MAX_BUCKETS {
        return Err(format!("timeline has {buckets} buckets: expected at most {MAX_BUCKETS}"));
    }
    let lengths = [t.cycles.len(), t.end_epoch_s.len(), t.energy_uj.len()];
    if lengths.iter().any(|&l| l != buckets)
        || t.threads.iter().chain(&t.other_threads).any(|s| s.energy_uj.len() != buckets)
    {
        return Err("timeline series differ in length".to_owned());
    }
    if !(t.bucket_s.is_finite() && t.bucket_s >= 0.0) {
        return Err(format!("timeline.bucket_s is {}: expected a finite, non-negative number of seconds", t.bucket_s));
    }
    for (i, &s) in t.covered_s.iter().enumerate() {
        if !(s.is_finite() && s >= 0.0) {
            return Err(format!("timeline.covered_s[{i}] is {s}: expected a finite, non-negative number of seconds"));
        }
    }
    for (i, &e) in t.energy_uj.iter().enumerate() {
        energy(&format!("timeline.energy_uj[{i}]"), e)?;
    }
    for (n, series) in t.threads.iter().enumerate() {
        for (i, &e) in series.energy_uj.iter().enumerate() {
            energy(&format!("timeline.threads[{n}].energy_uj[{i}]"), e)?;
        }
    }
    for (i, &e) in t.other_threads.iter().flat_map(|s| &s.energy_uj).enumerate() {
        energy(&format!("timeline.other_threads.energy_uj[{i}]"), e)?;
    }
    Ok(())
}

fn energy(field: &str, value_uj: f64) -> Result<(), String> {
    if value_uj.is_finite() && (0.0..=MAX_ENERGY_UJ).contains(&value_uj) {
        Ok(())
    } else {
        Err(format!("{field} is {value_uj}: expected a finite, non-negative energy of at most {MAX_ENERGY_UJ:e} µJ"))
    }
}

fn count(field: &str, value: u64) -> Result<(), String> {
    if value <= MAX_COUNT {
        Ok(())
    } else {
        Err(format!("{field} is {value}: expected a count of at most 2^53"))
    }
}

/// serde_json locates a bad value by line and column; name the field it belongs to as well
/// (the last key before that column).
fn json_error(path: &Path, text: &str, e: serde_json::Error) -> OutputError {
    // Out-of-range numbers (`1e999`) are syntax errors to serde_json.
    if e.is_data() || e.is_syntax() {
        if let Some(key) = key_before(text, e.line(), e.column()) {
            return OutputError::Format { path: path.to_owned(), reason: format!("field `{key}`: {e}") };
        }
    }
    OutputError::json(path, e)
}

fn key_before(text: &str, line: usize, column: usize) -> Option<&str> {
    let line = text.lines().nth(line.checked_sub(1)?)?;
    let upto = line.get(..column.min(line.len()))?;
    let end = upto.rfind("\":")?;
    let start = upto[..end].rfind('"')? + 1;
    Some(&upto[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::stacks::methods::tests::{frame, java};
    use crate::attribution::stacks::profile::ThreadTotal;
    use crate::safe_write::test_dir;

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
                carbon_g: 0.0,
                on_cpu_ns: 7,
                samples: 2,
            }],
            native_frames: true,
            jvm: Some(crate::attribution::stacks::profile::JvmShares::default()),
            ..RunSummary::default()
        };
        let shared = java("com.acme.App.main");
        let stacks = vec![
            StackTotal {
                carbon_g: 0.0,
                stack: Arc::from(vec![shared.clone(), frame("ksys_read", FrameKind::Kernel)]),
                thread: ThreadKind::Application,
                energy_uj: 1.5,
                samples: 1,
            },
            StackTotal {
                carbon_g: 0.0,
                stack: Arc::from(vec![shared.clone()]),
                thread: ThreadKind::Application,
                energy_uj: 3.5,
                samples: 1,
            },
            StackTotal {
                carbon_g: 0.0,
                stack: Arc::from(vec![Frame {
                    line: Some(42),
                    raw_name: Some("void com.acme.App$$Lambda$3/0x0000000800c01000.main()".into()),
                    ..shared
                }]),
                thread: ThreadKind::Gc,
                energy_uj: 0.5,
                samples: 1,
            },
        ];
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(RAW_PROFILE_FILE);
        let mut timeline = Timeline::default();
        timeline.add_cycle(0.0, 1.0, 1_700_000_001, [(10, "worker", 5.0)]);
        let profile =
            ProcessProfile { summary: summary.clone(), stacks: stacks.clone(), timeline, devices: Vec::new() };
        write_raw_profile(&test_dir(tmp.path()), RAW_PROFILE_FILE, &profile).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.matches("com.acme.App.main").count(), 4, "frame stored once per line (name + short)");
        assert_eq!(text.matches(r#""thread":"gc""#).count(), 1, "{text}");
        let back = read_raw_profile(&test_dir(tmp.path()), RAW_PROFILE_FILE).unwrap();
        assert_eq!(back, profile);
    }

    #[test]
    fn bad_frame_index_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(RAW_PROFILE_FILE);
        let summary = serde_json::to_string(&RunSummary::default()).unwrap();
        std::fs::write(&path, format!(r#"{{"format":"{FORMAT}","version":1,"summary":{summary},"frames":[],"stacks":[{{"frames":[0],"energy_uj":1,"samples":1}}]}}"#)).unwrap();
        assert!(matches!(read_raw_profile(&test_dir(tmp.path()), RAW_PROFILE_FILE), Err(OutputError::Format { .. })));
    }

    fn profile_with(summary: &str, stacks: &str) -> Result<ProcessProfile, OutputError> {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(RAW_PROFILE_FILE);
        let mut base = serde_json::to_value(RunSummary::default()).unwrap();
        let patch: serde_json::Value = serde_json::from_str(summary).unwrap();
        for (k, v) in patch.as_object().unwrap() {
            base[k] = v.clone();
        }
        std::fs::write(&path, format!(r#"{{"format":"{FORMAT}","version":1,"summary":{base},"frames":[{{"name":"f","short":"f","kind":"native"}}],"stacks":{stacks}}}"#)).unwrap();
        read_raw_profile(&test_dir(tmp.path()), RAW_PROFILE_FILE)
    }

    #[test]
    fn bad_numbers_are_refused_with_their_file_and_field() {
        assert!(profile_with("{}", r#"[{"frames":[0],"energy_uj":2.5,"samples":3}]"#).is_ok());
        for (summary, stacks, field) in [
            ("{}", r#"[{"frames":[0],"energy_uj":-1,"samples":3}]"#, "stacks[0].energy_uj is -1"),
            ("{}", r#"[{"frames":[0],"energy_uj":1e308,"samples":3}]"#, "stacks[0].energy_uj is 1"),
            (r#"{"energy_uj":-5}"#, "[]", "summary.energy_uj is -5"),
            (r#"{"socket_energy_uj":1e300}"#, "[]", "summary.socket_energy_uj"),
            (r#"{"duration_s":-2}"#, "[]", "summary.duration_s is -2"),
            (
                r#"{"threads":[{"tid":1,"comm":"a","energy_uj":-0.5,"on_cpu_ns":1,"samples":1}]}"#,
                "[]",
                "summary.threads[0].energy_uj",
            ),
            ("{}", r#"[{"frames":[0],"energy_uj":1,"samples":-3}]"#, "field `samples`"),
            ("{}", r#"[{"frames":[0],"energy_uj":1e999,"samples":3}]"#, "field `energy_uj`"),
        ] {
            let err = profile_with(summary, stacks).unwrap_err().to_string();
            assert!(err.contains(RAW_PROFILE_FILE) && err.contains(field), "{stacks} {summary}: {err}");
            assert!(!err.contains('\n'), "one line: {err}");
        }
    }

    #[test]
    fn a_bad_timeline_is_refused_naming_its_field() {
        let summary = serde_json::to_string(&RunSummary::default()).unwrap();
        let with = |timeline: &str| {
            let text = format!(
                r#"{{"format":"{FORMAT}","version":1,"summary":{summary},"frames":[],"stacks":[],"timeline":{timeline}}}"#
            );
            parse_raw_profile(&text, Path::new(RAW_PROFILE_FILE)).map(|p| p.timeline)
        };
        let good = r#"{"bucket_s":1,"covered_s":[1],"cycles":[1],"end_epoch_s":[9],"energy_uj":[3],"threads":[{"tid":1,"comm":"a","energy_uj":[3]}]}"#;
        assert_eq!(with(good).unwrap().threads[0].total_uj(), 3.0);
        for (timeline, want) in [
            (good.replace("\"energy_uj\":[3],", "\"energy_uj\":[-3],"), "timeline.energy_uj[0] is -3"),
            (good.replace("\"covered_s\":[1]", "\"covered_s\":[1,1]"), "differ in length"),
            (good.replace("\"bucket_s\":1", "\"bucket_s\":-1"), "timeline.bucket_s is -1"),
        ] {
            let err = with(&timeline).unwrap_err().to_string();
            assert!(err.contains(want), "{timeline}: {err}");
        }
    }
}
