//! The per-cycle protocol between the symbolizer and the JVMs' background jobs
//! ([`super::jvm`]), and the budget that bounds their maps ([`super::budget`]). Only JVMs named
//! through their perf map have jobs; HotSpot JVMs are read directly, in the cycle.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jvm_symbols::hotspot::ReadBudget;

use super::budget::{self, Consumer};
use super::hotspot::CycleStart;
use super::jvm::Refresh;
use super::HotspotProcess;
use super::{ProcessState, SymbolStats, Symbolizer};

/// How often [`Symbolizer::settle`] looks at the jobs it waits for.
const SETTLE_POLL: Duration = Duration::from_millis(5);
/// Time all HotSpot JVMs together may spend reading target memory per cycle, and the most
/// and least one JVM gets: a real JVM's cycle takes a few ms (its first, tens), so the
/// bounds only bite on a target that makes each read slow or the reads endless.
const HOTSPOT_READ_TIME_PER_CYCLE: Duration = Duration::from_millis(300);
const MAX_READ_TIME_PER_JVM: Duration = Duration::from_millis(150);
const MIN_READ_TIME_PER_JVM: Duration = Duration::from_millis(30);

/// Each of `jvms` HotSpot JVMs' share per cycle: its read budget (time, and a quarter of
/// the symbol budget in bytes read) and the cap on its caches (half the symbol budget split
/// between them; the rest is the interner's and the perf maps').
fn hotspot_shares(max_symbol_bytes: u64, jvms: usize) -> (ReadBudget, usize) {
    let max_time = (HOTSPOT_READ_TIME_PER_CYCLE / jvms as u32).clamp(MIN_READ_TIME_PER_JVM, MAX_READ_TIME_PER_JVM);
    let read = ReadBudget { max_bytes: max_symbol_bytes / 4, max_time };
    (read, (max_symbol_bytes / 2 / jvms as u64) as usize)
}

impl Symbolizer {
    /// Call once per cycle before symbolizing its stacks: takes what the JVMs' jobs produced,
    /// fits every map to its share of the budget, and starts the jobs that are due.
    pub fn begin_cycle(&mut self) {
        self.cycle_started = Instant::now();
        self.budget.report(Consumer::Interner, self.interner.bytes());
        let known: Vec<u32> = self.processes.keys().copied().collect();
        let hotspot_jvms =
            self.processes.values().filter(|p| matches!(p.hotspot, super::Hotspot::Ready(_))).count().max(1);
        let (read_budget, max_cached_bytes) = hotspot_shares(self.opts.max_symbol_bytes, hotspot_jvms);
        for pid in known {
            self.retry_discovery(pid);
            let Some(h) = self.processes.get_mut(&pid).and_then(ProcessState::hotspot) else { continue };
            if let Some(message) = h.take_panic() {
                log::warn!("JVM {pid}: its HotSpot reader panicked ({message}); its Java frames are no longer named");
            }
            if let Some(stall) = h.take_stall() {
                self.stats.jvms_blocked += 1;
                log::warn!("JVM {pid}: a read of its memory blocked ({stall}); its Java frames are no longer named");
            }
            if let CycleStart::BackedOff { overrun, cycles } = h.start_cycle(read_budget, max_cached_bytes) {
                self.stats.jvms_backed_off += 1;
                let message = format!(
                    "JVM {pid}: its HotSpot tables {overrun} in one cycle (budget {} ms, {} MiB); \
                     not read for {cycles} cycle(s), its Java frames unnamed meanwhile",
                    read_budget.max_time.as_millis(),
                    read_budget.max_bytes >> 20
                );
                match h.first_back_off() {
                    true => log::warn!("{message}"),
                    false => log::debug!("{message}"),
                }
            }
            // The cycle's first reads of this JVM, in one job on the read thread.
            self.hotspot_job(pid, HotspotProcess::refresh_in_job);
            if let Some(h) = self.processes.get_mut(&pid).and_then(ProcessState::hotspot) {
                let bytes = h.cached_bytes() as u64;
                self.budget.report(Consumer::HotSpot(pid), bytes);
            }
        }
        let caps = self.current_caps();
        let pids: Vec<u32> = caps.keys().copied().collect();
        for pid in pids {
            self.collect_job(pid);
            let Some(process) = self.processes.get_mut(&pid) else { continue };
            let jvm = process.jvm.as_mut().expect("a JVM has a demand");
            jvm.awaited = false;
            if jvm.fit_map(&self.jobs, caps[&pid]) {
                self.stats.perf_map_drops_for_budget += 1;
                process.jit.clear();
            }
            jvm.start(&self.jobs, caps[&pid]);
        }
    }

