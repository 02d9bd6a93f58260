//! Serve mode's periodic profile (`--profile-dir`): every process's energy per stack over one
//! export interval, written as one labelled pprof and one folded file that a continuous-profiling
//! backend (Pyroscope, Parca) ingests, then reset. Memory is bounded by the distinct stacks of one
//! interval, whatever the daemon's uptime.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufWriter, Write};

use super::pprof::{build_labelled, source_comment, write_profile, LabelValue, LabelledStack};
use super::OutputError;
use crate::attribution::stacks::methods::{join_frames, push_frame_name, StackRules};
use crate::attribution::stacks::paths::{all_path, PathStyle};
use crate::attribution::stacks::thread_kind::ThreadKind;
use crate::attribution::stacks::AttributedCycle;
use crate::model::Stack;
use crate::safe_write::OutDir;

#[derive(Default)]
struct IntervalProcess {
    comm: String,
    container_id: Option<String>,
    /// Seen to be a JVM in this interval (`methods::shows_jvm` or a HotSpot thread name).
    jvm: bool,
    /// Energy (µJ) and samples per distinct stack and thread kind.
    stacks: HashMap<(Stack, ThreadKind), (f64, u64)>,
}

type SortedStacks<'a> = Vec<(&'a (Stack, ThreadKind), f64, u64)>;

pub struct IntervalProfile {
    energy_source: String,
    estimated: bool,
    /// See `RunSummary::energy_detail`.
    energy_detail: String,
    host: String,
    start_epoch_ms: u64,
    duration_s: f64,
    processes: BTreeMap<u32, IntervalProcess>,
    native_frames: bool,
}

impl IntervalProfile {
    /// `native_frames`: keep every frame (`--native-frames`) instead of the Java view of JVMs.
    pub fn new(energy_source: &str, estimated: bool, host: &str, start_epoch_ms: u64, native_frames: bool) -> Self {
        Self {
            native_frames,
            energy_source: energy_source.to_owned(),
            estimated,
            energy_detail: String::new(),
            host: host.to_owned(),
            start_epoch_ms,
            duration_s: 0.0,
            processes: BTreeMap::new(),
        }
    }

    /// What the energy figures are (`EnergySource::detail`), written beside the source's name.
    pub fn with_energy_detail(mut self, detail: &str) -> Self {
        self.energy_detail = detail.to_owned();
        self
    }

    /// Adds the cycle's stack shares: the stage split each thread's energy over its stacks (a
    /// thread with energy but no sample is on `(no samples)`), so the interval's total is the
    /// sum of the threads' energy.
    pub fn on_cycle(&mut self, cycle: &AttributedCycle) {
        let report = &cycle.report;
        self.duration_s += cycle.duration_s;
        for charge in &cycle.charges {
            let process = self.processes.entry(charge.pid).or_default();
            for s in &charge.stacks {
                process.jvm = process.jvm || s.kind.is_jvm_internal() || s.shows_jvm;
                let sum = process.stacks.entry((s.stack.clone(), s.kind)).or_default();
                sum.0 += s.energy.cpu_uj;
                sum.1 += s.samples;
            }
        }
        for p in &report.processes {
            if let Some(process) = self.processes.get_mut(&p.pid) {
                if !p.comm.is_empty() {
                    process.comm.clone_from(&p.comm);
                }
                if p.container_id.is_some() {
                    process.container_id.clone_from(&p.container_id);
                }
            }
        }
        // Thread names stand in for a process that left no process row (it exited early).
        for t in &report.threads {
            if let Some(process) = self.processes.get_mut(&t.pid) {
                if process.comm.is_empty() && !t.comm.is_empty() {
                    process.comm.clone_from(&t.comm);
                }
            }
        }
    }

    pub fn duration_s(&self) -> f64 {
        self.duration_s
    }

    /// Energy of every stack of every process so far (µJ).
    pub fn energy_uj(&self) -> f64 {
        self.processes.values().flat_map(|p| p.stacks.values()).map(|(e, _)| e).sum()
    }

    /// Starts the next interval.
    pub fn reset(&mut self, start_epoch_ms: u64) {
        self.processes.clear();
        self.duration_s = 0.0;
        self.start_epoch_ms = start_epoch_ms;
    }

    /// Stacks of each process, highest energy first (ties in stack order), for stable files.
    fn sorted(&self) -> impl Iterator<Item = (u32, &IntervalProcess, SortedStacks<'_>)> {
        self.processes.iter().map(|(&pid, p)| {
            let mut stacks: SortedStacks = p.stacks.iter().map(|(s, &(e, n))| (s, e, n)).collect();
            stacks.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            (pid, p, stacks)
        })
    }

    fn rules(&self, process: &IntervalProcess) -> StackRules {
        StackRules { jvm: process.jvm, native_frames: self.native_frames }
    }

