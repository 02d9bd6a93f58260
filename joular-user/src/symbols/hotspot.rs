//! HotSpot JVMs named through their own introspection tables (`jvm_symbols::hotspot`),
//! one reader per JVM pid: interpreted frames from the `Method*` and bcp the sampler read
//! from their slots, compiled pcs with the methods inlined into them, stubs by name. No
//! attach, no perf map: those stay the fallback for JVMs whose tables cannot be read.
//!
//! Resolved pcs and interpreted frames are cached for one cycle only: between cycles code
//! can be freed and its address reused, and a `Method*` can be freed by class unloading.
//! The library's own caches (by `Method*` and nmethod, checked on each use) carry the work
//! across cycles.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use joular_ebpf::{JvmConfig, INTERPRETER_WINDOW_WORDS};
use jvm_symbols::hotspot::{
    CodeAt, FrameKind as HotspotKind, HotspotError, HotspotJvm, JavaFrame, MemoryReader, Misses, ProcessMemory,
    Reads,
};

use super::intern::{FrameId, Interner};
use crate::model::FrameKind;

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
    NotCode,
}

/// One outcome of [`HotspotProcess::code`], for the statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodeOutcome {
    /// The code cache was re-read to resolve a miss.
    pub refreshed: bool,
    /// It still missed.
    pub unknown: bool,
}

pub struct HotspotProcess<R = ProcessMemory> {
    jvm: HotspotJvm<R>,
    code: HashMap<u64, Code>,
    interpreted: HashMap<(u64, u64), FrameId>,
    /// Set once the code cache was re-read in this cycle (at most once per cycle).
    refreshed: bool,
    /// The walk configuration the kernel has for this JVM.
    published: Option<JvmConfig>,
}

impl HotspotProcess<ProcessMemory> {
    /// Reads the tables of `pid`. Fails for a process that is not HotSpot, a HotSpot
    /// without the tables, or one too early in its start to have filled them.
    pub fn attach(proc_root: &Path, pid: u32) -> Result<Self, HotspotError> {
        Self::new(HotspotJvm::attach(proc_root, pid)?)
    }
}

impl<R: MemoryReader> HotspotProcess<R> {
    pub fn new(jvm: HotspotJvm<R>) -> Result<Self, HotspotError> {
        // The version is set while the VM starts; before that the stream encoding (which
        // depends on it) would be guessed wrong.
        if jvm.layout().version.major == 0 {
            return Err(HotspotError::MissingField { what: "Abstract_VM_Version::_vm_major_version (JVM still starting)".into() });
        }
        Ok(Self { jvm, code: HashMap::new(), interpreted: HashMap::new(), refreshed: false, published: None })
    }

    pub fn begin_cycle(&mut self) {
        self.code.clear();
        self.interpreted.clear();
        self.refreshed = false;
        // A JVM read while it starts may have no interpreter yet: nothing to walk with.
        if self.walk_config().is_none() {
            self.jvm.refresh_code_cache();
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

    fn walk_config(&self) -> Option<JvmConfig> {
        let (interpreter_start, interpreter_end) = self.jvm.interpreter_bounds()?;
        let (code_start, code_end) = self.jvm.code_cache_bounds().unwrap_or((interpreter_start, interpreter_end));
        let slots = self.jvm.layout().interpreter_frame;
        let in_window = |slot: i64| (-i64::from(INTERPRETER_WINDOW_WORDS)..0).contains(&slot);
        if !in_window(slots.method_slot) || !in_window(slots.bcp_slot) {
            return None;
        }
        Some(JvmConfig {
            interpreter_start,
            interpreter_end,
            code_start,
            code_end,
            method_slot: slots.method_slot as i32,
            bcp_slot: slots.bcp_slot as i32,
        })
    }

    /// An interpreted frame; `None` when its `Method*` does not check out (counted by
    /// the reader as a miss).
    pub fn interpreted(&mut self, interner: &mut Interner, method: u64, bcp: u64) -> Option<FrameId> {
        if let Some(&id) = self.interpreted.get(&(method, bcp)) {
            return Some(id);
        }
        let frame = self.jvm.interpreted_frame(method, bcp)?;
        let id = java_frame(interner, &frame);
        self.interpreted.insert((method, bcp), id);
        Some(id)
    }

    /// What runs at `pc`. A miss in the code cache (or outside the bounds the reader knows,
    /// for a pc that `looks_like_code` by other evidence) re-reads the code cache, at most
    /// once per cycle, and tries again: code committed or stubs generated since the last
    /// read are then found in the same cycle.
    pub fn code(&mut self, interner: &mut Interner, pc: u64, looks_like_code: bool) -> (Code, CodeOutcome) {
        if let Some(code) = self.code.get(&pc) {
            return (code.clone(), CodeOutcome::default());
        }
        let mut outcome = CodeOutcome::default();
        let mut code = self.resolve(interner, pc);
        let missed = code == Code::UnknownJit || (code == Code::NotCode && looks_like_code);
        if missed && !self.refreshed {
            self.refreshed = true;
            self.jvm.refresh_code_cache();
            outcome.refreshed = true;
            code = self.resolve(interner, pc);
        }
        if code == Code::NotCode && looks_like_code {
            code = Code::UnknownJit;
        }
        outcome.unknown = code == Code::UnknownJit;
        self.code.insert(pc, code.clone());
        (code, outcome)
    }

    fn resolve(&mut self, interner: &mut Interner, pc: u64) -> Code {
        if !self.jvm.in_code_cache(pc) {
            return Code::NotCode;
        }
        match self.jvm.code_at(pc) {
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
    interner.frame_at_line(kind, &frame.method.full_name(), &frame.method.short_name(), frame.line)
}
