//! The kernel unwinder's blob-cache trust rules (`joular_ebpf::blob_cache`), exercised in
//! the order the sampler applies them to a compiled frame: entry match, fresh header
//! window, name, compile id, return address. A freed or reused block must never let a
//! cached fact through.

use joular_ebpf::blob_cache::{blob_cache_slot, window_field, window_holds_pc, BlobCacheEntry, BLOB_CACHE_SLOTS};
use joular_ebpf::{BlobLayout, BLOB_WINDOW_WORDS};

/// JDK 17's offsets, as user space publishes them.
const LAYOUT: BlobLayout = BlobLayout {
    used: 8,
    blob: 16,
    size: 28,
    frame_size: 44,
    frame_complete: 36,
    code_begin: 48,
    name: 112,
    compile_id: 304,
    method: 112,
    code_begin_bytes: 8,
    frame_complete_bytes: 4,
    _pad: 0,
};
const BLOCK: u64 = 0x7f00_1000_0000;
const TGID: u32 = 4242;
const INTERPRETER: u64 = 0x7f00_0800_0000;
const NMETHOD_NAME: u64 = 0x7f00_2000_0040;

/// A block header window as the kernel reads it: `used`, blob `size`, `code_begin`, name.
fn window(used: bool, size: u32, code_offset: u64, name: u64) -> [u64; BLOB_WINDOW_WORDS] {
    let mut w = [0u64; BLOB_WINDOW_WORDS];
    w[(LAYOUT.used / 8) as usize] = u64::from(used) << ((LAYOUT.used % 8) * 8);
    w[(LAYOUT.size / 8) as usize] |= u64::from(size) << ((LAYOUT.size % 8) * 8);
    w[(LAYOUT.code_begin / 8) as usize] = BLOCK + code_offset;
    w[(LAYOUT.name / 8) as usize] = name;
    w
}

/// Entry match and name, as the sampler applies them to a block read now (`window`,
/// `compile_id` at its compile-id offset) for `pc`: whether the blob is an nmethod, with the
/// entry updated as the sampler updates it.
fn classify(entry: &mut BlobCacheEntry, w: &[u64; BLOB_WINDOW_WORDS], compile_id: u32, pc: u64) -> bool {
    let segment = pc >> 6;
    if !entry.holds(segment, TGID, INTERPRETER) || !window_holds_pc(w, &LAYOUT, entry.block, pc) {
        // The segment map is walked again and the entry starts afresh.
        *entry = BlobCacheEntry::new(segment, TGID, INTERPRETER, BLOCK);
    }
    let name = window_field(w, LAYOUT.name, 8);
    let nmethod = entry.known_name(name).unwrap_or_else(|| {
        let nmethod = name == NMETHOD_NAME;
        entry.learn_name(name, nmethod);
        nmethod
    });
    if nmethod {
        entry.saw_compile_id(compile_id);
    }
    nmethod
}

/// What the sampler does with a compiled caller's return address `ret` whose block the
/// cache slot `entry` names, given the block as read now (`window`, `compile_id` at its
/// compile-id offset): whether the call-instruction check may be skipped, with the entry
/// updated as the sampler updates it.
fn skips_call_check(entry: &mut BlobCacheEntry, w: &[u64; BLOB_WINDOW_WORDS], compile_id: u32, ret: u64) -> bool {
    let vouched = entry.checked_return == ret;
    let nmethod = classify(entry, w, compile_id, ret);
    let skipped = vouched && entry.return_checked(ret, nmethod, compile_id);
    if nmethod {
        entry.learn_return(ret, compile_id);
    }
    skipped
}

#[test]
fn a_return_address_checked_in_the_same_nmethod_is_not_checked_again() {
    let ret = BLOCK + 0x400;
    let w = window(true, 0x1000, 0x100, NMETHOD_NAME);
    let mut entry = BlobCacheEntry::default();
    assert!(!skips_call_check(&mut entry, &w, 77, ret), "first sight: the call before it must be read");
    assert!(skips_call_check(&mut entry, &w, 77, ret), "same live nmethod: the checked return is trusted");
    assert!(!skips_call_check(&mut entry, &w, 77, ret + 5), "another return address is checked");
}

