//! JFR's execution samples (`jdk.ExecutionSample`: threads running Java code) of a recording,
//! read with the `jfr` tool of the JDK that recorded it.

use std::path::Path;
use std::process::Command;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
