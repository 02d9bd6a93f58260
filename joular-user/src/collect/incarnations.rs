//! A PID names one process at a time: the kernel tags every sample, CPU-time row and exit with
//! its process's start tick, and this stage lets each cycle carry one process per PID, so that
//! every later stage (results, symbols, labels, totals), keyed by PID, never mixes two.
//!
//! The process a PID names (its "live" start) is the oldest seen. Rows of a newer process with
//! the same PID (the PID was reused within the cycle) wait for the next cycle, and the older
//! process ends with this one: by its exit record, or, if that was lost, by a made-up one, so
//! every stage forgets it before the new process's first rows arrive. Their energy is then
//! attributed one cycle late, never to the wrong process. Every `SWEEP_EVERY_CYCLES` cycles,
//! live PIDs whose /proc entry is gone or names another start end the same way.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::exit::ThreadExit;
use crate::model::{RawSample, ThreadCpuTime};

/// Cycles between two /proc sweeps of the live PIDs.
const SWEEP_EVERY_CYCLES: u64 = 60;

/// One cycle's rows, each with its process's start tick (0: unknown, the live process's).
#[derive(Debug, Default)]
pub struct Rows {
    pub samples: Vec<(u32, RawSample)>,
    pub thread_cpu: Vec<(u32, ThreadCpuTime)>,
    /// (tid, start tick) → (pid, comm).
    pub comms: HashMap<(u32, u32), (u32, String)>,
    pub exits: Vec<(u32, ThreadExit)>,
}

/// What one cycle hands on: rows of one process per PID.
#[derive(Debug, Default, PartialEq)]
pub struct Sorted {
    pub samples: Vec<RawSample>,
    pub thread_cpu: Vec<ThreadCpuTime>,
    pub comms: HashMap<u32, (u32, String)>,
    pub exits: Vec<ThreadExit>,
    /// PID → the start tick of the process its rows are of (0: unknown), so readers of
    /// `/proc/<pid>` can check they read that process.
    pub starts: HashMap<u32, u32>,
    /// Rows of a process older than the one its PID names now (none are expected: its rows
    /// all come before its exit), or of another process than a `--pid` target with that PID
    /// (`expect`): left out, counted.
    pub stale_rows: u64,
}

pub struct Incarnations {
    proc_root: PathBuf,
    /// PID → the start tick of the process it names.
    live: HashMap<u32, u32>,
    /// PID → the start tick of the only process with this PID to profile (`--pid`): the
    /// kernel's filter holds numbers, and a target's PID may change hands before its number
    /// leaves the filter.
    expected: HashMap<u32, u32>,
    carried: Rows,
    cycles: u64,
}

/// Whether start tick `a` is after `b` (ticks are kept mod 2^32: 497 days at 100 Hz).
fn newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

enum Place {
    Here,
    Next,
    Stale,
}

impl Incarnations {
    pub fn new(proc_root: PathBuf) -> Self {
        Self { proc_root, live: HashMap::new(), expected: HashMap::new(), carried: Rows::default(), cycles: 0 }
    }

    /// Profiles PID `pid` only while it names the process that started at `start` (0: any).
    pub fn expect(&mut self, pid: u32, start: u32) {
        if start != 0 {
            self.expected.insert(pid, start);
        }
    }

    /// The start tick each PID of this cycle names: the live one, else the oldest seen.
    fn settle_live(&mut self, rows: &Rows) {
        let starts = rows
            .samples
            .iter()
            .map(|(s, r)| (r.pid, *s))
            .chain(rows.thread_cpu.iter().map(|(s, t)| (t.pid, *s)))
            .chain(rows.exits.iter().map(|(s, e)| (e.pid, *s)));
        let mut new_here: HashSet<u32> = HashSet::new();
        for (pid, start) in starts {
            let live = self.live.entry(pid).or_insert_with(|| {
                new_here.insert(pid);
                start
            });
            // An unknown start (0) gives way to a known one; a PID first seen in this cycle
            // names its oldest process.
            if *live == 0 || (start != 0 && new_here.contains(&pid) && newer(*live, start)) {
                *live = start;
            }
        }
    }

