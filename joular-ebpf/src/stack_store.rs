//! The walked Java stacks, stored once per cycle under their 64-bit hash in the buffer of
//! the cycle's tag (`JAVA_STACKS_0`/`_1`, flipped by user space), with a per-CPU memo of the
//! last stacks stored so that a thread sampled in the same place again costs no map lookup.

use joular_ebpf::{JavaStack, DROP_JAVA_STACK_COLLISION, DROP_JAVA_STACK_MAP_FULL};

use crate::maps::{count_drop, JAVA_STACKS_0, JAVA_STACKS_1, RECENT_STACKS, RECENT_STACK_SLOTS};

const BPF_NOEXIST: u64 = 1;
const EEXIST: i32 = 17;

/// Stores the stack under `hash` unless this cycle already has it. A stored stack of
/// another length or first caller under the same hash is a collision (counted, not stored).
#[inline(always)]
pub fn store(walker: u32, hash: u64, stack: &JavaStack, tag: u32) -> bool {
    let Some(recent) = RECENT_STACKS.get_ptr_mut(walker) else {
        return false;
    };
    // SAFETY: per-CPU and per walker, only this CPU's walker uses it.
    let slot = unsafe { &mut (*recent).slots[hash as usize & (RECENT_STACK_SLOTS - 1)] };
    // The tag changes at every flip: an entry of this tag was stored in this very buffer,
    // which user space drains only after flipping away from it.
    if slot[0] == hash && slot[1] == u64::from(tag) {
        return true;
    }
    let stored = store_in_map(hash, stack, tag & 1);
    if stored {
        *slot = [hash, u64::from(tag)];
    }
    stored
}

#[inline(always)]
fn store_in_map(hash: u64, stack: &JavaStack, buffer: u32) -> bool {
    let map = if buffer == 0 { &JAVA_STACKS_0 } else { &JAVA_STACKS_1 };
    if let Some(old) = map.get_ptr(hash) {
        // SAFETY: a map value; another CPU may overwrite nothing (entries are insert-only
        // within a cycle), so the read is consistent.
        let same = unsafe { (*old).len == stack.len && (stack.len < 2 || (*old).frames[1] == stack.frames[1]) };
        if !same {
            count_drop(DROP_JAVA_STACK_COLLISION);
        }
        return same;
    }
    match map.insert(hash, stack, BPF_NOEXIST) {
        Ok(()) => true,
        // Another CPU stored the same stack in the meantime.
        Err(e) if e == -EEXIST => true,
        Err(_) => {
            count_drop(DROP_JAVA_STACK_MAP_FULL);
            false
        }
    }
}
