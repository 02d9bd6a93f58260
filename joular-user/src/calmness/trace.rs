//! A run's CPU frequencies over time, as `frequencies.csv` holds them: one row per CPU and
//! cycle, `cycle,start_epoch_ms,end_epoch_ms,cpu,khz` (the frequency read at the cycle's end).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::model::CpuFrequency;

/// The file each run writes into its `--output` directory.
pub const FREQUENCIES_FILE: &str = "frequencies.csv";
pub const FREQUENCIES_HEADER: &str = "cycle,start_epoch_ms,end_epoch_ms,cpu,khz";
/// Largest file read back (64 MiB: a day of 1 s cycles on 256 CPUs is ~600 MB, so a longer run
/// is refused by name rather than read without bound).
pub const MAX_FREQUENCIES_BYTES: u64 = 64 << 20;

/// One cycle's reading.
#[derive(Debug, Clone, PartialEq)]
pub struct FrequencyCycle {
    pub cycle: u64,
    pub start_epoch_ms: u64,
    pub end_epoch_ms: u64,
    pub cpus: Vec<CpuFrequency>,
}

/// The rows of one cycle, as written.
pub fn cycle_rows(cycle: &FrequencyCycle) -> String {
    let mut out = String::new();
    for f in &cycle.cpus {
        let _ = writeln!(out, "{},{},{},{},{}", cycle.cycle, cycle.start_epoch_ms, cycle.end_epoch_ms, f.cpu, f.khz);
    }
    out
}

/// Reads a `frequencies.csv`; the line number and what was wrong, for a bad line.
pub fn parse_frequencies(text: &str) -> Result<Vec<FrequencyCycle>, String> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, h)) if h.trim_end() == FREQUENCIES_HEADER => {}
        _ => return Err(format!("line 1: expected the header `{FREQUENCIES_HEADER}`")),
    }
    let mut cycles: BTreeMap<u64, FrequencyCycle> = BTreeMap::new();
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || format!("line {}: expected 5 unsigned integers `{FREQUENCIES_HEADER}`", i + 1);
        let fields: Vec<u64> =
            line.trim_end().split(',').map(|f| f.parse().map_err(|_| bad())).collect::<Result<_, _>>()?;
        let [cycle, start, end, cpu, khz] = fields[..] else { return Err(bad()) };
        let cpu = u32::try_from(cpu).map_err(|_| bad())?;
        if khz == 0 {
            return Err(format!("line {}: a frequency of 0 kHz", i + 1));
        }
        let entry = cycles.entry(cycle).or_insert_with(|| FrequencyCycle {
            cycle,
            start_epoch_ms: start,
            end_epoch_ms: end,
            cpus: Vec::new(),
        });
        if entry.cpus.iter().any(|f| f.cpu == cpu) {
            return Err(format!("line {}: cpu {cpu} twice in cycle {cycle}", i + 1));
        }
        entry.cpus.push(CpuFrequency { cpu, khz });
    }
    Ok(cycles.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_back_and_bad_lines_are_named() {
        let c = FrequencyCycle {
            cycle: 3,
            start_epoch_ms: 1_000,
            end_epoch_ms: 2_000,
            cpus: vec![CpuFrequency { cpu: 0, khz: 800_000 }, CpuFrequency { cpu: 1, khz: 3_000_000 }],
        };
        let text = format!("{FREQUENCIES_HEADER}\n{}", cycle_rows(&c));
        assert_eq!(parse_frequencies(&text).unwrap(), vec![c]);
        assert!(parse_frequencies("cycle,khz\n").unwrap_err().starts_with("line 1"));
        let e = parse_frequencies(&format!("{FREQUENCIES_HEADER}\n0,1,2,0,-5\n")).unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        let e = parse_frequencies(&format!("{FREQUENCIES_HEADER}\n0,1,2,0,5\n0,1,2,0,6\n")).unwrap_err();
        assert!(e.contains("twice"), "{e}");
    }
}
