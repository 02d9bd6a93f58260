//! Per-method power over time, read back from the JoularJX evolution files (`unix seconds,watts`
//! per cycle) and averaged into the timeline's buckets.

use std::collections::HashMap;
use std::io::BufRead;

use super::charts::Series;
use crate::attribution::stacks::aggregate::Scope;
use crate::attribution::stacks::timeline::Timeline;
use crate::output::joularjx::evolution_name;
use crate::safe_write::OutDir;

/// An evolution file holds one short row per cycle: a month of 1 s cycles is ~50 MB.
const MAX_FILE_BYTES: u64 = 64 << 20;

/// The series of each of `methods` that has an evolution file in `run_dir`, in their order.
/// The files are read through the run's directory, as everything it writes (`safe_write`).
pub fn method_series(run_dir: &OutDir, pid: u32, timeline: &Timeline, methods: &[&str]) -> Vec<Series> {
    let Ok(evolution) = run_dir.open_subdir(&format!("{}/evolution", Scope::All.dir())) else {
        return Vec::new();
    };
    methods
        .iter()
        .filter_map(|&method| {
            let bytes = evolution.read(&evolution_name(pid, method), MAX_FILE_BYTES).ok()?;
            Some(Series { name: method.to_owned(), values: bucket_rows(bytes.as_slice(), timeline) })
        })
        .collect()
}

/// Average power per bucket: a cycle without a row is a cycle at 0 W; malformed rows and rows
/// outside the timeline are skipped.
fn bucket_rows(reader: impl BufRead, timeline: &Timeline) -> Vec<f64> {
    let mut sums = vec![0.0; timeline.covered_s.len()];
    let mut seen: HashMap<u64, usize> = HashMap::new();
    for line in reader.lines().map_while(Result::ok) {
        let Some((secs, watts)) = line.split_once(',') else {
            continue;
        };
        let (Ok(secs), Ok(watts)) = (secs.trim().parse::<u64>(), watts.trim().parse::<f64>()) else {
            continue;
        };
        if !(watts.is_finite() && watts >= 0.0) {
            continue;
        }
        let occurrence = seen.entry(secs).or_default();
        if let Some(bucket) = timeline.bucket_of_epoch(secs, *occurrence) {
            sums[bucket] += watts;
        }
        *occurrence += 1;
    }
    sums.iter().zip(&timeline.cycles).map(|(sum, &n)| if n > 0 { sum / f64::from(n) } else { 0.0 }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_cycles_ending_in_one_second_keep_their_own_rows() {
        let mut t = Timeline::default();
        for (n, end) in [101u64, 101, 102].into_iter().enumerate() {
            t.add_cycle(n as f64, 1.0, end, [(1, "main", 1.0)]);
        }
        assert_eq!(bucket_rows("101,1.0\n101,3.0\n102,5.0\n".as_bytes(), &t), [1.0, 3.0, 5.0]);
    }

    #[test]
    fn rows_are_averaged_per_bucket_with_missing_cycles_at_zero() {
        let mut t = Timeline::default();
        for n in 0..4u64 {
            t.add_cycle(n as f64, 1.0, 100 + n + 1, [(1, "main", 1.0)]);
        }
        // Cycles end at 101..104; the method ran in three of the four.
        let rows = "101,2.0000\n102,4.0000\nnot a row\n104,6.0000\n999,1.0\n103,-1\n";
        assert_eq!(bucket_rows(rows.as_bytes(), &t), [2.0, 4.0, 0.0, 6.0]);
    }
}
