//! The names of compiled code and interpreted methods, kept past their free. The sampler records a compiled
//! frame's pc with its nmethod's compile id; the cycle names it later, and by then the JIT may
//! have freed that nmethod (deoptimized, replaced by a higher tier, its class unloaded), which
//! happens most while a JVM starts. A compile id is never reused within a JVM, so what it was
//! named once stays true: a frame whose nmethod is gone is named from here, the exact pc's
//! inlining chain when that pc was named before, else the nmethod's own method.

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

    /// What `pc` of nmethod `compile_id` was named: the chain at that pc, else the nmethod's
    /// own method alone (the inlined callees at an unseen pc are unknown).
    pub fn lookup(&self, compile_id: u32, pc: u64) -> Option<Arc<[Frame]>> {
        self.by_pc
            .get(&(compile_id, pc))
            .cloned()
            .or_else(|| self.by_id.get(&compile_id).map(|(own, _)| Arc::from([own.clone()])))
    }

    pub fn len(&self) -> usize {
        self.by_pc.len()
    }
}

/// `Method*`s kept per JVM; past it the map starts over.
const MAX_METHODS: usize = 65_536;

/// The names interpreted `Method*`s (or stub pcs) were read with. A `Method*` that cannot be read any more
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
        assert_eq!(names.lookup(7, 0x1000).unwrap().to_vec(), chain);
        // Another pc of the same nmethod: its own method.
        assert_eq!(names.lookup(7, 0x1040).unwrap().to_vec(), vec![chain[1].clone()]);
        assert!(names.lookup(8, 0x1000).is_none(), "another compile id at the same address is not named");
        for i in 0..MAX_PCS as u64 {
            names.remember(100, 0x10_0000 + i, || vec![frame(FrameKind::JavaJit, "B.m")]);
        }
        assert_eq!(names.len(), MAX_PCS);
        assert!(names.lookup(7, 0x1000).is_none(), "the oldest nmethod was dropped");
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
