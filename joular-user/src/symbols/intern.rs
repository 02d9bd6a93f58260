//! Frames and stacks are shared, not copied: equal frames get one id, and an equal
//! sequence of ids gets one `Arc`, so a stack seen every cycle costs one allocation.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::{Frame, FrameKind, Stack};

pub type FrameId = u32;

/// Past this many distinct stacks the stack table starts over; handed-out `Arc`s stay
/// valid, later ones are simply new allocations. Bounds memory in host mode: a stack of 30
/// frames costs about 1.4 KiB here, so the table stays under ~100 MiB even at the bound.
const MAX_STACKS: usize = 1 << 16;

#[derive(Default)]
pub struct Interner {
    frames: Vec<Frame>,
    by_name: HashMap<(FrameKind, Arc<str>, Option<u32>), FrameId>,
    stacks: HashMap<Box<[FrameId]>, Stack>,
}

impl Interner {
    pub fn frame(&mut self, kind: FrameKind, name: &str, short: &str) -> FrameId {
        self.frame_at_line(kind, name, short, None)
    }

    /// A frame at a source line: the same method on two lines is two frames.
    pub fn frame_at_line(&mut self, kind: FrameKind, name: &str, short: &str, line: Option<u32>) -> FrameId {
        let name: Arc<str> = Arc::from(name);
        if let Some(&id) = self.by_name.get(&(kind, name.clone(), line)) {
            return id;
        }
        let short = if *short == *name { name.clone() } else { Arc::from(short) };
        let id = self.frames.len() as FrameId;
        self.frames.push(Frame {
            name: name.clone(),
            short,
            kind,
            line,
        });
        self.by_name.insert((kind, name, line), id);
        id
    }

    pub fn kind(&self, id: FrameId) -> FrameKind {
        self.frames[id as usize].kind
    }

    pub fn stack(&mut self, ids: &[FrameId]) -> Stack {
        if let Some(stack) = self.stacks.get(ids) {
            return stack.clone();
        }
        if self.stacks.len() >= MAX_STACKS {
            self.stacks.clear();
        }
        let stack: Stack = ids.iter().map(|&id| self.frames[id as usize].clone()).collect();
        self.stacks.insert(ids.into(), stack.clone());
        stack
    }

    pub fn distinct_stacks(&self) -> usize {
        self.stacks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_frames_and_stacks_are_shared() {
        let mut interner = Interner::default();
        let a = interner.frame(FrameKind::JavaJit, "void a.B.c()", "a.B.c");
        let b = interner.frame(FrameKind::Native, "start_thread", "start_thread");
        assert_eq!(interner.frame(FrameKind::JavaJit, "void a.B.c()", "a.B.c"), a);
        assert_ne!(interner.frame(FrameKind::Native, "void a.B.c()", "void a.B.c()"), a);
        let first = interner.stack(&[b, a]);
        let again = interner.stack(&[b, a]);
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(&*first[1].short, "a.B.c");
        assert!(!Arc::ptr_eq(&first, &interner.stack(&[a, b])));
        let at_3 = interner.frame_at_line(FrameKind::JavaJit, "void a.B.c()", "a.B.c", Some(3));
        assert_ne!(at_3, a, "a line makes another frame");
        assert_eq!(interner.frame_at_line(FrameKind::JavaJit, "void a.B.c()", "a.B.c", Some(3)), at_3);
        assert_eq!(interner.stack(&[at_3])[0].line, Some(3));
    }
}
