//! Copies and clears that stay inline in eBPF code. For the `bpf` target LLVM turns a large
//! struct copy, or adjacent zero stores, into a call to `memmove`/`memset`, which aya-ebpf
//! provides as byte loops: the sampler's 240-byte `JvmConfig` copy ran some 1,500 instructions
//! and cost the verifier ~4,000 (it checks both copy directions), each 16-byte clear ~80.
//! Volatile word accesses are never merged into such calls.

use core::mem::{align_of, size_of};

/// `*dst = *src`, a u64 word at a time (`T` is a whole number of aligned words).
#[inline(always)]
pub fn copy_words<T: Copy>(dst: &mut T, src: &T) {
    const { assert!(size_of::<T>().is_multiple_of(8) && align_of::<T>() >= 8) };
    let (d, s) = (dst as *mut T as *mut u64, src as *const T as *const u64);
    for i in 0..size_of::<T>() / 8 {
        // SAFETY: both are valid, aligned `T`s, `T` is `size_of::<T>() / 8` words, and a
        // `Copy` type has no invariant a word-wise copy could break.
        unsafe { core::ptr::write_volatile(d.add(i), core::ptr::read_volatile(s.add(i))) }
    }
}

/// Every byte of `dst` set to 0, a u64 word at a time (`T` is a whole number of aligned words
/// and all-zero is a valid `T`, as every `Default` of this crate's plain structs is).
#[inline(always)]
pub fn zero_words<T: Copy + Default>(dst: &mut T) {
    const { assert!(size_of::<T>().is_multiple_of(8) && align_of::<T>() >= 8) };
    let d = dst as *mut T as *mut u64;
    for i in 0..size_of::<T>() / 8 {
        // SAFETY: `dst` is a valid, aligned `T` of `size_of::<T>() / 8` words.
        unsafe { core::ptr::write_volatile(d.add(i), 0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
    struct Three {
        a: u64,
        b: u32,
        c: u32,
        d: i64,
    }

    #[test]
    fn copies_and_clears_every_word() {
        let src = Three { a: 1, b: 2, c: 3, d: -4 };
        let mut dst = Three::default();
        copy_words(&mut dst, &src);
        assert_eq!(dst, src);
        zero_words(&mut dst);
        assert_eq!(dst, Three::default());
    }
}
