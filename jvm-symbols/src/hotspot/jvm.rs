//! One JVM's introspection reader: the tables parsed once, then `Method*`s, interpreted
//! frames and pcs symbolized on demand, with caches and counted misses.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bounded::{BoundedReader, Overrun, ReadBudget};
use super::codecache::{self, BlobKind, CodeBlob, CodeHeap};
use super::error::HotspotError;
use super::layout::{self, Layout};
use super::libjvm::{locate_tables, TableSymbols};
use super::memory::{MemoryReader, ProcessMemory};
use super::method::{read_method, still_valid, JavaMethod, MethodMiss};
use super::poll_blobs::{self, PollEntryWindow, LOOP_POLL_HANDLER_BLOBS};
use super::scopes::NmethodDebugInfo;
use super::stub_names::{
    self, StubBlobs, StubDescs, StubRange, STUB_CODE_DESC_LIST, VTABLE_CHUNKS, VTABLE_STUBS_TABLE,
};
use super::vmstructs::VmStructs;

/// How a Java frame runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    Interpreted,
    /// Compiled code of this very method.
    Jit,
    /// Inlined into a compiled caller (the frame after it in the chain).
    Inlined,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaFrame {
    /// The `Method*` (what an eBPF sampler records for interpreted frames).
    pub method_ptr: u64,
    pub method: Arc<JavaMethod>,
    /// -1 at the method entry; `None` when unknown (no debug info at this pc, or a bcp
    /// outside the method's bytecodes).
    pub bci: Option<i32>,
    pub line: Option<u32>,
    pub kind: FrameKind,
}

/// How a compiled frame's pc was reached, which decides the PcDesc that describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PcRole {
    /// The sampled pc, or the return address of a call into code-cache code (a Java call, a
    /// runtime stub): the PcDesc at or after it, as HotSpot looks it up.
    #[default]
    AtOrAfter,
    /// The return address of a call whose callee ran outside the code cache (a leaf runtime
    /// call): the PcDesc before it ([`super::scopes::NmethodDebugInfo::frames_before`]).
    AfterLeafCall,
}

/// What a pc is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodeAt {
    /// Compiled Java code: innermost (inlined leaf) first, the nmethod's own method last.
    Java(Vec<JavaFrame>),
    /// The template interpreter: the method is in the frame, not in the pc.
    Interpreter,
    /// Other code-cache code: the name the JVM gives the stub whose range holds the pc
    /// (`StubRoutines::sha256_implCompress`, `vtable stub`, `itable stub`; see
    /// [`super::stub_names`]), else the blob name (`StubRoutines (1)`, `I2C/C2I adapters`,
    /// `_new_array_Java`; an nmethod whose `Method*` cannot be read shows as `nmethod`).
    Blob(String),
    /// Not in the code cache (libjvm, libc, ... or freed code).
    NotCode,
}

/// Counted failures. None of them is an error: the target changes while we read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Misses {
    /// A `Method*` whose memory could not be read.
    pub method_unreadable: u64,
    /// A `Method*` its holder class does not list (freed and reused, or garbage).
    pub method_stale: u64,
    pub method_corrupt: u64,
    /// A cached method whose `ConstMethod*` changed (re-read, then counted again above
    /// if it fails).
    pub method_revalidated: u64,
    /// Code-cache memory that could not be read for a pc.
    pub code_unreadable: u64,
}

/// Work done, for statistics: what was read from the target (cache misses that succeeded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reads {
    /// `Method*`s read and checked (not served from the cache).
    pub methods: u64,
    /// nmethods whose debug information (scopes, PcDescs) was read.
    pub nmethods: u64,
    pub code_cache_refreshes: u64,
    /// Times the caches were dropped for going over their byte cap.
    pub cache_resets: u64,
}

