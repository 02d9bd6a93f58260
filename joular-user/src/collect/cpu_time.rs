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
    /// One row per (thread, CPU).
    pub threads: Vec<ThreadCpuTime>,
    /// tid → (pid, comm) as the kernel saw it when the thread first ran in the cycle.
    pub comms: HashMap<u32, (u32, String)>,
}

/// Merges the drained buffer's part of each CPU's state (`(cpu, state)`) with that buffer's
/// `THREAD_CPU_*` entries. `tag` is the drained buffer's `CONFIG_ACTIVE_BUFFER` value: a CPU
/// whose times for the buffer carry another tag last wrote them in an older cycle, already
/// drained, so it had no accounting point in this one.
pub fn merge(states: &[(u32, CpuState)], tag: u32, spilled: &[(ThreadCpuKey, ThreadCpuValue)]) -> CycleCpuTime {
    let buffer = (tag & 1) as usize;
    let mut out = CycleCpuTime::default();
    let mut rows: HashMap<(u32, u32), usize> = HashMap::with_capacity(spilled.len());
    let mut add = |out: &mut CycleCpuTime, pid: u32, tid: u32, cpu: u32, on_cpu_ns: u64, comm: &[u8; 16]| {
        match rows.get(&(tid, cpu)) {
            Some(&i) => out.threads[i].on_cpu_ns += on_cpu_ns,
            None => {
                rows.insert((tid, cpu), out.threads.len());
                out.threads.push(ThreadCpuTime { pid, tid, cpu, on_cpu_ns });
            }
        }
        out.comms.entry(tid).or_insert_with(|| (pid, comm_str(comm)));
    };
    for (key, value) in spilled {
        add(&mut out, value.tgid, key.tid, key.cpu, value.on_cpu_ns, &value.comm);
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
            add(&mut out, (slot.pid_tgid >> 32) as u32, slot.pid_tgid as u32, *cpu, slot.on_cpu_ns, &slot.comm);
        }
    }
    out
}

pub fn comm_str(comm: &[u8; 16]) -> String {
    let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..end]).into_owned()
}
