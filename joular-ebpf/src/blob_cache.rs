//! The HotSpot unwinder's per-CPU cache of code-blob lookups, shared with user space so
//! its trust rules are unit-tested there.
//!
//! A compiled frame's blob is found through the code heap's segment map (one to several
//! reads of a table far from the code) and classified by the string its `_name` points to
//! (a read in libjvm); a caller's return address is checked against the instruction bytes
//! before it. Those are most of a compiled frame's cost, and a sampled thread hits the same
//! few blobs sample after sample. The cache remembers, per code-heap segment of a pc:
//! - the block the segment map gave. Every use re-reads the block's header window and
//!   requires it used and holding the pc, as a fresh lookup does; only the segment-map
//!   hops are saved. A block that no longer passes falls back to the segment map.
//! - which `_name` pointer was read as an nmethod's (or as `vtable chunks`, whose stubs
//!   push no frame): the same pointer names the same string in libjvm, so the string is not
//!   read again.
//! - one return address proven to follow a call instruction, with the compile id of the
//!   nmethod it was proven in. The id is read from the block on every use: compile ids are
//!   never reused, so a freed block reused by any other nmethod (even of the same method
//!   and size) has another id and the return address is checked again. Stubs and other
//!   blobs without a compile id are always checked.
//!
//! - an nmethod's frame size, frame-complete offset and code range, with its compile id.
//!   They are fixed for an nmethod's life, so a block still in use that holds the same
//!   compile id, both read now, is served from the cache without its header window. A
//!   freed block is not in use; a block reused by another nmethod has another id; a
//!   non-nmethod blob reusing it would have to hold the very id at that offset by chance,
//!   and even then user space names a compiled frame only from a blob that has that id at
//!   that pc now, so the frame stays unnamed rather than misnamed.
//!
//! Other blobs' facts always come from the block as it is now.

use crate::{BlobLayout, BLOB_WINDOW_WORDS};

/// Entries per CPU (a direct-mapped table).
pub const BLOB_CACHE_SLOTS: usize = 64;

/// What the cache remembers of one code-heap segment of one JVM.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct BlobCacheEntry {
    /// The segment (`pc >> log2_segment_bytes`); 0 = empty.
    pub segment: u64,
    /// The JVM's template interpreter start: with `tgid`, which process's memory this
    /// describes (a recycled PID gets a new code cache).
    pub interpreter_start: u64,
    /// The heap block holding the segment, as the segment map gave it.
    pub block: u64,
    /// A `CodeBlob::_name` pointer whose string was read; 0 = none.
    pub name: u64,
    /// A return address proven to follow a call in the nmethod `compile_id`; 0 = none.
    pub checked_return: u64,
    pub tgid: u32,
    /// The last compile id read from `block`.
    pub compile_id: u32,
    /// Whether `name`'s string is an nmethod's.
    pub nmethod: u32,
    /// The nmethod `compile_id`'s frame size (words) and frame-complete offset; valid while
    /// `code_end` is not 0.
    pub frame_words: u32,
    pub frame_complete: u32,
    /// How a leaf in a blob named `name` is stepped when its code pushes no frame: one of
    /// the `LEAF_*` rules (`LEAF_BY_FRAME` for every other blob).
    pub leaf_rule: u32,
    /// Its code, `[code_begin, code_end)`.
    pub code_begin: u64,
    pub code_end: u64,
}

/// A leaf stepped by the frame its blob describes (or the stub heuristics of the walk).
pub const LEAF_BY_FRAME: u32 = 0;
/// `vtable chunks`: vtable and itable stubs load their target from the receiver's class and
/// jump to it, pushing nothing, so their return address is at sp wherever they are
/// interrupted (`VtableStubs::create_*`).
pub const LEAF_VTABLE_STUB: u32 = 1;
/// `I2C/C2I adapters`: HotSpot's adapters are frameless too (`gen_i2c_adapter`,
/// `gen_c2i_adapter`): they move the arguments between the two calling conventions with the
/// caller's return address at sp, into the interpreter (an I2C adapter's interpreted caller
/// pushed it, no call precedes it) or after a call in compiled code (C2I). rbp is still the
/// caller's, so stepping by it would skip the caller.
pub const LEAF_ADAPTER: u32 = 2;

/// One CPU's cache.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct BlobCache {
    pub entries: [BlobCacheEntry; BLOB_CACHE_SLOTS],
}

/// The slot a segment of a JVM maps to.
#[inline(always)]
pub fn blob_cache_slot(segment: u64, tgid: u32) -> usize {
    (segment ^ (segment >> 6) ^ u64::from(tgid)) as usize & (BLOB_CACHE_SLOTS - 1)
}

impl BlobCacheEntry {
    /// A fresh entry for a block the segment map just gave.
    #[inline(always)]
    pub fn new(segment: u64, tgid: u32, interpreter_start: u64, block: u64) -> Self {
        BlobCacheEntry { segment, interpreter_start, block, tgid, ..Default::default() }
    }

    /// `*self = BlobCacheEntry::new(..)` in place, without the byte loops an assignment of
    /// the whole entry becomes in eBPF code ([`crate::words`]).
    #[inline(always)]
    pub fn reset(&mut self, segment: u64, tgid: u32, interpreter_start: u64, block: u64) {
        crate::words::zero_words(self);
        self.segment = segment;
        self.interpreter_start = interpreter_start;
        self.block = block;
        self.tgid = tgid;
    }

    /// Whether the entry describes this segment of this JVM (its block still has to be
    /// re-read and found holding the pc).
    #[inline(always)]
    pub fn holds(&self, segment: u64, tgid: u32, interpreter_start: u64) -> bool {
        self.segment != 0 && self.segment == segment && self.tgid == tgid && self.interpreter_start == interpreter_start
    }