/// Methods cached before the cache is cleared (a Jetty-size JVM has ~30k methods).
const MAX_CACHED_METHODS: usize = 1 << 17;
const MAX_CACHED_NMETHODS: usize = 1 << 15;
/// How long an untrimmed interpreter must read the same before its bounds are taken: far
/// longer than a JVM takes to generate it (milliseconds), or is kept off a CPU while it does.
pub const UNTRIMMED_FINAL_AFTER: Duration = Duration::from_millis(500);

pub struct HotspotJvm<R> {
    reader: BoundedReader<R>,
    layout: Layout,
    heaps: Vec<CodeHeap>,
    code_bounds: Option<(u64, u64)>,
    /// The interpreter's bounds, once known (see [`Self::refresh_interpreter`]).
    interpreter: Option<(u64, u64)>,
    /// The interpreter was read trimmed: its bounds are final.
    interpreter_trimmed: bool,
    /// The interpreter's queue as read untrimmed, and since when it reads the same.
    interpreter_seen: Option<(codecache::InterpreterCode, Instant)>,
    stubs: Vec<(u64, String)>,
    /// `StubCodeDesc::_list` and `VtableStubs::_table`, when libjvm's symbol table has them.
    stub_list: Option<u64>,
    vtable_table: Option<u64>,
    stub_descs: StubDescs,
    /// The statics holding the loop-poll handler blobs (libjvm's symbol table), and the
    /// windows read of those blobs so far (see [`poll_blobs`]).
    poll_blob_statics: Vec<u64>,
    poll_windows: Vec<PollEntryWindow>,
    /// Every static held its blob when the windows were read: they are final.
    poll_statics_read: bool,
    /// Every vtable and itable stub: (code start, is a vtable stub), read when a pc in their
    /// blob is in none of them.
    vtable_stubs: Vec<(u64, bool)>,
    /// The non-nmethod blobs pcs were named in ([`HotspotJvm::known_stub_name`]).
    stub_blobs: StubBlobs,
    methods: HashMap<u64, Arc<JavaMethod>>,
    nmethods: HashMap<u64, (u32, Arc<NmethodDebugInfo>)>,
    /// Approximate heap bytes held by `methods` and `nmethods`, and their cap.
    cached_bytes: usize,
    max_cached_bytes: usize,
    misses: Misses,
    reads: Reads,
}

impl HotspotJvm<ProcessMemory> {
    /// Reads the tables of the HotSpot JVM `pid` (under `proc_root`, normally `/proc`).
    pub fn attach(proc_root: &Path, pid: u32) -> Result<Self, HotspotError> {
        let (_lib, symbols) = locate_tables(proc_root, pid)?;
        Self::new(ProcessMemory { pid }, &symbols)
    }
}

impl<R: MemoryReader> HotspotJvm<R> {
    /// Reads the tables within [`ReadBudget::TABLES`]; afterwards reads are bounded per
    /// object only, until [`HotspotJvm::start_budget`] sets another budget.
    pub fn new(reader: R, symbols: &TableSymbols) -> Result<Self, HotspotError> {
        let reader = BoundedReader::new(reader, ReadBudget::TABLES);
        let tables = VmStructs::read(&reader, symbols).and_then(|vm| Layout::new(&vm, &reader));
        // A read refused for the budget shows as a failed read: say what it was.
        if let Some(overrun) = reader.overrun() {
            return Err(HotspotError::Overrun(overrun));
        }
        let layout = tables?;
        reader.start(ReadBudget::UNLIMITED);
        let mut jvm = Self {
            reader,
            layout,
            heaps: Vec::new(),
            code_bounds: None,
            interpreter: None,
            interpreter_trimmed: false,
            interpreter_seen: None,
            stubs: Vec::new(),
            stub_list: symbols.addrs.get(STUB_CODE_DESC_LIST).copied(),
            vtable_table: symbols.addrs.get(VTABLE_STUBS_TABLE).copied(),
            stub_descs: StubDescs::default(),
            poll_blob_statics: LOOP_POLL_HANDLER_BLOBS.iter().filter_map(|s| symbols.addrs.get(*s).copied()).collect(),
            poll_windows: Vec::new(),
            poll_statics_read: false,
            vtable_stubs: Vec::new(),
            stub_blobs: StubBlobs::default(),
            methods: HashMap::new(),
            nmethods: HashMap::new(),
            cached_bytes: 0,
            max_cached_bytes: usize::MAX,
            misses: Misses::default(),
            reads: Reads::default(),
        };
        jvm.refresh_code_cache();
        Ok(jvm)
    }