    /// Looks at a stack of the cycle before it is symbolized: a JVM seen for the first time,
    /// or a JIT address its map misses, makes [`Self::settle`] wait for that JVM's job.
    pub fn prepare(&mut self, pid: u32, user: &[u64]) {
        self.ensure_process(pid);
        let Some(process) = self.processes.get_mut(&pid) else { return };
        if process.uses_perf_map().is_none() {
            return;
        }
        let may_dump = process.may_dump();
        let Some(jvm) = process.jvm.as_mut() else { return };
        if jvm.awaited && (jvm.needs_dump || !may_dump) {
            return;
        }
        if user.iter().any(|&ip| jvm.map.index().lookup(ip).is_none() && jvm.in_code_cache(ip)) {
            // While its HotSpot tables may still be read, a JVM is not asked for a map, but
            // one another tool wrote is read (and waited for).
            jvm.needs_dump |= may_dump;
            jvm.awaited = true;
        }
    }

    /// Starts the jobs the prepared stacks need (a JVM's first, a dump for a miss) and waits,
    /// until `deadline`, for the jobs of the JVMs they are about. True when a map or a JVM's
    /// flags changed: the cycle's stacks are then symbolized with them. A deadline that passes
    /// first is counted.
    pub fn settle(&mut self, deadline: Instant) -> bool {
        let mut waiting: Vec<u32> = self
            .processes
            .iter()
            .filter(|(_, p)| p.uses_perf_map().is_some_and(|j| j.awaited))
            .map(|(&pid, _)| pid)
            .collect();
        let caps = self.current_caps();
        let mut changed = false;
        while !waiting.is_empty() {
            waiting.retain(|&pid| {
                let refresh = self.collect_job(pid);
                changed |= refresh.as_ref().is_some_and(|r| r.reloaded || r.flags_learned);
                let Some(jvm) = self.processes.get_mut(&pid).and_then(|p| p.jvm.as_mut()) else {
                    return false;
                };
                // A JVM's first job, or a dump for the miss when the job before did not dump.
                let first = !jvm.ever_started();
                if !jvm.in_flight() && (first || (jvm.dump_due(&self.jobs) && !jvm.dumped_since(self.cycle_started))) {
                    jvm.start(&self.jobs, caps.get(&pid).copied().unwrap_or(0));
                }
                jvm.in_flight()
            });
            if waiting.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                self.stats.settle_timeouts += 1;
                break;
            }
            std::thread::sleep(SETTLE_POLL);
        }
        changed
    }

    /// Each JVM's share of the budget as it stands.
    fn current_caps(&self) -> HashMap<u32, u64> {
        let demands: Vec<(u32, Option<u64>)> =
            self.processes.iter().filter_map(|(&pid, p)| Some((pid, p.uses_perf_map()?.map_demand_bytes()))).collect();
        budget::water_fill(self.budget.maps_share_bytes(), &demands)
    }

    /// Takes the result of `pid`'s job, if it has finished, into the statistics and caches.
    fn collect_job(&mut self, pid: u32) -> Option<Refresh> {
        let process = self.processes.get_mut(&pid)?;
        let refresh = process.jvm.as_mut()?.collect(self.opts.min_dump_interval)?;
        Self::count_refresh(&mut self.stats, process, &refresh);
        if refresh.flags_learned {
            self.note_frame_pointers(pid);
        }
        Some(refresh)
    }

    fn count_refresh(stats: &mut SymbolStats, process: &mut ProcessState, refresh: &Refresh) {
        stats.perf_map_dumps += u64::from(refresh.dumped);
        stats.perf_map_dump_failures += u64::from(refresh.dump_failed);
        stats.perf_map_job_panics += u64::from(refresh.panicked);
        stats.perf_map_entries_not_indexed_total += refresh.not_indexed;
        if refresh.reloaded {
            stats.perf_map_reloads += 1;
            process.jit.clear();
        }
    }
}
