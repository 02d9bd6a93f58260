//! The sampler's native lookup and step (`joular_ebpf::unwind`), exercised rule by rule on
//! made-up rows and stacks: which row a pc gets, the CFA from rsp or rbp, the return address
//! and saved rbp below it, the PLT's rule, a signal frame's saved registers, and every way a
//! step stops. The same code on real files and a real core is in `tests.rs`.

use joular_ebpf::unwind::{
    find_row, native_step, Lookup, NativeRegs, NativeStep, ProcUnwind, UnwindMapping, UnwindRow, UnwindSource,
    SIGNAL_FRAME_RBP_BYTES, SIGNAL_FRAME_RIP_BYTES, SIGNAL_FRAME_RSP_BYTES, UNWIND_CFA_RBP, UNWIND_CFA_RSP, UNWIND_END,
    UNWIND_NONE, UNWIND_PLT, UNWIND_SIGNAL,
};
use joular_ebpf::{DROP_JAVA_WALK_BAD_RETURN, DROP_JAVA_WALK_READ_FAILED, DROP_NATIVE_NO_ROW, DROP_NATIVE_UNMAPPED};

fn row(pc: u32, kind: u8, cfa_offset: i16, rbp_words: i8) -> UnwindRow {
    UnwindRow { pc, cfa_offset, rbp_words, kind }
}

/// A thread of a process with one file mapped at `MAP_START` (file address = process address
/// - `BIAS`), and `STACK_WORDS` words of stack at `STACK`.
struct Thread {
    table: Option<ProcUnwind>,
    rows: Vec<UnwindRow>,
    stack: Vec<u64>,
}

const MAP_START: u64 = 0x7f00_0000_1000;
const BIAS: u64 = 0x7f00_0000_0000;
const STACK: u64 = 0x7ffd_0000_0000;
const STACK_WORDS: usize = 64;

impl Thread {
    fn new(rows: Vec<UnwindRow>) -> Self {
        let mut table = ProcUnwind { count: 1, ..ProcUnwind::default() };
        let row_count = rows.len() as u32;
        table.mappings[0] =
            UnwindMapping { start: MAP_START, end: MAP_START + 0x1000, bias: BIAS, first_row: 0, row_count };
        // Each word holds its own address plus one, so a read shows where it was made.
        let stack = (0..STACK_WORDS as u64).map(|i| STACK + i * 8 + 1).collect();
        Thread { table: Some(table), rows, stack }
    }

    fn set(&mut self, at: u64, value: u64) {
        self.stack[((at - STACK) / 8) as usize] = value;
    }
}

impl UnwindSource for Thread {
    fn row_at(&mut self, pc: u64) -> Lookup {
        match &self.table {
            Some(table) => find_row(table, self.rows.as_slice(), pc),
            None => Lookup::NoTable,
        }
    }

    fn stack_words<const N: usize>(&mut self, at: u64) -> Option<[u64; N]> {
        let first = usize::try_from(at.checked_sub(STACK)? / 8).ok()?;
        at.is_multiple_of(8).then_some(())?;
        self.stack.get(first..first + N)?.try_into().ok()
    }
}

/// The process address of file address `rel`.
fn at(rel: u64) -> u64 {
    BIAS + rel
}

fn caller(pc: u64, sp: u64, fp: u64) -> NativeStep {
    NativeStep::Caller { regs: NativeRegs { pc, sp, fp }, interrupted: false }
}

#[test]
fn lookup_finds_the_mapping_then_the_last_row_at_or_below_the_pc() {
    // Two files' rows side by side; the second file is mapped twice.
    let rows = [
        row(0x100, UNWIND_CFA_RSP, 8, 0),
        row(0x180, UNWIND_CFA_RBP, 16, -2),
        row(0x200, UNWIND_NONE, 0, 0),
        row(0x40, UNWIND_CFA_RSP, 8, 0),
    ];
    let mut table = ProcUnwind { count: 3, ..ProcUnwind::default() };
    table.mappings[0] = UnwindMapping { start: 0x1000, end: 0x2000, bias: 0xf00, first_row: 0, row_count: 3 };
    table.mappings[1] = UnwindMapping { start: 0x5000, end: 0x6000, bias: 0x5000, first_row: 3, row_count: 1 };
    table.mappings[2] = UnwindMapping { start: 0x9000, end: 0xa000, bias: 0x9000, first_row: 3, row_count: 1 };
    let rows: &[UnwindRow] = &rows;
    for (pc, want) in
        [(0x1000, 0), (0x107f, 0), (0x1080, 1), (0x10ff, 1), (0x1100, 2), (0x1fff, 2), (0x5040, 3), (0x9fff, 3)]
    {
        assert_eq!(find_row(&table, rows, pc), Lookup::Row(rows[want]), "{pc:#x}");
    }
    // Below a file's first row: no row (kind UNWIND_NONE).
    assert_eq!(find_row(&table, rows, 0x5000), Lookup::Row(UnwindRow::default()));
    for pc in [0, 0xfff, 0x2000, 0x4fff, 0x6000, 0xa000, u64::MAX] {
        assert_eq!(find_row(&table, rows, pc), Lookup::Unmapped, "{pc:#x}");
    }
}

