//! Code blobs of a HotSpot JVM as the sampler's unwinder sees them: the block that holds a
//! pc, found through the code heap's segment map as `CodeHeap::find_blob` does (or the
//! per-CPU blob cache, `joular_ebpf::blob_cache`), its fields
//! read at the offsets user space published (`joular_ebpf::BlobLayout`) or, for an nmethod
//! the cache has, its cached facts (`known_nmethod`, `blob_facts`), and whether a return
//! address follows a call instruction.

use core::ffi::c_void;

use aya_ebpf::helpers::{bpf_probe_read_user, generated::bpf_probe_read_user as read_user_into};
use joular_ebpf::{
    blob_cache::{
        self, blob_cache_slot, window_holds_pc, BLOB_CACHE_SLOTS, LEAF_ADAPTER, LEAF_BY_FRAME, LEAF_VTABLE_STUB,
    },
    poll::{is_safepoint_poll, POLL_BYTES},
    CodeHeapConfig, BLOB_WINDOW_WORDS, DROP_JAVA_WALK_NO_BLOB, DROP_JAVA_WALK_READ_FAILED, MAX_CODE_HEAPS,
    MAX_SEGMAP_HOPS,
};

use crate::maps::{BlobFacts, WalkState};
use crate::report::{report_nmethod, report_stub};

/// The first 8 bytes of the `CodeBlob::_name`s of compiled Java methods: "nmethod\0" and
/// "native nmethod" (JNI wrappers), little-endian.
const NAME_NMETHOD: u64 = u64::from_le_bytes(*b"nmethod\0");
const NAME_NATIVE_NMETHOD: u64 = u64::from_le_bytes(*b"native n");
/// The first 8 bytes of "vtable chunks", the blob of vtable and itable stubs (JDK 11 to 25),
/// stepped by `LEAF_VTABLE_STUB`.
const NAME_VTABLE_CHUNKS: u64 = u64::from_le_bytes(*b"vtable c");
/// The first 8 bytes of "I2C/C2I adapters", the blobs of HotSpot's calling-convention
/// adapters (JDK 11 to 25), stepped by `LEAF_ADAPTER`.
const NAME_ADAPTERS: u64 = u64::from_le_bytes(*b"I2C/C2I ");
/// Segment-map value of a free segment.
const FREE_SEGMENT: u8 = 0xff;

/// Whether a call instruction ends right before `ret` (x86_64): `call rel32`,
/// `call *%reg` (with or without REX), `call *disp8(%reg)`, `call *disp32(%reg)`,
/// `call *(%reg)` and `call *disp32(%rip)`.
#[inline(always)]
pub fn follows_call(ret: u64) -> bool {
    // SAFETY: a user-space read that fails cleanly.
    let Ok(b) = (unsafe { bpf_probe_read_user((ret - 8) as *const [u8; 8]) }) else {
        return false;
    };
    b[3] == 0xe8
        || (b[6] == 0xff && (b[7] & 0xf8 == 0xd0 || b[7] & 0xf8 == 0x10))
        || (b[5] == 0xff && b[6] & 0xf8 == 0x50)
        || (b[2] == 0xff && (b[3] & 0xf8 == 0x90 || b[3] == 0x15))
}

/// Whether `pc` is a safepoint poll (see `joular_ebpf::poll`): the place a compiled frame
/// was stopped in when the safepoint handler blob above it returns to it.
#[inline(always)]
pub fn at_safepoint_poll(pc: u64) -> bool {
    // SAFETY: a user-space read that fails cleanly.
    match unsafe { bpf_probe_read_user(pc as *const [u8; POLL_BYTES]) } {
        Ok(b) => is_safepoint_poll(b),
        Err(_) => false,
    }
}

/// Where a pc in the code cache stands before any read: its heap (an index into the config's
/// heaps: a copy of the heap took the walk step past its 512-byte stack), its segment (`pc >>
/// log2_segment_bytes`) and the blob cache slot of that segment. `None`: no heap holds it.
#[derive(Copy, Clone)]
pub struct CodePlace {
    pub heap: usize,
    pub segment: u64,
    pub slot: usize,
}

