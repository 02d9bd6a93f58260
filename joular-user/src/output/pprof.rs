//! pprof (`profile.proto`, gzip) weighted by energy: sample types `energy/microjoules` (the
//! default) and `samples/count`, for `go tool pprof` and any pprof viewer.
//!
//! Frames are already symbolized, so each distinct frame is one location with one line;
//! addresses are synthetic but unique inside one mapping per code kind (`[jit]`,
//! `[native]`, `[kernel]`), which keeps pprof's location/mapping invariants.

use std::collections::HashMap;
use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use super::profile::{RunSummary, StackTotal};
use super::OutputError;
use crate::model::{Frame, FrameKind};
use crate::safe_write::OutDir;

#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// Leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// A sample label: `str` (string-table index) or `num`, never both.
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
}

/// A sample's label value before interning.
#[derive(Debug, Clone, Copy)]
pub enum LabelValue<'a> {
    Str(&'a str),
    Num(i64),
}

#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
}

#[derive(Clone, PartialEq, Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Short name (`com.acme.Foo.bar`), what views show.
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Full name (`void com.acme.Foo.bar(int)`).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
}

const MAPPINGS: [&str; 3] = ["[jit]", "[native]", "[kernel]"];
/// Each mapping owns a 2^40-byte window of synthetic addresses.
const MAPPING_SPAN: u64 = 1 << 40;

fn mapping_id(kind: FrameKind) -> u64 {
    match kind {
        FrameKind::JavaJit | FrameKind::JavaInlined | FrameKind::JavaInterpreted | FrameKind::Stub => 1,
        FrameKind::Native => 2,
        FrameKind::Kernel => 3,
    }
}

#[derive(Default)]
struct Builder<'a> {
    profile: Profile,
    strings: HashMap<&'a str, i64>,
    functions: HashMap<(&'a str, &'a str), u64>,
    locations: HashMap<&'a Frame, u64>,
    next_address: [u64; MAPPINGS.len()],
}

impl<'a> Builder<'a> {
    fn string(&mut self, s: &'a str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.profile.string_table.len() as i64;
        self.profile.string_table.push(s.to_owned());
        self.strings.insert(s, i);
        i
    }

    fn location(&mut self, frame: &'a Frame) -> u64 {
        if let Some(&id) = self.locations.get(frame) {
            return id;
        }
        let function_id = match self.functions.get(&(&*frame.short, &*frame.name)) {
            Some(&id) => id,
            None => {
                let id = self.profile.function.len() as u64 + 1;
                let name = self.string(&frame.short);
                let system_name = self.string(&frame.name);
                self.profile.function.push(Function {
                    id,
                    name,
                    system_name,
                });
                self.functions.insert((&frame.short, &frame.name), id);
                id
            }
        };
        let mapping_id = mapping_id(frame.kind);
        let slot = &mut self.next_address[mapping_id as usize - 1];
        *slot += 1;
        let id = self.profile.location.len() as u64 + 1;
        self.profile.location.push(Location {
            id,
            mapping_id,
            address: mapping_id * MAPPING_SPAN + *slot,
            line: vec![Line { function_id }],
        });
        self.locations.insert(frame, id);
        id
    }
}

impl<'a> Builder<'a> {
    /// An empty profile with our two sample types, energy the default.
    fn with_sample_types() -> Self {
        let mut b = Builder::default();
        b.string("");
        let energy = b.string("energy");
        let microjoules = b.string("microjoules");
        let samples = b.string("samples");
        let count = b.string("count");
        b.profile.sample_type = vec![
            ValueType {
                r#type: energy,
                unit: microjoules,
            },
            ValueType {
                r#type: samples,
                unit: count,
            },
        ];
        b.profile.default_sample_type = energy;
        b
    }