    /// gzip pprof, sample types `energy/microjoules` (default) and `samples/count`; every sample
    /// labelled `pid` (number), `comm` and, for containers, `container_id`.
    pub fn write_pprof(&self, dir: &OutDir, name: &str) -> Result<(), OutputError> {
        let processes: Vec<_> = self.sorted().collect();
        let samples = processes.iter().flat_map(|(pid, p, stacks)| {
            let rules = self.rules(p);
            stacks.iter().map(move |&((stack, kind), energy_uj, samples)| {
                let mut labels = vec![("pid", LabelValue::Num(i64::from(*pid))), ("comm", LabelValue::Str(&p.comm))];
                if let Some(c) = &p.container_id {
                    labels.push(("container_id", LabelValue::Str(c)));
                }
                LabelledStack { stack: all_path(stack, *kind, rules, PathStyle::Graph), energy_uj, samples, labels }
            })
        });
        let comments = [
            format!("joular-ebpf host {}", self.host),
            source_comment(&self.energy_source, self.estimated, &self.energy_detail),
        ];
        let profile = build_labelled(samples, &comments, self.start_epoch_ms, self.duration_s);
        write_profile(dir, name, &profile)
    }

    /// Folded stacks in whole µJ, each rooted at a `<comm>-<pid>` frame (as `stackcollapse-perf
    /// --pid` does); stacks under 0.5 µJ are left out.
    pub fn write_folded(&self, dir: &OutDir, name: &str) -> Result<(), OutputError> {
        let path = &dir.join(name);
        let file = dir.replace(name).map_err(|e| OutputError::io(path, e))?;
        let mut out = BufWriter::new(file);
        for (pid, process, stacks) in self.sorted() {
            let mut root = String::new();
            push_frame_name(&mut root, if process.comm.is_empty() { "?" } else { &process.comm });
            let root = format!("{root}-{pid}");
            let rules = self.rules(process);
            for ((stack, kind), energy_uj, _) in stacks {
                let energy_uj = energy_uj.round() as u64;
                if energy_uj == 0 {
                    continue;
                }
                let frames = all_path(stack, *kind, rules, PathStyle::Graph);
                let frames = join_frames(frames.into_iter(), false);
                let line = if frames.is_empty() {
                    format!("{root} {energy_uj}")
                } else {
                    format!("{root};{frames} {energy_uj}")
                };
                writeln!(out, "{line}").map_err(|e| OutputError::io(path, e))?;
            }
        }
        let file = out.into_inner().map_err(|e| OutputError::io(path, e.into_error()))?;
        file.commit().map_err(|e| OutputError::io(path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::stacks::methods::tests::{frame, java};
    use crate::attribution::stacks::{StackConfig, StackStage, ThreadStacks};
    use crate::model::{CycleReport, Frame, FrameKind, ProcessReport, ThreadReport, ThreadStack};
    use crate::output::pprof::Profile;
    use crate::safe_write::test_dir;
    use prost::Message;
    use std::fs::File;
    use std::io::Read;
    use std::sync::Arc;

    fn thread(pid: u32, tid: u32, energy_uj: f64) -> ThreadReport {
        ThreadReport { pid, tid, comm: format!("t{tid}"), energy_uj, ..ThreadReport::default() }
    }

    fn thread_named(pid: u32, tid: u32, comm: &str, energy_uj: f64) -> ThreadReport {
        ThreadReport { comm: comm.into(), ..thread(pid, tid, energy_uj) }
    }

    /// The JVM's worker (under HotSpot's thread start), its GC thread, and a C program.
    fn stacks() -> (Stack, Stack, Stack, Stack) {
        let entry = [
            frame("[unknown]", FrameKind::Native),
            frame("thread_native_entry(Thread*)", FrameKind::Native),
            frame("StubRoutines (1)", FrameKind::Stub),
        ];
        let run = java("java.lang.Thread.run");
        let java_stack =
            |leaf: Frame| -> Stack { Arc::from(entry.iter().cloned().chain([run.clone(), leaf]).collect::<Vec<_>>()) };
        (
            java_stack(java("com.acme.App.compute")),
            java_stack(frame("write", FrameKind::Native)),
            Arc::from(vec![
                frame("[unknown]", FrameKind::Native),
                frame("start_thread", FrameKind::Native),
                frame("G1ParTask::work", FrameKind::Native),
            ]),
            Arc::from(vec![frame("main", FrameKind::Native), frame("write", FrameKind::Native)]),
        )
    }

    /// JVM 10 (one thread 3:1 over two stacks, one thread with energy and no sample, a GC
    /// thread), a native process 20 in a container, over two cycles.
    fn fixture(native_frames: bool) -> IntervalProfile {
        let (compute, write, gc, nginx) = stacks();
        let mut p = IntervalProfile::new("model", true, "node-1", 1_700_000_000_000, native_frames);
        let mut stage = StackStage::new(StackConfig::default());
        for cycle in 0..2u64 {
            let report = CycleReport {
                start_ns: cycle * 1_000_000_000,
                end_ns: (cycle + 1) * 1_000_000_000,
                threads: vec![
                    thread(10, 11, 400.0),
                    thread(10, 12, 50.0),
                    thread_named(10, 13, "GC Thread#0", 30.0),
                    thread(20, 20, 100.0),
                ],
                processes: vec![
                    ProcessReport { pid: 10, comm: "java".into(), ..ProcessReport::default() },
                    ProcessReport {
                        pid: 20,
                        comm: "nginx;x".into(),
                        container_id: Some("abc123".into()),
                        ..ProcessReport::default()
                    },
                ],
                ..CycleReport::default()
            };
            let ts = |stack: &Stack, samples| ThreadStack { stack: stack.clone(), samples };
            let thread_stacks: Vec<ThreadStacks> = vec![
                (10, 11, vec![ts(&compute, 3), ts(&write, 1)]),
                (10, 13, vec![ts(&gc, 2)]),
                (20, 20, vec![ts(&nginx, 5)]),
            ];
            p.on_cycle(&stage.on_cycle(report, &thread_stacks));
        }
        p
    }

    #[test]
    fn interval_energy_is_the_threads_energy_split_by_samples() {
        let p = fixture(false);
        assert_eq!(p.duration_s(), 2.0);
        // Every thread's energy, including the sampleless one, lands somewhere.
        assert!((p.energy_uj() - 2.0 * 580.0).abs() < 1e-9);
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("x.folded");
        p.write_folded(&test_dir(tmp.path()), "x.folded").unwrap();
        // JVM stacks start at their first Java frame or their thread's bucket.
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "java-10;java.lang.Thread.run;com.acme.App.compute 600\n\
             java-10;java.lang.Thread.run;write 200\n\
             java-10;(no samples) 100\n\
             java-10;[GC];G1ParTask::work 60\n\
             nginx:x-20;main;write 200\n"
        );
        fixture(true).write_folded(&test_dir(tmp.path()), "x.folded").unwrap();
        let everything = std::fs::read_to_string(&path).unwrap();
        assert!(
            everything.starts_with("java-10;[unknown];thread_native_entry(Thread*);StubRoutines (1);java.lang.Thread.run;com.acme.App.compute 600\n"),
            "{everything}"
        );
        assert!(everything.contains("java-10;[unknown];start_thread;G1ParTask::work 60\n"), "{everything}");
    }

    #[test]
    fn pprof_samples_carry_process_labels() {
        let p = fixture(false);
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("x.pprof.gz");
        p.write_pprof(&test_dir(tmp.path()), "x.pprof.gz").unwrap();
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(File::open(&path).unwrap()).read_to_end(&mut bytes).unwrap();
        let profile = Profile::decode(bytes.as_slice()).unwrap();
        let s = |i: i64| profile.string_table[i as usize].as_str();
        let label =
            |sample: &crate::output::pprof::Sample, key: &str| sample.label.iter().find(|l| s(l.key) == key).cloned();
        let mut per_pid: BTreeMap<i64, i64> = BTreeMap::new();
        for sample in &profile.sample {
            *per_pid.entry(label(sample, "pid").unwrap().num).or_default() += sample.value[0];
        }
        assert_eq!(per_pid, BTreeMap::from([(10, 960), (20, 200)]));
        let nginx = profile.sample.iter().find(|x| label(x, "pid").unwrap().num == 20).unwrap();
        assert_eq!(s(label(nginx, "container_id").unwrap().str), "abc123");
        assert_eq!(s(label(nginx, "comm").unwrap().str), "nginx;x");
        assert_eq!(profile.duration_nanos, 2_000_000_000);
        assert!(profile.comment.iter().any(|&c| s(c) == "energy source: model (estimated)"));
    }

    /// The real consumer: fails (does not skip) when `go` is missing.
    #[test]
    fn go_tool_pprof_reads_the_labels() {
        let p = fixture(false);
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("x.pprof.gz");
        p.write_pprof(&test_dir(tmp.path()), "x.pprof.gz").unwrap();
        let out = std::process::Command::new("go")
            .args(["tool", "pprof", "-tags", path.to_str().unwrap()])
            .env("HOME", tmp.path())
            .output()
            .expect("`go` must be installed (apt-get install golang-go) for this test");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let tags = String::from_utf8(out.stdout).unwrap();
        for want in ["comm", "java", "nginx;x", "container_id", "abc123", "pid"] {
            assert!(tags.contains(want), "{want} missing from:\n{tags}");
        }
    }

    #[test]
    fn reset_starts_an_empty_interval() {
        let mut p = fixture(false);
        p.reset(1_700_000_002_000);
        assert_eq!(p.energy_uj(), 0.0);
        assert_eq!(p.duration_s(), 0.0);
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("x.folded");
        p.write_folded(&test_dir(tmp.path()), "x.folded").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
    }
}