#[inline(always)]
pub fn place(state: &WalkState, pc: u64) -> Option<CodePlace> {
    let packed = joular_code_place(state, pc);
    (packed >= 0).then_some(CodePlace {
        heap: (packed as usize) & (MAX_CODE_HEAPS - 1),
        slot: (packed as usize >> PLACE_SLOT_SHIFT) & (BLOB_CACHE_SLOTS - 1),
        segment: packed as u64 >> PLACE_SEGMENT_SHIFT,
    })
}

/// How [`joular_code_place`] packs a place into one number: heap in the low bits, then the
/// slot, then the segment.
const PLACE_SLOT_SHIFT: u32 = MAX_CODE_HEAPS.trailing_zeros();
const PLACE_SEGMENT_SHIFT: u32 = PLACE_SLOT_SHIFT + BLOB_CACHE_SLOTS.trailing_zeros();
const _: () = assert!(MAX_CODE_HEAPS.is_power_of_two() && BLOB_CACHE_SLOTS.is_power_of_two());

/// [`find_place`] as a global function: the verifier checks its loop over the heaps once,
/// rather than at every state of the walk step that reaches it (~2,500 instructions
/// processed there). The place packed ([`place`] unpacks it), or -1 when no heap holds `pc`
/// (or its segment would not fit, which no user-space address reaches).
#[no_mangle]
#[inline(never)]
pub extern "C" fn joular_code_place(state: *const WalkState, pc: u64) -> i64 {
    // SAFETY: the caller's per-CPU walk state, handed on (the verifier checks it is memory
    // of the struct's size; a global function must still test it for null).
    let Some(state) = (unsafe { state.as_ref() }) else {
        return -1;
    };
    match find_place(state, pc) {
        Some(p) if p.segment < 1 << (63 - PLACE_SEGMENT_SHIFT) => {
            ((p.segment << PLACE_SEGMENT_SHIFT) | ((p.slot as u64) << PLACE_SLOT_SHIFT) | p.heap as u64) as i64
        }
        _ => -1,
    }
}

#[inline(always)]
fn find_place(state: &WalkState, pc: u64) -> Option<CodePlace> {
    let cfg = &state.cfg;
    let mut found = None;
    for h in 0..MAX_CODE_HEAPS {
        let heap = &cfg.heaps[h];
        if (h as u32) < cfg.heap_count && pc >= heap.low && pc < heap.high {
            found = Some(h);
        }
    }
    let heap = found?;
    let segment = pc >> (cfg.heaps[heap & (MAX_CODE_HEAPS - 1)].log2_segment_bytes & 31);
    Some(CodePlace { heap, segment, slot: blob_cache_slot(segment, state.tgid) })
}

/// The start of the used code heap block holding `pc`, its first `BLOB_WINDOW_WORDS`
/// words read into `state.blob`: the block the blob cache remembers for the pc's segment
/// if, read now, it still holds the pc (see `joular_ebpf::blob_cache`), else the one the
/// segment map gives, which the cache then remembers.
#[inline(always)]
fn find_block(state: &mut WalkState, pc: u64, place: &CodePlace) -> Option<u64> {
    let slot = place.slot & (BLOB_CACHE_SLOTS - 1);
    let entry = state.cache.entries[slot];
    if entry.holds(place.segment, state.tgid, state.cfg.interpreter_start)
        && read_window(state, entry.block)
        && holds_pc(state, entry.block, pc)
    {
        return Some(entry.block);
    }
    let block = segmap_block(&state.cfg.heaps[place.heap & (MAX_CODE_HEAPS - 1)], pc)?;
    if !read_window(state, block) {
        return None;
    }
    let interpreter_start = state.cfg.interpreter_start;
    state.cache.entries[slot].reset(place.segment, state.tgid, interpreter_start, block);
    Some(block)
}