    /// Whether the blob whose `_name` is `name` is an nmethod, if that pointer's string
    /// was read before.
    #[inline(always)]
    pub fn known_name(&self, name: u64) -> Option<bool> {
        (self.name != 0 && self.name == name).then_some(self.nmethod != 0)
    }

    #[inline(always)]
    pub fn learn_name(&mut self, name: u64, nmethod: bool) {
        self.name = name;
        self.nmethod = nmethod as u32;
        self.leaf_rule = LEAF_BY_FRAME;
    }

    /// The `LEAF_*` rule of the blob whose `_name` is `name`, if that pointer's string was
    /// read before (`learn_leaf_rule` after `learn_name`); `LEAF_BY_FRAME` if not.
    #[inline(always)]
    pub fn known_leaf_rule(&self, name: u64) -> u32 {
        match self.name != 0 && self.name == name {
            true => self.leaf_rule,
            false => LEAF_BY_FRAME,
        }
    }

    #[inline(always)]
    pub fn learn_leaf_rule(&mut self, name: u64, rule: u32) {
        if self.name == name {
            self.leaf_rule = rule;
        }
    }

    /// Records the compile id just read from the block: another id is another nmethod,
    /// whose return addresses have not been checked.
    #[inline(always)]
    pub fn saw_compile_id(&mut self, compile_id: u32) {
        if self.compile_id != compile_id {
            self.checked_return = 0;
            self.code_end = 0;
        }
        self.compile_id = compile_id;
    }

    /// Remembers the frame facts of the nmethod `compile_id` (read from its block now).
    #[inline(always)]
    pub fn learn_nmethod(
        &mut self,
        compile_id: u32,
        code_begin: u64,
        code_end: u64,
        frame_words: u32,
        frame_complete: u32,
    ) {
        if self.compile_id == compile_id && compile_id != 0 && self.nmethod != 0 {
            self.code_begin = code_begin;
            self.code_end = code_end;
            self.frame_words = frame_words;
            self.frame_complete = frame_complete;
        }
    }

    /// Whether the entry has an nmethod's facts for this segment of this JVM whose code
    /// holds `pc`: then reading the block's `used` flag and compile id decides (`serves`).
    #[inline(always)]
    pub fn may_serve(&self, segment: u64, tgid: u32, interpreter_start: u64, pc: u64) -> bool {
        self.holds(segment, tgid, interpreter_start)
            && self.code_end != 0
            && pc >= self.code_begin
            && pc < self.code_end
    }

    /// Whether the block, read now (`used`, `compile_id` at the nmethod's compile-id offset),
    /// is still the nmethod whose facts the entry has.
    #[inline(always)]
    pub fn serves(&self, used: bool, compile_id: u32) -> bool {
        used && self.code_end != 0 && compile_id != 0 && compile_id == self.compile_id
    }

    /// Whether `ret` was proven to follow a call in the nmethod `compile_id` (`nmethod`:
    /// the blob holding `ret` now is one, and `compile_id` was read from it now).
    #[inline(always)]
    pub fn return_checked(&self, ret: u64, nmethod: bool, compile_id: u32) -> bool {
        nmethod && ret != 0 && self.checked_return == ret && self.compile_id == compile_id
    }

    /// Remembers that `ret` follows a call in the nmethod `compile_id`.
    #[inline(always)]
    pub fn learn_return(&mut self, ret: u64, compile_id: u32) {
        if self.compile_id == compile_id {
            self.checked_return = ret;
        }
    }
}

/// A field of a block's header window (`BLOB_WINDOW_WORDS` words read at the block start):
/// `bytes` wide at `offset` (user space checks that each field lies inside one aligned
/// word of the window).
#[inline(always)]
pub fn window_field(window: &[u64; BLOB_WINDOW_WORDS], offset: u32, bytes: u32) -> u64 {
    let word = window[(offset / 8) as usize & (BLOB_WINDOW_WORDS - 1)];
    let value = word >> ((offset & 7) * 8);
    if bytes >= 8 {
        value
    } else {
        value & ((1u64 << (bytes * 8)) - 1)
    }
}

/// Whether the block at `block`, whose window was just read, is in use and its blob's code
/// holds `pc`: what a block found by the segment map must pass, and what a cached block
/// must pass again at every use (a freed block, or one reused by a blob that ends before
/// `pc`, fails).
#[inline(always)]
pub fn window_holds_pc(window: &[u64; BLOB_WINDOW_WORDS], l: &BlobLayout, block: u64, pc: u64) -> bool {
    let blob = block + u64::from(l.blob);
    window_field(window, l.used, 1) != 0
        && pc >= window_code_begin(window, l, block)
        && pc < blob + window_field(window, l.size, 4)
}

/// The code start of the blob in the block at `block`: the pointer `_code_begin` or the
/// blob plus `_code_offset` (see `BlobLayout::code_begin_bytes`).
#[inline(always)]
pub fn window_code_begin(window: &[u64; BLOB_WINDOW_WORDS], l: &BlobLayout, block: u64) -> u64 {
    if l.code_begin_bytes >= 8 {
        window_field(window, l.code_begin, 8)
    } else {
        block + u64::from(l.blob) + window_field(window, l.code_begin, 4)
    }
}

/// `_frame_complete_offset`, sign-extended from its width: -1 (as u32) for blobs that
/// never set up a frame of their own, whether stored in 2 or 4 bytes.
#[inline(always)]
pub fn window_frame_complete(window: &[u64; BLOB_WINDOW_WORDS], l: &BlobLayout) -> u32 {
    if l.frame_complete_bytes == 2 {
        window_field(window, l.frame_complete, 2) as u16 as i16 as i32 as u32
    } else {
        window_field(window, l.frame_complete, 4) as u32
    }
}