    fn place(&self, pid: u32, start: u32) -> Place {
        if let Some(&expected) = self.expected.get(&pid) {
            return if start == expected || start == 0 { Place::Here } else { Place::Stale };
        }
        match self.live.get(&pid) {
            Some(&live) if start == 0 || start == live || live == 0 => Place::Here,
            Some(&live) if newer(start, live) => Place::Next,
            Some(_) => Place::Stale,
            None => Place::Here,
        }
    }

    /// Sorts this cycle's rows (with those carried from the last one) into this cycle's and the
    /// next one's, and ends the processes whose PID a newer process took.
    pub fn sort(&mut self, mut rows: Rows) -> Sorted {
        let carried = std::mem::take(&mut self.carried);
        rows.samples.splice(0..0, carried.samples);
        rows.thread_cpu.splice(0..0, carried.thread_cpu);
        rows.exits.splice(0..0, carried.exits);
        for (k, v) in carried.comms {
            rows.comms.entry(k).or_insert(v);
        }
        self.settle_live(&rows);
        let mut out = Sorted::default();
        let mut superseded: HashSet<u32> = HashSet::new();
        for (start, s) in rows.samples {
            match self.place(s.pid, start) {
                Place::Here => out.samples.push(s),
                Place::Next => {
                    superseded.insert(s.pid);
                    self.carried.samples.push((start, s));
                }
                Place::Stale => out.stale_rows += 1,
            }
        }
        for (start, t) in rows.thread_cpu {
            match self.place(t.pid, start) {
                Place::Here => out.thread_cpu.push(t),
                Place::Next => {
                    superseded.insert(t.pid);
                    self.carried.thread_cpu.push((start, t));
                }
                Place::Stale => out.stale_rows += 1,
            }
        }
        for ((tid, start), (pid, comm)) in rows.comms {
            match self.place(pid, start) {
                Place::Here => {
                    out.comms.entry(tid).or_insert((pid, comm));
                }
                Place::Next => {
                    self.carried.comms.insert((tid, start), (pid, comm));
                }
                Place::Stale => {}
            }
        }
        let mut ended: HashSet<u32> = HashSet::new();
        for (start, e) in rows.exits {
            match self.place(e.pid, start) {
                Place::Here => {
                    if e.process_ended {
                        ended.insert(e.pid);
                    }
                    out.exits.push(e);
                }
                Place::Next => {
                    superseded.insert(e.pid);
                    self.carried.exits.push((start, e));
                }
                Place::Stale => out.stale_rows += 1,
            }
        }
        // The process a newer one replaced ended in this cycle, even if its exit record was lost.
        for &pid in superseded.difference(&ended) {
            out.exits.push(ThreadExit { pid, tid: pid, comm: String::new(), process_ended: true });
        }
        for pid in out
            .samples
            .iter()
            .map(|s| s.pid)
            .chain(out.thread_cpu.iter().map(|t| t.pid))
            .chain(out.exits.iter().map(|e| e.pid))
        {
            if let Some(&start) = self.live.get(&pid) {
                out.starts.insert(pid, start);
            }
        }
        self.cycles += 1;
        if self.cycles.is_multiple_of(SWEEP_EVERY_CYCLES) {
            for pid in self.gone(&ended) {
                out.exits.push(ThreadExit { pid, tid: pid, comm: String::new(), process_ended: true });
                ended.insert(pid);
            }
        }
        for pid in ended.iter().chain(&superseded) {
            self.live.remove(pid);
        }
        out
    }

    /// Live processes whose /proc entry is gone or names another process.
    fn gone(&self, ended: &HashSet<u32>) -> Vec<u32> {
        self.live
            .iter()
            .filter(|(pid, _)| !ended.contains(pid))
            .filter(|&(&pid, &start)| match start_ticks(&self.proc_root, pid) {
                Some(now) => start != 0 && now != start,
                None => true,
            })
            .map(|(&pid, _)| pid)
            .collect()
    }
}

/// Field 22 of `<proc_root>/<pid>/stat` (`starttime`, clock ticks since boot), mod 2^32 as the
/// kernel programs keep it; `None` when the process is gone.
pub fn start_ticks(proc_root: &Path, pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(proc_root.join(format!("{pid}/stat"))).ok()?;
    parse_start_ticks(&stat)
}