/// As `CodeHeap::find_blob`: the segment map gives, per segment, how many segments to go
/// back towards the block start (0 at the start).
#[inline(always)]
fn segmap_block(heap: &CodeHeapConfig, pc: u64) -> Option<u64> {
    let shift = heap.log2_segment_bytes & 31;
    let mut segment = (pc - heap.low) >> shift;
    for _ in 0..MAX_SEGMAP_HOPS {
        // SAFETY: a user-space read that fails cleanly.
        let tag = unsafe { bpf_probe_read_user((heap.segmap + segment) as *const u8) }.ok()?;
        if tag == FREE_SEGMENT {
            return None;
        }
        if tag == 0 {
            return Some(heap.low + (segment << shift));
        }
        segment = segment.checked_sub(u64::from(tag))?;
    }
    None
}

/// Reads the block's first `BLOB_WINDOW_WORDS` words into `state.blob` (zeroes when the
/// read fails). Straight into the map value: a read returned by value took two copies of the
/// window on the walk step's eBPF stack, which has no room for them.
#[inline(always)]
fn read_window(state: &mut WalkState, block: u64) -> bool {
    let into = state.blob.as_mut_ptr() as *mut c_void;
    // SAFETY: the destination is this CPU's map value, `BLOB_WINDOW_WORDS` words long; the
    // source a user-space read that fails cleanly. The window lies in the heap (a blob is at
    // least that big, and a small stub's window runs into the next block, which is mapped
    // too).
    unsafe { read_user_into(into, (BLOB_WINDOW_WORDS * 8) as u32, block as *const c_void) == 0 }
}

/// Whether the block read into `state.blob` is in use and its blob's code holds `pc`.
#[inline(always)]
fn holds_pc(state: &WalkState, block: u64, pc: u64) -> bool {
    window_holds_pc(&state.blob, &state.cfg.blob, block, pc)
}

/// A field of the block read into `state.blob` (see `blob_cache::window_field`).
#[inline(always)]
fn window_field(state: &WalkState, offset: u32, bytes: u32) -> u64 {
    blob_cache::window_field(&state.blob, offset, bytes)
}

/// The compile id of the nmethod whose facts the blob cache has for `pc`, if its block,
/// read now, is in use and still holds that id (see `joular_ebpf::blob_cache`): two small
/// reads instead of the header window, name and compile id. `executing`: the thread was
/// running at `pc` (the sampled leaf, or code a signal interrupted), so the code there is
/// live, and only whether the cached nmethod is still the one there needs its compile id read:
/// HotSpot frees an nmethod only once no thread runs in it. The block's `used` flag, read
/// for return addresses, is the second of the two reads of the JVM's cold memory a compiled
/// frame costs (the two were 13-15% of a sample's time on a 2-thread JVM, the first ~80% of
/// that: its page and line are cold).
#[inline(always)]
pub fn known_nmethod(state: &WalkState, pc: u64, place: &CodePlace, executing: bool) -> Option<u32> {
    let e = &state.cache.entries[place.slot & (BLOB_CACHE_SLOTS - 1)];
    if !e.may_serve(place.segment, state.tgid, state.cfg.interpreter_start, pc) {
        return None;
    }
    let l = &state.cfg.blob;
    // SAFETY: user-space reads that fail cleanly.
    let used = executing || unsafe { bpf_probe_read_user((e.block + u64::from(l.used)) as *const u8) }.ok()? != 0;
    let id =
        unsafe { bpf_probe_read_user((e.block + u64::from(l.blob) + u64::from(l.compile_id)) as *const u32) }.ok()?;
    e.serves(used, id).then_some(id)
}

/// `joular_blob_facts`'s answer when the facts are in `state.facts`; any other answer is
/// the `DROP_*` counter of why there are none.
const FACTS_READ: i64 = -1;

/// The facts of the blob holding `pc` read from its block now (`joular_blob_facts`). Else
/// the `DROP_*` counter of why not: no live blob holds `pc`, or its compile id cannot be read.
#[inline(always)]
pub fn blob_facts(state: &mut WalkState, pc: u64, place: &CodePlace) -> Result<BlobFacts, u32> {
    match joular_blob_facts(state, pc, place.heap as u64, place.segment, place.slot as u64) {
        FACTS_READ => Ok(state.facts),
        drop => Err(drop as u32),
    }
}

