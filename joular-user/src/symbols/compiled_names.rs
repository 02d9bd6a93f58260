//! The names of compiled code and interpreted methods, kept past their free. The sampler records a compiled
//! frame's pc with its nmethod's compile id; the cycle names it later, and by then the JIT may
//! have freed that nmethod (deoptimized, replaced by a higher tier, its class unloaded), which
//! happens most while a JVM starts. A compile id is never reused within a JVM, so what it was
//! named once stays true: a frame whose nmethod is gone is named from here, the exact pc's
//! inlining chain when that pc was named before, else the nmethod's own method (from a pc of
//! it named before, or from the `Method*` the sampler reported when it first met the nmethod,
//! `joular_ebpf::CodeReport`).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::model::Frame;

/// Named pcs kept per JVM (each a few frames of shared names): about 4 MiB at most.
const MAX_PCS: usize = 32_768;

#[derive(Default)]
pub struct CompiledNames {
    /// (compile id, pc) → frames, innermost first, the nmethod's own method last.
    by_pc: HashMap<(u32, u64), Arc<[Frame]>>,
    /// compile id → the nmethod's own method, and how many of its pcs are kept.
    by_id: HashMap<u32, (Frame, usize)>,
    /// Insertion order, to drop the oldest past [`MAX_PCS`].
    order: VecDeque<(u32, u64)>,
    /// compile id → the nmethod's own method, named from the `Method*` the sampler reported
    /// for it; cleared past [`MAX_METHODS`].
    methods: HashMap<u32, Frame>,
}

/// What [`CompiledNames::lookup`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Named {
    /// Innermost first.
    pub frames: Arc<[Frame]>,
    /// The pc's own inlining chain; otherwise the nmethod's own method alone (the methods
    /// inlined at that pc, if any, are unknown).
    pub exact: bool,
}

impl CompiledNames {
    /// Keeps what `pc` of nmethod `compile_id` was named (innermost first), if not kept yet.
    pub fn remember(&mut self, compile_id: u32, pc: u64, frames: impl FnOnce() -> Vec<Frame>) {
        if self.by_pc.contains_key(&(compile_id, pc)) {
            return;
        }
        let frames: Arc<[Frame]> = frames().into();
        let Some(own) = frames.last() else { return };
        self.by_id.entry(compile_id).or_insert_with(|| (own.clone(), 0)).1 += 1;
        self.by_pc.insert((compile_id, pc), frames);
        self.order.push_back((compile_id, pc));
        while self.order.len() > MAX_PCS {
            let Some((id, old_pc)) = self.order.pop_front() else { break };
            self.by_pc.remove(&(id, old_pc));
            if let Some((_, pcs)) = self.by_id.get_mut(&id) {
                *pcs -= 1;
                if *pcs == 0 {
                    self.by_id.remove(&id);
                }
            }
        }
    }

    /// Keeps the method of nmethod `compile_id` (named from its `Method*`), if no pc of it is
    /// kept yet.
    pub fn remember_method(&mut self, compile_id: u32, own: Frame) {
        if self.knows(compile_id) {
            return;
        }
        if self.methods.len() >= MAX_METHODS {
            self.methods.clear();
        }
        self.methods.insert(compile_id, own);
    }

    /// Whether the method of nmethod `compile_id` is known.
    pub fn knows(&self, compile_id: u32) -> bool {
        self.by_id.contains_key(&compile_id) || self.methods.contains_key(&compile_id)
    }

    /// What `pc` of nmethod `compile_id` was named: the chain at that pc, else the nmethod's
    /// own method alone (the inlined callees at an unseen pc are unknown).
    pub fn lookup(&self, compile_id: u32, pc: u64) -> Option<Named> {
        if let Some(frames) = self.by_pc.get(&(compile_id, pc)) {
            return Some(Named { frames: frames.clone(), exact: true });
        }
        let own = self.by_id.get(&compile_id).map(|(own, _)| own).or_else(|| self.methods.get(&compile_id))?;
        Some(Named { frames: Arc::from([own.clone()]), exact: false })
    }

    pub fn len(&self) -> usize {
        self.by_pc.len() + self.methods.len()
    }
}

