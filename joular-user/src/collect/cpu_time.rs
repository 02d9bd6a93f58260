//! A cycle's CPU time from its two kernel sources: each CPU's `CpuState` (its busy and idle time
//! and its thread slots, per buffer) and the drained buffer's `THREAD_CPU_*` entries, where a
//! slot's time goes when another thread takes the slot. A thread's time on a CPU is the sum of
//! both.

use std::collections::HashMap;

use joular_ebpf::{CpuState, ThreadCpuKey, ThreadCpuValue};

use crate::model::{CpuTime, ThreadCpuTime};

/// What one cycle's CPU accounting holds.
#[derive(Debug, Default, PartialEq)]
pub struct CycleCpuTime {
    /// One row per CPU of `cycles`.
    pub cpus: Vec<CpuTime>,
    /// One row per (thread, CPU, process start tick): the start tick first.
    pub threads: Vec<(u32, ThreadCpuTime)>,
    /// (tid, process start tick) → (pid, comm) as the kernel saw it when the thread first ran
    /// in the cycle.
    pub comms: HashMap<(u32, u32), (u32, String)>,
}

/// Merges the drained buffer's part of each CPU's state (`(cpu, state)`) with that buffer's
/// `THREAD_CPU_*` entries. `tag` is the drained buffer's `CONFIG_ACTIVE_BUFFER` value: a CPU
/// whose times for the buffer carry another tag last wrote them in an older cycle, already
/// drained, so it had no accounting point in this one.
pub fn merge(states: &[(u32, CpuState)], tag: u32, spilled: &[(ThreadCpuKey, ThreadCpuValue)]) -> CycleCpuTime {
    let buffer = (tag & 1) as usize;
    let mut out = CycleCpuTime::default();
    let mut rows: HashMap<(u32, u32, u32), usize> = HashMap::with_capacity(spilled.len());
    let mut add =
        |out: &mut CycleCpuTime, start: u32, pid: u32, tid: u32, cpu: u32, on_cpu_ns: u64, comm: &[u8; 16]| {
            match rows.get(&(tid, cpu, start)) {
                Some(&i) => out.threads[i].1.on_cpu_ns += on_cpu_ns,
                None => {
                    rows.insert((tid, cpu, start), out.threads.len());
                    out.threads.push((start, ThreadCpuTime { pid, tid, cpu, on_cpu_ns }));
                }
            }
            out.comms.entry((tid, start)).or_insert_with(|| (pid, comm_str(comm)));
        };
    for (key, value) in spilled {
        add(&mut out, key.start_ticks, value.tgid, key.tid, key.cpu, value.on_cpu_ns, &value.comm);
    }
    for (cpu, state) in states {
        let times = &state.times[buffer];
        let current = times.tag == tag;
        out.cpus.push(CpuTime {
            cpu: *cpu,
            busy_ns: if current { times.busy_ns } else { 0 },
            idle_ns: if current { times.idle_ns } else { 0 },
        });
        if !current {
            continue;
        }
        for slot in state.threads[buffer].iter().filter(|s| s.pid_tgid != 0) {
            add(
                &mut out,
                slot.start_ticks,
                (slot.pid_tgid >> 32) as u32,
                slot.pid_tgid as u32,
                *cpu,
                u64::from(slot.on_cpu_ns),
                &slot.comm,
            );
        }
    }
    out
}

