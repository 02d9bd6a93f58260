//! Walked and bare stacks to frames: user frames through HotSpot, the perf map or blazesym, kernel
//! frames through the kernel resolver, and the warning about cut Java stacks.

use std::collections::HashMap;

use joular_ebpf::JVM_UNWIND_HOTSPOT;
use jvm_symbols::hotspot::PcRole;
use jvm_symbols::{classify, short_name, stable_name, CodeKind};

use super::budget::Consumer;
use super::hotspot::{Code, INTERPRETER, UNKNOWN_JIT};
use super::intern::FrameId;
use super::native::NativeName;
use super::{Symbolizer, UNKNOWN};
use crate::model::{FrameKind, WalkedFrame, WalkedStack};

/// Warn about cut stacks once this many Java stacks were seen, if most were cut.
const CUT_STACKS_MIN_SAMPLE: u64 = 20;

/// The frames the sampler walked, to resolve. A code-cache frame whose callee (the frame
/// before it, leaf first) ran outside the code cache returns from a leaf runtime call, whose
/// scope is recorded before its return address ([`PcRole::AfterLeafCall`]).
pub(super) fn user_inputs(walked: &WalkedStack) -> Vec<UserInput> {
    let mut callee_native = false;
    walked
        .frames
        .iter()
        .map(|f| {
            let role = if callee_native { PcRole::AfterLeafCall } else { PcRole::AtOrAfter };
            callee_native = matches!(f, WalkedFrame::Native(_));
            match *f {
                WalkedFrame::Native(pc) => UserInput::Pc { pc, code: false, role: PcRole::AtOrAfter },
                WalkedFrame::Code(pc) => UserInput::Pc { pc, code: true, role },
                WalkedFrame::Compiled { pc, compile_id } => UserInput::Compiled { pc, compile_id, role },
                WalkedFrame::Interpreted { method, bcp } => UserInput::Interpreted { method, bcp },
            }
        })
        .collect()
}

/// One user frame to resolve: a pc, or an interpreted frame the sampler walked.
#[derive(Debug, Clone, Copy)]
pub(super) enum UserInput {
    Pc { pc: u64, code: bool, role: PcRole },
    Compiled { pc: u64, compile_id: u32, role: PcRole },
    Interpreted { method: u64, bcp: u64 },
}

/// The compiled frames of one stack whose nmethod was freed before their pc was named (see
/// `hotspot::CodeOutcome`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Freed {
    /// Named by nothing: `[unknown JIT code]`.
    pub stale: u64,
    /// Named by their nmethod's own method (the methods inlined at that pc unknown).
    pub by_method: u64,
}

impl Symbolizer {
    /// Resolves user frames, leaf first; a compiled pc with inlined methods gives several
    /// frames (innermost first), so the output can be longer than the input. Also says which
    /// compiled frames were freed before their pc was named.
    pub(super) fn resolve_user(&mut self, pid: u32, inputs: &[UserInput]) -> (Vec<FrameId>, Freed) {
        let mut freed = Freed::default();
        let process = self.processes.get_mut(&pid).expect("ensure_process ran");
        // Each input's frames; a native pc waits for one blazesym batch.
        let mut slots: Vec<Option<std::sync::Arc<[FrameId]>>> = vec![None; inputs.len()];
        let mut pending: Vec<(usize, u64)> = Vec::new();
        let one = |id: FrameId| -> Option<std::sync::Arc<[FrameId]>> { Some(std::sync::Arc::from([id])) };
        for (slot, input) in inputs.iter().enumerate() {
            let (pc, kernel_says_code, role) = match *input {
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
                UserInput::Pc { pc, code, role } => (pc, code, role),
                UserInput::Compiled { pc, compile_id, role } => {
                    let code = process.hotspot().map(|h| h.compiled(&mut self.interner, pc, compile_id, role));
                    if let Some((_, outcome)) = &code {
                        freed.stale += u64::from(outcome.stale);
                        freed.by_method += u64::from(outcome.by_method);
                    }
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
                match h.code(&mut self.interner, pc, kernel_says_code || in_mappings, role) {
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
                        CodeKind::JavaMethod => {
                            let stable = stable_name(symbol.name);
                            let raw = (stable != symbol.name).then_some(symbol.name);
                            self.interner.frame_with_raw_name(
                                FrameKind::JavaJit,
                                &stable,
                                &short_name(&stable),
                                None,
                                raw,
                            )
                        }
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
        let ids = slots.into_iter().flatten().flat_map(|ids| ids.iter().copied().collect::<Vec<_>>()).collect();
        (ids, freed)
    }

    pub(super) fn resolve_kernel(&mut self, kernel: &[u64]) -> Vec<FrameId> {
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
    /// one whose root is Java code was cut (no -XX:+PreserveFramePointer). Returns whether it
    /// was: Java code always has a caller, down to the thread's native start.
    pub(super) fn note_cut_stack(&mut self, pid: u32, user_leaf_first: &[FrameId]) -> bool {
        let is_java = |kind: FrameKind| kind.is_java() || kind == FrameKind::Stub;
        let Some(process) = self.processes.get_mut(&pid) else {
            return false;
        };
        // Frame pointers would not help a JVM the HotSpot unwinder walks.
        let hotspot_unwound = process.hotspot().and_then(|h| h.published_unwind()) == Some(JVM_UNWIND_HOTSPOT);
        let Some(jvm) = process.jvm.as_mut() else {
            return false;
        };
        if !user_leaf_first.iter().any(|&id| is_java(self.interner.kind(id))) {
            return false;
        }
        jvm.java_stacks += 1;
        let root = *user_leaf_first.last().expect("a Java frame is present");
        let cut = is_java(self.interner.kind(root));
        if cut {
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
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leaf first: a compiled frame right above native code returns from a leaf runtime call;
    /// every other frame is looked up as sampled.
    #[test]
    fn a_code_frame_above_native_code_is_after_a_leaf_call() {
        let walked = WalkedStack {
            frames: vec![
                WalkedFrame::Native(0x7000),
                WalkedFrame::Compiled { pc: 0x1000, compile_id: 7 },
                WalkedFrame::Compiled { pc: 0x2000, compile_id: 8 },
                WalkedFrame::Native(0x7100),
                WalkedFrame::Code(0x3000),
                WalkedFrame::Interpreted { method: 0x50, bcp: 0x60 },
                WalkedFrame::Code(0x4000),
            ],
            ..WalkedStack::default()
        };
        let roles: Vec<Option<PcRole>> = user_inputs(&walked)
            .into_iter()
            .map(|input| match input {
                UserInput::Pc { code: true, role, .. } | UserInput::Compiled { role, .. } => Some(role),
                UserInput::Pc { code: false, .. } | UserInput::Interpreted { .. } => None,
            })
            .collect();
        let (after, at) = (Some(PcRole::AfterLeafCall), Some(PcRole::AtOrAfter));
        assert_eq!(roles, [None, after, at, None, after, None, at]);
    }

    /// The sampled pc itself is never a return address.
    #[test]
    fn the_leaf_frame_is_looked_up_as_sampled() {
        let walked =
            WalkedStack { frames: vec![WalkedFrame::Compiled { pc: 0x1000, compile_id: 7 }], ..WalkedStack::default() };
        assert!(matches!(user_inputs(&walked)[0], UserInput::Compiled { role: PcRole::AtOrAfter, .. }));
    }
}
