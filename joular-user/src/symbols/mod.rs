//! Raw instruction pointers → frames. Java JIT code through the JVM's perf map
//! (jvm-symbols), other user code and the kernel through blazesym. Each (pid, ip) is
//! resolved once; equal stacks share one `Arc`.
//!
//! Per cycle: [`Symbolizer::begin_cycle`] collects what the JVMs' background jobs produced
//! and starts new ones (a re-dump for the maps that missed sampled addresses, at most once per
//! `min_dump_interval`); [`Symbolizer::prepare`] looks at the cycle's stacks for what is
//! missing and [`Symbolizer::settle`] waits, until a deadline, for the jobs that can supply it;
//! then every stack of the cycle is symbolized. Nothing changes a map between `settle` and the
//! next `begin_cycle`, so one cycle's stacks all see one version of each map. Nothing here
//! blocks on a JVM: attach, dumps and map loads run on the JVMs' job threads ([`jvm`], driven
//! from [`jobs`]).
//!
//! All symbol memory is bounded by one budget ([`budget`]).

pub mod budget;
mod intern;
mod jobs;
mod jvm;
mod kernel;
mod native;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use jvm_symbols::{classify, short_name, CodeKind, FlagState};

use crate::model::{FrameKind, Stack};
use budget::SymbolBudget;
use intern::{FrameId, Interner};
use jvm::{JobSettings, JvmState};
use kernel::KernelResolver;
use native::NativeResolver;

const UNKNOWN: &str = "[unknown]";
/// An address in a JVM's code cache that its perf map does not cover (yet).
const UNKNOWN_JIT: &str = "[unknown JIT code]";
/// Warn about cut stacks once this many Java stacks were seen, if most were cut.
const CUT_STACKS_MIN_SAMPLE: u64 = 20;
/// The interner may hold this fraction of the budget in stacks before its table starts over.
const STACKS_SHARE_OF_BUDGET: u64 = 4;

#[derive(Debug, Clone)]
pub struct SymbolizerOptions {
    /// Resolve kernel frames (otherwise they are dropped).
    pub kernel: bool,
    /// Ask JVMs for perf maps over the attach protocol (otherwise only read existing maps).
    pub attach: bool,
    /// `/proc`, or a fake tree in tests.
    pub proc_root: PathBuf,
    pub min_dump_interval: Duration,
    /// Bounds one attach exchange (listener start included).
    pub attach_timeout: Duration,
    /// Bounds reading one perf map.
    pub load_timeout: Duration,
    /// All symbol data together (`--max-symbol-mb`).
    pub max_symbol_bytes: u64,
}

impl Default for SymbolizerOptions {
    fn default() -> Self {
        SymbolizerOptions {
            kernel: true,
            attach: true,
            proc_root: PathBuf::from("/proc"),
            min_dump_interval: Duration::from_secs(1),
            attach_timeout: Duration::from_secs(5),
            load_timeout: Duration::from_secs(10),
            max_symbol_bytes: 256 << 20,
        }
    }
}

/// Counters since the start (bad lines: in the maps currently loaded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymbolStats {
    pub jvms: usize,
    pub perf_map_entries: usize,
    pub perf_map_bad_lines: u64,
    pub perf_map_dumps: u64,
    pub perf_map_dump_failures: u64,
    pub perf_map_reloads: u64,
    /// Sampled addresses in a code cache that the perf map did not cover.
    pub jit_misses: u64,
    pub unresolved_frames: u64,
    /// Java stacks whose root is Java code: unwinding stopped inside the JVM.
    pub cut_java_stacks: u64,
    pub jvms_without_frame_pointers: u64,
    pub distinct_stacks: usize,
    /// Well-formed lines of the loaded maps left out for lack of memory.
    pub perf_map_entries_not_indexed: u64,
    /// The same, summed over every load since the start (a map read again counts again).
    pub perf_map_entries_not_indexed_total: u64,
    /// Maps dropped because a smaller share of the budget was left for them.
    pub perf_map_drops_for_budget: u64,
    /// Symbol memory accounted for now, and the budget.
    pub symbol_bytes: u64,
    pub symbol_budget_bytes: u64,
    /// Cycles symbolized before a JVM's job they waited for had finished (their misses
    /// stay `[unknown JIT code]`).
    pub settle_timeouts: u64,
    /// Times kallsyms was copied and parsed again because the module list changed.
    pub kallsyms_reloads: u64,
}

#[derive(Default)]
struct ProcessState {
    jvm: Option<JvmState>,
    /// Frames from the perf map; cleared when the map is reloaded.
    jit: HashMap<u64, FrameId>,
    native: HashMap<u64, FrameId>,
}

