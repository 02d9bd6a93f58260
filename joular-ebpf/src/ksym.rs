//! Kernel addresses named by the kernel itself, on request from user space.
//!
//! The other way to name a kernel address is to read /proc/kallsyms: ~120,000 lines the
//! kernel formats on every read (20 ms of kernel CPU here, and as much again to parse them),
//! a large part of a short profile's whole cost for the handful of kernel frames it shows.
//! This program is never attached; user space runs it with `BPF_PROG_TEST_RUN`, passing up
//! to `KSYM_BATCH` addresses as the raw tracepoint's arguments, and `bpf_snprintf("%ps")`
//! looks each one up in the kernel's own symbol table (a binary search), modules and other
//! eBPF programs included, always current.

use aya_ebpf::{helpers::generated::bpf_snprintf, programs::RawTracePointContext, EbpfContext};
use joular_ebpf::{KSYM_BATCH, KSYM_NAME_BYTES};

use crate::maps::KSYM_NAMES;

/// `bpf_snprintf` takes its format only from read-only map memory: a static, never a literal
/// the compiler could copy to the stack.
static SYMBOL_FORMAT: [u8; 4] = *b"%ps\0";

pub fn on_request(ctx: &RawTracePointContext) -> u32 {
    let Some(out) = KSYM_NAMES.get_ptr_mut(0) else {
        return 1;
    };
    // SAFETY: the test run passes 12 u64 arguments; this reads them at constant offsets.
    let args = unsafe { *(ctx.as_ptr() as *const [u64; KSYM_BATCH + 1]) };
    // SAFETY: a map value only this program writes, and only while user space waits for it.
    let out = unsafe { &mut *out };
    let count = args[0];
    // Unrolled: each name's slot is then a constant offset in the map value.
    macro_rules! name {
        ($($i:literal)*) => {$(
            if count > $i {
                out.len[$i] = name_one(&mut out.names[$i], args[$i + 1]);
            }
        )*};
    }
    name!(0 1 2 3 4 5 6 7 8 9 10);
    0
}

#[inline(always)]
fn name_one(out: &mut [u8; KSYM_NAME_BYTES], addr: u64) -> i64 {
    let mut data = [addr];
    // SAFETY: `out` is writable map memory of the size given; the format is a NUL-terminated
    // static in .rodata, which the loader freezes; `data` holds the one argument `%ps` takes.
    unsafe {
        bpf_snprintf(
            out.as_mut_ptr() as *mut _,
            KSYM_NAME_BYTES as u32,
            SYMBOL_FORMAT.as_ptr() as *const _,
            data.as_mut_ptr(),
            8,
        )
    }
}