pub fn comm_str(comm: &[u8; 16]) -> String {
    let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use joular_ebpf::{ThreadSlot, THREAD_SLOTS};

    /// The Throughput JVM of the recorded cycle.
    const JVM_TGID: u32 = 3159;

    /// One accounting point: the task running on `cpu` until `now_ns`.
    #[derive(Clone)]
    struct Point {
        cpu: u32,
        now_ns: u64,
        pid_tgid: u64,
        comm: [u8; 16],
    }

    fn recorded_cycle() -> Vec<Point> {
        let path =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/sched-switch/cycle.txt");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let f: Vec<&str> = l.splitn(5, ' ').collect();
                let (tgid, tid): (u64, u64) = (f[2].parse().unwrap(), f[3].parse().unwrap());
                let mut comm = [0u8; 16];
                comm[..f[4].len().min(15)].copy_from_slice(&f[4].as_bytes()[..f[4].len().min(15)]);
                Point { cpu: f[0].parse().unwrap(), now_ns: f[1].parse().unwrap(), pid_tgid: tgid << 32 | tid, comm }
            })
            .collect()
    }

    /// The accounting before thread slots: every charge of a target went straight to its
    /// (tid, cpu) hash map entry. Per (tid, cpu): (pid, ns); per CPU: (busy, idle).
    #[derive(Default)]
    struct Unbatched {
        last_ns: HashMap<u32, u64>,
        threads: HashMap<(u32, u32), (u32, u64)>,
        cpus: HashMap<u32, (u64, u64)>,
    }

    impl Unbatched {
        fn account(&mut self, p: &Point, target: bool) {
            let last_ns = self.last_ns.insert(p.cpu, p.now_ns).unwrap_or(0);
            if last_ns == 0 || p.now_ns <= last_ns {
                return;
            }
            let delta_ns = p.now_ns - last_ns;
            let cpu = self.cpus.entry(p.cpu).or_default();
            if p.pid_tgid as u32 == 0 {
                cpu.1 += delta_ns;
            } else {
                cpu.0 += delta_ns;
            }
            if target {
                self.threads.entry((p.pid_tgid as u32, p.cpu)).or_insert(((p.pid_tgid >> 32) as u32, 0)).1 += delta_ns;
            }
        }
    }

    /// What the kernel does at an accounting point (account.rs `account`, `charge_thread` and
    /// `flush_thread`) to the CPU's state and the buffer's `THREAD_CPU_*` map.
    fn kernel_account(
        state: &mut CpuState,
        spilled: &mut HashMap<ThreadCpuKey, ThreadCpuValue>,
        tag: u32,
        p: &Point,
        target: bool,
    ) {
        let last_ns = std::mem::replace(&mut state.last_ns, p.now_ns);
        if last_ns == 0 || p.now_ns <= last_ns {
            return;
        }
        let delta_ns = p.now_ns - last_ns;
        let buffer = (tag & 1) as usize;
        if state.times[buffer].tag != tag {
            state.times[buffer] = joular_ebpf::CpuTimes { tag, ..Default::default() };
            state.threads[buffer].iter_mut().for_each(|s| s.pid_tgid = 0);
        }
        let times = &mut state.times[buffer];
        if p.pid_tgid as u32 == 0 {
            times.idle_ns += delta_ns;
        } else {
            times.busy_ns += delta_ns;
        }
        if !target {
            return;
        }
        let pair = p.pid_tgid as usize % (THREAD_SLOTS / 2) * 2;
        let slots = &mut state.threads[buffer];
        if let Some(slot) = slots[pair..pair + 2].iter_mut().find(|s| s.pid_tgid == p.pid_tgid) {
            slot.on_cpu_ns += delta_ns as u32;
            return;
        }
        let (first, second) = (&slots[pair], &slots[pair + 1]);
        let taken = if first.pid_tgid == 0 || (second.pid_tgid != 0 && first.on_cpu_ns <= second.on_cpu_ns) {
            pair
        } else {
            pair + 1
        };
        let slot = &mut slots[taken];
        if slot.pid_tgid != 0 {
            let key = ThreadCpuKey { tid: slot.pid_tgid as u32, cpu: p.cpu, start_ticks: 0, _pad: 0 };
            let value = ThreadCpuValue { on_cpu_ns: 0, tgid: (slot.pid_tgid >> 32) as u32, _pad: 0, comm: slot.comm };
            spilled.entry(key).or_insert(value).on_cpu_ns += u64::from(slot.on_cpu_ns);
        }
        *slot = ThreadSlot { pid_tgid: p.pid_tgid, on_cpu_ns: delta_ns as u32, comm: p.comm, ..Default::default() };
    }

    fn sorted_threads(rows: impl IntoIterator<Item = ThreadCpuTime>) -> Vec<ThreadCpuTime> {
        let mut rows: Vec<_> = rows.into_iter().collect();
        rows.sort_by_key(|r| (r.tid, r.cpu));
        rows
    }

    /// Runs `points` through both paths as consecutive cycles (cycle k is
    /// `points[starts[k]..starts[k + 1]]`), draining each as `Collector::read` does, and checks
    /// that they agree. Returns how many slots went to the hash maps.
    fn assert_batched_equals_unbatched(points: &[Point], starts: &[usize], target: impl Fn(&Point) -> bool) -> usize {
        let target = |p: &Point| p.pid_tgid as u32 != 0 && target(p);
        let mut states: HashMap<u32, CpuState> = HashMap::new();
        let mut maps: [HashMap<ThreadCpuKey, ThreadCpuValue>; 2] = Default::default();
        let mut spills = 0;
        for (cycle, &start) in starts.iter().enumerate() {
            let span = start..starts.get(cycle + 1).copied().unwrap_or(points.len());
            // `Collector::flip`: generation << 1 | buffer.
            let tag = (cycle as u32) << 1 | (cycle as u32 & 1);
            let buffer = (tag & 1) as usize;
            let mut unbatched = Unbatched::default();
            for cpu in [0, 1] {
                if let Some(prev) = points[..span.start].iter().rev().find(|p| p.cpu == cpu) {
                    unbatched.last_ns.insert(cpu, prev.now_ns);
                }
            }
            for p in &points[span.clone()] {
                kernel_account(states.entry(p.cpu).or_default(), &mut maps[buffer], tag, p, target(p));
                unbatched.account(p, target(p));
            }
            let spilled: Vec<_> = maps[buffer].drain().collect();
            spills += spilled.len();
            let mut cpus: Vec<(u32, CpuState)> = states.iter().map(|(c, s)| (*c, *s)).collect();
            cpus.sort_by_key(|(c, _)| *c);
            let merged = merge(&cpus, tag, &spilled);

            let expected = unbatched.threads.iter().map(|(&(tid, cpu), &(pid, on_cpu_ns))| ThreadCpuTime {
                pid,
                tid,
                cpu,
                on_cpu_ns,
            });
            assert_eq!(
                sorted_threads(merged.threads.iter().map(|t| t.1)),
                sorted_threads(expected),
                "cycle {cycle}: time per (thread, CPU)"
            );
            let charged: u64 = merged.threads.iter().map(|t| t.1.on_cpu_ns).sum();
            assert_eq!(charged, unbatched.threads.values().map(|v| v.1).sum::<u64>(), "cycle {cycle}: total");
            assert_eq!(merged.cpus.len(), cpus.len());
            for c in &merged.cpus {
                let (busy_ns, idle_ns) = unbatched.cpus.get(&c.cpu).copied().unwrap_or_default();
                assert_eq!((c.busy_ns, c.idle_ns), (busy_ns, idle_ns), "cycle {cycle}: CPU {}", c.cpu);
            }
            for (start, t) in &merged.threads {
                let (pid, name) = &merged.comms[&(t.tid, *start)];
                assert_eq!(*pid, t.pid);
                assert!(
                    points[span.clone()].iter().any(|p| p.pid_tgid as u32 == t.tid && comm_str(&p.comm) == *name),
                    "cycle {cycle}: thread {} named {name:?}, a name it did not have",
                    t.tid
                );
            }
        }
        spills
    }

    #[test]
    fn batched_drains_lose_nothing_on_a_recorded_cycle_in_host_mode() {
        let points = recorded_cycle();
        assert!(points.len() > 2000, "fixture too short");
        let spills = assert_batched_equals_unbatched(&points, &[0, 800, 1600], |_| true);
        assert!(spills > 0, "the recorded cycle should make threads share slots");
    }

    #[test]
    fn batched_drains_lose_nothing_on_a_recorded_cycle_with_one_target() {
        let points = recorded_cycle();
        assert!(points.iter().any(|p| (p.pid_tgid >> 32) as u32 == JVM_TGID));
        assert_batched_equals_unbatched(&points, &[0, 1000], |p| (p.pid_tgid >> 32) as u32 == JVM_TGID);
    }

    /// Point `i` of a synthetic run: `threads` threads whose tids all select the same slot
    /// pair, round robin on CPU 0 (every charge takes a slot over), CPU 1 busy with one thread
    /// and idle in turns. From `quiet_from` on, CPU 1 has no accounting point.
    fn crowded(i: u64, threads: u64, quiet_from: u64) -> Point {
        let cpu = if i >= quiet_from { 0 } else { (i % 2) as u32 };
        let tid = if cpu == 0 { 3 + (THREAD_SLOTS as u64 / 2) * (i / 2 % threads) } else { (i / 2 % 2) * 77 };
        let mut comm = [0u8; 16];
        comm[..6].copy_from_slice(format!("t{:05}", tid).as_bytes());
        Point { cpu, now_ns: 1_000 + i * 997 + (i * i) % 13, pid_tgid: 42 << 32 | tid, comm }
    }

    #[test]
    fn threads_that_share_a_slot_pair_lose_nothing_and_an_idle_cpu_reports_nothing() {
        let points: Vec<Point> = (0..3000).map(|i| crowded(i, 9, 2500)).collect();
        let spills = assert_batched_equals_unbatched(&points, &[0, 1000, 2000, 2600], |_| true);
        assert!(spills >= 9, "{spills} slots spilled");
    }

    #[test]
    fn a_cpu_state_of_an_older_cycle_of_the_buffer_counts_nothing() {
        let mut stale = CpuState::default();
        stale.times[0] = joular_ebpf::CpuTimes { tag: 2, _pad: 0, busy_ns: 5, idle_ns: 6 };
        stale.threads[0][0] = ThreadSlot {
            pid_tgid: 7 << 32 | 8,
            on_cpu_ns: 5,
            comm: *b"old\0\0\0\0\0\0\0\0\0\0\0\0\0",
            ..Default::default()
        };
        let mut current = stale;
        current.times[0].tag = 4;
        let spilled = [(
            ThreadCpuKey { tid: 8, cpu: 1, start_ticks: 0, _pad: 0 },
            ThreadCpuValue { on_cpu_ns: 10, tgid: 7, _pad: 0, comm: *b"new\0\0\0\0\0\0\0\0\0\0\0\0\0" },
        )];
        let merged = merge(&[(0, stale), (1, current)], 4, &spilled);
        assert_eq!(
            merged.cpus,
            vec![CpuTime { cpu: 0, busy_ns: 0, idle_ns: 0 }, CpuTime { cpu: 1, busy_ns: 5, idle_ns: 6 }]
        );
        assert_eq!(merged.threads, vec![(0, ThreadCpuTime { pid: 7, tid: 8, cpu: 1, on_cpu_ns: 15 })]);
        assert_eq!(merged.comms[&(8, 0)], (7, "new".to_string()));
    }

    #[test]
    fn a_reused_pid_and_tid_on_one_cpu_are_two_rows_with_their_own_names() {
        let old = ThreadSlot {
            pid_tgid: 7 << 32 | 7,
            on_cpu_ns: 5,
            comm: *b"java\0\0\0\0\0\0\0\0\0\0\0\0",
            start_ticks: 100,
        };
        let mut state = CpuState::default();
        state.times[0].tag = 4;
        state.threads[0][0] =
            ThreadSlot { start_ticks: 900, on_cpu_ns: 3, comm: *b"burn\0\0\0\0\0\0\0\0\0\0\0\0", ..old };
        // The old process's time left its slot when the new one took it.
        let spilled = [(
            ThreadCpuKey { tid: 7, cpu: 0, start_ticks: 100, _pad: 0 },
            ThreadCpuValue { on_cpu_ns: old.on_cpu_ns.into(), tgid: 7, _pad: 0, comm: old.comm },
        )];
        let merged = merge(&[(0, state)], 4, &spilled);
        assert_eq!(
            merged.threads,
            vec![
                (100, ThreadCpuTime { pid: 7, tid: 7, cpu: 0, on_cpu_ns: 5 }),
                (900, ThreadCpuTime { pid: 7, tid: 7, cpu: 0, on_cpu_ns: 3 })
            ]
        );
        assert_eq!((merged.comms[&(7, 100)].1.as_str(), merged.comms[&(7, 900)].1.as_str()), ("java", "burn"));
    }
}
