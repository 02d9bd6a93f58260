//! HotSpot JVMs named through their own introspection tables (`jvm_symbols::hotspot`),
//! one reader per JVM pid: interpreted frames from the `Method*` and bcp the sampler read
//! from their slots, compiled pcs with the methods inlined into them, stubs by name. No
//! attach, no perf map: those stay the fallback for JVMs whose tables cannot be read.
//!
//! Resolved pcs and interpreted frames are cached for one cycle only: between cycles code
//! can be freed and its address reused, and a `Method*` can be freed by class unloading.
//! The library's own caches (by `Method*` and nmethod, checked on each use) carry the work
//! across cycles, and what was named once is kept for code and `Method*`s that are gone by a
//! later cycle ([`super::compiled_names`]). Attaching and naming live here; the per-cycle
//! batch that runs them on the guarded read thread is in [`prefetch`].

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use joular_ebpf::{JvmConfig, INTERPRETER_WINDOW_WORDS, JVM_UNWIND_FP, JVM_UNWIND_HOTSPOT};
use jvm_symbols::hotspot::{
    CodeAt, FrameKind as HotspotKind, HotspotError, HotspotJvm, JavaFrame, MemoryReader, Misses, Overrun, PcRole,
    ReadBudget, Reads,
};

use super::compiled_names::{CompiledNames, MethodNames};
use super::intern::{FrameId, Interner};
use super::panic_message;
use super::walk_config::{self, Unavailable};
use crate::model::FrameKind;
use crate::target_read::stall_guard::{self, GuardedMemory, Stall};
use crate::urgency::urgent;

/// Shown for an interpreted frame whose `Method*` could not be read, and for a pc in the
/// interpreter whose frame was not walked: what the perf map says for both.
pub const INTERPRETER: &str = "Interpreter";
/// A pc in a JVM's code cache that no live code blob holds.
pub const UNKNOWN_JIT: &str = "[unknown JIT code]";

/// What a user-space pc of a JVM is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code {
    /// Java frames (innermost first: the inlined leaf, then its callers) or one stub frame.
    Frames(Arc<[FrameId]>),
    /// In the code cache, but no live blob holds it, even after re-reading the code cache.
    UnknownJit,
    /// Not in the code cache: native code.
    Native,
}

/// One outcome of [`HotspotProcess::code`] or [`HotspotProcess::compiled`], for the statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodeOutcome {
    /// The code cache was re-read to resolve a miss.
    pub refreshed: bool,
    /// It still missed.
    pub unknown: bool,
    /// A compiled frame whose nmethod was freed (or its space reused) before anything named
    /// it: `[unknown JIT code]`.
    pub stale: bool,
    /// A compiled frame whose nmethod was freed before its pc was named, named by the
    /// nmethod's own method: the methods inlined at that pc, if any, are unknown.
    pub by_method: bool,
}

mod learn;
mod libjvm_file;
mod prefetch;
#[cfg(test)]
mod tests;

pub use prefetch::Wanted;

/// Longest back-off, in cycles, of a JVM that keeps spending its budget.
const MAX_BACKOFF_CYCLES: u32 = 64;

/// What [`HotspotProcess::begin_cycle`] tells its caller, to warn and count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CycleStart {
    /// Read this cycle, within a fresh budget.
    Read,
    /// Not read this cycle: backed off.
    Skipped,
    /// The last cycle spent the budget: not read for `cycles` cycles from now.
    BackedOff { overrun: Overrun, cycles: u32 },
}

pub struct HotspotProcess<R = GuardedMemory> {
    jvm: HotspotJvm<R>,
    /// Cycles this JVM is still not read for, and the back-off the next overrun gets.
    skip_cycles: u32,
    next_backoff_cycles: u32,
    /// The reader panicked on this JVM: never read again (its frames stay unnamed).
    panicked: bool,
    panic_message: Option<String>,
    /// Not read in this cycle (backed off, or panicked).
    skipping: bool,
    back_off_warned: bool,
    /// This cycle's names of code pcs, by how each pc was reached (a return address after a
    /// leaf call is described by another PcDesc than the same pc sampled).
    code: HashMap<(u64, PcRole), Code>,
    interpreted: HashMap<(u64, u64), FrameId>,
    /// Set once the code cache was re-read in this cycle (at most once per cycle).
    refreshed: bool,
    /// The walk configuration the kernel has for this JVM.
    published: Option<JvmConfig>,
    /// This cycle's compile ids of the nmethods at pcs the unwinder gave one for.
    compile_ids: HashMap<u64, Option<u32>>,
    /// This cycle's read time budget (bounds how long its batch may take).
    read_time: Duration,
    /// What compiled code was named in earlier cycles, for frames whose code is freed since.
    compiled_names: CompiledNames,
    /// What interpreted `Method*`s were named in earlier cycles, for those unreadable since.
    method_names: MethodNames,
    /// `-XX:+DebugNonSafepoints` as the JVM runs (its flag table); `None`: unreadable.
    debug_non_safepoints: Option<bool>,
}

