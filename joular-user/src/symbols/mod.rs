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
pub(crate) mod elf_copy;
mod hotspot;
mod intern;
mod jobs;
mod jvm;
mod kernel;
mod native;
mod native_maps;
pub(crate) use native::on_fuse;
pub(crate) mod stall_guard;
mod truncation;
mod walk_config;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use joular_ebpf::{JvmConfig, JVM_UNWIND_HOTSPOT};
use jvm_symbols::hotspot::HotspotError;
use jvm_symbols::{classify, short_name, stable_name, CodeKind, FlagState};

use crate::ebpf::kernel_names::KernelNames;
use crate::model::{FrameKind, JavaUnwinder, Stack, WalkedFrame, WalkedStack};
use budget::{Consumer, SymbolBudget};
use hotspot::{Code, HotspotProcess, Wanted, INTERPRETER, UNKNOWN_JIT};
use intern::{FrameId, Interner};
use jvm::{JobSettings, JvmState};
use kernel::KernelResolver;
pub use native::{names_at_file_offsets, panic_message, NameError, NativeStats};
use native::{NativeName, NativeResolver};

const UNKNOWN: &str = "[unknown]";
/// Cycles a process is looked at again to see whether it became a JVM (`record` sees the
/// launcher before it loads libjvm), and a JVM's tables are tried again (they are filled
/// while the VM starts) before its perf map is used instead.
const DISCOVERY_ATTEMPTS: u32 = 10;
/// Warn about cut stacks once this many Java stacks were seen, if most were cut.
const CUT_STACKS_MIN_SAMPLE: u64 = 20;
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
        }
    }
}

/// Counters since the start (bad lines: in the maps currently loaded).
#[derive(Debug, Clone, Default, PartialEq)]
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
    /// JVMs named through their HotSpot tables since the start (the others use their perf map).
    pub hotspot_jvms: usize,
    /// `Method*`s read and checked (once each, then served from the cache), and nmethods
    /// whose debug information (inlining, lines) was read.
    pub hotspot_methods_read: u64,
    pub hotspot_nmethods_read: u64,
    /// Why a `Method*` or pc could not be named (`jvm_symbols::hotspot::Misses`).
    pub method_unreadable: u64,
    pub method_stale: u64,
    pub method_corrupt: u64,
    pub code_unreadable: u64,
    /// Code-cache re-reads, most of them to resolve a miss in the cycle it happened.
    pub code_cache_refreshes: u64,
    /// Distinct JIT pcs per cycle that stayed `[unknown JIT code]` (HotSpot path).
    pub unknown_jit_frames: u64,
    /// Interpreted frames shown as `Interpreter`: their `Method*` failed the check.
    pub unnamed_interpreted_frames: u64,
    /// Stacks the sampler walked (per thread, CPU and cycle), and those of them that
    /// stopped before the thread's first frame or at the frame limit.
    pub walked_stacks: u64,
    pub walked_stacks_cut: u64,
    pub walked_stacks_truncated: u64,
    /// Approximate heap bytes of the HotSpot readers' caches now.
    pub hotspot_cache_bytes: usize,
    /// Compiled frames whose nmethod was freed and reused before it was named.
    pub stale_compiled_frames: u64,
    /// Per live JVM whose stacks the sampler walks: which unwinder, and its stacks.
    pub unwinders: BTreeMap<u32, JavaUnwinder>,
    /// Wall time spent symbolizing stacks (`symbolize`, `symbolize_walked`), discovery included.
    pub symbolize_ns: u64,
    /// JVMs whose HotSpot tables could not be read (their perf map names them instead), and
    /// why (`pid: reason`, the first [`MAX_UNREADABLE_REASONS`]).
    pub jvms_unreadable: u64,
    pub jvms_unreadable_reasons: Vec<String>,
    /// Times a JVM was backed off for spending its per-cycle budget of HotSpot reads.
    pub jvms_backed_off: u64,
    /// Panics caught in a JVM's HotSpot reader (that JVM is then read no more).
    pub hotspot_panics: u64,
    /// JVMs one of whose reads blocked past its deadline (then read no more), and reads of
    /// targets (JVM memory, mapped files) that did, or were refused while too many threads were
    /// left blocked (`stall_guard`).
    pub jvms_blocked: u64,
    pub target_reads_blocked: u64,
    pub target_reads_refused: u64,
    /// Native files copied and named, and those that could not be.
    pub native: NativeStats,
    /// Panics the symbol worker caught, and the samples of the cycles they cost their names
    /// (set by the worker, `session::symbolize`).
    pub worker_panics: u64,
    pub samples_unsymbolized: u64,
}

