//! Per-program eBPF run time (`kernel.bpf_stats_enabled`), read from a process's own program
//! descriptors in `/proc/<pid>/fdinfo`: no bpftool needed, and only that process's programs count
//! even when other profilers run on the machine.

use std::collections::BTreeMap;

use anyhow::Context as _;

const SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// Turns the kernel's per-program statistics on for its lifetime, then restores the setting.
pub struct BpfStats {
    previous: String,
}

impl BpfStats {
    pub fn enable() -> anyhow::Result<Self> {
        let previous = std::fs::read_to_string(SYSCTL).with_context(|| format!("reading {SYSCTL}"))?;
        std::fs::write(SYSCTL, "1").with_context(|| format!("enabling {SYSCTL}"))?;
        Ok(BpfStats { previous: previous.trim().to_string() })
    }

    /// The cumulative counters of every program `pid` holds, by program id.
    pub fn snapshot_of(&self, pid: u32) -> BTreeMap<u32, ProgStats> {
        let mut out = BTreeMap::new();
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else { return out };
        for fd in fds.flatten() {
            if let Some(stats) = std::fs::read_to_string(fd.path()).ok().and_then(|t| ProgStats::parse_fdinfo(&t)) {
                out.insert(stats.id, stats);
            }
        }
        out
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        let _ = std::fs::write(SYSCTL, &self.previous);
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProgStats {
    pub id: u32,
    /// `perf_event` (the samplers), `raw_tracepoint` (sched_switch), `tracepoint`, ...
    pub kind: &'static str,
    pub run_time_ns: u64,
    pub runs: u64,
}

impl ProgStats {
    /// A program descriptor's fdinfo (links and maps have no `prog_type` line).
    fn parse_fdinfo(text: &str) -> Option<Self> {
        let field = |key: &str| text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':')).map(str::trim);
        let kind = match field("prog_type")?.parse::<u32>().ok()? {
            5 => "tracepoint",
            7 => "perf_event",
            17 => "raw_tracepoint",
            26 => "tracing",
            _ => "other",
        };
        let id = field("prog_id")?.parse().ok()?;
        Some(ProgStats {
            id,
            kind,
            run_time_ns: field("run_time_ns")?.parse().ok()?,
            runs: field("run_cnt")?.parse().ok()?,
        })
    }

    /// What each program did between two snapshots of the same process.
    pub fn deltas(before: &BTreeMap<u32, ProgStats>, after: &BTreeMap<u32, ProgStats>) -> Vec<ProgStats> {
        after
            .values()
            .map(|a| {
                let (t0, n0) = before.get(&a.id).map_or((0, 0), |b| (b.run_time_ns, b.runs));
                ProgStats {
                    run_time_ns: a.run_time_ns.saturating_sub(t0),
                    runs: a.runs.saturating_sub(n0),
                    ..a.clone()
                }
            })
            .collect()
    }

    pub fn ns_per_run(&self) -> f64 {
        self.run_time_ns as f64 / self.runs.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROG: &str = "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1038\nprog_type:\t7\nprog_jited:\t1\n\
prog_tag:\tca487931aae54374\nmemlock:\t4096\nprog_id:\t362\nrun_time_ns:\t14633111\nrun_cnt:\t3589\nrecursion_misses:\t0\n";
    const LINK: &str =
        "pos:\t0\nflags:\t02000000\nlink_type:\traw_tracepoint\nlink_id:\t248\nprog_tag:\tab48\nprog_id:\t378\n";

    #[test]
    fn program_descriptors_parse_and_links_do_not() {
        let p = ProgStats::parse_fdinfo(PROG).unwrap();
        assert_eq!((p.id, p.kind, p.run_time_ns, p.runs), (362, "perf_event", 14_633_111, 3589));
        assert!((p.ns_per_run() - 4077.2).abs() < 0.1);
        assert_eq!(ProgStats::parse_fdinfo(LINK), None);
    }

    #[test]
    fn deltas_subtract_the_earlier_snapshot() {
        let p = ProgStats::parse_fdinfo(PROG).unwrap();
        let before = BTreeMap::from([(p.id, ProgStats { run_time_ns: 633_111, runs: 589, ..p.clone() })]);
        let after = BTreeMap::from([(p.id, p.clone())]);
        let d = ProgStats::deltas(&before, &after);
        assert_eq!((d[0].run_time_ns, d[0].runs), (14_000_000, 3000));
        assert_eq!(ProgStats::deltas(&BTreeMap::new(), &after)[0].runs, 3589);
    }
}