impl HotspotProcess<GuardedMemory> {
    /// Reads the tables of `pid`. Fails for a process that is not HotSpot, a HotSpot
    /// without the tables, or one too early in its start to have filled them.
    /// A panic in the reader (a bug these tables found) is caught and returned as
    /// [`HotspotError::Panicked`]; a read the target blocks (its libjvm.so, its memory) as
    /// [`HotspotError::Blocked`]. Every read of its memory, then and later, has a deadline
    /// ([`stall_guard`]). The tables are read in one job on the guarded read thread, not one
    /// hop per read (about 2,000 reads), and [`urgent`]ly: a JVM launched under `record` runs
    /// its first Java code tens of milliseconds after its tables become readable.
    pub fn attach(proc_root: &Path, pid: u32) -> Result<Self, HotspotError> {
        let root = proc_root.to_owned();
        let memory = stall_guard::hotspot_reads();
        let attached = catch_unwind(|| {
            let symbols = libjvm_file::table_symbols(&root, pid)?;
            let reader = GuardedMemory::new(pid, Arc::clone(memory));
            let deadline = memory.deadline() + ReadBudget::TABLES.max_time;
            let read = move || urgent(|| HotspotJvm::new(reader, &symbols).and_then(Self::new));
            match memory.run_within(deadline, read) {
                Ok(attached) => attached,
                Err(stall @ Stall::TimedOut { .. }) => {
                    Err(HotspotError::Blocked(format!("reading its tables: {stall}")))
                }
                // Not run (other JVMs' reads are stuck, or no thread): tried again later.
                Err(stall) => Err(HotspotError::Io {
                    path: Path::new("/proc").join(pid.to_string()).join("mem"),
                    source: std::io::Error::other(stall),
                }),
            }
        });
        match attached {
            Ok(result) => result,
            Err(panic) => Err(HotspotError::Panicked(panic_message(&*panic))),
        }
    }

    /// Why a read of this JVM's memory blocked, the first time it is asked after it did (to
    /// warn once); its reads all fail from then on, its frames stay unnamed.
    pub fn take_stall(&self) -> Option<Stall> {
        self.jvm.reader().inner().take_new_stall()
    }
}

impl<R: MemoryReader> HotspotProcess<R> {
    pub fn new(jvm: HotspotJvm<R>) -> Result<Self, HotspotError> {
        // The version is set while the VM starts; before that the stream encoding (which
        // depends on it) would be guessed wrong.
        if jvm.layout().version.major == 0 {
            return Err(HotspotError::MissingField {
                what: "Abstract_VM_Version::_vm_major_version (JVM still starting)".into(),
            });
        }
        // A JDK whose tables lack a field of the code cache or inlining readers is named by
        // its compiled frames' nmethods only (or walked by frame pointers): say which.
        for missing in &jvm.layout().missing {
            log::warn!("HotSpot {}: {missing}; its compiled frames are named without it", jvm.layout().version.major);
        }
        let debug_non_safepoints = jvm.bool_flag("DebugNonSafepoints");
        Ok(Self {
            jvm,
            debug_non_safepoints,
            skip_cycles: 0,
            next_backoff_cycles: 1,
            panicked: false,
            panic_message: None,
            skipping: false,
            back_off_warned: false,
            code: HashMap::new(),
            interpreted: HashMap::new(),
            refreshed: false,
            published: None,
            compile_ids: HashMap::new(),
            read_time: Duration::ZERO,
            compiled_names: CompiledNames::default(),
            method_names: MethodNames::default(),
        })
    }

    /// Starts a cycle with a fresh `budget` of reads and a cap on the caches. A JVM whose
    /// last cycle spent its budget is backed off (1, 2, 4... up to [`MAX_BACKOFF_CYCLES`]
    /// cycles, reset by a cycle within budget): meanwhile nothing of it is read and its
    /// frames stay unnamed, so it cannot starve the other JVMs. Then re-reads what the cycle
    /// starts from ([`Self::refresh_at_cycle_start`]). (The symbolizer makes those reads in one
    /// job: [`Self::start_cycle`], then `refresh_in_job`.)
    #[cfg(test)]
    pub fn begin_cycle(&mut self, budget: ReadBudget, max_cached_bytes: usize) -> CycleStart {
        let start = self.start_cycle(budget, max_cached_bytes);
        self.refresh_at_cycle_start();
        start
    }