    /// The value of the boolean JVM flag `name` as the JVM runs with it (its own flag
    /// table), or `None` when the table is not exported, unreadable, or has no such flag.
    pub fn bool_flag(&self, name: &str) -> Option<bool> {
        let l = self.layout.flags.as_ref()?;
        super::flags::bool_flag(&self.reader, l, name).ok().flatten()
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn reader(&self) -> &BoundedReader<R> {
        &self.reader
    }

    /// Bounds the reads from now on (one cycle's, for a profiler): once `budget` is spent,
    /// reads fail as misses and [`HotspotJvm::overrun`] says so.
    pub fn start_budget(&self, budget: ReadBudget) {
        self.reader.start(budget);
    }

    /// Whether the budget of the last [`HotspotJvm::start_budget`] was spent.
    pub fn overrun(&self) -> Option<Overrun> {
        self.reader.overrun()
    }

    /// Bytes read since the last [`HotspotJvm::start_budget`].
    pub fn bytes_read(&self) -> u64 {
        self.reader.bytes_read()
    }

    /// Caps the method and nmethod caches: past it they are dropped and start over.
    pub fn set_max_cached_bytes(&mut self, max_bytes: usize) {
        self.max_cached_bytes = max_bytes;
        if self.cached_bytes > max_bytes {
            self.reset_caches();
        }
    }

    fn reset_caches(&mut self) {
        self.reads.cache_resets += 1;
        self.clear_caches();
    }

    pub fn misses(&self) -> Misses {
        self.misses
    }

    pub fn reads(&self) -> Reads {
        self.reads
    }

    /// Approximate heap bytes of the method and nmethod caches (both bounded by entry
    /// counts, `MAX_CACHED_METHODS` and `MAX_CACHED_NMETHODS`).
    pub fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    pub fn code_heaps(&self) -> &[CodeHeap] {
        &self.heaps
    }

    pub fn interpreter_bounds(&self) -> Option<(u64, u64)> {
        self.interpreter
    }

    /// `StubRoutines::_call_stub_return_address`: where every entry frame (the VM calling
    /// Java) returns into the call stub. HotSpot's own `frame::sender` knows entry frames by
    /// it. `None` before the stubs are generated.
    pub fn call_stub_return_address(&self) -> Option<u64> {
        self.stubs.iter().find(|(_, name)| name == layout::CALL_STUB_NAME).map(|(address, _)| *address)
    }

    /// `[start, end)` of the code cache (see [`codecache::code_cache_bounds`]).
    pub fn code_cache_bounds(&self) -> Option<(u64, u64)> {
        self.code_bounds
    }

    /// Whether `pc` is in the code cache: compiled code, stubs or the interpreter (which
    /// may live outside the heaps' committed parts the reader knows).
    pub fn in_code_cache(&self, pc: u64) -> bool {
        let within = |b: Option<(u64, u64)>| b.is_some_and(|(lo, hi)| (lo..hi).contains(&pc));
        within(self.code_bounds) || within(self.interpreter) || self.heaps.iter().any(|h| h.contains(pc))
    }

    /// Re-reads the code heaps' bounds (they grow as code is committed) and the
    /// interpreter's bounds.
    pub fn refresh_code_cache(&mut self) {
        self.reads.code_cache_refreshes += 1;
        if let Some(code) = &self.layout.code {
            if let Ok(heaps) = codecache::read_heaps(&self.reader, code) {
                self.heaps = heaps;
            }
            self.code_bounds = codecache::code_cache_bounds(&self.reader, code, &self.heaps);
        }
        self.refresh_interpreter();
        self.stubs = codecache::stub_entries(&self.reader, &self.layout.stub_entry_fields);
        self.refresh_stub_descs();
        self.refresh_poll_windows();
    }

    /// The loop-poll handler blobs' entry windows (see [`poll_blobs`]): read once every blob
    /// exists (the JVM generates them early in its start, and never frees them), then kept,
    /// whether or not each had a window.
    fn refresh_poll_windows(&mut self) {
        let Some(code) = &self.layout.code else { return };
        if self.poll_statics_read {
            return;
        }
        let blobs: Vec<u64> =
            self.poll_blob_statics.iter().filter_map(|&at| self.reader.read_u64(at).ok().filter(|&b| b != 0)).collect();
        if blobs.len() < self.poll_blob_statics.len() {
            return;
        }
        self.poll_windows =
            blobs.iter().filter_map(|&blob| poll_blobs::read_entry_window(&self.reader, code, blob)).collect();
        self.poll_statics_read = true;
    }

    /// Where a loop-poll handler blob's frame does not say yet where it returns.
    pub fn poll_entry_windows(&self) -> &[PollEntryWindow] {
        &self.poll_windows
    }

    /// The stubs the JVM describes (`StubCodeDesc`), by address.
    pub fn stub_ranges(&self) -> &[StubRange] {
        self.stub_descs.ranges()
    }

    /// The exported `StubRoutines` entries: (address, `StubRoutines::<name>`).
    pub fn stub_entries(&self) -> impl Iterator<Item = (u64, &str)> {
        self.stubs.iter().map(|(pc, name)| (*pc, name.as_str()))
    }

    /// Reads the stub descriptors the JVM added since the last read (see [`StubDescs`]).
    fn refresh_stub_descs(&mut self) {
        if let (Some(list), Some(code)) = (self.stub_list, self.code_bounds) {
            if self.stub_descs.refresh(&self.reader, list, code).is_err() {
                self.misses.code_unreadable += 1;
            }
        }
    }

    /// The JVM's name for the stub holding `pc` in the non-nmethod `blob`: a vtable or
    /// itable stub by its own header, any other by the `StubCodeDesc` whose range holds it
    /// (the list is read again once when none does: JDK 21+ generates stubs after startup),
    /// else the exported `StubRoutines` address it is exactly (the call stub's return
    /// address), else the blob's name. Never the nearest entry before it: that is another
    /// stub's whenever the pc's own stub is not exported.
    fn stub_name(&mut self, blob: &CodeBlob, pc: u64) -> String {
        self.stub_blobs.remember(blob.address, blob.address.saturating_add(blob.size_bytes), &blob.name);
        if blob.name == VTABLE_CHUNKS {
            return self.vtable_stub_at(pc).unwrap_or(VTABLE_CHUNKS).to_owned();
        }
        if self.stub_descs.name_at(pc).is_none() {
            self.refresh_stub_descs();
        }
        self.named_stub(&blob.name, pc)
    }

    /// [`HotspotJvm::stub_name`] from what was read before, reading nothing: for a pc in a
    /// non-nmethod blob a pc was named in before (HotSpot never frees those), when the JVM's
    /// memory cannot be read any more (it exited before its last cycle was named).
    pub fn known_stub_name(&self, pc: u64) -> Option<String> {
        let blob = self.stub_blobs.name_at(pc)?;
        if blob == VTABLE_CHUNKS {
            return Some(stub_names::vtable_stub_name(&self.vtable_stubs, pc).unwrap_or(VTABLE_CHUNKS).to_owned());
        }
        Some(self.named_stub(blob, pc))
    }

    /// The `StubCodeDesc` whose range holds `pc`, else the exported `StubRoutines` address it
    /// is exactly, else the name of its blob.
    fn named_stub(&self, blob_name: &str, pc: u64) -> String {
        if let Some(name) = self.stub_descs.name_at(pc) {
            return name.to_owned();
        }
        match self.stubs.iter().find(|(entry, _)| *entry == pc) {
            Some((_, name)) => name.clone(),
            None => blob_name.to_owned(),
        }
    }

    fn vtable_stub_at(&mut self, pc: u64) -> Option<&'static str> {
        if let Some(name) = stub_names::vtable_stub_name(&self.vtable_stubs, pc) {
            return Some(name);
        }
        let (table, code) = (self.vtable_table?, self.code_bounds?);
        match stub_names::read_vtable_stubs(&self.reader, table, code) {
            Ok(stubs) => self.vtable_stubs = stubs,
            Err(_) => self.misses.code_unreadable += 1,
        }
        stub_names::vtable_stub_name(&self.vtable_stubs, pc)
    }

