//! One cycle's drain: flip the active buffer, let in-flight programs finish, read the
//! now-idle buffer completely and clear it for the cycle after next.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use joular_ebpf::{JavaFrame, JavaStack, CONFIG_ACTIVE_BUFFER, DROP_KINDS, DROP_NAMES, STACK_ID_OVERFLOW};

use super::cpu_time::{self, comm_str};
use super::exit::ThreadExit;
use super::incarnations::{Incarnations, Rows};
use super::monotonic;
use super::{sample_log, sample_names, walked};
use crate::attribution::devices::DeviceSample;
use crate::ebpf::{Probe, ProbeError};
use crate::model::{CpuTime, RawSample, ThreadCpuTime, WalkedStack};

/// Programs that read the old buffer index just before the flip finish within microseconds;
/// waiting this long before reading guarantees the buffer is quiet.
const QUIESCE: Duration = Duration::from_millis(2);

/// Drop cause: rows of a process older than the one its PID names, or of another process than
/// a `--pid` target with its PID (see `incarnations.rs`).
pub const OTHER_PROCESS_ROWS: &str = "other_process_rows";

/// Everything the kernel counted in one cycle.
#[derive(Debug, Clone, Default)]
pub struct RawCycle {
    pub start_ns: u64,
    pub end_ns: u64,
    /// Of one process per PID: a process that took a PID in this cycle comes in the next one
    /// (see `incarnations.rs`), and the one it replaced ends with this one (`exits`).
    pub samples: Vec<RawSample>,
    pub thread_cpu: Vec<ThreadCpuTime>,
    /// tid → (pid, comm) as the kernel saw it in the thread's samples (the most sampled name),
    /// or, for a thread without samples, when it first ran in the cycle.
    pub comms: HashMap<u32, (u32, String)>,
    pub cpus: Vec<CpuTime>,
    pub exits: Vec<ThreadExit>,
    /// PID → the start tick (`/proc/<pid>/stat` field 22, mod 2^32; 0: unknown) of the process
    /// the cycle's rows of that PID are of: what reads `/proc/<pid>` checks it is reading.
    pub starts: HashMap<u32, u32>,
    /// Losses in this cycle, by cause (only causes with losses).
    pub drops: BTreeMap<String, u64>,
    /// `--devices network,disk`: bytes per (thread, user stack, class), of the processes the
    /// cycle's other rows are of.
    pub devices: Vec<DeviceSample>,
}

pub struct Collector {
    active: u32,
    /// `CONFIG_ACTIVE_BUFFER` as last written, and as it was before (the drained buffer's).
    tag: u32,
    retired_tag: u32,
    /// Flips so far: the kernel tags per-CPU caches of a buffer's contents with it.
    generation: u32,
    last_flip_ns: u64,
    drops_seen: [u64; DROP_KINDS as usize],
    incarnations: Incarnations,
}

impl Collector {
    /// Call right after `Probe::load`: the kernel starts on buffer 0. `proc_root` is where
    /// processes' start times are checked (see `incarnations.rs`).
    pub fn new(proc_root: PathBuf) -> Self {
        Self {
            active: 0,
            tag: 0,
            retired_tag: 0,
            generation: 0,
            last_flip_ns: monotonic::now_ns(),
            drops_seen: [0; DROP_KINDS as usize],
            incarnations: Incarnations::new(proc_root),
        }
    }

    /// Ends the current cycle: the kernel switches to the other buffer. Read the cycle's
    /// other counters (energy) right after this, so they describe the same instants, then
    /// call `read`.
    pub fn flip(&mut self, probe: &mut Probe) -> Result<(u64, u64), ProbeError> {
        self.active = 1 - self.active;
        // Tags repeat after 2^31 flips (68 years of 1 s cycles); a per-CPU cache entry
        // would have to survive that long untouched to be mistaken for a current one.
        self.generation = self.generation.wrapping_add(1) & (u32::MAX >> 1);
        let tag = self.generation << 1 | self.active;
        probe.config.set(CONFIG_ACTIVE_BUFFER, u64::from(tag), 0).map_err(|e| ProbeError::Map("CONFIG", e))?;
        self.retired_tag = std::mem::replace(&mut self.tag, tag);
        let end_ns = monotonic::now_ns();
        let start_ns = std::mem::replace(&mut self.last_flip_ns, end_ns);
        Ok((start_ns, end_ns))
    }

    /// Counts PID `pid` only while it names the process that started at tick `start_ticks` (a
    /// `--pid` target; 0: any process).
    pub fn expect_process(&mut self, pid: u32, start_ticks: u32) {
        self.incarnations.expect(pid, start_ticks);
    }