    /// [`Self::begin_cycle`] without its reads of the JVM, for a caller that makes them in one
    /// job on the guarded read thread (`refresh_in_job`).
    pub fn start_cycle(&mut self, budget: ReadBudget, max_cached_bytes: usize) -> CycleStart {
        self.code.clear();
        self.interpreted.clear();
        self.compile_ids.clear();
        self.refreshed = false;
        self.read_time = budget.max_time;
        let start = match self.jvm.overrun() {
            Some(overrun) => {
                let cycles = self.next_backoff_cycles;
                self.skip_cycles = cycles;
                self.next_backoff_cycles = (cycles * 2).min(MAX_BACKOFF_CYCLES);
                CycleStart::BackedOff { overrun, cycles }
            }
            None if self.skip_cycles > 0 => CycleStart::Skipped,
            None => {
                // A whole cycle read within budget ends the streak.
                if !self.skipping {
                    self.next_backoff_cycles = 1;
                }
                CycleStart::Read
            }
        };
        // The budget starts over even when skipped: nothing is read then, so nothing is
        // spent, and the next cycle sees no overrun.
        self.jvm.start_budget(budget);
        self.skipping = self.skip_cycles > 0 || self.panicked;
        if self.skipping {
            self.skip_cycles = self.skip_cycles.saturating_sub(1);
            return if self.panicked { CycleStart::Skipped } else { start };
        }
        self.jvm.set_max_cached_bytes(max_cached_bytes);
        start
    }

    /// The reads a cycle starts with, unless the cycle is skipped: the code heaps' bounds, or
    /// the whole code cache while the JVM starts.
    pub fn refresh_at_cycle_start(&mut self) {
        if self.skipping {
            return;
        }
        // A JVM read while it starts may have no interpreter yet: nothing to walk with.
        let starting = self.walk_config().is_none();
        self.guarded(|jvm| match starting {
            true => jvm.refresh_code_cache(),
            // Heaps grow as code is committed: the kernel's unwinder needs their bounds.
            false => jvm.refresh_code_heaps(),
        });
    }

    /// True the first time only: whether a back-off is worth a warning (later ones are
    /// logged at debug level).
    pub fn first_back_off(&mut self) -> bool {
        !std::mem::replace(&mut self.back_off_warned, true)
    }

    /// What the reader panicked with, the first time it is asked after the panic (to
    /// warn once, with the JVM's pid).
    pub fn take_panic(&mut self) -> Option<String> {
        self.panic_message.take()
    }

    /// Whether the reader panicked on this JVM (then it is read no more).
    pub fn panicked(&self) -> bool {
        self.panicked
    }

    /// Whether this cycle's reads are over: backed off, panicked, or the budget spent.
    fn stopped(&self) -> bool {
        self.panicked || self.skipping || self.jvm.overrun().is_some()
    }

    /// Runs `f` on the reader, catching a panic: the JVM is then marked bad and never read
    /// again, and `None` returned.
    fn guarded<T>(&mut self, f: impl FnOnce(&mut HotspotJvm<R>) -> T) -> Option<T> {
        if self.panicked {
            return None;
        }
        match catch_unwind(AssertUnwindSafe(|| f(&mut self.jvm))) {
            Ok(v) => Some(v),
            Err(panic) => {
                self.panicked = true;
                self.panic_message = Some(panic_message(&*panic));
                None
            }
        }
    }

    pub fn misses(&self) -> Misses {
        self.jvm.misses()
    }

    pub fn reads(&self) -> Reads {
        self.jvm.reads()
    }

    /// Approximate heap bytes of the caches (the reader's and this cycle's).
    pub fn cached_bytes(&self) -> usize {
        self.jvm.cached_bytes()
            + self.code.len() * (std::mem::size_of::<(u64, Code)>() + 16)
            + self.interpreted.len() * std::mem::size_of::<((u64, u64), FrameId)>()
            + self.compiled_names.len() * 128
            + self.method_names.len() * 64
    }

    /// The walk configuration for the kernel, if it differs from what was published last
    /// (then it counts as published). `None` while the JVM has no interpreter yet, or
    /// when its interpreter frame slots are not where the kernel can read them.
    pub fn take_walk_config(&mut self) -> Option<JvmConfig> {
        let config = self.walk_config()?;
        if self.published == Some(config) {
            return None;
        }
        self.published = Some(config);
        Some(config)
    }

