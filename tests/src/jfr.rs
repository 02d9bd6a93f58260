//! JFR's execution samples (`jdk.ExecutionSample`: threads running Java code) of a recording,
//! and from JDK 25 its CPU-time samples (`jdk.CPUTimeSample`), read with the `jfr` tool of the
//! JDK that recorded it.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// One execution sample: its methods leaf first (`java.lang.String.hashCode`), and whether JFR
/// cut the stack at its depth limit.
#[derive(Debug, Clone, PartialEq)]
pub struct JfrSample {
    pub methods: Vec<String>,
    pub truncated: bool,
}

/// A JDK tool (`jcmd`, `jfr`) beside the `java` launcher `java` (`jfr` for a bare `java`).
pub fn jdk_tool(java: &str, tool: &str) -> String {
    match Path::new(java).parent() {
        Some(bin) if !bin.as_os_str().is_empty() => bin.join(tool).display().to_string(),
        _ => tool.to_owned(),
    }
}

/// A JFR settings file (`.jfc`) that takes execution samples every `period_ms`, and with
/// `cpu_time` (JDK 25+) CPU-time samples too, every `period_ms` of each thread's CPU time: a
/// reference that follows CPU time as ours does (execution samples follow time in Java code,
/// on a CPU or waiting for one).
pub fn sampling_settings(period_ms: u32, cpu_time: bool) -> String {
    let cpu_time_event = match cpu_time {
        true => format!(
            r#"  <event name="jdk.CPUTimeSample">
    <setting name="enabled">true</setting>
    <setting name="throttle">{period_ms} ms</setting>
  </event>
"#
        ),
        false => String::new(),
    };
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="samples every {period_ms} ms">
  <event name="jdk.ExecutionSample">
    <setting name="enabled">true</setting>
    <setting name="period">{period_ms} ms</setting>
  </event>
{cpu_time_event}</configuration>
"#
    )
}

/// The execution samples of `recording`, in the order `jfr print` gives them.
pub fn execution_samples(jfr: &str, recording: &Path) -> Vec<JfrSample> {
    let out = Command::new(jfr)
        .args(["print", "--stack-depth", "2048", "--events", "jdk.ExecutionSample"])
        .arg(recording)
        .output()
        .unwrap_or_else(|e| panic!("run {jfr}: {e}"));
    assert!(out.status.success(), "{jfr} print {}: {}", recording.display(), String::from_utf8_lossy(&out.stderr));
    parse_execution_samples(&String::from_utf8_lossy(&out.stdout))
}

/// `jfr print`'s text: each event's `stackTrace = [` is followed by one frame a line
/// (`java.lang.String.hashCode() line: 2345`), `...` when the stack was cut, then `]`.
pub fn parse_execution_samples(text: &str) -> Vec<JfrSample> {
    let mut samples = Vec::new();
    let mut lines = text.lines().map(str::trim);
    while let Some(line) = lines.next() {
        if line != "stackTrace = [" {
            continue;
        }
        let mut sample = JfrSample { methods: Vec::new(), truncated: false };
        for frame in lines.by_ref() {
            match frame {
                "]" => break,
                "..." => sample.truncated = true,
                _ => sample.methods.push(frame.split_once('(').map_or(frame, |(m, _)| m).trim().to_owned()),
            }
        }
        samples.push(sample);
    }
    samples
}

/// One CPU-time sample (JDK 25+, `jdk.CPUTimeSample`): taken when its thread has used a period
/// of CPU time, whatever it runs, so its samples follow CPU time as ours do (execution samples
/// follow the time a thread spends in Java code, on a CPU or waiting for one).
#[derive(Debug, Clone, PartialEq)]
pub struct CpuTimeSample {
    pub thread: String,
    /// The leaf frame's method (`java.lang.String.hashCode`) and JFR's frame type
    /// (`Interpreted`, `JIT compiled`, `Inlined`, `Native`); `None` without a stack.
    pub leaf: Option<(String, String)>,
    /// JFR could not take the stack where the thread was, only at its next safepoint.
    pub biased: bool,
}

