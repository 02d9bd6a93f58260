//! pprof (`profile.proto`, gzip) weighted by energy: sample types `energy/microjoules` (the
//! default) and `samples/count`, for `go tool pprof` and any pprof viewer.
//!
//! Frames are already symbolized, so each distinct frame (name and source line) is one location
//! with one line; addresses are synthetic but unique inside one mapping per code kind (`[jit]`,
//! `[native]`, `[kernel]`), which keeps pprof's location/mapping invariants. Java frames name
//! their source file as javac lays sources out (`com/acme/Foo.java` for `com.acme.Foo$Inner`),
//! so `go tool pprof -list` and Pyroscope put energy on source lines.

use std::collections::HashMap;
use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

pub use super::pprof_proto::*;
use super::OutputError;
use crate::attribution::stacks::aggregate::StackTotal;
use crate::attribution::stacks::methods::StackRules;
use crate::attribution::stacks::paths::{all_path, PathStyle};
use crate::attribution::stacks::profile::RunSummary;
use crate::model::{Frame, FrameKind};
use crate::safe_write::OutDir;

/// A sample's label value before interning.
#[derive(Debug, Clone, Copy)]
pub enum LabelValue<'a> {
    Str(&'a str),
    Num(i64),
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
    owned: HashMap<String, i64>,
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

    /// A string built here (not borrowed from a frame), interned by value.
    fn owned_string(&mut self, s: String) -> i64 {
        if let Some(&i) = self.owned.get(&s) {
            return i;
        }
        let i = self.profile.string_table.len() as i64;
        self.profile.string_table.push(s.clone());
        self.owned.insert(s, i);
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
                let filename = match java_source_file(frame) {
                    Some(file) => self.owned_string(file),
                    None => 0,
                };
                self.profile.function.push(Function { id, name, system_name, filename });
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
            line: vec![Line { function_id, line: frame.line.map_or(0, i64::from) }],
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
        b.profile.sample_type =
            vec![ValueType { r#type: energy, unit: microjoules }, ValueType { r#type: samples, unit: count }];
        b.profile.default_sample_type = energy;
        b
    }

    /// One sample (frames root first); skipped when it carries neither energy nor samples.
    fn sample(&mut self, stack: &[&'a Frame], energy_uj: f64, samples: u64, labels: &[(&'a str, LabelValue<'a>)]) {
        let energy_uj = energy_uj.round() as i64;
        if energy_uj == 0 && samples == 0 {
            return;
        }
        let location_id = stack.iter().rev().map(|&f| self.location(f)).collect();
        let label = labels
            .iter()
            .map(|&(key, value)| {
                let key = self.string(key);
                match value {
                    LabelValue::Str(v) => Label { key, str: self.string(v), num: 0 },
                    LabelValue::Num(num) => Label { key, str: 0, num },
                }
            })
            .collect();
        self.profile.sample.push(Sample { location_id, value: vec![energy_uj, samples as i64], label });
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

/// `energy source: powercap`, or `... (estimated)` for the model, then what its figures are
/// (the model, its coefficients and their source) when the source says.
pub fn source_comment(energy_source: &str, estimated: bool, detail: &str) -> String {
    let mut comment = format!("energy source: {energy_source}");
    if estimated {
        comment.push_str(" (estimated)");
    }
    if !detail.is_empty() {
        comment.push_str(": ");
        comment.push_str(detail);
    }
    comment
}

/// `com/acme/Foo.java` for a Java frame `com.acme.Foo$Inner.run`: where javac's layout puts the
/// source of a top-level class. A guess (a file may hold other top-level classes), but the one
/// every IDE and `-source_path` lookup makes.
fn java_source_file(frame: &Frame) -> Option<String> {
    if !frame.kind.is_java() {
        return None;
    }
    let (class, _method) = frame.short.rsplit_once('.')?;
    let outer = class.split('$').next().filter(|c| !c.is_empty())?;
    Some(format!("{}.java", outer.replace('.', "/")))
}

/// One sample per stack, with the frames the graphs show (`paths::all_path`).
pub fn build(summary: &RunSummary, stacks: &[StackTotal], rules: StackRules) -> Profile {
    let mut b = Builder::with_sample_types();
    for total in stacks {
        let frames = all_path(&total.stack, total.thread, rules, PathStyle::Graph);
        b.sample(&frames, total.energy_uj, total.samples, &[]);
    }
    let comments = [
        format!("joular-ebpf pid {} ({})", summary.pid, summary.comm),
        source_comment(&summary.energy_source, summary.estimated, &summary.energy_detail),
    ];
    b.finish(&comments, summary.start_epoch_ms, summary.duration_s)
}

/// One labelled sample of a multi-process profile.
pub struct LabelledStack<'a> {
    /// Root first.
    pub stack: Vec<&'a Frame>,
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
        b.sample(&s.stack, s.energy_uj, s.samples, &s.labels);
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
    rules: StackRules,
) -> Result<(), OutputError> {
    write_profile(dir, name, &build(summary, stacks, rules))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::stacks::methods::tests::{frame, java};
    use crate::attribution::stacks::thread_kind::ThreadKind;
    use crate::model::Stack;
    use crate::safe_write::test_dir;
    use std::fs::File;
    use std::io::Read;
    use std::path::Path;
    use std::process::Command;
    use std::sync::Arc;

    const JVM: StackRules = StackRules { jvm: true, native_frames: false };

    fn at(frame: Frame, line: u32) -> Frame {
        Frame { line: Some(line), ..frame }
    }

    /// A JVM: `App.compute` (two hot lines, one calling an inlined JDK method, one a
    /// syscall) under HotSpot's thread start, and a GC thread.
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
        let entry = [
            frame("[unknown]", FrameKind::Native),
            frame("thread_native_entry(Thread*)", FrameKind::Native),
            frame("JavaCalls::call_helper(...)", FrameKind::Native),
            frame("StubRoutines (1)", FrameKind::Stub),
        ];
        let run = at(frame("java.lang.Thread.run", FrameKind::JavaInterpreted), 840);
        let compute = java("com.acme.App.compute");
        let with = |tail: Vec<Frame>| -> Stack {
            Arc::from(entry.iter().cloned().chain([run.clone()]).chain(tail).collect::<Vec<_>>())
        };
        let stacks = vec![
            StackTotal {
                carbon_g: 0.0,
                stack: with(vec![
                    at(compute.clone(), 12),
                    at(frame("java.math.BigInteger.multiply", FrameKind::JavaInlined), 1500),
                ]),
                thread: ThreadKind::Application,
                energy_uj: 900_000.0,
                samples: 90,
            },
            StackTotal {
                carbon_g: 0.0,
                stack: with(vec![
                    at(compute, 17),
                    frame("write", FrameKind::Native),
                    frame("ksys_write", FrameKind::Kernel),
                ]),
                thread: ThreadKind::Application,
                energy_uj: 100_000.0,
                samples: 10,
            },
            StackTotal {
                carbon_g: 0.0,
                stack: Arc::from(vec![
                    entry[0].clone(),
                    entry[1].clone(),
                    frame("G1ParTask::work(unsigned int)", FrameKind::Native),
                ]),
                thread: ThreadKind::Gc,
                energy_uj: 50_000.0,
                samples: 5,
            },
        ];
        (summary, stacks)
    }

    fn decode(path: &Path) -> Profile {
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(File::open(path).unwrap()).read_to_end(&mut bytes).unwrap();
        Profile::decode(bytes.as_slice()).unwrap()
    }

    #[test]
    fn decoded_profile_has_types_functions_locations_and_mappings() {
        let (summary, stacks) = fixture();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("p.pb.gz");
        write_pprof(&test_dir(tmp.path()), "p.pb.gz", &summary, &stacks, JVM).unwrap();
        let p = decode(&path);
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(s(0), "");
        let types: Vec<(&str, &str)> = p.sample_type.iter().map(|t| (s(t.r#type), s(t.unit))).collect();
        assert_eq!(types, [("energy", "microjoules"), ("samples", "count")]);
        assert_eq!(s(p.default_sample_type), "energy");
        let function = |loc: &Location| &p.function[loc.line[0].function_id as usize - 1];
        let mut names: Vec<&str> = p.function.iter().map(|f| s(f.name)).collect();
        names.sort_unstable();
        // HotSpot's entry into Java is gone; the GC thread is rooted at its bucket.
        assert_eq!(
            names,
            [
                "G1ParTask::work(unsigned int)",
                "[GC]",
                "com.acme.App.compute",
                "java.lang.Thread.run",
                "java.math.BigInteger.multiply",
                "ksys_write",
                "write",
            ]
        );
        // One location per (frame, line): compute at lines 12 and 17 share a function.
        assert_eq!(p.location.len(), 8);
        let total: i64 = p.sample.iter().map(|x| x.value[0]).sum();
        assert_eq!(total, 1_050_000);
        let leaf = &p.location[p.sample[0].location_id[0] as usize - 1];
        assert_eq!(s(function(leaf).name), "java.math.BigInteger.multiply");
        assert_eq!(leaf.line[0].line, 1500);
        assert_eq!(s(function(leaf).filename), "java/math/BigInteger.java");
        let root = &p.location[*p.sample[0].location_id.last().unwrap() as usize - 1];
        assert_eq!(s(function(root).name), "java.lang.Thread.run");
        let gc_root = &p.location[*p.sample[2].location_id.last().unwrap() as usize - 1];
        assert_eq!(s(function(gc_root).name), "[GC]");
        assert_eq!(function(gc_root).filename, 0, "no file for native frames");
        for loc in &p.location {
            let m = &p.mapping[loc.mapping_id as usize - 1];
            assert!(m.memory_start <= loc.address && loc.address < m.memory_limit);
        }
        let kernel = p.location.iter().find(|l| s(function(l).name) == "ksys_write").unwrap();
        assert_eq!(s(p.mapping[kernel.mapping_id as usize - 1].filename), "[kernel]");
        // --native-frames keeps HotSpot's entry frames.
        let everything = build(&summary, &stacks, StackRules { native_frames: true, ..JVM });
        let names: Vec<&str> =
            everything.function.iter().map(|f| everything.string_table[f.name as usize].as_str()).collect();
        assert!(names.contains(&"thread_native_entry(Thread*)") && !names.contains(&"[GC]"), "{names:?}");
    }

    #[test]
    fn java_source_files_follow_the_class() {
        let file = |short: &str, kind| java_source_file(&frame(short, kind));
        assert_eq!(file("com.acme.Foo$Inner.run", FrameKind::JavaJit).as_deref(), Some("com/acme/Foo.java"));
        assert_eq!(file("Main.lambda$main$0", FrameKind::JavaInterpreted).as_deref(), Some("Main.java"));
        assert_eq!(file("write", FrameKind::Native), None);
        assert_eq!(file("noclass", FrameKind::JavaJit), None);
    }

    fn go_pprof(args: &[&str], path: &Path, home: &Path) -> String {
        let out = Command::new("go")
            .arg("tool")
            .arg("pprof")
            .args(args)
            .arg(path)
            .env("HOME", home)
            .output()
            .expect("`go` must be installed (apt-get install golang-go) for this test");
        assert!(out.status.success(), "go tool pprof {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// The real consumer: fails (does not skip) when `go` is missing.
    #[test]
    fn go_tool_pprof_reads_it() {
        let (summary, stacks) = fixture();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("p.pb.gz");
        write_pprof(&test_dir(tmp.path()), "p.pb.gz", &summary, &stacks, JVM).unwrap();
        let raw = go_pprof(&["-raw"], &path, tmp.path());
        assert!(raw.contains("energy/microjoules") && raw.contains("samples/count"), "{raw}");
        assert!(raw.contains("900000") && raw.contains("com.acme.App.compute"), "{raw}");
        let top = go_pprof(&["-top"], &path, tmp.path());
        let hot = top.lines().find(|l| l.contains("java.math.BigInteger.multiply")).expect(&top);
        assert!(hot.contains("85.71%"), "{top}");
    }

    /// `go tool pprof -list` puts each hot loop's energy on its own source line.
    #[test]
    fn go_tool_pprof_lists_energy_by_source_line() {
        let (summary, stacks) = fixture();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("p.pb.gz");
        write_pprof(&test_dir(tmp.path()), "p.pb.gz", &summary, &stacks, JVM).unwrap();
        let sources = tmp.path().join("src");
        std::fs::create_dir_all(sources.join("com/acme")).unwrap();
        let mut app = String::new();
        for n in 1..=20 {
            app.push_str(&match n {
                12 => "        for (int i = 0; i < n; i++) big = big.multiply(x); // HOT-A\n".to_owned(),
                17 => "        for (int i = 0; i < n; i++) out.write(buf); // HOT-B\n".to_owned(),
                n => format!("        // line {n}\n"),
            });
        }
        std::fs::write(sources.join("com/acme/App.java"), app).unwrap();
        let listing =
            go_pprof(&["-list", "com.acme.App.compute", "-source_path", sources.to_str().unwrap()], &path, tmp.path());
        let line = |marker: &str| {
            listing
                .lines()
                .find(|l| l.contains(marker))
                .unwrap_or_else(|| panic!("{marker} not listed:\n{listing}"))
                .to_owned()
        };
        // Cumulative energy of each line (µJ): 900,000 under line 12, 100,000 under line 17.
        let hot_a = line("HOT-A");
        let hot_b = line("HOT-B");
        assert!(hot_a.contains("900000") && hot_a.trim_start().contains("12:"), "{listing}");
        assert!(hot_b.contains("100000") && hot_b.trim_start().contains("17:"), "{listing}");
        assert!(listing.contains("com/acme/App.java"), "{listing}");
    }
}