    /// Re-reads only the code heaps' bounds (cheap: a few words per heap), and the
    /// interpreter's until they are final.
    pub fn refresh_code_heaps(&mut self) {
        if let Some(code) = &self.layout.code {
            if let Ok(heaps) = codecache::read_heaps(&self.reader, code) {
                self.heaps = heaps;
            }
        }
        self.refresh_interpreter();
    }

    /// Reads the interpreter's queue until it is trimmed to its code (JDK 11 to 25 trim it
    /// once it is generated, as their recorded tables show): its bounds are then final and
    /// not read again. A JVM read while it generates the interpreter has some codelets
    /// committed and more to come: those bounds wait. Only for a JVM that would never trim,
    /// the same untrimmed code read again [`UNTRIMMED_FINAL_AFTER`] later is taken (and still
    /// re-read, in case it grows).
    fn refresh_interpreter(&mut self) {
        if self.interpreter_trimmed {
            return;
        }
        let Some(code) = &self.layout.code else { return };
        let Ok(now) = codecache::interpreter_code(&self.reader, code) else { return };
        if now.trimmed() {
            self.interpreter = Some(now.bounds());
            self.interpreter_trimmed = true;
            return;
        }
        match self.interpreter_seen {
            Some((seen, since)) if seen == now => {
                if since.elapsed() >= UNTRIMMED_FINAL_AFTER {
                    self.interpreter = Some(now.bounds());
                }
            }
            _ => self.interpreter_seen = Some((now, Instant::now())),
        }
    }