    /// Whether the JIT records debug information between safepoints (read once, at attach):
    /// without it a pc in compiled code is described by the next safepoint's scope.
    pub fn debug_non_safepoints(&self) -> Option<bool> {
        self.debug_non_safepoints
    }

    /// How the kernel unwinds this JVM's compiled frames, once published.
    pub fn published_unwind(&self) -> Option<u32> {
        self.published.map(|c| c.unwind)
    }

    /// Why the HotSpot unwinder cannot walk this JVM's compiled frames, if it cannot.
    pub fn hotspot_unwind_unavailable(&self) -> Option<Unavailable> {
        self.hotspot_unwind().err()
    }

    fn hotspot_unwind(&self) -> Result<JvmConfig, Unavailable> {
        let blob = walk_config::blob_layout(self.jvm.layout().code.as_ref())?;
        let (heaps, heap_count) = walk_config::heaps(self.jvm.code_heaps())?;
        Ok(JvmConfig { unwind: JVM_UNWIND_HOTSPOT, heaps, heap_count, blob, ..JvmConfig::default() })
    }

    fn walk_config(&self) -> Option<JvmConfig> {
        let (interpreter_start, interpreter_end) = self.jvm.interpreter_bounds()?;
        let (code_start, code_end) = self.jvm.code_cache_bounds().unwrap_or((interpreter_start, interpreter_end));
        let slots = self.jvm.layout().interpreter_frame;
        let in_window = |slot: i64| (-i64::from(INTERPRETER_WINDOW_WORDS)..0).contains(&slot);
        if !in_window(slots.method_slot) || !in_window(slots.bcp_slot) || !in_window(slots.sender_sp_slot) {
            return None;
        }
        // The code blobs' frame sizes whenever the tables allow, -XX:+PreserveFramePointer or
        // not: only this unwinder gives the sampler each compiled frame's nmethod (its compile
        // id), which names code freed or replaced before its cycle is symbolized. Walked by
        // frame pointers, the demo's JVM (run with the flag) left 0.8-5.8% of its energy on
        // `[unknown JIT code]` and unnamed interpreted frames (8 runs), at most 0.004 J with
        // this unwinder (3 runs), for ~1 us more a sample. Else frame pointers, cut at
        // compiled frames without them.
        let unwinder = self.hotspot_unwind().unwrap_or(JvmConfig { unwind: JVM_UNWIND_FP, ..JvmConfig::default() });
        Some(JvmConfig {
            interpreter_start,
            interpreter_end,
            code_start,
            code_end,
            method_slot: slots.method_slot as i32,
            bcp_slot: slots.bcp_slot as i32,
            sender_sp_slot: slots.sender_sp_slot as i32,
            call_stub_return: self.jvm.call_stub_return_address().unwrap_or(0),
            poll_entries: walk_config::poll_entries(self.jvm.poll_entry_windows()),
            ..unwinder
        })
    }

    /// An interpreted frame; `None` when its `Method*` does not check out (counted by
    /// the reader as a miss).
    pub fn interpreted(&mut self, interner: &mut Interner, method: u64, bcp: u64) -> Option<FrameId> {
        if let Some(&id) = self.interpreted.get(&(method, bcp)) {
            return Some(id);
        }
        let frame = match self.stopped() {
            true => None,
            false => self.guarded(|jvm| jvm.interpreted_frame(method, bcp)).flatten(),
        };
        let Some(frame) = frame else {
            // Unreadable now (its class unloaded, or the JVM gone): the name an earlier
            // cycle read at this `Method*`, without a line.
            let f = self.method_names.lookup(method)?;
            return Some(interner.intern(f));
        };
        let id = java_frame(interner, &frame);
        self.interpreted.insert((method, bcp), id);
        self.method_names.remember(method, interner.frame_of(id));
        Some(id)
    }

    /// What runs at `pc`. A miss in the code cache (or outside the bounds the reader knows,
    /// for a pc that `looks_like_code` by other evidence) re-reads the code cache, at most
    /// once per cycle, and tries again: code committed or stubs generated since the last
    /// read are then found in the same cycle.
    pub fn code(
        &mut self,
        interner: &mut Interner,
        pc: u64,
        looks_like_code: bool,
        role: PcRole,
    ) -> (Code, CodeOutcome) {
        if let Some(code) = self.code.get(&(pc, role)) {
            return (code.clone(), CodeOutcome::default());
        }
        let mut outcome = CodeOutcome::default();
        let mut code = self.resolve(interner, pc, role);
        let missed = code == Code::UnknownJit || (code == Code::Native && looks_like_code);
        if missed && !self.refreshed && !self.stopped() {
            self.refreshed = true;
            self.guarded(|jvm| jvm.refresh_code_cache());
            outcome.refreshed = true;
            code = self.resolve(interner, pc, role);
        }
        if code == Code::Native && looks_like_code {
            code = Code::UnknownJit;
        }
        if code == Code::UnknownJit {
            // A pc in a stub blob a pc was named in before (HotSpot never frees those), when the
            // code cache cannot be read now (the JVM exited before its last cycle was named).
            if let Some(name) = self.guarded(|jvm| jvm.known_stub_name(pc)).flatten() {
                code = Code::Frames(Arc::from([interner.frame(FrameKind::Stub, &name, &name)]));
            }
        }
        outcome.unknown = code == Code::UnknownJit;
        self.code.insert((pc, role), code.clone());
        (code, outcome)
    }