    /// One sample (stack root first); skipped when it carries neither energy nor samples.
    fn sample(
        &mut self,
        stack: &'a [Frame],
        energy_uj: f64,
        samples: u64,
        labels: &[(&'a str, LabelValue<'a>)],
    ) {
        let energy_uj = energy_uj.round() as i64;
        if energy_uj == 0 && samples == 0 {
            return;
        }
        let location_id = stack.iter().rev().map(|f| self.location(f)).collect();
        let label = labels
            .iter()
            .map(|&(key, value)| {
                let key = self.string(key);
                match value {
                    LabelValue::Str(v) => Label {
                        key,
                        str: self.string(v),
                        num: 0,
                    },
                    LabelValue::Num(num) => Label { key, str: 0, num },
                }
            })
            .collect();
        self.profile.sample.push(Sample {
            location_id,
            value: vec![energy_uj, samples as i64],
            label,
        });
    }

    fn finish(mut self, comments: &[String], start_epoch_ms: u64, duration_s: f64) -> Profile {
        for (i, name) in MAPPINGS.iter().enumerate() {
            let id = i as u64 + 1;
            let filename = self.string(name);
            self.profile.mapping.push(Mapping {
                id,
                memory_start: id * MAPPING_SPAN,
                memory_limit: (id + 1) * MAPPING_SPAN,
                filename,
                has_functions: true,
            });
        }
        self.profile.comment = comments
            .iter()
            .map(|c| {
                let i = self.profile.string_table.len() as i64;
                self.profile.string_table.push(c.clone());
                i
            })
            .collect();
        self.profile.time_nanos = (start_epoch_ms as i64).saturating_mul(1_000_000);
        self.profile.duration_nanos = (duration_s * 1e9) as i64;
        self.profile
    }
}

/// `energy source: powercap`, or `... (estimated)` for the model.
pub fn source_comment(energy_source: &str, estimated: bool) -> String {
    if estimated {
        format!("energy source: {energy_source} (estimated)")
    } else {
        format!("energy source: {energy_source}")
    }
}

pub fn build(summary: &RunSummary, stacks: &[StackTotal]) -> Profile {
    let mut b = Builder::with_sample_types();
    for total in stacks {
        b.sample(&total.stack, total.energy_uj, total.samples, &[]);
    }
    let comments = [
        format!("joular-ebpf pid {} ({})", summary.pid, summary.comm),
        source_comment(&summary.energy_source, summary.estimated),
    ];
    b.finish(&comments, summary.start_epoch_ms, summary.duration_s)
}

/// One labelled sample of a multi-process profile.
pub struct LabelledStack<'a> {
    pub stack: &'a [Frame],
    pub energy_uj: f64,
    pub samples: u64,
    pub labels: Vec<(&'a str, LabelValue<'a>)>,
}

/// A profile of many processes (serve mode's per-interval export): one sample per
/// (process, stack), told apart by labels.
pub fn build_labelled<'a>(
    samples: impl IntoIterator<Item = LabelledStack<'a>>,
    comments: &[String],
    start_epoch_ms: u64,
    duration_s: f64,
) -> Profile {
    let mut b = Builder::with_sample_types();
    for s in samples {
        b.sample(s.stack, s.energy_uj, s.samples, &s.labels);
    }
    b.finish(comments, start_epoch_ms, duration_s)
}

/// gzip-compressed, as `go tool pprof`, Pyroscope and Parca read it.
pub fn write_profile(dir: &OutDir, name: &str, profile: &Profile) -> Result<(), OutputError> {
    let path = &dir.join(name);
    let bytes = profile.encode_to_vec();
    let file = dir.replace(name).map_err(|e| OutputError::io(path, e))?;
    let mut gz = GzEncoder::new(file, Compression::fast());
    gz.write_all(&bytes).map_err(|e| OutputError::io(path, e))?;
    let file = gz.finish().map_err(|e| OutputError::io(path, e))?;
    file.commit().map_err(|e| OutputError::io(path, e))
}

