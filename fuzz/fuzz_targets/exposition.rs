//! Names a process chose (comm, exe path, cgroup path, thread and method names) through the
//! `/metrics` exposition. Input: names separated by NUL (comm, exe, cgroup, thread comm, then
//! methods). Every line must follow the text format 0.0.4 grammar, strictly: a `# HELP`/`# TYPE`
//! header, or `name{label="value",...} value` whose label values use only the format's escapes
//! and hold no control character.
#![no_main]

use std::collections::HashSet;

use joular_user::attribution::stacks::AttributedCycle;
use joular_user::fleet::{MetricsRegistry, ProcessLabels, ProcessTable, RegistryConfig};
use joular_user::model::{CycleReport, MethodReport, ProcessReport, SocketReport, ThreadReport};
use libfuzzer_sys::fuzz_target;

const PID: u32 = 4242;

struct OneProcess(ProcessLabels);

impl ProcessTable for OneProcess {
    fn labels(&self, pid: u32) -> Option<ProcessLabels> {
        (pid == PID).then(|| self.0.clone())
    }

    fn start_ticks(&self, pid: u32) -> Option<u64> {
        (pid == PID).then_some(self.0.start_ticks)
    }
}

fn is_name(name: &str, colons: bool) -> bool {
    let mut chars = name.chars();
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || (colons && c == ':');
    chars.next().is_some_and(|c| !c.is_ascii_digit() && ok(c)) && chars.all(ok)
}

/// `label="value",...}` up to the closing brace; returns what follows it.
fn labels<'a>(mut rest: &'a str, line: &str) -> &'a str {
    loop {
        let (name, after) = rest.split_once("=\"").unwrap_or_else(|| panic!("no label value: {line:?}"));
        assert!(is_name(name, false), "label name {name:?}: {line:?}");
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\' | '"' | 'n')) => {}
                    other => panic!("escape \\{other:?} is not the format's: {line:?}"),
                },
                Some((at, '"')) => break at,
                Some((_, c)) => assert!(!c.is_control(), "control character {c:?} in a label value: {line:?}"),
                None => panic!("unterminated label value: {line:?}"),
            }
        };
        rest = &after[end + 1..];
        match rest.strip_prefix(',') {
            Some(next) => rest = next,
            None => return rest.strip_prefix('}').unwrap_or_else(|| panic!("no closing brace: {line:?}")),
        }
    }
}

fn check(text: &str) {
    let mut typed = HashSet::new();
    for line in text.lines() {
        if let Some(header) = line.strip_prefix("# ") {
            let (kind, rest) = header.split_once(' ').unwrap_or_else(|| panic!("header {line:?}"));
            let (name, what) = rest.split_once(' ').unwrap_or_else(|| panic!("header {line:?}"));
            assert!(is_name(name, true), "family name {name:?}");
            match kind {
                "HELP" => assert!(!what.chars().any(char::is_control), "help {line:?}"),
                "TYPE" => {
                    assert!(matches!(what, "counter" | "gauge"), "type {line:?}");
                    assert!(typed.insert(name.to_owned()), "family {name} typed twice");
                }
                _ => panic!("header {line:?}"),
            }
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("sample {line:?}"));
        let name = &line[..name_end];
        assert!(is_name(name, true) && typed.contains(name), "sample of an undeclared family: {line:?}");
        let rest = &line[name_end..];
        let rest = match rest.strip_prefix('{') {
            Some(inner) => labels(inner, line),
            None => rest,
        };
        let value = rest.strip_prefix(' ').unwrap_or_else(|| panic!("no value: {line:?}"));
        assert!(matches!(value, "+Inf" | "-Inf" | "NaN") || value.parse::<f64>().is_ok(), "value {value:?}: {line:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let mut names = data.split(|&b| b == 0).map(|n| String::from_utf8_lossy(n).into_owned());
    let mut next = || names.next().unwrap_or_default();
    let (comm, exe, cgroup, thread) = (next(), next(), next(), next());
    let methods: Vec<String> = std::iter::from_fn(|| Some(next())).take(8).filter(|m| !m.is_empty()).collect();
    let table = OneProcess(ProcessLabels {
        pid: PID,
        comm: comm.clone(),
        exe: Some(exe.clone()),
        cgroup: Some(cgroup.clone()),
        container_id: None,
        start_ticks: 7,
    });
    let mut registry = MetricsRegistry::new(RegistryConfig::default());
    for n in 1..=2u64 {
        let report = CycleReport {
            cycle: n,
            start_ns: (n - 1) * 1_000_000_000,
            end_ns: n * 1_000_000_000,
            sockets: vec![SocketReport {
                socket: 0,
                energy_uj: 2e6,
                source: "model".into(),
                unattributed_uj: 1e6,
                power_w: 2.0,
                ..SocketReport::default()
            }],
            processes: vec![ProcessReport {
                pid: PID,
                comm: comm.clone(),
                energy_uj: 1e6,
                power_w: 1.0,
                on_cpu_ns: 1,
                exe: Some(exe.clone()),
                cgroup: Some(cgroup.clone()),
                ..ProcessReport::default()
            }],
            threads: vec![ThreadReport {
                pid: PID,
                tid: PID,
                comm: thread.clone(),
                on_cpu_ns: 1,
                samples: 1,
                energy_uj: 1e6,
                power_w: 1.0,
                ..ThreadReport::default()
            }],
            methods: methods
                .iter()
                .map(|m| MethodReport { pid: PID, tid: PID, method: m.clone(), energy_uj: 1e5, samples: 1 })
                .collect(),
            ..CycleReport::default()
        };
        registry.on_cycle(&AttributedCycle::of_report(report), &table);
    }
    check(&registry.render());
});
