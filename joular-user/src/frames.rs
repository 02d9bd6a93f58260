//! A frame's kind and its name as reports carry it (`--json`, `summary.json`, profiles): the
//! leaf types every report shares.

use serde::{Deserialize, Serialize};

/// What kind of code a frame is, so flame graphs can colour it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameKind {
    /// JIT-compiled Java method (its own compiled code).
    JavaJit,
    /// A Java method inlined into a compiled caller: it has no frame of its own, the
    /// compiler's debug info (HotSpot scopes) names it. Perf maps cannot show these.
    JavaInlined,
    /// A Java method run by the interpreter, named from the `Method*` in its frame.
    JavaInterpreted,
    /// Other code-cache code: `StubRoutines::...`, adapters, and the `Interpreter` blob when
    /// the method it runs is unknown (the perf-map path). Named `interpreted` before the
    /// Java kinds were split, which old `profile.json` files still say.
    #[serde(alias = "interpreted")]
    Stub,
    /// Native user-space code (libjvm, libc, any ELF), or an unresolved user address.
    Native,
    /// Kernel code.
    Kernel,
}

impl FrameKind {
    /// A Java method's frame (compiled, inlined or interpreted), as opposed to stubs,
    /// native and kernel code.
    pub fn is_java(self) -> bool {
        matches!(self, FrameKind::JavaJit | FrameKind::JavaInlined | FrameKind::JavaInterpreted)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameReport {
    pub name: String,
    pub kind: FrameKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The JVM's own name where `name` leaves out what changes between runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_name: Option<String>,
}