#[test]
fn a_block_freed_and_reused_by_another_nmethod_is_not_trusted() {
    let ret = BLOCK + 0x400;
    let w = window(true, 0x1000, 0x100, NMETHOD_NAME);
    let mut entry = BlobCacheEntry::default();
    skips_call_check(&mut entry, &w, 77, ret);
    // Freed, then reused by a recompilation of the same method, same size and header:
    // only the compile id tells them apart.
    assert!(!skips_call_check(&mut entry, &w, 78, ret), "a reused block's return addresses must be checked again");
    assert_eq!(entry.compile_id, 78);
    // The old id coming back (never happens in HotSpot) still does not revive the old check.
    let mut entry2 = entry;
    entry2.saw_compile_id(77);
    assert!(!entry2.return_checked(ret, true, 77), "a cleared check stays cleared");
}

#[test]
fn a_freed_block_or_one_that_no_longer_holds_the_pc_is_not_used() {
    let pc = BLOCK + 0x400;
    assert!(window_holds_pc(&window(true, 0x1000, 0x100, NMETHOD_NAME), &LAYOUT, BLOCK, pc));
    assert!(!window_holds_pc(&window(false, 0x1000, 0x100, NMETHOD_NAME), &LAYOUT, BLOCK, pc), "freed block trusted");
    // Reused by a smaller blob that ends before the pc: the pc is in another block now.
    assert!(!window_holds_pc(&window(true, 0x200, 0x100, NMETHOD_NAME), &LAYOUT, BLOCK, pc), "pc past the new blob");
    // Reused by a blob whose code starts after the pc (the pc is in its header).
    assert!(!window_holds_pc(&window(true, 0x1000, 0x500, NMETHOD_NAME), &LAYOUT, BLOCK, pc), "pc before the code");
}

#[test]
fn stubs_are_always_checked() {
    let ret = BLOCK + 0x400;
    let w = window(true, 0x1000, 0x100, NMETHOD_NAME + 0x100);
    let mut entry = BlobCacheEntry::default();
    for _ in 0..3 {
        assert!(!skips_call_check(&mut entry, &w, 0, ret), "a blob without a compile id vouched for a return");
    }
    // Even a return learned for a compile id does not apply to a blob that is no nmethod.
    entry.learn_return(ret, entry.compile_id);
    assert!(!entry.return_checked(ret, false, entry.compile_id));
}

#[test]
fn an_entry_serves_only_its_own_segment_of_its_own_jvm() {
    let e = BlobCacheEntry::new(0x1234, TGID, INTERPRETER, BLOCK);
    assert!(e.holds(0x1234, TGID, INTERPRETER));
    assert!(!e.holds(0x1235, TGID, INTERPRETER), "another segment");
    assert!(!e.holds(0x1234, TGID + 1, INTERPRETER), "another process");
    assert!(!e.holds(0x1234, TGID, INTERPRETER + 0x1000), "a recycled PID with another code cache");
    assert!(!BlobCacheEntry::default().holds(0, 0, 0), "an empty entry holds nothing");
}

#[test]
fn an_entry_reset_in_place_is_a_new_entry_and_forgets_what_it_learned() {
    // The eBPF walk resets slots in place (an assignment of a whole entry is a byte loop there).
    let mut e = BlobCacheEntry::new(1, TGID + 1, INTERPRETER + 0x1000, BLOCK + 64);
    e.learn_name(0xdead, true);
    e.compile_id = 42;
    e.learn_return(0x7f00_1234, 42);
    e.code_end = 0x7f00_2000;
    assert_ne!(e.checked_return, 0, "learned before the reset");
    e.reset(0x1234, TGID, INTERPRETER, BLOCK);
    assert_eq!(e, BlobCacheEntry::new(0x1234, TGID, INTERPRETER, BLOCK));
}

#[test]
fn a_name_is_known_only_once_its_string_was_read() {
    let mut e = BlobCacheEntry::new(1, TGID, INTERPRETER, BLOCK);
    assert_eq!(e.known_name(NMETHOD_NAME), None);
    e.learn_name(NMETHOD_NAME, true);
    assert_eq!(e.known_name(NMETHOD_NAME), Some(true));
    assert_eq!(e.known_name(NMETHOD_NAME + 8), None, "another pointer is another string");
    assert_eq!(e.known_name(0), None);
}

#[test]
fn slots_stay_in_the_table() {
    let mut used = std::collections::HashSet::new();
    for segment in 0..4096u64 {
        let slot = blob_cache_slot(0x7f00_0000 + segment, TGID);
        assert!(slot < BLOB_CACHE_SLOTS);
        used.insert(slot);
    }
    assert_eq!(used.len(), BLOB_CACHE_SLOTS, "consecutive segments leave slots unused");
}

