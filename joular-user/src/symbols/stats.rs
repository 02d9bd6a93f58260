//! What the symbolizer counts: its stats since the start, summed into the run summary.

use std::collections::BTreeMap;

use super::native::NativeStats;
use crate::model::JavaUnwinder;
use crate::unwind::tables::TableStats;

/// Counters since the start (bad lines: in the maps currently loaded).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SymbolStats {
    pub jvms: usize,
    pub perf_map_entries: usize,
    pub perf_map_bad_lines: u64,
    pub perf_map_dumps: u64,
    pub perf_map_dump_failures: u64,
    /// JVMs whose perf-map job panicked (their perf map is used no more).
    pub perf_map_job_panics: u64,
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
    /// Compiled frames of samples (one per sample and frame) whose nmethod was freed, or its
    /// space reused, before anything named it: `[unknown JIT code]`.
    pub stale_compiled_frames: u64,
    /// Compiled frames of samples whose nmethod was freed before their pc was named, named by
    /// the nmethod's own method (reported by the sampler when it met it): the methods inlined
    /// at that pc, if any, are unknown.
    pub compiled_frames_named_by_method: u64,
    /// Reports of code the sampler met for the first time (`joular_ebpf::CodeReport`) taken,
    /// and those named from them.
    pub code_reports: u64,
    pub code_reports_named: u64,
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
    /// The native unwind rows built for walked processes (`crate::unwind::tables`).
    pub native_unwind: TableStats,
    /// Panics the symbol worker caught, and the samples of the cycles they cost their names
    /// (set by the worker, `session::symbolize`).
    pub worker_panics: u64,
    pub samples_unsymbolized: u64,
}

/// Reasons kept in [`SymbolStats::jvms_unreadable_reasons`]: a host full of hostile fakes
/// must not grow the summary without bound.
pub(super) const MAX_UNREADABLE_REASONS: usize = 32;