    /// [`HotspotProcess::code`] for a compiled frame the kernel read `compile_id` for: named
    /// only if the nmethod at `pc` still has that compile id (checked once per pc and
    /// cycle); else from what named that nmethod before (its pc, or its method), else
    /// `[unknown JIT code]`. The outcome says which. What named a pc before is kept by pc
    /// alone: a return address's role is fixed by the call it returns from.
    pub fn compiled(&mut self, interner: &mut Interner, pc: u64, compile_id: u32, role: PcRole) -> (Code, CodeOutcome) {
        // `None`: not read (stopped); `Some(None)`: no nmethod at `pc` any more.
        let now = match self.compile_ids.get(&pc) {
            Some(&id) => Some(id),
            None if self.stopped() => None,
            None => {
                let id = self.guarded(|jvm| jvm.compile_id_at(pc)).flatten();
                self.compile_ids.insert(pc, id);
                Some(id)
            }
        };
        if now == Some(Some(compile_id)) {
            let (code, outcome) = self.code(interner, pc, true, role);
            if let Code::Frames(ids) = &code {
                self.compiled_names
                    .remember(compile_id, pc, || ids.iter().map(|&id| interner.frame_of(id).clone()).collect());
                return (code, outcome);
            }
            return match self.named_before(interner, compile_id, pc) {
                Some((code, by_method)) => (code, CodeOutcome { by_method, ..outcome }),
                None => (code, outcome),
            };
        }
        if let Some((code, by_method)) = self.named_before(interner, compile_id, pc) {
            return (code, CodeOutcome { by_method, ..CodeOutcome::default() });
        }
        // Not read: unknown, but not known to be stale either.
        (Code::UnknownJit, CodeOutcome { unknown: true, stale: now.is_some(), ..CodeOutcome::default() })
    }

    /// What an earlier cycle, or the sampler's report of the nmethod, named `pc` of nmethod
    /// `compile_id` (it is freed, or unreadable now); whether by its own method alone.
    fn named_before(&self, interner: &mut Interner, compile_id: u32, pc: u64) -> Option<(Code, bool)> {
        let named = self.compiled_names.lookup(compile_id, pc)?;
        let ids = named.frames.iter().map(|f| interner.intern(f)).collect();
        Some((Code::Frames(ids), !named.exact))
    }

    fn resolve(&mut self, interner: &mut Interner, pc: u64, role: PcRole) -> Code {
        if !self.jvm.in_code_cache(pc) {
            return Code::Native;
        }
        if self.stopped() {
            return Code::UnknownJit;
        }
        let Some(code) = self.guarded(|jvm| jvm.code_at_as(pc, role)) else {
            return Code::UnknownJit;
        };
        match code {
            CodeAt::Java(frames) => Code::Frames(frames.iter().map(|f| java_frame(interner, f)).collect()),
            CodeAt::Interpreter => Code::Frames(Arc::from([interner.frame(FrameKind::Stub, INTERPRETER, INTERPRETER)])),
            // An nmethod whose Method* could not be read is a Java method we cannot name.
            CodeAt::Blob(name) if name == "nmethod" || name == "native nmethod" => Code::UnknownJit,
            CodeAt::Blob(name) => Code::Frames(Arc::from([interner.frame(FrameKind::Stub, &name, &name)])),
            CodeAt::NotCode => Code::UnknownJit,
        }
    }
}

fn java_frame(interner: &mut Interner, frame: &JavaFrame) -> FrameId {
    let kind = match frame.kind {
        HotspotKind::Interpreted => FrameKind::JavaInterpreted,
        HotspotKind::Jit => FrameKind::JavaJit,
        HotspotKind::Inlined => FrameKind::JavaInlined,
    };
    let raw_name = frame.method.raw_full_name();
    interner.frame_with_raw_name(
        kind,
        &frame.method.full_name(),
        &frame.method.short_name(),
        frame.line,
        raw_name.as_deref(),
    )
}