pub struct Symbolizer {
    opts: SymbolizerOptions,
    budget: SymbolBudget,
    jobs: JobSettings,
    /// When the current cycle began: at most one dump per JVM per cycle.
    cycle_started: Instant,
    native: NativeResolver,
    kernel_symbols: KernelResolver,
    interner: Interner,
    processes: HashMap<u32, ProcessState>,
    kernel: HashMap<u64, FrameId>,
    stats: SymbolStats,
    frame_pointer_warned: bool,
    cut_warned: bool,
}

impl Symbolizer {
    pub fn new(opts: SymbolizerOptions) -> Self {
        let budget = SymbolBudget::new(opts.max_symbol_bytes);
        let jobs = JobSettings {
            attach_timeout: opts.attach.then_some(opts.attach_timeout),
            min_dump_interval: opts.min_dump_interval,
            load_timeout: opts.load_timeout,
            pool: budget.maps_pool().clone(),
        };
        Symbolizer {
            kernel_symbols: KernelResolver::new(&opts.proc_root),
            native: NativeResolver::new(),
            interner: Interner::with_max_stack_bytes(opts.max_symbol_bytes / STACKS_SHARE_OF_BUDGET),
            opts,
            budget,
            jobs,
            cycle_started: Instant::now(),
            processes: HashMap::new(),
            kernel: HashMap::new(),
            stats: SymbolStats::default(),
            frame_pointer_warned: false,
            cut_warned: false,
        }
    }

    pub fn forget_process(&mut self, pid: u32) {
        self.processes.remove(&pid);
        self.budget.forget_process(pid);
        self.native.process_ended();
    }

    pub fn stats(&self) -> SymbolStats {
        let jvms = self.processes.values().filter_map(|p| p.jvm.as_ref());
        let mut stats = self.stats.clone();
        for jvm in jvms {
            stats.jvms += 1;
            stats.perf_map_entries += jvm.map.index().len();
            stats.perf_map_bad_lines += jvm.map.index().bad_lines();
            stats.perf_map_entries_not_indexed += jvm.map.index().not_indexed();
        }
        stats.distinct_stacks = self.interner.distinct_stacks();
        stats.kallsyms_reloads = self.kernel_symbols.reloads();
        stats.symbol_bytes = self.budget.used_bytes();
        stats.symbol_budget_bytes = self.budget.total_bytes();
        stats
    }

    /// `user`/`kernel`: raw IPs, leaf first, as the kernel gives them. Returns the stack
    /// root first: user frames, then the kernel frames on top of them.
    pub fn symbolize(&mut self, pid: u32, user: &[u64], kernel: &[u64]) -> Stack {
        self.ensure_process(pid);
        let user_ids = self.resolve_user(pid, user);
        self.note_cut_stack(pid, &user_ids);
        let kernel_ids = if self.opts.kernel {
            self.resolve_kernel(kernel)
        } else {
            Vec::new()
        };
        let root_first: Vec<FrameId> = user_ids.iter().rev().chain(kernel_ids.iter().rev()).copied().collect();
        self.interner.stack(&root_first)
    }

    fn ensure_process(&mut self, pid: u32) {
        if self.processes.contains_key(&pid) {
            return;
        }
        let mut process = ProcessState::default();
        match JvmState::discover(&self.opts.proc_root, pid) {
            Ok(Some(jvm)) => {
                // Its first job (flags, dump, map) starts in `settle` (or the next
                // `begin_cycle`), once every JVM of the cycle is known to share the budget.
                process.jvm = Some(jvm);
                self.processes.insert(pid, process);
                self.note_frame_pointers(pid);
                return;
            }
            Ok(None) => {}
            Err(e) => log::debug!("process {pid}: {e}"),
        }
        self.processes.insert(pid, process);
    }

    /// Says once that a JVM runs without frame pointers, when that becomes known.
    fn note_frame_pointers(&mut self, pid: u32) {
        let Some(jvm) = self.processes.get(&pid).and_then(|p| p.jvm.as_ref()) else {
            return;
        };
        if jvm.info.preserve_frame_pointer != FlagState::Off {
            return;
        }
        self.stats.jvms_without_frame_pointers += 1;
        if !std::mem::replace(&mut self.frame_pointer_warned, true) {
            log::warn!(
                "JVM {pid} runs without frame pointers in JIT code, so its Java stacks \
                 are cut at the first compiled method: restart it with -XX:+PreserveFramePointer"
            );
        }
    }

