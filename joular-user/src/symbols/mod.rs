//! Sampled stacks → frames. Java frames of HotSpot JVMs through the JVM's own
//! introspection tables ([`hotspot`]: interpreted frames from the `Method*` and bcp the
//! sampler walked, compiled pcs with their inlined methods and lines, stubs by name); JIT
//! code of JVMs whose tables cannot be read through their perf map (jvm-symbols); other
//! user code and the kernel through blazesym. Equal stacks share one `Arc`.
//!
//! Per cycle: [`Symbolizer::begin_cycle`] collects what the JVMs' background jobs produced
//! and starts new ones (a re-dump for the perf maps that missed sampled addresses, at most once
//! per `min_dump_interval`); [`Symbolizer::prepare`] looks at the cycle's stacks for what is
//! missing and [`Symbolizer::settle`] waits, until a deadline, for the jobs that can supply it;
//! then every stack of the cycle is symbolized. Nothing changes a map between `settle` and the
//! next `begin_cycle`, so one cycle's stacks all see one version of each map. Nothing here
//! blocks on a JVM: attach, dumps and map loads run on the JVMs' job threads ([`jvm`], driven
//! from [`jobs`]).
//!
//! A HotSpot JVM is named through its own tables ([`hotspot`]), with no perf map and no attach;
//! its code cache is re-read in the middle of a cycle when a pc misses it, so fresh code is named
//! in the cycle it ran. The perf map is the fallback for JVMs whose tables cannot be read. The
//! kernel needs to know each HotSpot JVM to walk its stacks:
//! [`Symbolizer::take_kernel_updates`] hands those changes to whoever owns the maps.
//!
//! All symbol memory is bounded by one budget ([`budget`]). A HotSpot JVM's reads of its target
//! are bounded too: per object by the reader, per cycle in time and bytes ([`jobs`]); a JVM
//! that overruns is backed off, so hostile tables cannot starve the other JVMs.

pub mod budget;
mod compiled_names;
mod debug_file;
pub(crate) mod elf_copy;
mod hotspot;
mod intern;
mod jobs;
mod jvm;
mod kernel;
mod native;
mod native_maps;
mod process;
mod reports;
mod resolve;
mod stats;
mod truncation;
mod walk_config;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use joular_ebpf::{JvmConfig, JVM_UNWIND_HOTSPOT};
use jvm_symbols::hotspot::PcRole;
use jvm_symbols::FlagState;

use crate::ebpf::kernel_names::KernelNames;
use crate::model::{FrameKind, JavaUnwinder, Stack, WalkedStack};
use crate::target_read::stall_guard;
use budget::{Consumer, SymbolBudget};
use hotspot::{HotspotProcess, Wanted};
use intern::{FrameId, Interner};
use jvm::JobSettings;
use kernel::KernelResolver;
use native::NativeResolver;
pub use native::{names_at_file_offsets, panic_message, NameError, NativeStats};
use process::{Hotspot, ProcessState};
use resolve::{user_inputs, UserInput};
pub use stats::SymbolStats;

const UNKNOWN: &str = "[unknown]";
/// The interner may hold this fraction of the budget in stacks before its table starts over.
const STACKS_SHARE_OF_BUDGET: u64 = 4;
/// Private copies of native files' symbol tables may hold this fraction of the budget.
const NATIVE_COPIES_SHARE_OF_BUDGET: u64 = 4;

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
    /// Name Java frames through the JVMs' HotSpot tables (off: perf maps only, and the
    /// sampler walks no JVM stacks).
    pub hotspot: bool,
    /// The kernel's own symbol lookup (from the loaded probe); without it kernel frames are
    /// named through /proc/kallsyms.
    pub kernel_names: Option<KernelNames>,
    /// Where native unwind rows are kept between runs (`--unwind-cache`); `None`: built
    /// every run.
    pub unwind_cache: Option<PathBuf>,
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
            hotspot: true,
            kernel_names: None,
            unwind_cache: None,
        }
    }
}

