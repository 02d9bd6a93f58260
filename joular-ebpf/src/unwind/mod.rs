//! Native unwinding from the binaries' own call-frame information (`.eh_frame`): the rows user
//! space extracts per file and the per-process table the sampler finds a pc's row through.
//!
//! A row holds from its `pc` up to the next row's `pc` (rows of a file are sorted by `pc`,
//! file-relative virtual addresses). Every rule that cannot be written as one of these kinds
//! is an explicit `UNWIND_NONE` row: the sampler stops there and counts a miss, it never
//! guesses. The return address is always at CFA - 8 (x86_64); a row whose CFI says otherwise
//! is `UNWIND_NONE`.
//!
//! How a pc's row is found ([`lookup`]) and how a frame is stepped by it ([`step`]) are here
//! too, so the sampler and user space's tests run the same code: the eBPF program reads rows
//! and stack words from its maps, a test from a recorded table and stack.

mod lookup;
mod step;

pub use lookup::{find_row, Lookup, RowArray};
pub use step::{native_step, NativeRegs, NativeStep, UnwindSource, MAX_FRAME_BYTES};

/// No usable rule here (a gap between functions, or a rule too complex to keep).
pub const UNWIND_NONE: u8 = 0;
/// CFA = rsp + `cfa_offset`.
pub const UNWIND_CFA_RSP: u8 = 1;
/// CFA = rbp + `cfa_offset`.
pub const UNWIND_CFA_RBP: u8 = 2;
/// A PLT entry (the DWARF expression every linker emits for `.plt`): CFA = rsp +
/// `cfa_offset`, plus 8 when `pc & 15 >= plt_threshold` (the entry pushed its slot index).
pub const UNWIND_PLT: u8 = 3;
/// The return address is undefined: the thread's first frame (`_start`, `clone3`'s child).
pub const UNWIND_END: u8 = 4;
/// A signal trampoline (`__restore_rt`, an FDE whose CIE says "S"): sp is at the `ucontext_t`
/// the kernel pushed, and the interrupted frame's registers are in its `uc_mcontext`. The
/// interrupted pc is where the thread was, not a return address.
pub const UNWIND_SIGNAL: u8 = 5;

/// Where `ucontext_t.uc_mcontext.gregs` keeps the interrupted registers (x86_64 Linux): after
/// `uc_flags`, `uc_link` and `uc_stack` (40 bytes), `REG_RBP` = 10, `REG_RSP` = 15, `REG_RIP`
/// = 16.
pub const SIGNAL_FRAME_RBP_BYTES: u64 = 40 + 10 * 8;
pub const SIGNAL_FRAME_RSP_BYTES: u64 = 40 + 15 * 8;
pub const SIGNAL_FRAME_RIP_BYTES: u64 = 40 + 16 * 8;

/// One unwind row: 8 bytes, so libjvm's whole table is a few MiB.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct UnwindRow {
    /// First file-relative virtual address the row holds for.
    pub pc: u32,
    pub cfa_offset: i16,
    /// Where the caller's rbp is saved, in 8-byte words from the CFA (negative); 0: rbp is
    /// unchanged by this frame. For `UNWIND_PLT`: the `pc & 15` threshold instead.
    pub rbp_words: i8,
    /// `UNWIND_*`.
    pub kind: u8,
}

/// Executable file mappings one process's table holds (a JVM maps some 30).
pub const MAX_UNWIND_MAPPINGS: usize = 128;

/// One executable file mapping: `[start, end)` in the process, the file's rows at
/// `UNWIND_ROWS[first_row..first_row + row_count]`, and `bias` = process address - file
/// virtual address.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct UnwindMapping {
    pub start: u64,
    pub end: u64,
    pub bias: u64,
    pub first_row: u32,
    pub row_count: u32,
}

/// A process's executable file mappings, sorted by `start`, non-overlapping (`UNWIND_PROCS`,
/// keyed by tgid).
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct ProcUnwind {
    pub count: u32,
    pub _pad: u32,
    pub mappings: [UnwindMapping; MAX_UNWIND_MAPPINGS],
}

impl Default for ProcUnwind {
    fn default() -> Self {
        ProcUnwind { count: 0, _pad: 0, mappings: [UnwindMapping::default(); MAX_UNWIND_MAPPINGS] }
    }
}

/// Rows `UNWIND_ROWS` is declared with; the loader sizes it from `--max-symbol-mb`.
pub const MAX_UNWIND_ROWS: u32 = 1 << 20;
/// Binary-search steps over one file's rows: files of up to 2^24 rows.
pub const UNWIND_ROW_SEARCH_STEPS: u32 = 24;
/// Binary-search steps over a process's mappings (`MAX_UNWIND_MAPPINGS` = 2^7).
pub const UNWIND_MAPPING_SEARCH_STEPS: u32 = 8;

#[cfg(feature = "user")]
mod pod {
    // SAFETY: #[repr(C)], plain integers, padding explicit.
    unsafe impl aya::Pod for super::UnwindRow {}
    unsafe impl aya::Pod for super::UnwindMapping {}
    unsafe impl aya::Pod for super::ProcUnwind {}
}