    /// Reads and clears the buffer the last `flip` retired.
    pub fn read(&mut self, probe: &mut Probe, (start_ns, end_ns): (u64, u64)) -> Result<RawCycle, ProbeError> {
        std::thread::sleep(QUIESCE);
        let old = 1 - self.active;
        let mut rows = Rows::default();
        let mut cycle = RawCycle { start_ns, end_ns, ..Default::default() };
        let mut devices = Vec::new();
        let sampled_names = drain_samples(probe, old as usize, self.retired_tag, &mut rows, &mut devices)?;
        drain_cpu_time(probe, old as usize, self.retired_tag, &mut rows, &mut cycle)?;
        // The names threads had when sampled over those they had when they first ran.
        rows.comms.extend(sampled_names);
        drain_exits(probe, old as usize, &mut rows)?;
        let sorted = self.incarnations.sort(rows);
        (cycle.samples, cycle.thread_cpu, cycle.comms, cycle.exits, cycle.starts) =
            (sorted.samples, sorted.thread_cpu, sorted.comms, sorted.exits, sorted.starts);
        // A byte count of a process other than the one the cycle's rows of its PID are of (a
        // reused PID) waits for nothing: it is dropped and counted with the other such rows.
        let before = devices.len();
        devices.retain(|(start, _)| cycle.starts.get(&start.0).is_none_or(|&s| s == start.1 || s == 0 || start.1 == 0));
        cycle.devices = devices.into_iter().map(|(_, d)| d).collect();
        let stale_devices = (before - cycle.devices.len()) as u64;
        cycle.drops = self.drop_deltas(probe)?;
        if stale_devices > 0 {
            *cycle.drops.entry(OTHER_PROCESS_ROWS.into()).or_default() += stale_devices;
        }
        if sorted.stale_rows > 0 {
            cycle.drops.insert(OTHER_PROCESS_ROWS.into(), sorted.stale_rows);
        }
        probe.flush_log();
        Ok(cycle)
    }

    fn drop_deltas(&mut self, probe: &Probe) -> Result<BTreeMap<String, u64>, ProbeError> {
        let mut out = BTreeMap::new();
        for kind in 0..DROP_KINDS {
            let total: u64 = probe.drops.get(&kind, 0).map_err(|e| ProbeError::Map("DROPS", e))?.iter().sum();
            let seen = &mut self.drops_seen[kind as usize];
            if total > *seen {
                out.insert(DROP_NAMES[kind as usize].to_string(), total - *seen);
            }
            *seen = total;
        }
        Ok(out)
    }
}

/// Returns the names the threads had when sampled (see `sample_names`).
/// Also drains the buffer's byte counts (`--devices`) into `devices`, with (pid, start tick):
/// their stacks are in the same stack maps, cleared here.
fn drain_samples(
    probe: &mut Probe,
    buffer: usize,
    tag: u32,
    rows: &mut Rows,
    devices: &mut Vec<((u32, u32), DeviceSample)>,
) -> Result<sample_names::ThreadNames, ProbeError> {
    let logs = probe.sample_log.get(&(buffer as u32), 0).map_err(|e| ProbeError::Map("SAMPLE_LOG", e))?;
    let maps = &mut probe.buffers[buffer];
    let counted: Vec<_> = maps.counts.iter().filter_map(Result::ok).collect();
    let byte_counts: Vec<_> = match &maps.device_bytes {
        Some(map) => map.iter().filter_map(Result::ok).collect(),
        None => Vec::new(),
    };
    let entries = sample_log::merge_counts(logs.iter(), tag, &counted);
    let names = sample_names::from_samples(&entries);
    let mut stacks: HashMap<i32, Arc<[u64]>> = HashMap::new();
    // One shared empty stack for every sample that has none (most kernel stacks).
    let empty: Arc<[u64]> = Arc::from([]);
    let mut stack = |id: i32| -> Arc<[u64]> {
        if id < 0 {
            return empty.clone();
        }
        stacks
            .entry(id)
            .or_insert_with(|| {
                let (map, id) = stack_map_of(id);
                let map = if map == StackMap::Overflow { &maps.stacks_overflow } else { &maps.stacks };
                match map.get(&id, 0) {
                    Ok(trace) => trace.frames().iter().map(|f| f.ip).collect(),
                    Err(_) => empty.clone(),
                }
            })
            .clone()
    };
    // Stored stacks by hash, then the stacks of samples (stored stack + leaf from the key).
    let mut stored: HashMap<u64, Option<JavaStack>> = HashMap::new();
    let mut walked: HashMap<(u64, JavaFrame), Option<Arc<WalkedStack>>> = HashMap::new();
    // A sample's or byte count's walked Java stack, decoded once per (stored stack, leaf).
    let mut walked_of = |hash: u64, leaf: JavaFrame| -> Option<Arc<WalkedStack>> {
        if hash == 0 {
            return None;
        }
        walked
            .entry((hash, leaf))
            .or_insert_with(|| {
                let raw = stored.entry(hash).or_insert_with(|| maps.java_stacks.get(&hash, 0).ok());
                raw.as_ref().map(|raw| Arc::new(walked::decode(raw, &leaf)))
            })
            .clone()
    };
    for (key, count) in &entries {
        let walked = walked_of(key.java_stack_hash, key.java_leaf);
        let sample = RawSample {
            pid: key.tgid,
            tid: key.tid,
            cpu: key.cpu,
            user: stack(key.user_stack_id),
            kernel: stack(key.kernel_stack_id),
            count: *count,
            walked,
        };
        rows.samples.push((key.start_ticks, sample));
    }
    for (key, bytes) in &byte_counts {
        let walked = walked_of(key.java_stack_hash, key.java_leaf);
        let sample = RawSample {
            pid: key.tgid,
            tid: key.tid,
            cpu: 0,
            user: stack(key.user_stack_id),
            kernel: empty.clone(),
            count: 0,
            walked,
        };
        devices.push((
            (key.tgid, key.start_ticks),
            DeviceSample { sample, class: key.class, bytes: *bytes, dev: key.dev },
        ));
    }
    if let Some(map) = maps.device_bytes.as_mut() {
        for (key, _) in byte_counts {
            let _ = map.remove(&key);
        }
    }
    for (key, _) in counted {
        let _ = maps.counts.remove(&key);
    }
    for map in [&mut maps.stacks, &mut maps.stacks_overflow] {
        let ids: Vec<u32> = map.stack_ids().filter_map(Result::ok).collect();
        for id in ids {
            let _ = map.remove(&id);
        }
    }
    let hashes: Vec<u64> = maps.java_stacks.keys().filter_map(Result::ok).collect();
    for hash in hashes {
        let _ = maps.java_stacks.remove(&hash);
    }
    Ok(names)
}

