//! Frames and stacks are shared, not copied: equal frames get one id, and an equal
//! sequence of ids gets one `Arc`, so a stack seen every cycle costs one allocation.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::{Frame, FrameKind, Stack};

pub type FrameId = u32;

/// Past this many distinct stacks, or past its byte bound, the stack table starts over;
/// handed-out `Arc`s stay valid, later ones are simply new allocations. Bounds memory in host
/// mode: a stack of 30 frames costs about 1.4 KiB here.
const MAX_STACKS: usize = 1 << 16;
/// What a hash-map slot and its allocation headers cost beyond the data, roughly.
const ENTRY_OVERHEAD_BYTES: usize = 48;

/// What makes two frames the same frame: kind, stable name, line, and the JVM's raw name
/// (two hidden classes with one stable name stay apart in --json and profile.json).
type FrameKey = (FrameKind, Arc<str>, Option<u32>, Option<Arc<str>>);

pub struct Interner {
    frames: Vec<Frame>,
    by_name: HashMap<FrameKey, FrameId>,
    stacks: HashMap<Box<[FrameId]>, Stack>,
    frame_bytes: usize,
    stack_bytes: usize,
    max_stack_bytes: usize,
}

impl Default for Interner {
    fn default() -> Self {
        Self::with_max_stack_bytes(u64::MAX)
    }
}

impl Interner {
    pub fn with_max_stack_bytes(max_stack_bytes: u64) -> Self {
        Interner {
            frames: Vec::new(),
            by_name: HashMap::new(),
            stacks: HashMap::new(),
            frame_bytes: 0,
            stack_bytes: 0,
            max_stack_bytes: usize::try_from(max_stack_bytes).unwrap_or(usize::MAX),
        }
    }

    /// Heap bytes held, estimated from what was stored (for the symbol budget).
    pub fn bytes(&self) -> u64 {
        (self.frame_bytes + self.stack_bytes) as u64
    }

    pub fn frame(&mut self, kind: FrameKind, name: &str, short: &str) -> FrameId {
        self.frame_at_line(kind, name, short, None)
    }

    /// A frame at a source line: the same method on two lines is two frames.
    pub fn frame_at_line(&mut self, kind: FrameKind, name: &str, short: &str, line: Option<u32>) -> FrameId {
        self.frame_with_raw_name(kind, name, short, line, None)
    }

    /// A frame whose name leaves out what the JVM's own name (`raw_name`) has that changes
    /// between runs; two hidden classes of one stable name stay two frames.
    pub fn frame_with_raw_name(
        &mut self,
        kind: FrameKind,
        name: &str,
        short: &str,
        line: Option<u32>,
        raw_name: Option<&str>,
    ) -> FrameId {
        let name: Arc<str> = Arc::from(name);
        let raw_name: Option<Arc<str>> = raw_name.map(Arc::from);
        let key = (kind, name.clone(), line, raw_name.clone());
        if let Some(&id) = self.by_name.get(&key) {
            return id;
        }
        let short = if *short == *name { name.clone() } else { Arc::from(short) };
        self.frame_bytes += std::mem::size_of::<Frame>()
            + name.len()
            + if Arc::ptr_eq(&short, &name) { 0 } else { short.len() }
            + raw_name.as_ref().map_or(0, |r| r.len())
            + ENTRY_OVERHEAD_BYTES;
        let id = self.frames.len() as FrameId;
        self.frames.push(Frame { name, short, kind, line, raw_name });
        self.by_name.insert(key, id);
        id
    }

    /// `frame`'s id here (a frame another interner or a cache holds), its raw name kept.
    pub fn intern(&mut self, frame: &Frame) -> FrameId {
        self.frame_with_raw_name(frame.kind, &frame.name, &frame.short, frame.line, frame.raw_name.as_deref())
    }

    /// The frame of `id`.
    pub fn frame_of(&self, id: FrameId) -> &Frame {
        &self.frames[id as usize]
    }

    pub fn kind(&self, id: FrameId) -> FrameKind {
        self.frames[id as usize].kind
    }

    pub fn stack(&mut self, ids: &[FrameId]) -> Stack {
        if let Some(stack) = self.stacks.get(ids) {
            return stack.clone();
        }
        if self.stacks.len() >= MAX_STACKS || self.stack_bytes >= self.max_stack_bytes {
            self.stacks = HashMap::new();
            self.stack_bytes = 0;
        }
        // The ids as key, and the frames (two `Arc`s each) of the stack itself.
        self.stack_bytes +=
            ids.len() * (std::mem::size_of::<FrameId>() + std::mem::size_of::<Frame>()) + ENTRY_OVERHEAD_BYTES;
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
        let mut lambda =
            |raw| interner.frame_with_raw_name(FrameKind::JavaJit, "void M$$Lambda.run()", "M$$Lambda.run", None, raw);
        let (one, two) = (lambda(Some("void M$$Lambda$1/0x10.run()")), lambda(Some("void M$$Lambda$2/0x20.run()")));
        assert_ne!(one, two, "two hidden classes of one stable name are two frames");
        assert_eq!(interner.frame_of(one).raw_name.as_deref(), Some("void M$$Lambda$1/0x10.run()"));
        assert_eq!(&*interner.frame_of(two).name, "void M$$Lambda.run()");
    }

    #[test]
    fn the_stack_table_starts_over_at_its_byte_bound() {
        let mut interner = Interner::with_max_stack_bytes(10_000);
        let ids: Vec<FrameId> =
            (0..10).map(|i| interner.frame(FrameKind::Native, &format!("f{i}"), &format!("f{i}"))).collect();
        let frames_only = interner.bytes();
        assert!(frames_only > 10 * 2, "{frames_only}");
        let first = interner.stack(&ids);
        let mut grown = 0;
        for n in 1..200 {
            let stack: Vec<FrameId> = ids.iter().cycle().take(n).copied().collect();
            interner.stack(&stack);
            grown = grown.max(interner.bytes());
            assert!(interner.bytes() < frames_only + 10_000 + 200 * 64 * 2, "{}", interner.bytes());
        }
        assert!(grown > frames_only + 10_000, "the bound was reached");
        assert!(interner.distinct_stacks() < 200, "the table started over");
        // A stack handed out before stays valid.
        assert_eq!(first.len(), 10);
    }
}
