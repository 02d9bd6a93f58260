//! The compact rows against `gimli`'s own unwind table, looked up through `.eh_frame_hdr` (an
//! independent path: the binary-search table, one FDE's rows evaluated per pc), on the real
//! libc and libjvm of this machine.

use std::fs::File;

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, LittleEndian, RegisterRule, UnwindContext, UnwindSection, X86_64,
};
use joular_ebpf::unwind::{
    UnwindRow, UNWIND_CFA_RBP, UNWIND_CFA_RSP, UNWIND_END, UNWIND_NONE, UNWIND_PLT, UNWIND_SIGNAL,
};
use object::{Object, ObjectSection};

use super::elf_read::read_file_rows;
use super::rows::find_row;

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
const LIBJVM: &str = "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so";

fn check_against_gimli(path: &str) {
    let src = File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let size = src.metadata().unwrap().len();
    let started = std::time::Instant::now();
    let table = read_file_rows(&src, size, u64::MAX).unwrap();
    eprintln!(
        "{path}: {} rows ({} bytes) in {} ms",
        table.rows.len(),
        table.rows.len() * size_of::<UnwindRow>(),
        started.elapsed().as_millis()
    );
    let bytes = std::fs::read(path).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let section = |name: &str| file.section_by_name(name).unwrap();
    let (eh, hdr, text) = (section(".eh_frame"), section(".eh_frame_hdr"), section(".text"));
    let mut eh_frame = EhFrame::new(eh.data().unwrap(), LittleEndian);
    eh_frame.set_address_size(8);
    let bases = BaseAddresses::default()
        .set_eh_frame(eh.address())
        .set_eh_frame_hdr(hdr.address())
        .set_text(text.address())
        .set_got(file.section_by_name(".got").map_or(0, |s| s.address()));
    let hdr = EhFrameHdr::new(hdr.data().unwrap(), LittleEndian).parse(&bases, 8).unwrap();
    let lookup = hdr.table().unwrap();
    let mut ctx = UnwindContext::new();
    let (mut checked, mut kept) = (0u64, 0u64);
    // 20,000 pcs spread over the text (an odd stride): first, middle and last instructions
    // of functions alike.
    let stride = (text.size() / 20_000) | 1;
    for pc in (text.address()..text.address() + text.size()).step_by(stride as usize) {
        let ours = find_row(&table.rows, pc);
        let theirs = lookup.unwind_info_for_address(&eh_frame, &bases, &mut ctx, pc, EhFrame::cie_from_offset);
        match theirs {
            Err(_) => assert!(
                ours.is_none_or(|r| r.kind == UNWIND_NONE),
                "{path} {pc:#x}: gimli has no row, ours is {ours:?}"
            ),
            Ok(row) => {
                let ours = ours.unwrap_or_else(|| panic!("{path} {pc:#x}: no row of ours"));
                checked += 1;
                let ra = row.register(X86_64::RA);
                if ours.kind == UNWIND_SIGNAL {
                    // The kernel's saved registers, which the rows do not describe by rule.
                    assert!(matches!(row.cfa(), CfaRule::Expression(_)), "{path} {pc:#x}: {row:?}");
                    continue;
                }
                if ours.kind == UNWIND_END {
                    assert_eq!(ra, Some(RegisterRule::Undefined), "{path} {pc:#x}");
                    continue;
                }
                if ours.kind == UNWIND_NONE {
                    // Only a rule the rows cannot say is left out.
                    let simple =
                        matches!(row.cfa(), CfaRule::RegisterAndOffset { register: X86_64::RSP | X86_64::RBP, .. })
                            && ra == Some(RegisterRule::Offset(-8))
                            && matches!(
                                row.register(X86_64::RBP),
                                None | Some(RegisterRule::SameValue | RegisterRule::Offset(_))
                            );
                    let CfaRule::RegisterAndOffset { offset, .. } = row.cfa() else { continue };
                    assert!(!simple || *offset > i64::from(i16::MAX), "{path} {pc:#x}: a simple rule dropped: {row:?}");
                    continue;
                }
                kept += 1;
                assert_eq!(ra, Some(RegisterRule::Offset(-8)), "{path} {pc:#x}");
                match row.cfa() {
                    CfaRule::RegisterAndOffset { register, offset } => {
                        let reg = if ours.kind == UNWIND_CFA_RSP { X86_64::RSP } else { X86_64::RBP };
                        assert!(ours.kind == UNWIND_CFA_RSP || ours.kind == UNWIND_CFA_RBP, "{path} {pc:#x}");
                        assert_eq!((*register, *offset), (reg, i64::from(ours.cfa_offset)), "{path} {pc:#x}");
                    }
                    CfaRule::Expression(_) => assert_eq!(ours.kind, UNWIND_PLT, "{path} {pc:#x}"),
                }
                let rbp = match row.register(X86_64::RBP) {
                    Some(RegisterRule::Offset(o)) => o / 8,
                    _ => 0,
                };
                if ours.kind != UNWIND_PLT {
                    assert_eq!(rbp, i64::from(ours.rbp_words), "{path} {pc:#x}");
                }
            }
        }
    }
    eprintln!("{path}: {checked} pcs checked, {kept} with a kept rule");
    assert!(checked > 1000 && kept * 100 >= checked * 99, "{path}: {kept} of {checked} kept");
}

#[test]
fn libc_rows_equal_gimli_unwind_table() {
    check_against_gimli(LIBC);
}

#[test]
fn libjvm_rows_equal_gimli_unwind_table() {
    check_against_gimli(LIBJVM);
}

#[test]
fn plt_entries_get_the_plt_rule() {
    let src = File::open(LIBC).unwrap();
    let table = read_file_rows(&src, src.metadata().unwrap().len(), u64::MAX).unwrap();
    let bytes = std::fs::read(LIBC).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let plt = file.section_by_name(".plt").expect("libc has a .plt");
    let row = find_row(&table.rows, plt.address() + 16).unwrap();
    assert_eq!(row.kind, UNWIND_PLT, "{row:?}");
    assert!((10..=11).contains(&row.rbp_words), "{row:?}");
}

#[test]
fn libc_signal_trampoline_gets_the_signal_row() {
    use object::ObjectSymbol;
    // `__restore_rt` is a local symbol: only libc's debug file (libc6-dbg) names it.
    let libc = std::fs::read(LIBC).unwrap();
    let build_id = object::File::parse(&*libc).unwrap().build_id().unwrap().expect("libc has a build id");
    let hex: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
    let debug = format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..]);
    let bytes = std::fs::read(&debug).unwrap_or_else(|e| panic!("{debug}: {e} (Debian's libc6-dbg must be installed)"));
    let debug = object::File::parse(&*bytes).unwrap();
    let restore_rt = debug.symbols().find(|s| s.name() == Ok("__restore_rt")).expect("__restore_rt").address();
    let src = File::open(LIBC).unwrap();
    let table = read_file_rows(&src, src.metadata().unwrap().len(), u64::MAX).unwrap();
    // A handler returns to `__restore_rt`: the row the sampler takes is the one of pc - 1 (the
    // FDE starts one byte early for that), and the trampoline's own instructions.
    for pc in [restore_rt - 1, restore_rt, restore_rt + 7] {
        let row = find_row(&table.rows, pc).unwrap();
        assert_eq!(row.kind, UNWIND_SIGNAL, "{pc:#x}: {row:?}");
    }
    // The function before it is an ordinary one.
    assert_ne!(find_row(&table.rows, restore_rt - 0x20).unwrap().kind, UNWIND_SIGNAL);
}