/// `Method*`s (and nmethods named by theirs) kept per JVM; past it the map starts over.
const MAX_METHODS: usize = 65_536;

/// The names interpreted `Method*`s were read with. A `Method*` that cannot be read any more
/// (its class unloaded, its JVM exited before the cycle was named) was, when sampled, the
/// method last read there. Only a read that fails falls back to this: a `Method*` freed and
/// reused is read anew.
#[derive(Default)]
pub struct MethodNames {
    by_method: HashMap<u64, Frame>,
}

impl MethodNames {
    /// Keeps `frame`'s name (without its line) for `method`.
    pub fn remember(&mut self, method: u64, frame: &Frame) {
        if self.by_method.len() >= MAX_METHODS && !self.by_method.contains_key(&method) {
            self.by_method.clear();
        }
        self.by_method.insert(method, Frame { line: None, ..frame.clone() });
    }

    pub fn lookup(&self, method: u64) -> Option<&Frame> {
        self.by_method.get(&method)
    }

    pub fn len(&self) -> usize {
        self.by_method.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FrameKind;

    fn frame(kind: FrameKind, name: &str) -> Frame {
        Frame { name: name.into(), short: name.into(), kind, line: None, raw_name: None }
    }

    #[test]
    fn a_freed_nmethod_keeps_its_names_and_the_oldest_go_first() {
        let mut names = CompiledNames::default();
        let chain = vec![frame(FrameKind::JavaInlined, "A.callee"), frame(FrameKind::JavaJit, "A.caller")];
        names.remember(7, 0x1000, || chain.clone());
        assert_eq!(names.lookup(7, 0x1000).unwrap(), Named { frames: chain.clone().into(), exact: true });
        // Another pc of the same nmethod: its own method.
        assert_eq!(names.lookup(7, 0x1040).unwrap(), Named { frames: vec![chain[1].clone()].into(), exact: false });
        assert!(names.lookup(8, 0x1000).is_none(), "another compile id at the same address is not named");
        for i in 0..MAX_PCS as u64 {
            names.remember(100, 0x10_0000 + i, || vec![frame(FrameKind::JavaJit, "B.m")]);
        }
        assert_eq!(names.len(), MAX_PCS);
        assert!(names.lookup(7, 0x1000).is_none(), "the oldest nmethod was dropped");
    }

    #[test]
    fn an_nmethod_none_of_whose_pcs_was_named_has_its_reported_method() {
        let mut names = CompiledNames::default();
        assert!(!names.knows(9));
        names.remember_method(9, frame(FrameKind::JavaJit, "A.reported"));
        assert!(names.knows(9));
        let named = names.lookup(9, 0x2000).unwrap();
        assert_eq!(named, Named { frames: vec![frame(FrameKind::JavaJit, "A.reported")].into(), exact: false });
        // A pc named exactly wins, and so does a method learned from a named pc.
        names.remember(9, 0x2000, || {
            vec![frame(FrameKind::JavaInlined, "B.callee"), frame(FrameKind::JavaJit, "A.own")]
        });
        assert!(names.lookup(9, 0x2000).unwrap().exact);
        assert_eq!(names.lookup(9, 0x2040).unwrap().frames[0].name.as_ref(), "A.own");
        assert!(names.lookup(10, 0x2000).is_none());
        // Bounded: past the cap, the reported methods start over.
        for id in 0..MAX_METHODS as u32 + 1 {
            names.remember_method(1000 + id, frame(FrameKind::JavaJit, "C.m"));
        }
        assert!(names.len() <= MAX_PCS + MAX_METHODS);
        assert!(!names.knows(1000), "the oldest reported methods went with the cap");
    }

    #[test]
    fn an_interpreted_method_keeps_its_name_without_a_line() {
        let mut names = MethodNames::default();
        let f = Frame { line: Some(12), ..frame(FrameKind::JavaInterpreted, "A.m") };
        names.remember(0x7000, &f);
        assert_eq!(names.lookup(0x7000), Some(&Frame { line: None, ..f }));
        assert_eq!(names.lookup(0x7008), None);
    }
}