/// Reasons kept in [`SymbolStats::jvms_unreadable_reasons`]: a host full of hostile fakes
/// must not grow the summary without bound.
const MAX_UNREADABLE_REASONS: usize = 32;

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

/// How far a JVM's HotSpot tables got.
enum Hotspot {
    Ready(Box<HotspotProcess>),
    /// Not readable yet: tried again after `wait_cycles` cycles, a wait that doubles with
    /// each attempt (tables that never become readable are not read every cycle).
    Pending {
        attempts_left: u32,
        wait_cycles: u32,
    },
    /// Not readable: the perf map names its JIT code.
    Unavailable,
    /// A cycle's reads of its memory blocked: its reader is left with the blocked thread, its
    /// Java frames stay unnamed (no attach, no perf map for a target that blocks us).
    Blocked,
}

struct ProcessState {
    jvm: Option<JvmState>,
    hotspot: Hotspot,
    /// Cycles left to check whether a process that is not a JVM became one.
    discovery_attempts_left: u32,
    /// Walked stacks of this process: (HotSpot-unwound, frame pointers only, cut).
    walked: (u64, u64, u64),
    /// Walked samples with a Java frame, and those whose leaf is compiled Java code.
    java_samples: (u64, u64),
    /// Frames from the perf map; cleared when the map is reloaded.
    jit: HashMap<u64, FrameId>,
    native: HashMap<u64, FrameId>,
}

impl ProcessState {
    fn hotspot(&mut self) -> Option<&mut HotspotProcess> {
        match &mut self.hotspot {
            Hotspot::Ready(h) => Some(h),
            _ => None,
        }
    }

    /// A JVM named through its perf map: its tables cannot be read (or `--java-symbols
    /// perf-map`), or not yet (then a map some other tool wrote is read, but none is dumped).
    /// A JVM named through its tables never attaches, dumps or loads a map.
    fn uses_perf_map(&self) -> Option<&JvmState> {
        match self.hotspot {
            Hotspot::Ready(_) | Hotspot::Blocked => None,
            _ => self.jvm.as_ref(),
        }
    }

    /// Whether its perf map may be dumped over attach: only once its tables are known to be
    /// unreadable.
    fn may_dump(&self) -> bool {
        matches!(self.hotspot, Hotspot::Unavailable)
    }
}

