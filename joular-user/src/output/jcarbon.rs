//! `jcarbon.json`: a process's run as jcarbon's signals, `{"SignalClass": [{"start", "end",
//! "data": [{"id", "value"}]}]}`, for tools that read jcarbon's reports. Instants are
//! `{"secs", "nanos"}` since the epoch, as jcarbon's timestamps.
//!
//! - `ProcessEnergy`: the process's joules over the run (`id` its pid): `summary.json`'s
//!   `energy_uj`.
//! - `TaskEnergy`: each thread's joules over the run (`id` its tid): `summary.json`'s
//!   `threads[].energy_uj`.
//! - `TaskActivity`: each thread's on-CPU time over the run's length, as a fraction of one
//!   CPU (jcarbon's task jiffies over its CPU's jiffies; here from the scheduler's ns).
//! - `CpuFrequency`: each CPU's frequency in kHz per cycle (`id` the CPU), from the run's
//!   `frequencies.csv`; an empty list where the machine exposes none.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::attribution::stacks::profile::ProcessProfile;
use crate::calmness::FrequencyCycle;

pub const JCARBON_FILE: &str = "jcarbon.json";

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Timestamp {
    pub secs: u64,
    pub nanos: u32,
}

impl Timestamp {
    fn from_epoch_ms(ms: u64) -> Self {
        Self { secs: ms / 1_000, nanos: (ms % 1_000) as u32 * 1_000_000 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Datum {
    pub id: u64,
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    pub start: Timestamp,
    pub end: Timestamp,
    pub data: Vec<Datum>,
}

/// The signals of one process, by class name.
pub fn jcarbon_signals(
    profile: &ProcessProfile,
    frequencies: &[FrequencyCycle],
) -> BTreeMap<&'static str, Vec<Interval>> {
    let s = &profile.summary;
    let run = |data: Vec<Datum>| Interval {
        start: Timestamp::from_epoch_ms(s.start_epoch_ms),
        end: Timestamp::from_epoch_ms(s.end_epoch_ms.max(s.start_epoch_ms)),
        data,
    };
    let duration_ns = s.duration_s * 1e9;
    let mut signals = BTreeMap::new();
    signals.insert("ProcessEnergy", vec![run(vec![Datum { id: u64::from(s.pid), value: s.energy_uj / 1e6 }])]);
    let threads = |value: &dyn Fn(&crate::output::ThreadTotal) -> f64| {
        s.threads.iter().map(|t| Datum { id: u64::from(t.tid), value: value(t) }).collect()
    };
    signals.insert("TaskEnergy", vec![run(threads(&|t| t.energy_uj / 1e6))]);
    let activity = threads(&|t| if duration_ns > 0.0 { t.on_cpu_ns as f64 / duration_ns } else { 0.0 });
    signals.insert("TaskActivity", vec![run(activity)]);
    // The run's trace is the host's: this process's part is the cycles within its run.
    let cycles = frequencies
        .iter()
        .filter(|c| c.end_epoch_ms > s.start_epoch_ms && c.start_epoch_ms < s.end_epoch_ms.max(s.start_epoch_ms + 1))
        .map(|c| Interval {
            start: Timestamp::from_epoch_ms(c.start_epoch_ms),
            end: Timestamp::from_epoch_ms(c.end_epoch_ms),
            data: c.cpus.iter().map(|f| Datum { id: u64::from(f.cpu), value: f.khz as f64 }).collect(),
        })
        .collect();
    signals.insert("CpuFrequency", cycles);
    signals
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CpuFrequency;
    use crate::output::{RunSummary, ThreadTotal};

    #[test]
    fn the_signals_carry_summary_json_s_energies() {
        let summary = RunSummary {
            pid: 7,
            start_epoch_ms: 1_700_000_000_000,
            end_epoch_ms: 1_700_000_002_500,
            duration_s: 2.5,
            energy_uj: 3_000_000.0,
            threads: vec![
                ThreadTotal { tid: 7, energy_uj: 1_000_000.0, on_cpu_ns: 500_000_000, ..Default::default() },
                ThreadTotal { tid: 8, energy_uj: 2_000_000.0, on_cpu_ns: 2_500_000_000, ..Default::default() },
            ],
            ..Default::default()
        };
        let profile = ProcessProfile { summary, ..Default::default() };
        let freq = |start, end| FrequencyCycle {
            cycle: 0,
            start_epoch_ms: start,
            end_epoch_ms: end,
            cpus: vec![CpuFrequency { cpu: 0, khz: 800_000 }],
        };
        let trace = [freq(1_699_999_999_000, 1_700_000_000_000), freq(1_700_000_000_000, 1_700_000_001_000)];
        let json = serde_json::to_value(jcarbon_signals(&profile, &trace)).unwrap();
        let one = |class: &str| json[class][0]["data"].clone();
        assert_eq!(one("ProcessEnergy"), serde_json::json!([{"id": 7, "value": 3.0}]));
        assert_eq!(one("TaskEnergy"), serde_json::json!([{"id": 7, "value": 1.0}, {"id": 8, "value": 2.0}]));
        assert_eq!(one("TaskActivity"), serde_json::json!([{"id": 7, "value": 0.2}, {"id": 8, "value": 1.0}]));
        assert_eq!(json["ProcessEnergy"][0]["start"], serde_json::json!({"secs": 1_700_000_000u64, "nanos": 0}));
        assert_eq!(
            json["ProcessEnergy"][0]["end"],
            serde_json::json!({"secs": 1_700_000_002u64, "nanos": 500_000_000})
        );
        let cycles = json["CpuFrequency"].as_array().unwrap();
        assert_eq!(cycles.len(), 1, "the cycle before the process's run is not its");
        assert_eq!(cycles[0]["data"], serde_json::json!([{"id": 0, "value": 800000.0}]));
    }
}