/// `read_blob_facts` as a global function: the verifier checks the block search and the
/// header reads once, on their own, rather than at every state the step reaches them in.
/// The facts go to `state.facts` (a global function returns a number only).
#[no_mangle]
#[inline(never)]
pub extern "C" fn joular_blob_facts(state: *mut WalkState, pc: u64, heap: u64, segment: u64, slot: u64) -> i64 {
    // SAFETY: the caller's per-CPU walk state, handed on (the verifier checks it is memory
    // of the struct's size; a global function must still test it for null).
    let Some(state) = (unsafe { state.as_mut() }) else {
        return i64::from(DROP_JAVA_WALK_NO_BLOB);
    };
    let place =
        CodePlace { heap: heap as usize & (MAX_CODE_HEAPS - 1), segment, slot: slot as usize & (BLOB_CACHE_SLOTS - 1) };
    match read_blob_facts(state, pc, &place) {
        Ok(facts) => {
            state.facts = facts;
            FACTS_READ
        }
        Err(drop) => i64::from(drop),
    }
}

#[inline(always)]
fn read_blob_facts(state: &mut WalkState, pc: u64, place: &CodePlace) -> Result<BlobFacts, u32> {
    let block = find_block(state, pc, place).ok_or(DROP_JAVA_WALK_NO_BLOB)?;
    if !holds_pc(state, block, pc) {
        return Err(DROP_JAVA_WALK_NO_BLOB);
    }
    let l = state.cfg.blob;
    let blob = block + u64::from(l.blob);
    let code_begin = blob_cache::window_code_begin(&state.blob, &l, block);
    let code_end = blob + window_field(state, l.size, 4);
    let frame_words = window_field(state, l.frame_size, 4) as u32;
    let complete = blob_cache::window_frame_complete(&state.blob, &l);
    let name = window_field(state, l.name, 8);
    let slot = place.slot & (BLOB_CACHE_SLOTS - 1);
    let (nmethod, leaf_rule) = match state.cache.entries[slot].known_name(name) {
        Some(nmethod) => (nmethod, state.cache.entries[slot].known_leaf_rule(name)),
        None => {
            // SAFETY: user-space reads that fail cleanly.
            match unsafe { bpf_probe_read_user(name as *const u64) } {
                Ok(s) => {
                    let nmethod = s == NAME_NMETHOD || s == NAME_NATIVE_NMETHOD;
                    let leaf_rule = match s {
                        NAME_VTABLE_CHUNKS => LEAF_VTABLE_STUB,
                        NAME_ADAPTERS => LEAF_ADAPTER,
                        _ => LEAF_BY_FRAME,
                    };
                    let e = &mut state.cache.entries[slot];
                    e.learn_name(name, nmethod);
                    e.learn_leaf_rule(name, leaf_rule);
                    (nmethod, leaf_rule)
                }
                Err(_) => (false, LEAF_BY_FRAME),
            }
        }
    };
    let mut compile_id = 0;
    if nmethod {
        // SAFETY: a user-space read that fails cleanly.
        compile_id = unsafe { bpf_probe_read_user((blob + u64::from(l.compile_id)) as *const u32) }
            .map_err(|_| DROP_JAVA_WALK_READ_FAILED)?;
        let e = &mut state.cache.entries[slot];
        e.saw_compile_id(compile_id);
        e.learn_nmethod(compile_id, code_begin, code_end, frame_words, complete);
        // With its method, for user space to name it by even once it is freed. An nmethod the
        // cache has came through here first, and was reported then.
        report_nmethod(state, blob + u64::from(l.method), compile_id);
    } else {
        report_stub(state, pc);
    }
    Ok(BlobFacts { code_begin, frame_words, complete, nmethod, compile_id, leaf_rule })
}