#[test]
fn lookup_of_rows_past_the_array_is_no_row() {
    let rows = [row(0, UNWIND_CFA_RSP, 8, 0)];
    let mut table = ProcUnwind { count: 1, ..ProcUnwind::default() };
    table.mappings[0] = UnwindMapping { start: 0x1000, end: 0x2000, bias: 0x1000, first_row: 5, row_count: 100 };
    let rows: &[UnwindRow] = &rows;
    assert_eq!(find_row(&table, rows, 0x1800), Lookup::Row(UnwindRow::default()));
}

#[test]
fn cfa_from_rsp_with_the_return_address_below_it() {
    let mut t = Thread::new(vec![row(0x1000, UNWIND_CFA_RSP, 24, 0), row(0x1100, UNWIND_NONE, 0, 0)]);
    let sp = STACK + 16;
    t.set(sp + 16, 0xc0de);
    // rbp untouched by the frame: the caller's is the same.
    assert_eq!(native_step(&mut t, NativeRegs { pc: at(0x1010), sp, fp: 77 }, true), caller(0xc0de, sp + 24, 77));
}

#[test]
fn saved_rbp_is_read_where_the_row_says() {
    let mut t = Thread::new(vec![row(0x1000, UNWIND_CFA_RSP, 16, -2), row(0x1010, UNWIND_CFA_RSP, 48, -3)]);
    let sp = STACK + 64;
    // A frame-pointer frame: rbp pushed right after the call.
    t.set(sp, 0xf00d);
    t.set(sp + 8, 0xc0de);
    assert_eq!(native_step(&mut t, NativeRegs { pc: at(0x1008), sp, fp: 1 }, true), caller(0xc0de, sp + 16, 0xf00d));
    // rbp saved three words below the CFA.
    let cfa = sp + 48;
    t.set(cfa - 24, 0xbeef);
    t.set(cfa - 8, 0xcafe);
    assert_eq!(native_step(&mut t, NativeRegs { pc: at(0x1010), sp, fp: 1 }, true), caller(0xcafe, cfa, 0xbeef));
}

#[test]
fn cfa_from_rbp() {
    let mut t = Thread::new(vec![row(0x1000, UNWIND_CFA_RBP, 16, -2)]);
    let (sp, fp) = (STACK + 8, STACK + 200);
    t.set(fp, 0xf00d);
    t.set(fp + 8, 0xc0de);
    assert_eq!(native_step(&mut t, NativeRegs { pc: at(0x1004), sp, fp }, true), caller(0xc0de, fp + 16, 0xf00d));
}

#[test]
fn a_return_address_takes_the_row_of_the_call_before_it() {
    // The call is the last instruction of the function whose rows end at 0x1020; the return
    // address is the first byte of the next function, whose row says something else.
    let mut t = Thread::new(vec![row(0x1000, UNWIND_CFA_RSP, 32, 0), row(0x1020, UNWIND_CFA_RSP, 8, 0)]);
    let sp = STACK;
    t.set(sp + 24, 0xaaaa);
    t.set(sp, 0xbbbb);
    let regs = NativeRegs { pc: at(0x1020), sp, fp: 0 };
    assert_eq!(native_step(&mut t, regs, false), caller(0xaaaa, sp + 32, 0));
    // The leaf (and a frame a signal interrupted) is where it was.
    assert_eq!(native_step(&mut t, regs, true), caller(0xbbbb, sp + 8, 0));
}

#[test]
fn plt_entries_add_the_pushed_slot_index_past_the_threshold() {
    let mut t = Thread::new(vec![row(0x1000, UNWIND_PLT, 8, 11)]);
    let sp = STACK;
    t.set(sp, 0x1111);
    t.set(sp + 8, 0x2222);
    // Before the push (pc & 15 < 11): the return address at sp.
    assert_eq!(native_step(&mut t, NativeRegs { pc: at(0x1016), sp, fp: 5 }, true), caller(0x1111, sp + 8, 5));
    // After it: one word further.
    assert_eq!(native_step(&mut t, NativeRegs { pc: at(0x101b), sp, fp: 5 }, true), caller(0x2222, sp + 16, 5));
}

