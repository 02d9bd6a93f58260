//! Compact unwind rows from a file's call-frame information, parsed by `gimli`: per pc range,
//! the CFA as rsp or rbp plus an offset and where the caller's rbp is saved. A rule these rows
//! cannot say (a DWARF expression other than the PLT's, a return address not at CFA - 8, an
//! offset too large) becomes an explicit `UNWIND_NONE` row, as do the gaps between functions.
//! A signal trampoline's FDE (its CIE says "S") is one `UNWIND_SIGNAL` row: its DWARF
//! expressions read the registers the kernel saved, which the sampler reads itself.

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, DebugFrame, EhFrame, LittleEndian, Reader, RegisterRule, UnwindContext,
    UnwindSection, X86_64,
};
use joular_ebpf::unwind::{
    UnwindRow, UNWIND_CFA_RBP, UNWIND_CFA_RSP, UNWIND_END, UNWIND_NONE, UNWIND_PLT, UNWIND_SIGNAL,
};

/// The unwind sections of one file, with the addresses they are loaded at.
pub struct CfiSections<'a> {
    pub eh_frame: Option<(&'a [u8], u64)>,
    pub debug_frame: Option<&'a [u8]>,
    pub text_address: u64,
    pub got_address: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum RowsError {
    #[error("no .eh_frame or .debug_frame")]
    NoCfi,
    #[error("call-frame information unreadable: {0}")]
    Cfi(#[from] gimli::Error),
    #[error("addresses above 4 GiB")]
    TooLarge,
}

/// A pc range `[start, end)` and its row (whose `pc` is set by [`compact`]).
pub type Span = (u64, u64, UnwindRow);

/// Every CFI row of the file as a span, sorted by start ([`compact`] makes them rows). Rows of
/// `.eh_frame` win over `.debug_frame`'s for the same pc.
pub fn extract_spans(s: &CfiSections) -> Result<Vec<Span>, RowsError> {
    let mut spans: Vec<Span> = Vec::new();
    let mut ctx = UnwindContext::new();
    if let Some((data, address)) = s.eh_frame {
        let mut section = EhFrame::new(data, LittleEndian);
        section.set_address_size(8);
        let bases = BaseAddresses::default().set_eh_frame(address).set_text(s.text_address).set_got(s.got_address);
        collect(&section, &bases, &mut ctx, &mut spans)?;
    }
    if let Some(data) = s.debug_frame {
        let mut section = DebugFrame::new(data, LittleEndian);
        section.set_address_size(8);
        let mut extra = Vec::new();
        collect(&section, &BaseAddresses::default(), &mut ctx, &mut extra)?;
        // Only where .eh_frame said nothing.
        spans.sort_by_key(|s| s.0);
        extra.retain(|e| !covered(&spans, e.0));
        spans.extend(extra);
    }
    if s.eh_frame.is_none() && s.debug_frame.is_none() {
        return Err(RowsError::NoCfi);
    }
    spans.sort_by_key(|s| s.0);
    Ok(spans)
}

fn covered(sorted: &[Span], pc: u64) -> bool {
    let i = sorted.partition_point(|s| s.0 <= pc);
    i > 0 && pc < sorted[i - 1].1
}

/// Each CFI row as (start, end, row).
fn collect<R: Reader<Offset = usize>, S: UnwindSection<R>>(
    section: &S,
    bases: &BaseAddresses,
    ctx: &mut UnwindContext<usize>,
    out: &mut Vec<Span>,
) -> Result<(), RowsError> {
    let mut entries = section.entries(bases);
    while let Some(entry) = entries.next()? {
        let CieOrFde::Fde(partial) = entry else { continue };
        // One bad FDE costs its function's rows, not the file's.
        let Ok(fde) = partial.parse(|s, b, o| s.cie_from_offset(b, o)) else { continue };
        if fde.is_signal_trampoline() {
            let start = fde.initial_address();
            let row = UnwindRow { kind: UNWIND_SIGNAL, ..UnwindRow::default() };
            out.push((start, start.saturating_add(fde.len()), row));
            continue;
        }
        let Ok(mut table) = fde.rows(section, bases, ctx) else { continue };
        while let Ok(Some(row)) = table.next_row() {
            if row.start_address() < row.end_address() {
                out.push((row.start_address(), row.end_address(), compact_row(section, row)));
            }
        }
    }
    Ok(())
}

/// The row a CFI row becomes (its `pc` is set later).
pub fn compact_row<R: Reader<Offset = usize>, S: UnwindSection<R>>(
    section: &S,
    row: &gimli::UnwindTableRow<usize>,
) -> UnwindRow {
    let none = UnwindRow { kind: UNWIND_NONE, ..UnwindRow::default() };
    match row.register(X86_64::RA) {
        Some(RegisterRule::Undefined) => return UnwindRow { kind: UNWIND_END, ..UnwindRow::default() },
        Some(RegisterRule::Offset(-8)) => {}
        _ => return none,
    }
    let rbp_words = match row.register(X86_64::RBP) {
        None | Some(RegisterRule::SameValue) | Some(RegisterRule::Undefined) => 0,
        Some(RegisterRule::Offset(o)) if o < 0 && o % 8 == 0 && o / 8 >= i64::from(i8::MIN) => (o / 8) as i8,
        _ => return none,
    };
    match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            let kind = match *register {
                X86_64::RSP => UNWIND_CFA_RSP,
                X86_64::RBP => UNWIND_CFA_RBP,
                _ => return none,
            };
            match i16::try_from(*offset) {
                Ok(cfa_offset) if cfa_offset > 0 => UnwindRow { pc: 0, cfa_offset, rbp_words, kind },
                _ => none,
            }
        }
        CfaRule::Expression(e) => match e.get(section) {
            Ok(expr) => plt_row(expr.0.to_slice().ok().as_deref().unwrap_or(&[])).unwrap_or(none),
            Err(_) => none,
        },
    }
}