    /// The compile id of the nmethod holding `pc` now (`None`: no nmethod there).
    pub fn compile_id_at(&mut self, pc: u64) -> Option<u32> {
        match self.blob_at(pc)?.kind {
            BlobKind::Nmethod { compile_id, .. } => Some(compile_id),
            BlobKind::Other => None,
        }
    }

    /// The method at `m`, checked (see [`super::method`]); `None` is a counted miss.
    pub fn method(&mut self, m: u64) -> Option<Arc<JavaMethod>> {
        if let Some(cached) = self.methods.get(&m) {
            if still_valid(&self.reader, &self.layout.methods, m, cached) {
                return Some(cached.clone());
            }
            self.misses.method_revalidated += 1;
            if let Some(old) = self.methods.remove(&m) {
                self.cached_bytes = self.cached_bytes.saturating_sub(old.heap_bytes());
            }
        }
        match read_method(&self.reader, &self.layout.methods, self.layout.encoding, m) {
            Ok(method) => {
                self.reads.methods += 1;
                if self.methods.len() >= MAX_CACHED_METHODS
                    || self.cached_bytes + method.heap_bytes() > self.max_cached_bytes
                {
                    self.reset_caches();
                }
                self.cached_bytes += method.heap_bytes();
                let method = Arc::new(method);
                self.methods.insert(m, method.clone());
                Some(method)
            }
            Err(miss) => {
                match miss {
                    MethodMiss::Unreadable(_) => self.misses.method_unreadable += 1,
                    MethodMiss::Stale(_) => self.misses.method_stale += 1,
                    MethodMiss::Corrupt(_) => self.misses.method_corrupt += 1,
                }
                None
            }
        }
    }

