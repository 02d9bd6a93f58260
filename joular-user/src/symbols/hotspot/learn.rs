//! Naming the code the sampler reported as it met it (`joular_ebpf::CodeReport`), while the
//! JVM still has it: an nmethod's method (from the `Method*` the sampler read in it), for its
//! frames once it is freed; an interpreted frame's method and a stub's blob, for their frames
//! once the JVM is gone (its last cycle is named after it exited). The symbol worker brings the reports every few
//! tens of milliseconds and before each cycle.

use std::sync::Arc;

use joular_ebpf::{CodeReport, REPORT_METHOD, REPORT_NMETHOD, REPORT_STUB};
use jvm_symbols::hotspot::{CodeAt, MemoryReader};

use super::prefetch::MAX_BATCH_READ_TIME;
use super::HotspotProcess;
use crate::model::{Frame, FrameKind};
use crate::target_read::stall_guard::{self, GuardedMemory, Stall};

impl<R: MemoryReader> HotspotProcess<R> {
    /// Names the reported code of this JVM that is not named yet. Reports of another JVM
    /// (one that had this pid before) are left out. Returns how many were named.
    pub fn learn(&mut self, reports: &[CodeReport]) -> u64 {
        let Some(jvm) = self.published.map(|c| c.interpreter_start) else {
            return 0;
        };
        let mut named = 0;
        for r in reports.iter().filter(|r| r.jvm == jvm) {
            if self.stopped() {
                break;
            }
            let known = match r.kind {
                REPORT_NMETHOD => self.compiled_names.knows(r.compile_id),
                REPORT_METHOD => self.method_names.lookup(r.method).is_some(),
                REPORT_STUB => self.jvm.known_stub_name(r.method).is_some(),
                _ => true,
            };
            if known {
                continue;
            }
            if r.kind == REPORT_STUB {
                // Naming a pc of a stub keeps its blob (`HotspotJvm::known_stub_name`).
                let code = self.guarded(|jvm| jvm.code_at(r.method));
                named += u64::from(matches!(code, Some(CodeAt::Blob(_))));
                continue;
            }
            let Some(method) = self.guarded(|jvm| jvm.method(r.method)).flatten() else {
                continue;
            };
            let kind = match r.kind {
                REPORT_NMETHOD => FrameKind::JavaJit,
                _ => FrameKind::JavaInterpreted,
            };
            let mut frame = Frame::new(kind, method.full_name(), method.short_name(), None);
            frame.raw_name = method.raw_full_name().map(Arc::from);
            match r.kind {
                REPORT_NMETHOD => self.compiled_names.remember_method(r.compile_id, frame),
                _ => {
                    self.method_names.remember(r.method, &frame);
                }
            }
            named += 1;
        }
        named
    }
}

impl HotspotProcess<GuardedMemory> {
    /// [`HotspotProcess::learn`] in one job on the guarded read thread. Returns the JVM and how
    /// many reports were named (none when the job could not run), or the stall, when the job
    /// blocked: the JVM is then left with its thread, and read no more.
    pub fn learn_in_job(h: Box<Self>, reports: Vec<CodeReport>) -> Result<(Box<Self>, u64), Stall> {
        let deadline = stall_guard::hotspot_reads().deadline() + MAX_BATCH_READ_TIME;
        let (h, named) = Self::in_one_job(h, deadline, move |h| h.learn(&reports))?;
        Ok((h, named.unwrap_or(0)))
    }
}