    fn resolve_user(&mut self, pid: u32, user: &[u64]) -> Vec<FrameId> {
        let process = self.processes.get_mut(&pid).expect("ensure_process ran");
        let mut ids = vec![0; user.len()];
        let mut pending: Vec<(usize, u64)> = Vec::new();
        for (slot, &ip) in user.iter().enumerate() {
            if let Some(&id) = process.jit.get(&ip).or_else(|| process.native.get(&ip)) {
                ids[slot] = id;
                continue;
            }
            if let Some(jvm) = &mut process.jvm {
                if let Some(symbol) = jvm.map.index().lookup(ip) {
                    let id = match classify(symbol.name) {
                        CodeKind::JavaMethod => {
                            self.interner.frame(FrameKind::JavaJit, symbol.name, &short_name(symbol.name))
                        }
                        CodeKind::Stub => self.interner.frame(FrameKind::Stub, symbol.name, symbol.name),
                    };
                    process.jit.insert(ip, id);
                    ids[slot] = id;
                    continue;
                }
                if jvm.in_code_cache(ip) {
                    // A dump this cycle already answered what `prepare` saw missing.
                    jvm.needs_dump |= !jvm.dumped_since(self.cycle_started);
                    self.stats.jit_misses += 1;
                    let id = self.interner.frame(FrameKind::JavaJit, UNKNOWN_JIT, UNKNOWN_JIT);
                    process.jit.insert(ip, id);
                    ids[slot] = id;
                    continue;
                }
            }
            pending.push((slot, ip));
        }
        if !pending.is_empty() {
            let addrs: Vec<u64> = pending.iter().map(|&(_, ip)| ip).collect();
            let names = self.native.user(pid, &addrs);
            for ((slot, ip), name) in pending.into_iter().zip(names) {
                let name = name.unwrap_or_else(|| {
                    self.stats.unresolved_frames += 1;
                    UNKNOWN.to_owned()
                });
                let id = self.interner.frame(FrameKind::Native, &name, &name);
                process.native.insert(ip, id);
                ids[slot] = id;
            }
        }
        ids
    }

    fn resolve_kernel(&mut self, kernel: &[u64]) -> Vec<FrameId> {
        let missing: Vec<u64> = kernel.iter().copied().filter(|ip| !self.kernel.contains_key(ip)).collect();
        let mut unknown = HashMap::new();
        if !missing.is_empty() {
            let names = self.kernel_symbols.resolve(&missing);
            for (ip, name) in missing.into_iter().zip(names) {
                match name {
                    Some(name) => {
                        let id = self.interner.frame(FrameKind::Kernel, &name, &name);
                        self.kernel.insert(ip, id);
                    }
                    // Not cached: a module loaded later may cover it (see `kernel.rs`).
                    None => {
                        self.stats.unresolved_frames += 1;
                        unknown.insert(ip, self.interner.frame(FrameKind::Kernel, UNKNOWN, UNKNOWN));
                    }
                }
            }
        }
        kernel.iter().map(|ip| self.kernel.get(ip).or_else(|| unknown.get(ip)).copied().expect("resolved above")).collect()
    }

    /// With frame pointers, a Java thread's stack unwinds down to native thread start;
    /// one whose root is Java code was cut (no -XX:+PreserveFramePointer).
    fn note_cut_stack(&mut self, pid: u32, user_leaf_first: &[FrameId]) {
        let is_java = |kind| matches!(kind, FrameKind::JavaJit | FrameKind::Stub);
        let Some(jvm) = self.processes.get_mut(&pid).and_then(|p| p.jvm.as_mut()) else {
            return;
        };
        if !user_leaf_first.iter().any(|&id| is_java(self.interner.kind(id))) {
            return;
        }
        jvm.java_stacks += 1;
        let root = *user_leaf_first.last().expect("a Java frame is present");
        if is_java(self.interner.kind(root)) {
            jvm.cut_stacks += 1;
            self.stats.cut_java_stacks += 1;
        }
        // The flag to add is said once: when discovery already warned, cut stacks are expected.
        if !self.cut_warned
            && !self.frame_pointer_warned
            && jvm.java_stacks >= CUT_STACKS_MIN_SAMPLE
            && jvm.cut_stacks * 2 > jvm.java_stacks
        {
            self.cut_warned = true;
            log::warn!(
                "JVM {pid}: {} of {} Java stacks end in JIT code (cut call stacks): \
                 restart it with -XX:+PreserveFramePointer",
                jvm.cut_stacks,
                jvm.java_stacks
            );
        }
    }
}

#[cfg(test)]
mod tests;