/// Field 22 of a stat line: the 20th after the command name (which may hold spaces and ')').
pub fn parse_start_ticks(stat: &str) -> Option<u32> {
    let ticks: u64 = stat[stat.rfind(')')? + 1..].split_whitespace().nth(19)?.parse().ok()?;
    Some(ticks as u32)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn sample(pid: u32, tid: u32, count: u64) -> RawSample {
        RawSample { pid, tid, cpu: 0, user: Arc::from([tid as u64]), kernel: Arc::from([]), count, walked: None }
    }

    fn time(pid: u32, tid: u32, on_cpu_ns: u64) -> ThreadCpuTime {
        ThreadCpuTime { pid, tid, cpu: 0, on_cpu_ns }
    }

    fn exit(pid: u32, tid: u32) -> ThreadExit {
        ThreadExit { pid, tid, comm: "java".into(), process_ended: true }
    }

    pub fn stat_line(pid: u32, comm: &str, start: u64) -> String {
        format!("{pid} ({comm}) R 1 {pid} {pid} 0 -1 4194304 0 0 0 0 5 1 0 0 20 0 1 0 {start} 1000 10 18446744073709551615\n")
    }

    #[test]
    fn start_ticks_are_field_22_even_after_a_hostile_comm() {
        assert_eq!(
            parse_start_ticks(&stat_line(42, "a) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20", 123_456)),
            Some(123_456)
        );
        assert_eq!(
            parse_start_ticks(&stat_line(42, "java", (1 << 32) + 7)),
            Some(7),
            "kept mod 2^32 like the kernel's"
        );
        assert_eq!(parse_start_ticks("42 (java) R 1 2"), None);
        assert_eq!(parse_start_ticks("42 java"), None);
    }

    #[test]
    fn a_pid_reused_within_a_cycle_ends_the_old_process_and_carries_the_new_one() {
        let proc = tempfile::tempdir().unwrap();
        let mut inc = Incarnations::new(proc.path().to_owned());
        // Cycle 0: the root JVM (start 100) runs.
        let first = inc.sort(Rows {
            samples: vec![(100, sample(7, 7, 5))],
            thread_cpu: vec![(100, time(7, 7, 50))],
            ..Default::default()
        });
        assert_eq!((first.samples.len(), first.thread_cpu.len(), first.exits.len()), (1, 1, 0));
        // Cycle 1: it exits, and `nobody` (start 900) gets PID 7 and runs in the same cycle.
        let mut rows = Rows {
            samples: vec![(100, sample(7, 7, 2)), (900, sample(7, 7, 40)), (900, sample(7, 8, 3))],
            thread_cpu: vec![(100, time(7, 7, 20)), (900, time(7, 7, 400))],
            exits: vec![(100, exit(7, 7))],
            ..Default::default()
        };
        rows.comms.insert((7, 100), (7, "java".into()));
        rows.comms.insert((7, 900), (7, "burn".into()));
        let reuse = inc.sort(rows);
        assert_eq!(reuse.samples.iter().map(|s| s.count).collect::<Vec<_>>(), [2], "only the JVM's own samples");
        assert_eq!(reuse.thread_cpu, [time(7, 7, 20)]);
        assert_eq!(reuse.comms[&7].1, "java");
        assert_eq!(reuse.exits, [exit(7, 7)], "the JVM ends with this cycle");
        assert_eq!(reuse.starts[&7], 100);
        // Cycle 2: the impostor's rows of cycle 1 come first, as a process of their own.
        let next = inc.sort(Rows {
            samples: vec![(900, sample(7, 7, 100))],
            thread_cpu: vec![(900, time(7, 7, 990))],
            ..Default::default()
        });
        assert_eq!(next.samples.iter().map(|s| (s.tid, s.count)).collect::<Vec<_>>(), [(7, 40), (8, 3), (7, 100)]);
        assert_eq!(next.thread_cpu, [time(7, 7, 400), time(7, 7, 990)]);
        assert_eq!(next.comms[&7].1, "burn");
        assert_eq!(next.starts[&7], 900);
        assert!(next.exits.is_empty());
        assert_eq!(next.stale_rows, 0);
    }

    #[test]
    fn a_pid_target_is_its_process_only_even_when_the_filter_catches_the_next_one() {
        let proc = tempfile::tempdir().unwrap();
        let mut inc = Incarnations::new(proc.path().to_owned());
        inc.expect(7, 100);
        // The target died and `nobody` took PID 7 before the filter let go of it.
        let cycle = inc.sort(Rows {
            samples: vec![(900, sample(7, 7, 40))],
            thread_cpu: vec![(900, time(7, 7, 400))],
            ..Default::default()
        });
        assert!(cycle.samples.is_empty() && cycle.thread_cpu.is_empty());
        assert_eq!(cycle.stale_rows, 2);
        let cycle = inc.sort(Rows {
            samples: vec![(100, sample(7, 7, 5)), (900, sample(7, 7, 1))],
            exits: vec![(100, exit(7, 7))],
            ..Default::default()
        });
        assert_eq!((cycle.samples, cycle.exits, cycle.stale_rows), (vec![sample(7, 7, 5)], vec![exit(7, 7)], 1));
        assert!(
            inc.sort(Rows { samples: vec![(900, sample(7, 7, 1))], ..Default::default() }).samples.is_empty(),
            "never after its end either"
        );
    }

    #[test]
    fn a_lost_exit_record_is_made_up_when_the_pid_is_reused() {
        let proc = tempfile::tempdir().unwrap();
        let mut inc = Incarnations::new(proc.path().to_owned());
        inc.sort(Rows { samples: vec![(100, sample(7, 7, 5))], ..Default::default() });
        // No exit record: the map was full.
        let reuse = inc.sort(Rows { samples: vec![(900, sample(7, 7, 40))], ..Default::default() });
        assert!(reuse.samples.is_empty());
        assert_eq!(reuse.exits, [ThreadExit { pid: 7, tid: 7, comm: String::new(), process_ended: true }]);
        let next = inc.sort(Rows::default());
        assert_eq!(next.samples, [sample(7, 7, 40)]);
        assert!(next.exits.is_empty(), "the new process lives on");
    }

    #[test]
    fn an_exit_in_an_earlier_cycle_frees_the_pid_without_a_cycle_of_delay() {
        let proc = tempfile::tempdir().unwrap();
        let mut inc = Incarnations::new(proc.path().to_owned());
        inc.sort(Rows { samples: vec![(100, sample(7, 7, 5))], exits: vec![(100, exit(7, 7))], ..Default::default() });
        let later = inc.sort(Rows { samples: vec![(900, sample(7, 7, 40))], ..Default::default() });
        assert_eq!(later.samples, [sample(7, 7, 40)]);
        assert!(later.exits.is_empty());
        // Unknown start ticks (no BTF) are the live process's: nothing is held back.
        let unknown =
            inc.sort(Rows { samples: vec![(0, sample(7, 7, 1)), (900, sample(7, 7, 2))], ..Default::default() });
        assert_eq!(unknown.samples.len(), 2);
    }

    #[test]
    fn the_sweep_ends_live_pids_that_proc_no_longer_has_or_gave_to_another_process() {
        let proc = tempfile::tempdir().unwrap();
        for (pid, start) in [(10, 100u64), (11, 555)] {
            std::fs::create_dir(proc.path().join(pid.to_string())).unwrap();
            std::fs::write(proc.path().join(format!("{pid}/stat")), stat_line(pid, "x", start)).unwrap();
        }
        let mut inc = Incarnations::new(proc.path().to_owned());
        // 10 is alive as seen; 11 now names another process; 12 is gone.
        inc.sort(Rows {
            samples: vec![(100, sample(10, 10, 1)), (111, sample(11, 11, 1)), (120, sample(12, 12, 1))],
            ..Default::default()
        });
        for _ in 2..SWEEP_EVERY_CYCLES {
            assert!(inc.sort(Rows::default()).exits.is_empty());
        }
        let mut ended: Vec<u32> = inc.sort(Rows::default()).exits.iter().map(|e| e.pid).collect();
        ended.sort_unstable();
        assert_eq!(ended, [11, 12]);
        assert_eq!(inc.live.keys().copied().collect::<Vec<_>>(), [10]);
    }
}