#[test]
fn a_signal_frame_leads_to_the_interrupted_registers() {
    let mut t = Thread::new(vec![row(0x1000, UNWIND_SIGNAL, 0, 0)]);
    let sp = STACK;
    t.set(sp + SIGNAL_FRAME_RBP_BYTES, 0xb0b0);
    t.set(sp + SIGNAL_FRAME_RSP_BYTES, 0x5050);
    t.set(sp + SIGNAL_FRAME_RIP_BYTES, 0x1919);
    let step = native_step(&mut t, NativeRegs { pc: at(0x1001), sp, fp: 0 }, false);
    let interrupted = NativeRegs { pc: 0x1919, sp: 0x5050, fp: 0xb0b0 };
    assert_eq!(step, NativeStep::Caller { regs: interrupted, interrupted: true });
    // No interrupted pc: not a signal frame after all.
    t.set(sp + SIGNAL_FRAME_RIP_BYTES, 0);
    assert_eq!(
        native_step(&mut t, NativeRegs { pc: at(0x1001), sp, fp: 0 }, false),
        NativeStep::Cut(DROP_JAVA_WALK_BAD_RETURN)
    );
}

#[test]
fn the_thread_ends_at_an_undefined_or_zero_return_address() {
    let mut t = Thread::new(vec![row(0x1000, UNWIND_END, 0, 0), row(0x1100, UNWIND_CFA_RSP, 8, 0)]);
    assert_eq!(native_step(&mut t, NativeRegs { pc: at(0x1004), sp: STACK, fp: 0 }, true), NativeStep::End);
    t.set(STACK, 0);
    assert_eq!(native_step(&mut t, NativeRegs { pc: at(0x1100), sp: STACK, fp: 0 }, true), NativeStep::End);
}

#[test]
fn a_pc_without_a_rule_or_a_table_is_never_guessed() {
    let mut t = Thread::new(vec![row(0x1000, UNWIND_NONE, 0, 0)]);
    let regs = |pc| NativeRegs { pc, sp: STACK, fp: STACK + 64 };
    assert_eq!(native_step(&mut t, regs(at(0x1004)), true), NativeStep::Cut(DROP_NATIVE_NO_ROW));
    // Below the file's first row, in no mapping.
    assert_eq!(native_step(&mut t, regs(at(0x0ff0)), true), NativeStep::Cut(DROP_NATIVE_UNMAPPED));
    assert_eq!(native_step(&mut t, regs(0x1234), true), NativeStep::Cut(DROP_NATIVE_UNMAPPED));
    t.table = None;
    assert_eq!(native_step(&mut t, regs(at(0x1004)), true), NativeStep::NoTable);
}

#[test]
fn a_cfa_not_above_sp_or_too_far_or_unaligned_is_cut() {
    let sp = STACK + 128;
    for (kind, offset, fp) in [
        (UNWIND_CFA_RBP, 16, sp - 16),        // at sp
        (UNWIND_CFA_RBP, 16, sp - 64),        // below sp
        (UNWIND_CFA_RBP, 16, sp + (1 << 20)), // a frame larger than any stack
        (UNWIND_CFA_RSP, 12, 0),              // unaligned
        (UNWIND_CFA_RBP, 16, u64::MAX - 7),   // wraps around
    ] {
        let mut t = Thread::new(vec![row(0x1000, kind, offset, 0)]);
        let step = native_step(&mut t, NativeRegs { pc: at(0x1000), sp, fp }, true);
        assert_eq!(step, NativeStep::Cut(DROP_JAVA_WALK_BAD_RETURN), "{kind} {offset} {fp:#x}");
    }
}

#[test]
fn an_unreadable_stack_is_a_counted_cut() {
    let end = STACK + (STACK_WORDS as u64) * 8;
    // The return address past the readable stack.
    let mut t = Thread::new(vec![row(0x1000, UNWIND_CFA_RSP, 16, 0), row(0x1100, UNWIND_SIGNAL, 0, 0)]);
    let step = native_step(&mut t, NativeRegs { pc: at(0x1000), sp: end - 8, fp: 0 }, true);
    assert_eq!(step, NativeStep::Cut(DROP_JAVA_WALK_READ_FAILED));
    let step = native_step(&mut t, NativeRegs { pc: at(0x1100), sp: end - 64, fp: 0 }, true);
    assert_eq!(step, NativeStep::Cut(DROP_JAVA_WALK_READ_FAILED));
}