/// The expression linkers emit for `.plt` entries: `rsp + 8 + ((rip & 15) >= N) << 3`.
fn plt_row(expr: &[u8]) -> Option<UnwindRow> {
    const BREG7_8: [u8; 2] = [0x77, 0x08];
    const BREG16_0_LIT15_AND: [u8; 4] = [0x80, 0x00, 0x3f, 0x1a];
    const GE_LIT3_SHL_PLUS: [u8; 4] = [0x2a, 0x33, 0x24, 0x22];
    let (head, rest) = expr.split_at_checked(2)?;
    let (mid, rest) = rest.split_at_checked(4)?;
    let (&lit, tail) = rest.split_first()?;
    // DW_OP_lit0..lit31 are 0x30..0x4f.
    let threshold = lit.checked_sub(0x30).filter(|&n| n < 16)?;
    (head == BREG7_8 && mid == BREG16_0_LIT15_AND && tail == GE_LIT3_SHL_PLUS).then_some(UnwindRow {
        pc: 0,
        cfa_offset: 8,
        rbp_words: threshold as i8,
        kind: UNWIND_PLT,
    })
}

/// Sorted rows, with an `UNWIND_NONE` row where a gap starts, and without a row that repeats
/// the one before it.
pub fn compact(mut spans: Vec<Span>) -> Result<Vec<UnwindRow>, RowsError> {
    spans.sort_by_key(|s| s.0);
    let mut rows: Vec<UnwindRow> = Vec::with_capacity(spans.len());
    let mut covered_to = 0u64;
    let push = |rows: &mut Vec<UnwindRow>, pc: u64, mut row: UnwindRow| -> Result<(), RowsError> {
        row.pc = u32::try_from(pc).map_err(|_| RowsError::TooLarge)?;
        match rows.last_mut() {
            Some(last) if last.pc == row.pc => *last = row,
            Some(last) if UnwindRow { pc: row.pc, ..*last } == row => {}
            _ => rows.push(row),
        }
        Ok(())
    };
    for (start, end, row) in spans {
        if !rows.is_empty() && start > covered_to {
            push(&mut rows, covered_to, UnwindRow::default())?;
        }
        // Overlapping FDEs (rare, broken files): the first one keeps its range.
        if start < covered_to && !rows.is_empty() {
            if end <= covered_to {
                continue;
            }
            push(&mut rows, covered_to, row)?;
        } else {
            push(&mut rows, start, row)?;
        }
        covered_to = covered_to.max(end);
    }
    if !rows.is_empty() {
        push(&mut rows, covered_to, UnwindRow::default())?;
    }
    Ok(rows)
}