/// What the sampler does with a pc in the segment the entry names: serve the nmethod's facts
/// from the cache when the block, read now (`used`, the id at its compile-id offset), is
/// still that nmethod; else read the header window and learn them again, as `blob_facts`
/// does. Returns whether the cache served them.
fn served_from_cache(
    entry: &mut BlobCacheEntry,
    pc: u64,
    used: bool,
    compile_id: u32,
    w: &[u64; BLOB_WINDOW_WORDS],
) -> bool {
    if entry.may_serve(pc >> 6, TGID, INTERPRETER, pc) && entry.serves(used, compile_id) {
        return true;
    }
    if classify(entry, w, compile_id, pc) && window_holds_pc(w, &LAYOUT, BLOCK, pc) {
        let code_begin = window_field(w, LAYOUT.code_begin, 8);
        let code_end = BLOCK + u64::from(LAYOUT.blob) + window_field(w, LAYOUT.size, 4);
        entry.learn_nmethod(compile_id, code_begin, code_end, 12, 0x20);
    }
    false
}

#[test]
fn an_nmethods_facts_are_served_only_while_its_block_is_in_use_with_its_compile_id() {
    let pc = BLOCK + 0x400;
    let w = window(true, 0x1000, 0x100, NMETHOD_NAME);
    let mut entry = BlobCacheEntry::default();
    assert!(!served_from_cache(&mut entry, pc, true, 77, &w), "first sight: read from the block");
    assert_eq!((entry.frame_words, entry.frame_complete, entry.code_begin), (12, 0x20, BLOCK + 0x100));
    assert!(served_from_cache(&mut entry, pc, true, 77, &w), "same live nmethod: served");
    assert!(served_from_cache(&mut entry, pc + 0x10, true, 77, &w), "any pc of its code");
    // Freed: the block is not in use, though its bytes (the id) are still there.
    assert!(!served_from_cache(&mut entry, pc, false, 77, &window(false, 0x1000, 0x100, NMETHOD_NAME)));
    // Reused by another nmethod (a recompilation, same size and header): another id.
    let mut entry = BlobCacheEntry::default();
    served_from_cache(&mut entry, pc, true, 77, &w);
    assert!(!served_from_cache(&mut entry, pc, true, 78, &w), "a reused block's facts must be read again");
    assert_eq!(entry.compile_id, 78, "and learned for the new nmethod");
    assert!(served_from_cache(&mut entry, pc, true, 78, &w));
    assert!(!entry.serves(true, 77), "the old id does not revive the old facts");
    // A pc outside the learned code (its header, or past the blob) is never served.
    assert!(!entry.may_serve(pc >> 6, TGID, INTERPRETER, BLOCK + 0x80));
    assert!(!entry.may_serve(pc >> 6, TGID, INTERPRETER, BLOCK + 0x10 + 0x1000));
    assert!(!entry.may_serve(pc >> 6, TGID + 1, INTERPRETER, pc), "another process");
}

#[test]
fn stubs_and_unread_ids_have_no_facts_to_serve() {
    let pc = BLOCK + 0x400;
    let stub = window(true, 0x1000, 0x100, NMETHOD_NAME + 0x100);
    let mut entry = BlobCacheEntry::default();
    for _ in 0..3 {
        assert!(!served_from_cache(&mut entry, pc, true, 0, &stub), "a stub's facts were served");
    }
    // Facts are learned only for the compile id the entry last saw, and only for nmethods.
    let mut e = BlobCacheEntry::new(pc >> 6, TGID, INTERPRETER, BLOCK);
    e.learn_name(NMETHOD_NAME, true);
    e.saw_compile_id(5);
    e.learn_nmethod(6, BLOCK + 0x100, BLOCK + 0x1010, 12, 0x20);
    assert!(!e.may_serve(pc >> 6, TGID, INTERPRETER, pc), "facts of another id were kept");
    e.learn_name(NMETHOD_NAME + 0x100, false);
    e.learn_nmethod(5, BLOCK + 0x100, BLOCK + 0x1010, 12, 0x20);
    assert!(!e.may_serve(pc >> 6, TGID, INTERPRETER, pc), "facts of a non-nmethod were kept");
    assert!(!e.serves(true, 0), "id 0 (none read) is never served");
}