pub fn write_pprof(
    dir: &OutDir,
    name: &str,
    summary: &RunSummary,
    stacks: &[StackTotal],
) -> Result<(), OutputError> {
    write_profile(dir, name, &build(summary, stacks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::methods::tests::{frame, java};
    use crate::safe_write::test_dir;
    use std::fs::File;
    use std::io::Read;
    use std::path::Path;
    use std::process::Command;
    use std::sync::Arc;

    fn fixture() -> (RunSummary, Vec<StackTotal>) {
        let summary = RunSummary {
            pid: 4242,
            comm: "java".into(),
            start_epoch_ms: 1_700_000_000_000,
            duration_s: 2.0,
            energy_source: "model".into(),
            estimated: true,
            ..RunSummary::default()
        };
        let run = java("java.lang.Thread.run");
        let compute = java("com.acme.App.compute");
        let stacks = vec![
            StackTotal {
                stack: Arc::from(vec![
                    run.clone(),
                    compute.clone(),
                    java("java.math.BigInteger.multiply"),
                ]),
                energy_uj: 900_000.0,
                samples: 90,
            },
            StackTotal {
                stack: Arc::from(vec![
                    run,
                    compute,
                    frame("write", FrameKind::Native),
                    frame("ksys_write", FrameKind::Kernel),
                ]),
                energy_uj: 100_000.0,
                samples: 10,
            },
        ];
        (summary, stacks)
    }

    fn decode(path: &Path) -> Profile {
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(File::open(path).unwrap())
            .read_to_end(&mut bytes)
            .unwrap();
        Profile::decode(bytes.as_slice()).unwrap()
    }

    #[test]
    fn decoded_profile_has_types_functions_locations_and_mappings() {
        let (summary, stacks) = fixture();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("p.pb.gz");
        write_pprof(&test_dir(tmp.path()), "p.pb.gz", &summary, &stacks).unwrap();
        let p = decode(&path);
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(s(0), "");
        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|t| (s(t.r#type), s(t.unit)))
            .collect();
        assert_eq!(types, [("energy", "microjoules"), ("samples", "count")]);
        assert_eq!(s(p.default_sample_type), "energy");
        // Shared frames are one location and one function each.
        assert_eq!(p.location.len(), 5);
        assert_eq!(p.function.len(), 5);
        let total: i64 = p.sample.iter().map(|x| x.value[0]).sum();
        assert_eq!(total, 1_000_000);
        let leaf = &p.location[p.sample[0].location_id[0] as usize - 1];
        let leaf_fn = &p.function[leaf.line[0].function_id as usize - 1];
        assert_eq!(s(leaf_fn.name), "java.math.BigInteger.multiply");
        assert_eq!(s(leaf_fn.system_name), "full java.math.BigInteger.multiply");
        for loc in &p.location {
            let m = &p.mapping[loc.mapping_id as usize - 1];
            assert!(m.memory_start <= loc.address && loc.address < m.memory_limit);
        }
        let kernel = p
            .location
            .iter()
            .find(|l| s(p.function[l.line[0].function_id as usize - 1].name) == "ksys_write")
            .unwrap();
        assert_eq!(
            s(p.mapping[kernel.mapping_id as usize - 1].filename),
            "[kernel]"
        );
    }

    /// The real consumer: fails (does not skip) when `go` is missing.
    #[test]
    fn go_tool_pprof_reads_it() {
        let (summary, stacks) = fixture();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("p.pb.gz");
        write_pprof(&test_dir(tmp.path()), "p.pb.gz", &summary, &stacks).unwrap();
        let run = |flag: &str| {
            let out = Command::new("go")
                .args(["tool", "pprof", flag, path.to_str().unwrap()])
                .env("HOME", tmp.path())
                .output()
                .expect("`go` must be installed (apt-get install golang-go) for this test");
            assert!(
                out.status.success(),
                "go tool pprof {flag}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        let raw = run("-raw");
        assert!(
            raw.contains("energy/microjoules") && raw.contains("samples/count"),
            "{raw}"
        );
        assert!(
            raw.contains("900000") && raw.contains("com.acme.App.compute"),
            "{raw}"
        );
        let top = run("-top");
        let hot = top
            .lines()
            .find(|l| l.contains("java.math.BigInteger.multiply"))
            .expect(&top);
        assert!(hot.contains("90.00%"), "{top}");
    }
}
