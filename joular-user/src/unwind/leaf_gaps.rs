//! Rows for code that has no call-frame information but provably never moves its stack
//! pointer. The assembler gives hand-written routines no FDE unless they ask for one, and
//! HotSpot's copy routines in libjvm (`linux_x86_64.S`: `_Copy_conjoint_jints_atomic`,
//! `_Copy_arrayof_conjoint_jlongs`, ..., and `SpinPause`) do not: on a CPU without AVX-512
//! HotSpot's arraycopy calls them, and every sample in them was a cut `native_no_row` stack.
//!
//! Such a routine is found as a gap between two FDEs of an executable section. Its bytes are
//! decoded (`iced-x86`) from the gap's first byte to its last; when every instruction decodes,
//! none calls, none writes rsp (push, pop, enter, leave, rsp arithmetic) and none writes memory
//! addressed by rsp, and the gap holds more than padding, then at every pc of it the return
//! address is the word at rsp: CFA = rsp + 8, rbp untouched. Anything else leaves the gap
//! without a row (a counted `native_no_row`), never a guess. What this cannot see: code that
//! jumps into a gap with a frame of its own still set up; compilers emit no such jump (a
//! function's parts outside its range, `.cold` ones, have FDEs of their own).

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, Register,
};
use joular_ebpf::unwind::{UnwindRow, UNWIND_CFA_RSP};

/// Gaps longer than this are not decoded (HotSpot's copy routines are 1.1 KiB together).
pub const MAX_GAP_BYTES: u64 = 64 << 10;
/// Gaps shorter than this are taken for the padding compilers put between functions (to align
/// the next one to 16 bytes) and not read: libjvm has some 40,000 such gaps and 2 or 3 longer
/// ones. A routine that short alone between two FDEs keeps no row.
pub const MIN_GAP_BYTES: u64 = 16;

/// An executable section: `[address, address + bytes)` in the file's virtual addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecSection {
    pub address: u64,
    pub bytes: u64,
}

/// The row of a leaf that keeps its return address at rsp.
pub fn leaf_row() -> UnwindRow {
    UnwindRow { pc: 0, cfa_offset: 8, rbp_words: 0, kind: UNWIND_CFA_RSP }
}

/// The gaps `[start, end)` between the sorted, covered ranges `spans` that lie inside an
/// executable section, [`MIN_GAP_BYTES`] to [`MAX_GAP_BYTES`] long. Only gaps between two ranges of the
/// same section are returned: past a section's last FDE may be anything.
pub fn gaps(sorted_spans: &[(u64, u64)], sections: &[ExecSection]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut covered_to = None::<u64>;
    for &(start, end) in sorted_spans {
        if let Some(from) = covered_to.filter(|&c| start > c) {
            let inside = sections.iter().any(|s| from >= s.address && start <= s.address.saturating_add(s.bytes));
            if inside && (MIN_GAP_BYTES..=MAX_GAP_BYTES).contains(&(start - from)) {
                out.push((from, start));
            }
        }
        covered_to = Some(covered_to.map_or(end, |c| c.max(end)));
    }
    out
}