#[derive(Debug, PartialEq, Eq)]
enum StackMap {
    Main,
    Overflow,
}

/// Which of a buffer's two stack maps holds a (non-negative) stack id, and its id there.
fn stack_map_of(id: i32) -> (StackMap, u32) {
    if id & STACK_ID_OVERFLOW != 0 {
        (StackMap::Overflow, (id & !STACK_ID_OVERFLOW) as u32)
    } else {
        (StackMap::Main, id as u32)
    }
}

/// Busy and idle time per online CPU and on-CPU time per (thread, CPU), from `CPU_STATE`
/// and `THREAD_CPU_*` (see `cpu_time::merge`).
fn drain_cpu_time(
    probe: &mut Probe,
    buffer: usize,
    tag: u32,
    rows: &mut Rows,
    cycle: &mut RawCycle,
) -> Result<(), ProbeError> {
    let states = probe.cpu_state.get(&0, 0).map_err(|e| ProbeError::Map("CPU_STATE", e))?;
    let cpus: Vec<_> =
        probe.online_cpus.iter().filter_map(|&cpu| states.get(cpu as usize).map(|s| (cpu, *s))).collect();
    let map = &mut probe.buffers[buffer].thread_cpu;
    let spilled: Vec<_> = map.iter().filter_map(Result::ok).collect();
    let merged = cpu_time::merge(&cpus, tag, &spilled);
    (cycle.cpus, rows.thread_cpu, rows.comms) = (merged.cpus, merged.threads, merged.comms);
    for (key, _) in spilled {
        let _ = map.remove(&key);
    }
    Ok(())
}

fn drain_exits(probe: &mut Probe, buffer: usize, rows: &mut Rows) -> Result<(), ProbeError> {
    let map = &mut probe.buffers[buffer].exits;
    let entries: Vec<_> = map.iter().filter_map(Result::ok).collect();
    for (tid, value) in &entries {
        let exit = ThreadExit {
            pid: value.tgid,
            tid: *tid,
            comm: comm_str(&value.comm),
            process_ended: value.group_dead != 0,
        };
        rows.exits.push((value.start_ticks, exit));
    }
    for (tid, _) in entries {
        let _ = map.remove(&tid);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overflow_stack_id_names_the_second_map_and_its_own_id() {
        assert_eq!(stack_map_of(0), (StackMap::Main, 0));
        assert_eq!(stack_map_of(4095), (StackMap::Main, 4095));
        assert_eq!(stack_map_of(STACK_ID_OVERFLOW), (StackMap::Overflow, 0));
        assert_eq!(stack_map_of(STACK_ID_OVERFLOW | 1023), (StackMap::Overflow, 1023));
    }
}