/// A stack of a cycle, for [`Symbolizer::prefetch_hotspot`].
#[derive(Debug, Clone, Copy)]
pub enum StackInput<'a> {
    Walked(&'a WalkedStack),
    /// Bare user pcs, leaf first.
    Bare(&'a [u64]),
}

/// The frames the sampler walked, to resolve.
fn user_inputs(walked: &WalkedStack) -> Vec<UserInput> {
    walked
        .frames
        .iter()
        .map(|f| match *f {
            WalkedFrame::Native(pc) => UserInput::Pc { pc, code: false },
            WalkedFrame::Code(pc) => UserInput::Pc { pc, code: true },
            WalkedFrame::Compiled { pc, compile_id } => UserInput::Compiled { pc, compile_id },
            WalkedFrame::Interpreted { method, bcp } => UserInput::Interpreted { method, bcp },
        })
        .collect()
}

/// One user frame to resolve: a pc, or an interpreted frame the sampler walked.
#[derive(Debug, Clone, Copy)]
enum UserInput {
    Pc { pc: u64, code: bool },
    Compiled { pc: u64, compile_id: u32 },
    Interpreted { method: u64, bcp: u64 },
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
            ),
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
        }
    }

    /// Looks at a process before its first sample (a target named at the start), so a
    /// JVM's stacks are walked from the first cycle on.
    pub fn watch(&mut self, pid: u32) {
        self.ensure_process(pid);
    }

    /// Kernel map changes asked for since the last call, in order.
    pub fn take_kernel_updates(&mut self) -> Vec<KernelUpdate> {
        let mut no_unwinder = Vec::new();
        for (&pid, process) in &mut self.processes {
            let Some(jvm) = &process.jvm else { continue };
            let frame_pointers = jvm.info.preserve_frame_pointer == FlagState::On;
            let reason = match &mut process.hotspot {
                Hotspot::Ready(h) => {
                    if let Some(config) = h.take_walk_config(frame_pointers) {
                        self.kernel_updates.push(KernelUpdate::WalkJvm { pid, config: Box::new(config) });
                        if config.unwind == JVM_UNWIND_HOTSPOT {
                            log::info!("JVM {pid}: no frame pointers in JIT code; its compiled frames are unwound by their code blobs' frame sizes");
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
        let walked = self
            .processes
            .iter()
            .filter(|(_, p)| matches!(&p.hotspot, Hotspot::Ready(h) if h.published_unwind().is_some()));
        for pid in walked.map(|(&pid, _)| pid).collect::<Vec<_>>() {
            if let Some(table) = self.unwind.refresh(pid) {
                self.kernel_updates.push(KernelUpdate::NativeUnwind { pid, table });
            }
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
        s.stale_compiled_frames += h.stale_compiled_frames();
        s.hotspot_methods_read += r.methods;
        s.hotspot_nmethods_read += r.nmethods;
        s.code_cache_refreshes += r.code_cache_refreshes;
        s.hotspot_panics += u64::from(h.panicked());
    }

    pub fn stats(&self) -> SymbolStats {
        let mut stats = self.stats.clone();
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
                stats.stale_compiled_frames += h.stale_compiled_frames();
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
                StackInput::Bare(user) => user.iter().map(|&pc| UserInput::Pc { pc, code: false }).collect(),
            })
            .map(|input| match input {
                UserInput::Pc { pc, code } => Wanted::Pc { pc, looks_like_code: code || in_mappings(pc) },
                UserInput::Compiled { pc, compile_id } => Wanted::Compiled { pc, compile_id },
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
        let inputs: Vec<UserInput> = user.iter().map(|&pc| UserInput::Pc { pc, code: false }).collect();
        let user_ids = self.resolve_user(pid, &inputs);
        self.finish_stack(pid, &user_ids, None, kernel, started)
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
        let user_ids = self.resolve_user(pid, &inputs);
        self.count_java_samples(pid, &user_ids, samples);
        let root = truncation::truncation_root(walked).map(|name| self.interner.frame(FrameKind::Native, &name, &name));
        self.finish_stack(pid, &user_ids, root, kernel, started)
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

    /// `root`: the frame a cut walk ends with (see `truncation`), below every user frame.
    fn finish_stack(
        &mut self,
        pid: u32,
        user_ids: &[FrameId],
        root: Option<FrameId>,
        kernel: &[u64],
        started: std::time::Instant,
    ) -> Stack {
        self.note_cut_stack(pid, user_ids);
        let kernel_ids = if self.opts.kernel { self.resolve_kernel(kernel) } else { Vec::new() };
        let root_first: Vec<FrameId> =
            root.iter().chain(user_ids.iter().rev()).chain(kernel_ids.iter().rev()).copied().collect();
        let stack = self.interner.stack(&root_first);
        self.stats.symbolize_ns += started.elapsed().as_nanos() as u64;
        stack
    }

    fn ensure_process(&mut self, pid: u32) {
        if self.processes.contains_key(&pid) {
            return;
        }
        let mut process = ProcessState {
            jvm: None,
            hotspot: Hotspot::Unavailable,
            discovery_attempts_left: DISCOVERY_ATTEMPTS,
            walked: (0, 0, 0),
            java_samples: (0, 0),
            jit: HashMap::new(),
            native: HashMap::new(),
        };
        self.discover(pid, &mut process);
        self.processes.insert(pid, process);
        self.note_frame_pointers(pid);
    }

    /// A process that was not a JVM, or a JVM whose tables were not readable yet, is
    /// looked at again for a few cycles.
    fn retry_discovery(&mut self, pid: u32) {
        let process = self.processes.get_mut(&pid).expect("known process");
        if process.jvm.is_none() && process.discovery_attempts_left > 0 {
            process.discovery_attempts_left -= 1;
            let mut process = self.processes.remove(&pid).expect("known process");
            self.discover(pid, &mut process);
            let found = process.jvm.is_some();
            self.processes.insert(pid, process);
            if found {
                self.note_frame_pointers(pid);
            }
        } else if let Hotspot::Pending { .. } = process.hotspot {
            Self::attach_hotspot(&self.opts.proc_root, pid, process, &mut self.stats);
        }
    }

    /// A JVM found here is named through its HotSpot tables when they can be read; otherwise
    /// its first perf-map job (flags, dump, map) starts in `settle` (or the next `begin_cycle`),
    /// once every JVM of the cycle is known to share the budget.
    fn discover(&mut self, pid: u32, process: &mut ProcessState) {
        match JvmState::discover(&self.opts.proc_root, pid) {
            Ok(Some(mut jvm)) => {
                if self.opts.hotspot {
                    // No perf map is asked for while the HotSpot tables may still be read.
                    jvm.needs_dump = false;
                    process.hotspot = Hotspot::Pending { attempts_left: DISCOVERY_ATTEMPTS, wait_cycles: 0 };
                }
                process.jvm = Some(jvm);
                Self::attach_hotspot(&self.opts.proc_root, pid, process, &mut self.stats);
            }
            Ok(None) => {}
            Err(e) => log::debug!("process {pid}: {e}"),
        }
    }

    /// Reads the JVM's HotSpot tables; after the last failed attempt its perf map is used.
    fn attach_hotspot(proc_root: &std::path::Path, pid: u32, process: &mut ProcessState, stats: &mut SymbolStats) {
        let Hotspot::Pending { attempts_left, wait_cycles } = process.hotspot else {
            return;
        };
        let Some(jvm) = &mut process.jvm else {
            return;
        };
        if wait_cycles > 0 {
            process.hotspot = Hotspot::Pending { attempts_left, wait_cycles: wait_cycles - 1 };
            return;
        }
        let started = std::time::Instant::now();
        match HotspotProcess::attach(proc_root, pid) {
            Ok(h) => {
                log::debug!("JVM {pid}: named through its HotSpot tables (read in {:?})", started.elapsed());
                process.hotspot = Hotspot::Ready(Box::new(h));
                // A map read while the tables were pending has no use any more.
                jvm.map.forget();
            }
            // Not HotSpot, or one without the tables: retrying cannot help.
            Err(e) if attempts_left <= 1 || !e.may_pass() => {
                match e {
                    // Tables no HotSpot writes: a hostile or broken target, worth a warning.
                    HotspotError::Bound { .. }
                    | HotspotError::Panicked(_)
                    | HotspotError::TooLarge { .. }
                    | HotspotError::Blocked(_) => {
                        log::warn!("JVM {pid}: HotSpot tables unreadable ({e}); naming its JIT code from its perf map")
                    }
                    _ => log::info!(
                        "JVM {pid}: HotSpot tables not readable ({e}); naming its JIT code from its perf map"
                    ),
                }
                stats.jvms_unreadable += 1;
                stats.hotspot_panics += u64::from(matches!(e, HotspotError::Panicked(_)));
                stats.jvms_blocked += u64::from(matches!(e, HotspotError::Blocked(_)));
                if stats.jvms_unreadable_reasons.len() < MAX_UNREADABLE_REASONS {
                    stats.jvms_unreadable_reasons.push(format!("{pid}: {e}"));
                }
                process.hotspot = Hotspot::Unavailable;
                jvm.needs_dump = true;
            }
            Err(e) => {
                log::debug!("JVM {pid}: HotSpot tables not readable yet ({e})");
                let tried = DISCOVERY_ATTEMPTS - attempts_left;
                process.hotspot =
                    Hotspot::Pending { attempts_left: attempts_left - 1, wait_cycles: (1 << tried.min(3)) - 1 };
            }
        }
    }

    /// Counts a JVM that runs without frame pointers, when that becomes known. Whether that
    /// needs a word to the user depends on the unwinder it gets (`take_kernel_updates`).
    fn note_frame_pointers(&mut self, pid: u32) {
        let Some(jvm) = self.processes.get(&pid).and_then(|p| p.jvm.as_ref()) else {
            return;
        };
        if jvm.info.preserve_frame_pointer == FlagState::Off {
            self.stats.jvms_without_frame_pointers += 1;
        }
    }

    /// Says once that a JVM's Java stacks are cut at compiled frames, and why.
    fn warn_frame_pointers(&mut self, pid: u32, reason: &str) {
        if !std::mem::replace(&mut self.frame_pointer_warned, true) {
            log::warn!(
                "JVM {pid} runs without frame pointers in JIT code and {reason}, so its Java stacks \
                 are cut at the first compiled method: restart it with -XX:+PreserveFramePointer"
            );
        }
    }

    /// Resolves user frames, leaf first; a compiled pc with inlined methods gives several
    /// frames (innermost first), so the output can be longer than the input.
    fn resolve_user(&mut self, pid: u32, inputs: &[UserInput]) -> Vec<FrameId> {
        let process = self.processes.get_mut(&pid).expect("ensure_process ran");
        // Each input's frames; a native pc waits for one blazesym batch.
        let mut slots: Vec<Option<std::sync::Arc<[FrameId]>>> = vec![None; inputs.len()];
        let mut pending: Vec<(usize, u64)> = Vec::new();
        let one = |id: FrameId| -> Option<std::sync::Arc<[FrameId]>> { Some(std::sync::Arc::from([id])) };
        for (slot, input) in inputs.iter().enumerate() {
            let (pc, kernel_says_code) = match *input {
                UserInput::Interpreted { method, bcp } => {
                    let id = match process.hotspot().and_then(|h| h.interpreted(&mut self.interner, method, bcp)) {
                        Some(id) => id,
                        None => {
                            self.stats.unnamed_interpreted_frames += 1;
                            self.interner.frame(FrameKind::Stub, INTERPRETER, INTERPRETER)
                        }
                    };
                    slots[slot] = one(id);
                    continue;
                }
                UserInput::Pc { pc, code } => (pc, code),
                UserInput::Compiled { pc, compile_id } => {
                    let code = process.hotspot().map(|h| h.compiled(&mut self.interner, pc, compile_id));
                    slots[slot] = match code {
                        Some((Code::Frames(ids), _)) => Some(ids),
                        Some((_, outcome)) => {
                            self.stats.unknown_jit_frames += u64::from(outcome.unknown);
                            one(self.interner.frame(FrameKind::JavaJit, UNKNOWN_JIT, UNKNOWN_JIT))
                        }
                        // Only a JVM read through its tables is walked this way.
                        None => one(self.interner.frame(FrameKind::JavaJit, UNKNOWN_JIT, UNKNOWN_JIT)),
                    };
                    continue;
                }
            };
            if let Some(&id) = process.native.get(&pc) {
                slots[slot] = one(id);
                continue;
            }
            let in_mappings = process.jvm.as_ref().is_some_and(|j| j.in_code_cache(pc));
            if let Some(h) = process.hotspot() {
                match h.code(&mut self.interner, pc, kernel_says_code || in_mappings) {
                    (Code::Frames(ids), _) => slots[slot] = Some(ids),
                    (Code::UnknownJit, outcome) => {
                        self.stats.unknown_jit_frames += u64::from(outcome.unknown);
                        slots[slot] = one(self.interner.frame(FrameKind::JavaJit, UNKNOWN_JIT, UNKNOWN_JIT));
                    }
                    (Code::Native, _) => pending.push((slot, pc)),
                }
                continue;
            }
            if let Some(&id) = process.jit.get(&pc) {
                slots[slot] = one(id);
                continue;
            }
            if let Some(jvm) = &mut process.jvm {
                if let Some(symbol) = jvm.map.index().lookup(pc) {
                    let id = match classify(symbol.name) {
                        CodeKind::JavaMethod => self.interner.frame(
                            FrameKind::JavaJit,
                            &stable_name(symbol.name),
                            &short_name(&stable_name(symbol.name)),
                        ),
                        CodeKind::Stub => self.interner.frame(FrameKind::Stub, symbol.name, symbol.name),
                    };
                    process.jit.insert(pc, id);
                    slots[slot] = one(id);
                    continue;
                }
                if in_mappings {
                    // A dump this cycle already answered what `prepare` saw missing.
                    jvm.needs_dump |= !jvm.dumped_since(self.cycle_started);
                    self.stats.jit_misses += 1;
                    let id = self.interner.frame(FrameKind::JavaJit, UNKNOWN_JIT, UNKNOWN_JIT);
                    process.jit.insert(pc, id);
                    slots[slot] = one(id);
                    continue;
                }
            }
            pending.push((slot, pc));
        }
        if !pending.is_empty() {
            let addrs: Vec<u64> = pending.iter().map(|&(_, ip)| ip).collect();
            let names = self.native.user(pid, &addrs);
            self.budget.report(Consumer::NativeCopies, self.native.stats().copy_bytes);
            for ((slot, ip), name) in pending.into_iter().zip(names) {
                let (name, for_good) = match name {
                    NativeName::Named(name) => (name, true),
                    unnamed => {
                        self.stats.unresolved_frames += 1;
                        (UNKNOWN.to_owned(), unnamed == NativeName::Unknown)
                    }
                };
                let id = self.interner.frame(FrameKind::Native, &name, &name);
                // A file unreadable now (being rewritten, over the budget) may be read later.
                if for_good {
                    process.native.insert(ip, id);
                }
                slots[slot] = one(id);
            }
        }
        slots.into_iter().flatten().flat_map(|ids| ids.iter().copied().collect::<Vec<_>>()).collect()
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
        kernel
            .iter()
            .map(|ip| self.kernel.get(ip).or_else(|| unknown.get(ip)).copied().expect("resolved above"))
            .collect()
    }

    /// With frame pointers, a Java thread's stack unwinds down to native thread start;
    /// one whose root is Java code was cut (no -XX:+PreserveFramePointer).
    fn note_cut_stack(&mut self, pid: u32, user_leaf_first: &[FrameId]) {
        let is_java = |kind: FrameKind| kind.is_java() || kind == FrameKind::Stub;
        let Some(process) = self.processes.get_mut(&pid) else {
            return;
        };
        // Frame pointers would not help a JVM the HotSpot unwinder walks.
        let hotspot_unwound = process.hotspot().and_then(|h| h.published_unwind()) == Some(JVM_UNWIND_HOTSPOT);
        let Some(jvm) = process.jvm.as_mut() else {
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
            && !hotspot_unwound
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