/// Whether the code `bytes`, loaded at `address`, keeps its return address at rsp at every
/// instruction (see the module's comment).
pub fn keeps_return_address_at_rsp(bytes: &[u8], address: u64) -> bool {
    let mut decoder = Decoder::with_ip(64, bytes, address, DecoderOptions::NONE);
    let mut info = InstructionInfoFactory::new();
    let mut instruction = Instruction::default();
    let mut code = false;
    while decoder.can_decode() {
        decoder.decode_out(&mut instruction);
        // Invalid bytes, or an instruction running past the gap's end.
        if instruction.is_invalid() {
            return false;
        }
        match instruction.flow_control() {
            FlowControl::Call | FlowControl::IndirectCall | FlowControl::XbeginXabortXend => return false,
            // `ret` reads the return address at rsp: the rule holds at it.
            FlowControl::Return => {
                code = true;
                continue;
            }
            _ => {}
        }
        let used = info.info(&instruction);
        let writes = |a: OpAccess| {
            matches!(a, OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite)
        };
        if used.used_registers().iter().any(|r| r.register().full_register() == Register::RSP && writes(r.access())) {
            return false;
        }
        let by_rsp = |r: Register| r.full_register() == Register::RSP;
        if used.used_memory().iter().any(|m| (by_rsp(m.base()) || by_rsp(m.index())) && writes(m.access())) {
            return false;
        }
        // Padding: nops, int3, ud2, and zeros (`00 00` decodes as `add %al,(%rax)`).
        let at = (instruction.ip() - address) as usize;
        let zeros = bytes.get(at..at + instruction.len()).is_some_and(|b| b.iter().all(|&b| b == 0));
        code |= !zeros && !matches!(instruction.mnemonic(), Mnemonic::Nop | Mnemonic::Int3 | Mnemonic::Ud2);
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: u64 = 0x1000;

    /// HotSpot's `_Copy_conjoint_jints_atomic` (JDK 17, linux_x86_64.S) as assembled in
    /// Debian's libjvm 17 (`nm`: 0xa99cf0 up to `_Copy_arrayof_conjoint_jlongs`, with its
    /// padding): branches, copy loops, three `ret`s, no frame.
    const COPY_JINTS: &[u8] = &[
        0x49, 0x89, 0xd0, 0x48, 0xd1, 0xea, 0x48, 0x39, 0xfe, 0x4a, 0x8d, 0x44, 0x87, 0xfc, 0x76, 0x05, 0x48, 0x39,
        0xc6, 0x76, 0x6f, 0x48, 0x8d, 0x44, 0xd7, 0xf8, 0x48, 0x8d, 0x4c, 0xd6, 0xf8, 0x48, 0xf7, 0xda, 0xeb, 0x52,
        0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00, 0x90, 0x48, 0x8b, 0x74, 0xd0, 0x08, 0x48,
        0x89, 0x74, 0xd1, 0x08, 0x48, 0x83, 0xc2, 0x01, 0x75, 0xf0, 0x49, 0xf7, 0xc0, 0x01, 0x00, 0x00, 0x00, 0x74,
        0x06, 0x8b, 0x70, 0x08, 0x89, 0x71, 0x08, 0xc3, 0x48, 0x8b, 0x74, 0xd0, 0xe8, 0x48, 0x89, 0x74, 0xd1, 0xe8,
        0x48, 0x8b, 0x74, 0xd0, 0xf0, 0x48, 0x89, 0x74, 0xd1, 0xf0, 0x48, 0x8b, 0x74, 0xd0, 0xf8, 0x48, 0x89, 0x74,
        0xd1, 0xf8, 0x48, 0x8b, 0x34, 0xd0, 0x48, 0x89, 0x34, 0xd1, 0x48, 0x83, 0xc2, 0x04, 0x7e, 0xd4, 0x48, 0x83,
        0xea, 0x04, 0x7c, 0xae, 0xeb, 0xbc, 0x49, 0xf7, 0xc0, 0x01, 0x00, 0x00, 0x00, 0x74, 0x49, 0x42, 0x8b, 0x4c,
        0x87, 0xfc, 0x42, 0x89, 0x4c, 0x86, 0xfc, 0xeb, 0x3d, 0x48, 0x8b, 0x4c, 0xd7, 0xf8, 0x48, 0x89, 0x4c, 0xd6,
        0xf8, 0x48, 0x83, 0xea, 0x01, 0x75, 0xf0, 0xc3, 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x48, 0x8b, 0x4c, 0xd7,
        0x18, 0x48, 0x89, 0x4c, 0xd6, 0x18, 0x48, 0x8b, 0x4c, 0xd7, 0x10, 0x48, 0x89, 0x4c, 0xd6, 0x10, 0x48, 0x8b,
        0x4c, 0xd7, 0x08, 0x48, 0x89, 0x4c, 0xd6, 0x08, 0x48, 0x8b, 0x0c, 0xd7, 0x48, 0x89, 0x0c, 0xd6, 0x48, 0x83,
        0xea, 0x04, 0x7d, 0xd4, 0x48, 0x83, 0xc2, 0x04, 0x7f, 0xb7, 0xc3, 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x66, 0x90,
    ];

    #[test]
    fn a_frameless_copy_routine_keeps_its_return_address_at_rsp() {
        assert!(keeps_return_address_at_rsp(COPY_JINTS, AT));
        // SpinPause: pause; mov $1,%rax; ret.
        assert!(keeps_return_address_at_rsp(&[0xf3, 0x90, 0x48, 0xc7, 0xc0, 0x01, 0, 0, 0, 0xc3], AT));
    }

    #[test]
    fn code_that_moves_rsp_or_writes_at_it_is_refused() {
        for (what, extra) in [
            ("push %rbp", &[0x55][..]),
            ("pop %rbx", &[0x5b]),
            ("sub $8,%rsp", &[0x48, 0x83, 0xec, 0x08]),
            ("lea 8(%rsp),%rsp", &[0x48, 0x8d, 0x64, 0x24, 0x08]),
            ("mov %rax,%rsp", &[0x48, 0x89, 0xc4]),
            ("mov %eax,%esp", &[0x89, 0xc4]),
            ("leave", &[0xc9]),
            ("call +0", &[0xe8, 0, 0, 0, 0]),
            ("call *%rax", &[0xff, 0xd0]),
            ("mov %rax,(%rsp)", &[0x48, 0x89, 0x04, 0x24]),
            ("pushf", &[0x9c]),
        ] {
            let mut bytes = extra.to_vec();
            bytes.extend_from_slice(COPY_JINTS);
            assert!(!keeps_return_address_at_rsp(&bytes, AT), "{what} was let through");
        }
        // Reading at rsp is no write.
        let mut read = vec![0x48, 0x8b, 0x04, 0x24]; // mov (%rsp),%rax
        read.extend_from_slice(COPY_JINTS);
        assert!(keeps_return_address_at_rsp(&read, AT));
    }

    #[test]
    fn padding_invalid_or_cut_bytes_get_no_row() {
        assert!(!keeps_return_address_at_rsp(&[0x90, 0x66, 0x90, 0xcc, 0xcc, 0x0f, 0x1f, 0x00], AT), "padding only");
        assert!(!keeps_return_address_at_rsp(&[0x66, 0x90, 0, 0, 0, 0, 0, 0], AT), "padding filled with zeros");
        assert!(!keeps_return_address_at_rsp(&[], AT));
        // An instruction cut by the gap's end (mov $imm32 missing its last bytes).
        assert!(!keeps_return_address_at_rsp(&[0xc3, 0x48, 0xc7, 0xc0, 0x01], AT));
        // 0x06 (push es) is invalid in 64-bit mode.
        assert!(!keeps_return_address_at_rsp(&[0x06, 0xc3], AT));
    }

    #[test]
    fn gaps_are_between_two_covered_ranges_of_one_executable_section() {
        let text = [ExecSection { address: 0x1000, bytes: 0x1000 }];
        let spans = [(0x1000, 0x1100), (0x1100, 0x1200), (0x1240, 0x1300), (0x1200, 0x1230), (0x1400, 0x1500)];
        let mut sorted = spans.to_vec();
        sorted.sort();
        assert_eq!(gaps(&sorted, &text), vec![(0x1230, 0x1240), (0x1300, 0x1400)]);
        // A gap reaching outside every executable section (a data section between two).
        let split = [ExecSection { address: 0x1000, bytes: 0x310 }, ExecSection { address: 0x1380, bytes: 0x200 }];
        assert_eq!(gaps(&sorted, &split), vec![(0x1230, 0x1240)]);
        // Too long to be a hand-written routine: not decoded.
        let far = [(0x1000, 0x1100), (0x1100 + MAX_GAP_BYTES + 1, 0x1100 + MAX_GAP_BYTES + 2)];
        let big = [ExecSection { address: 0x1000, bytes: 1 << 20 }];
        assert!(gaps(&far, &big).is_empty());
        assert!(gaps(&[], &text).is_empty());
        // Alignment padding.
        assert!(gaps(&[(0x1000, 0x1101), (0x1110, 0x1200)], &text).is_empty());
    }
}