/// A change to the kernel's maps the symbolizer asks for: it learns which processes are
/// HotSpot JVMs, and the sampler walks those stacks itself. Plain data, so the symbolizer
/// can run on another thread than the one that owns the maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelUpdate {
    /// Walk the stacks of `pid`'s threads with this configuration.
    WalkJvm { pid: u32, config: Box<JvmConfig> },
    /// Stop walking `pid` (it ended).
    ForgetJvm { pid: u32 },
    /// The native unwind table of walked JVM `pid` changed (`crate::unwind`).
    NativeUnwind { pid: u32, table: Vec<crate::unwind::tables::MappedRows> },
}

/// A stack of a cycle, for [`Symbolizer::prefetch_hotspot`].
#[derive(Debug, Clone, Copy)]
pub enum StackInput<'a> {
    Walked(&'a WalkedStack),
    /// Bare user pcs, leaf first.
    Bare(&'a [u64]),
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
    kernel_updates: Vec<KernelUpdate>,
    unwind: crate::unwind::tables::UnwindTables,
    /// Where the sampler's reports of code it met come from, and when they are next read
    /// ([`Symbolizer::learn_reported`]).
    reports: Option<reports::ReportSource>,
}

/// The unwind-row cache at `path`, or `None` with a warning saying why and how to fix it (the
/// run goes on, building every file's rows).
fn open_unwind_cache(path: &std::path::Path) -> Option<crate::unwind::row_cache::RowCache> {
    match crate::unwind::row_cache::RowCache::open(path) {
        Ok(cache) => Some(cache),
        Err(e) => {
            log::warn!(
                "--unwind-cache {}: not used ({e}); native unwind rows are built anew. Give a directory of your own \
                 that only you may write to, or --no-unwind-cache",
                path.display()
            );
            None
        }
    }
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
            unwind: crate::unwind::tables::UnwindTables::new(
                &opts.proc_root,
                opts.max_symbol_bytes / crate::unwind::tables::SHARE_OF_SYMBOL_BUDGET,
            )
            .with_cache(opts.unwind_cache.as_deref().and_then(open_unwind_cache)),
            kernel_symbols: KernelResolver::new(&opts.proc_root, opts.kernel_names.clone()),
            native: NativeResolver::new(&opts.proc_root, opts.max_symbol_bytes / NATIVE_COPIES_SHARE_OF_BUDGET),
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
            kernel_updates: Vec::new(),
            reports: None,
        }
    }

    /// Looks at a process before its first sample (a target named at the start), so a
    /// JVM's stacks are walked from the first cycle on.
    pub fn watch(&mut self, pid: u32) {
        self.ensure_process(pid);
        if let Some(process) = self.processes.get_mut(&pid) {
            process.watched = true;
        }
    }

    /// Kernel map changes asked for since the last call, in order: the JVMs' walk
    /// configurations and the processes to forget ([`Symbolizer::take_walk_updates`]), then
    /// the native unwind tables of walked processes.
    pub fn take_kernel_updates(&mut self) -> Vec<KernelUpdate> {
        let mut updates = self.take_walk_updates();
        let walked = self
            .processes
            .iter()
            .filter(|(_, p)| matches!(&p.hotspot, Hotspot::Ready(h) if h.published_unwind().is_some()));
        for pid in walked.map(|(&pid, _)| pid).collect::<Vec<_>>() {
            if let Some(table) = self.unwind.refresh(pid) {
                updates.push(KernelUpdate::NativeUnwind { pid, table });
            }
        }
        updates
    }

    /// The walk configurations and processes to forget of [`Symbolizer::take_kernel_updates`]
    /// alone: a starting JVM's configuration goes to the kernel before its native unwind
    /// tables are read (0.1-0.4 s for libjvm's on a loaded host), which its first walks can do
    /// without (native frames are then stepped by their frame pointers).
    pub fn take_walk_updates(&mut self) -> Vec<KernelUpdate> {
        let mut no_unwinder = Vec::new();
        for (&pid, process) in &mut self.processes {
            let Some(jvm) = &process.jvm else { continue };
            // Only a JVM without them is told to keep frame pointers when its HotSpot tables
            // cannot be walked.
            let frame_pointers = jvm.info.preserve_frame_pointer == FlagState::On;
            let reason = match &mut process.hotspot {
                Hotspot::Ready(h) => {
                    if let Some(config) = h.take_walk_config() {
                        self.kernel_updates.push(KernelUpdate::WalkJvm { pid, config: Box::new(config) });
                        log::debug!(
                            "JVM {pid}: walk configuration sent to the kernel {} ms after the process was first seen",
                            process.seen_at.elapsed().as_millis()
                        );
                        if config.unwind == JVM_UNWIND_HOTSPOT {
                            log::info!("JVM {pid}: its compiled frames are unwound by their code blobs' frame sizes");
                        }
                    }
                    match h.published_unwind() {
                        Some(JVM_UNWIND_HOTSPOT) | None => None,
                        Some(_) => h.hotspot_unwind_unavailable().map(|u| u.reason()),
                    }
                }
                Hotspot::Unavailable if self.opts.hotspot => Some("its HotSpot tables cannot be read"),
                Hotspot::Unavailable => Some("--java-symbols perf-map reads no HotSpot tables"),
                Hotspot::Pending { .. } | Hotspot::Blocked => None,
            };
            if let (Some(reason), false) = (reason, frame_pointers) {
                no_unwinder.push((pid, reason));
            }
        }
        for (pid, reason) in no_unwinder {
            self.warn_frame_pointers(pid, reason);
        }
        std::mem::take(&mut self.kernel_updates)
    }

    pub fn forget_process(&mut self, pid: u32) {
        if let Some(mut process) = self.processes.remove(&pid) {
            if let Some(h) = process.hotspot() {
                self.retire_hotspot_counts(h);
                self.kernel_updates.push(KernelUpdate::ForgetJvm { pid });
            }
        }
        self.budget.forget_process(pid);
        self.unwind.forget(pid);
        self.native.process_ended(pid);
        self.budget.report(Consumer::NativeCopies, self.native.stats().copy_bytes);
    }

    /// Keeps an ended JVM's counts in the totals.
    fn retire_hotspot_counts(&mut self, h: &HotspotProcess) {
        let (m, r) = (h.misses(), h.reads());
        let s = &mut self.stats;
        s.hotspot_jvms += 1;
        s.method_unreadable += m.method_unreadable;
        s.method_stale += m.method_stale;
        s.method_corrupt += m.method_corrupt;
        s.code_unreadable += m.code_unreadable;
        s.hotspot_methods_read += r.methods;
        s.hotspot_nmethods_read += r.nmethods;
        s.code_cache_refreshes += r.code_cache_refreshes;
        s.hotspot_panics += u64::from(h.panicked());
    }

    pub fn stats(&self) -> SymbolStats {
        let mut stats = self.stats.clone();
        stats.native_unwind = self.unwind.stats.clone();
        let guards = [stall_guard::hotspot_reads(), stall_guard::file_reads()];
        stats.target_reads_blocked = guards.iter().map(|g| g.timed_out()).sum();
        stats.target_reads_refused = guards.iter().map(|g| g.refused()).sum();
        for (&pid, process) in &self.processes {
            if let Some(jvm) = &process.jvm {
                stats.jvms += 1;
                stats.perf_map_entries += jvm.map.index().len();
                stats.perf_map_bad_lines += jvm.map.index().bad_lines();
                stats.perf_map_entries_not_indexed += jvm.map.index().not_indexed();
            }
            if let Hotspot::Ready(h) = &process.hotspot {
                let (m, r) = (h.misses(), h.reads());
                stats.hotspot_jvms += 1;
                stats.method_unreadable += m.method_unreadable;
                stats.method_stale += m.method_stale;
                stats.method_corrupt += m.method_corrupt;
                stats.code_unreadable += m.code_unreadable;
                stats.hotspot_methods_read += r.methods;
                stats.hotspot_nmethods_read += r.nmethods;
                stats.code_cache_refreshes += r.code_cache_refreshes;
                stats.hotspot_cache_bytes += h.cached_bytes();
                stats.hotspot_panics += u64::from(h.panicked());
                if let Some(mode) = h.published_unwind() {
                    let hotspot = mode == JVM_UNWIND_HOTSPOT;
                    let frame_pointers =
                        process.jvm.as_ref().is_some_and(|j| j.info.preserve_frame_pointer == FlagState::On);
                    let reason = (!hotspot && !frame_pointers)
                        .then(|| h.hotspot_unwind_unavailable())
                        .flatten()
                        .map(|u| u.reason().to_owned());
                    stats.unwinders.insert(
                        pid,
                        JavaUnwinder {
                            unwinder: if hotspot { "hotspot" } else { "frame_pointers" }.into(),
                            reason,
                            stacks_hotspot: process.walked.0,
                            stacks_frame_pointers: process.walked.1,
                            stacks_cut: process.walked.2,
                            debug_non_safepoints: h.debug_non_safepoints(),
                            inlining_approximate_share: (h.debug_non_safepoints() == Some(false)
                                && process.java_samples.0 > 0)
                                .then(|| process.java_samples.1 as f64 / process.java_samples.0 as f64),
                        },
                    );
                }
            }
        }
        stats.distinct_stacks = self.interner.distinct_stacks();
        stats.kallsyms_reloads = self.kernel_symbols.reloads();
        stats.native = self.native.stats().clone();
        stats.symbol_bytes = self.budget.used_bytes();
        stats.symbol_budget_bytes = self.budget.total_bytes();
        stats
    }

    /// Resolves this cycle's frames of `pid` (a HotSpot JVM read through its tables; nothing
    /// otherwise) in one guarded job ([`HotspotProcess::prefetch`]), before its stacks are
    /// symbolized. A job that blocks marks the JVM, once, with a warning.
    pub fn prefetch_hotspot<'a>(&mut self, pid: u32, stacks: impl IntoIterator<Item = StackInput<'a>>) {
        let Some(process) = self.processes.get_mut(&pid) else {
            return;
        };
        // Blocked while the job has it: a job that blocks leaves it so.
        let h = match std::mem::replace(&mut process.hotspot, Hotspot::Blocked) {
            Hotspot::Ready(h) => h,
            other => {
                process.hotspot = other;
                return;
            }
        };
        let in_mappings = |pc: u64| process.jvm.as_ref().is_some_and(|j| j.in_code_cache(pc));
        let wanted = stacks
            .into_iter()
            .flat_map(|stack| match stack {
                StackInput::Walked(walked) => user_inputs(walked),
                StackInput::Bare(user) => {
                    user.iter().map(|&pc| UserInput::Pc { pc, code: false, role: PcRole::AtOrAfter }).collect()
                }
            })
            .map(|input| match input {
                UserInput::Pc { pc, code, role } => Wanted::Pc { pc, looks_like_code: code || in_mappings(pc), role },
                UserInput::Compiled { pc, compile_id, role } => Wanted::Compiled { pc, compile_id, role },
                UserInput::Interpreted { method, bcp } => Wanted::Interpreted { method, bcp },
            })
            .collect();
        match HotspotProcess::prefetch(h, &mut self.interner, wanted) {
            Ok((h, unknown)) => {
                self.stats.unknown_jit_frames += unknown;
                process.hotspot = Hotspot::Ready(h);
            }
            Err(stall) => {
                self.stats.jvms_blocked += 1;
                log::warn!("JVM {pid}: a read of its memory blocked ({stall}); its Java frames are no longer named");
            }
        }
    }

    /// `user`/`kernel`: raw IPs, leaf first, as the kernel gives them. Returns the stack
    /// root first: user frames, then the kernel frames on top of them.
    pub fn symbolize(&mut self, pid: u32, user: &[u64], kernel: &[u64]) -> Stack {
        let started = std::time::Instant::now();
        self.ensure_process(pid);
        let inputs: Vec<UserInput> =
            user.iter().map(|&pc| UserInput::Pc { pc, code: false, role: PcRole::AtOrAfter }).collect();
        let (user_ids, _) = self.resolve_user(pid, &inputs);
        // A JVM the kernel does not walk yet (its tables still being read) is walked by frame
        // pointers, which JIT code without them cuts.
        self.finish_stack(pid, &user_ids, None, truncation::FRAME_POINTER_CUT, kernel, started)
    }

    /// A user stack the sampler walked in a JVM (leaf first), with the kernel's IPs.
    /// Returns the stack root first, as [`Symbolizer::symbolize`] does.
    pub fn symbolize_walked(&mut self, pid: u32, walked: &WalkedStack, kernel: &[u64], samples: u64) -> Stack {
        let started = std::time::Instant::now();
        self.ensure_process(pid);
        self.stats.walked_stacks += 1;
        self.stats.walked_stacks_cut += u64::from(walked.cut);
        self.stats.walked_stacks_truncated += u64::from(walked.truncated);
        if let Some(p) = self.processes.get_mut(&pid) {
            match walked.hotspot {
                true => p.walked.0 += 1,
                false => p.walked.1 += 1,
            }
            p.walked.2 += u64::from(walked.cut);
        }
        let inputs = user_inputs(walked);
        let (user_ids, freed) = self.resolve_user(pid, &inputs);
        self.stats.stale_compiled_frames += freed.stale * samples;
        self.stats.compiled_frames_named_by_method += freed.by_method * samples;
        self.count_java_samples(pid, &user_ids, samples);
        let root = truncation::truncation_root(walked).map(|name| self.interner.frame(FrameKind::Native, &name, &name));
        self.finish_stack(pid, &user_ids, root, truncation::UNKNOWN_CUT, kernel, started)
    }

    /// Counts `samples` of a walked stack with a Java frame, and whether its leaf is compiled
    /// Java code: a pc there lies between safepoints, which only `-XX:+DebugNonSafepoints`
    /// describes exactly (a compiled frame above native code is at a call, described exactly).
    fn count_java_samples(&mut self, pid: u32, user_leaf_first: &[FrameId], samples: u64) {
        let Some(process) = self.processes.get_mut(&pid) else {
            return;
        };
        if !user_leaf_first.iter().any(|&id| self.interner.kind(id).is_java()) {
            return;
        }
        process.java_samples.0 += samples;
        if user_leaf_first
            .first()
            .is_some_and(|&id| matches!(self.interner.kind(id), FrameKind::JavaJit | FrameKind::JavaInlined))
        {
            process.java_samples.1 += samples;
        }
    }

    /// `root`: the frame a cut walk ends with (see `truncation`), below every user frame. A
    /// Java stack cut with no root (its outermost frame is Java code) gets `unmarked_cut`.
    fn finish_stack(
        &mut self,
        pid: u32,
        user_ids: &[FrameId],
        root: Option<FrameId>,
        unmarked_cut: &str,
        kernel: &[u64],
        started: std::time::Instant,
    ) -> Stack {
        let cut = self.note_cut_stack(pid, user_ids);
        let root = root.or_else(|| cut.then(|| self.interner.frame(FrameKind::Native, unmarked_cut, unmarked_cut)));
        let kernel_ids = if self.opts.kernel { self.resolve_kernel(kernel) } else { Vec::new() };
        let root_first: Vec<FrameId> =
            root.iter().chain(user_ids.iter().rev()).chain(kernel_ids.iter().rev()).copied().collect();
        let stack = self.interner.stack(&root_first);
        self.stats.symbolize_ns += started.elapsed().as_nanos() as u64;
        stack
    }
}

#[cfg(test)]
mod tests;