    /// An interpreted frame from the `Method*` and bcp read from its frame slots.
    pub fn interpreted_frame(&mut self, m: u64, bcp: u64) -> Option<JavaFrame> {
        let method = self.method(m)?;
        let bci = method.bci_of_bcp(bcp);
        let line = bci.and_then(|b| method.line_for_bci(b));
        Some(JavaFrame { method_ptr: m, method, bci, line, kind: FrameKind::Interpreted })
    }

    /// The blob holding `pc`, read fresh.
    pub fn blob_at(&mut self, pc: u64) -> Option<CodeBlob> {
        let code = self.layout.code.as_ref()?;
        match codecache::find_blob(&self.reader, code, &self.heaps, pc) {
            Ok(blob) => blob,
            Err(_) => {
                self.misses.code_unreadable += 1;
                None
            }
        }
    }

    fn debug_info(&mut self, blob: &CodeBlob, method: u64, compile_id: u32) -> Option<Arc<NmethodDebugInfo>> {
        if let Some((id, info)) = self.nmethods.get(&blob.address) {
            if *id == compile_id && info.method == method {
                return Some(info.clone());
            }
        }
        let scopes = self.layout.scopes.as_ref()?;
        let info = match NmethodDebugInfo::read(
            &self.reader,
            scopes,
            self.layout.encoding,
            blob.address,
            method,
            blob.code_begin,
        ) {
            Ok(info) => Arc::new(info?),
            Err(_) => {
                self.misses.code_unreadable += 1;
                return None;
            }
        };
        self.reads.nmethods += 1;
        if self.nmethods.len() >= MAX_CACHED_NMETHODS || self.cached_bytes + info.heap_bytes() > self.max_cached_bytes {
            self.reset_caches();
        }
        self.cached_bytes += info.heap_bytes();
        if let Some((_, old)) = self.nmethods.insert(blob.address, (compile_id, info.clone())) {
            self.cached_bytes = self.cached_bytes.saturating_sub(old.heap_bytes());
        }
        Some(info)
    }

    /// What runs at `pc`: Java frames (inlined ones included) for compiled code.
    pub fn code_at(&mut self, pc: u64) -> CodeAt {
        self.code_at_as(pc, PcRole::AtOrAfter)
    }

    /// [`HotspotJvm::code_at`] for a pc reached as `role` says.
    pub fn code_at_as(&mut self, pc: u64, role: PcRole) -> CodeAt {
        if self.interpreter.is_some_and(|(lo, hi)| (lo..hi).contains(&pc)) {
            return CodeAt::Interpreter;
        }
        let Some(blob) = self.blob_at(pc) else {
            return CodeAt::NotCode;
        };
        let BlobKind::Nmethod { method, compile_id } = blob.kind else {
            return CodeAt::Blob(self.stub_name(&blob, pc));
        };
        let scopes = match self.debug_info(&blob, method, compile_id) {
            Some(info) => match role {
                PcRole::AtOrAfter => info.frames_at(pc),
                PcRole::AfterLeafCall => info.frames_before(pc),
            },
            None => vec![super::scopes::ScopeFrame { method, bci: None }],
        };
        let last = scopes.len() - 1;
        let mut frames = Vec::with_capacity(scopes.len());
        for (i, s) in scopes.iter().enumerate() {
            let Some(m) = self.method(s.method) else {
                // A chain with a hole would misname callers: keep what is certain.
                return if frames.is_empty() { CodeAt::Blob(blob.name) } else { CodeAt::Java(frames) };
            };
            let line = s.bci.and_then(|b| m.line_for_bci(b));
            frames.push(JavaFrame {
                method_ptr: s.method,
                method: m,
                bci: s.bci,
                line,
                kind: if i == last { FrameKind::Jit } else { FrameKind::Inlined },
            });
        }
        CodeAt::Java(frames)
    }

    /// Drops cached methods and nmethods (e.g. after classes were unloaded).
    pub fn clear_caches(&mut self) {
        self.methods.clear();
        self.nmethods.clear();
        self.cached_bytes = 0;
    }
}