impl CpuTimeSample {
    /// A sample whose thread was running Java code, with the stack where it was.
    pub fn in_java_unbiased(&self) -> Option<&str> {
        let (method, kind) = self.leaf.as_ref()?;
        let java = ["Interpreted", "JIT compiled", "Inlined"].contains(&kind.as_str());
        (java && !self.biased).then_some(method.as_str())
    }
}

/// One execution sample's thread, time and leaf method, from `jfr print --json` (its text gives
/// times to the millisecond only): what [`crate::jfr_signals`] matches to the signal behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedSample {
    pub os_thread_id: u64,
    pub thread: String,
    /// `startTime`: when the signalled thread was suspended, in ns since the Unix epoch.
    pub at_unix_ns: i128,
    /// `java.lang.String.hashCode`.
    pub leaf: String,
}

/// The execution samples of `recording` with their threads and times, in `jfr print`'s order.
pub fn timed_execution_samples(jfr: &str, recording: &Path) -> Vec<TimedSample> {
    parse_timed_execution_samples(&leaf_events_json(jfr, recording, "jdk.ExecutionSample"))
}

/// `jfr print --json` of `recording`'s `event`s, with their leaf frames only.
fn leaf_events_json(jfr: &str, recording: &Path, event: &str) -> Value {
    let out = Command::new(jfr)
        .args(["print", "--json", "--stack-depth", "1", "--events", event])
        .arg(recording)
        .output()
        .unwrap_or_else(|e| panic!("run {jfr}: {e}"));
    assert!(out.status.success(), "{jfr} print {}: {}", recording.display(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("jfr print --json gives JSON")
}

/// `jfr print --json`'s execution samples; one without a thread, a time or a stack is left out.
pub fn parse_timed_execution_samples(json: &Value) -> Vec<TimedSample> {
    events(json)
        .iter()
        .filter_map(|e| {
            let v = &e["values"];
            let thread = &v["sampledThread"];
            let at: jiff::Timestamp = v["startTime"].as_str()?.parse().ok()?;
            Some(TimedSample {
                os_thread_id: thread["osThreadId"].as_u64()?,
                thread: thread["javaName"].as_str().or(thread["osName"].as_str()).unwrap_or("").to_owned(),
                at_unix_ns: at.as_nanosecond(),
                leaf: leaf_method(v["stackTrace"]["frames"].get(0)?),
            })
        })
        .collect()
}

/// `jfr print --json`'s events.
fn events(json: &Value) -> &[Value] {
    json["recording"]["events"].as_array().map(Vec::as_slice).unwrap_or_default()
}

/// A `jfr print --json` frame's method: `java.lang.String.hashCode`.
fn leaf_method(frame: &Value) -> String {
    let class = frame["method"]["type"]["name"].as_str().unwrap_or("?").replace('/', ".");
    format!("{class}.{}", frame["method"]["name"].as_str().unwrap_or("?"))
}

/// The CPU-time samples of `recording` (none on JDKs without the event).
pub fn cpu_time_samples(jfr: &str, recording: &Path) -> Vec<CpuTimeSample> {
    parse_cpu_time_samples(&leaf_events_json(jfr, recording, "jdk.CPUTimeSample"))
}

/// `jfr print --json`'s CPU-time events.
pub fn parse_cpu_time_samples(json: &Value) -> Vec<CpuTimeSample> {
    events(json)
        .iter()
        .map(|e| {
            let v = &e["values"];
            let leaf = v["stackTrace"]["frames"]
                .get(0)
                .map(|f| (leaf_method(f), f["type"].as_str().unwrap_or("?").to_owned()));
            CpuTimeSample {
                thread: v["eventThread"]["osName"].as_str().unwrap_or("").to_owned(),
                leaf,
                biased: v["biased"].as_bool().unwrap_or(true),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each event of a settings file with its settings, as JFR reads them.
    fn events_of(settings: &str) -> Vec<(String, Vec<(String, String)>)> {
        let doc = roxmltree::Document::parse(settings).expect("the settings are XML");
        doc.root_element()
            .children()
            .filter(|n| n.has_tag_name("event"))
            .map(|e| {
                let values = e
                    .children()
                    .filter(|n| n.has_tag_name("setting"))
                    .map(|n| (n.attribute("name").unwrap().to_owned(), n.text().unwrap().to_owned()))
                    .collect();
                (e.attribute("name").unwrap().to_owned(), values)
            })
            .collect()
    }

    #[test]
    fn sampling_settings_name_the_period_and_cpu_time_samples_only_when_asked() {
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        let execution = ("jdk.ExecutionSample".to_owned(), vec![pair("enabled", "true"), pair("period", "1 ms")]);
        assert_eq!(events_of(&sampling_settings(1, false)), std::slice::from_ref(&execution));
        let cpu_time = ("jdk.CPUTimeSample".to_owned(), vec![pair("enabled", "true"), pair("throttle", "1 ms")]);
        assert_eq!(events_of(&sampling_settings(1, true)), [execution, cpu_time]);
        assert!(sampling_settings(2, true).contains(r#"<setting name="throttle">2 ms</setting>"#));
    }

    #[test]
    fn frames_are_read_leaf_first_and_a_cut_is_seen() {
        let text = "jdk.ExecutionSample {\n  startTime = 12:00:00.000\n  stackTrace = [\n    \
                    java.lang.String.hashCode() line: 2345\n    Foo.bar(int) line: 3\n    ...\n  ]\n}\n\
                    jdk.ExecutionSample {\n  stackTrace = [\n    Foo.main(String[]) line: 9\n  ]\n}\n";
        let samples = parse_execution_samples(text);
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].methods, ["java.lang.String.hashCode", "Foo.bar"]);
        assert!(samples[0].truncated);
        assert_eq!(samples[1], JfrSample { methods: vec!["Foo.main".into()], truncated: false });
    }

    #[test]
    fn timed_samples_keep_their_thread_and_nanosecond_time() {
        let frame = serde_json::json!({"method": {"type": {"name": "java/lang/String"}, "name": "hashCode"}, "type": "JIT compiled"});
        let event = |time: &str, tid: u64, frames: Vec<Value>| {
            serde_json::json!({"type": "jdk.ExecutionSample", "values": {"startTime": time,
                "sampledThread": {"osName": "os-name", "javaName": "qtp-26", "osThreadId": tid},
                "stackTrace": {"truncated": false, "frames": frames}}})
        };
        let json = serde_json::json!({"recording": {"events": [
            event("2026-12-02T05:16:14.263951530Z", 14917, vec![frame.clone()]),
            event("not a time", 14917, vec![frame.clone()]),
            event("1970-01-01T00:00:01.000000002Z", 3, vec![]),
            event("1970-01-01T00:00:01.000000002Z", 3, vec![frame]),
        ]}});
        let samples = parse_timed_execution_samples(&json);
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].os_thread_id, 14917);
        assert_eq!(samples[0].thread, "qtp-26");
        assert_eq!(samples[0].leaf, "java.lang.String.hashCode");
        // 2026-12-02 is day 20,789 of the epoch.
        assert_eq!(samples[0].at_unix_ns, (20_789 * 86_400 + 5 * 3600 + 16 * 60 + 14) * 1_000_000_000 + 263_951_530);
        assert_eq!(samples[1].at_unix_ns, 1_000_000_002);
    }

    #[test]
    fn cpu_time_samples_keep_their_leaf_type_and_bias() {
        let frame = |class: &str, name: &str, kind: &str| serde_json::json!({"method": {"type": {"name": class}, "name": name}, "type": kind});
        let event = |biased: bool, frames: Vec<Value>| {
            serde_json::json!({"type": "jdk.CPUTimeSample", "values": {
                "biased": biased, "eventThread": {"osName": "qtp-1"}, "stackTrace": {"frames": frames}}})
        };
        let json = serde_json::json!({"recording": {"events": [
            event(false, vec![frame("java/lang/String", "hashCode", "Inlined")]),
            event(true, vec![frame("java/lang/String", "hashCode", "JIT compiled")]),
            event(false, vec![frame("sun/nio/ch/IOUtil", "write0", "Native")]),
            event(false, vec![]),
        ]}});
        let samples = parse_cpu_time_samples(&json);
        let leaves: Vec<Option<&str>> = samples.iter().map(CpuTimeSample::in_java_unbiased).collect();
        assert_eq!(leaves, [Some("java.lang.String.hashCode"), None, None, None]);
        assert_eq!(samples[0].thread, "qtp-1");
    }
}
