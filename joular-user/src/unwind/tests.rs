//! The native unwinder on recorded real files and threads, no root needed
//! (`tests/fixtures/native-unwind`, recorded by `cargo xtask record-unwind-fixture` from two
//! fixture JVMs of the system's JDK 17; each file there is an image as long as the original, zero
//! but for what the row builder reads):
//! - for pcs spread over a real libc's and libjvm's text, the CFA, return-address and saved-rbp
//!   locations the sampler's own step computes from our rows equal those of gimli's unwind
//!   table, evaluated per pc from the file's FDE;
//! - real threads (a JNI leaf without frame pointers, glibc's syscall wrappers, the vDSO,
//!   libjvm's threads down to `clone3`, the launcher down to `_start`, a signal handler over its
//!   signal frame), unwound from a core's registers and stack by the sampler's own lookup and
//!   step, over the tables user space builds from the process's maps, have the frames (pc and
//!   sp) of gdb's backtrace of that core.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use gimli::{
    BaseAddresses, CfaRule, CieOrFde, EhFrame, LittleEndian, RegisterRule, UnwindContext, UnwindSection, X86_64,
};
use joular_ebpf::unwind::{
    find_row, native_step, Lookup, NativeRegs, NativeStep, ProcUnwind, UnwindMapping, UnwindRow, UnwindSource,
    UNWIND_END, UNWIND_NONE, UNWIND_PLT, UNWIND_SIGNAL,
};
use joular_ebpf::DROP_NATIVE_UNMAPPED;
use object::{Object, ObjectSection};

use super::elf_read::read_file_rows;
use super::kernel_maps::process_entry;
use super::tables::UnwindTables;
use crate::target_read::ByteSource;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/native-unwind")
}

/// A recorded file's image (`<name>.gz`).
fn image(name: &str) -> Vec<u8> {
    let path = fixture_dir().join(format!("{name}.gz"));
    let gz = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(&*gz).read_to_end(&mut bytes).unwrap();
    bytes
}

/// A symbol's file address as `images.txt` recorded it.
fn symbol(image: &str, name: &str) -> u64 {
    let text = std::fs::read_to_string(fixture_dir().join("images.txt")).unwrap();
    let line = text.lines().find(|l| l.split(' ').take(3).eq(["symbol", image, name])).expect("a recorded symbol");
    hex(line.rsplit(' ').next().unwrap())
}

fn hex(text: &str) -> u64 {
    u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap_or_else(|e| panic!("{text}: {e}"))
}

struct Image<'a>(&'a [u8]);

impl ByteSource for Image<'_> {
    fn read_bytes_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let rest = self.0.get(offset as usize..).unwrap_or_default();
        let n = buf.len().min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        Ok(n)
    }
}

fn rows_of(bytes: &[u8]) -> Vec<UnwindRow> {
    let started = std::time::Instant::now();
    let rows = read_file_rows(&Image(bytes), bytes.len() as u64, u64::MAX).unwrap().rows;
    eprintln!(
        "{} rows ({} bytes) in {} ms",
        rows.len(),
        rows.len() * size_of::<UnwindRow>(),
        started.elapsed().as_millis()
    );
    rows
}

/// A file's rows as the sampler reads them: one mapping at its own addresses.
struct FileThread<'a> {
    table: ProcUnwind,
    rows: &'a [UnwindRow],
    /// The registers the probe starts from.
    sp: u64,
    fp: u64,
}

/// What a stack word read at `at` holds in `FileThread`: its address, marked, so a step's result
/// tells where it read.
const READ_MARK: u64 = 0x5a5a_0000_0000_0000;

impl<'a> FileThread<'a> {
    fn new(rows: &'a [UnwindRow]) -> Self {
        let row_count = rows.len() as u32;
        let mut table = ProcUnwind { count: 1, ..ProcUnwind::default() };
        table.mappings[0] = UnwindMapping { start: 0, end: u64::from(u32::MAX), bias: 0, first_row: 0, row_count };
        FileThread { table, rows, sp: 0x7ffd_0000_1000, fp: 0x7ffd_0000_8000 }
    }
}

impl UnwindSource for FileThread<'_> {
    fn row_at(&mut self, pc: u64) -> Lookup {
        find_row(&self.table, self.rows, pc)
    }

    fn stack_words<const N: usize>(&mut self, at: u64) -> Option<[u64; N]> {
        Some(core::array::from_fn(|i| (at + 8 * i as u64) | READ_MARK))
    }
}

/// The row the sampler finds for a file address.
pub(crate) fn row_of(rows: &[UnwindRow], address: u64) -> UnwindRow {
    match FileThread::new(rows).row_at(address) {
        Lookup::Row(row) => row,
        other => panic!("{address:#x}: {other:?}"),
    }
}

/// Where a frame's caller's registers come from: the CFA, the address the return address is
/// read at, and where the caller's rbp is saved (`None`: rbp is unchanged).
#[derive(Debug, PartialEq, Eq)]
struct Locations {
    cfa: u64,
    return_address_at: u64,
    rbp_at: Option<u64>,
}

fn check_against_gimli(name: &str) {
    let bytes = image(name);
    let rows = rows_of(&bytes);
    let file = object::File::parse(&*bytes).unwrap();
    let section = |name: &str| file.section_by_name(name).unwrap();
    let (eh, text) = (section(".eh_frame"), section(".text"));
    let mut eh_frame = EhFrame::new(eh.data().unwrap(), LittleEndian);
    eh_frame.set_address_size(8);
    let bases = BaseAddresses::default()
        .set_eh_frame(eh.address())
        .set_text(text.address())
        .set_got(file.section_by_name(".got").map_or(0, |s| s.address()));
    // gimli's FDEs by address (the search `.eh_frame_hdr` serves; the image keeps no such table).
    let mut fdes = Vec::new();
    let mut entries = eh_frame.entries(&bases);
    while let Some(entry) = entries.next().unwrap() {
        if let CieOrFde::Fde(partial) = entry {
            fdes.extend(partial.parse(EhFrame::cie_from_offset).ok());
        }
    }
    fdes.sort_by_key(|f| f.initial_address());
    let mut ctx = UnwindContext::new();
    let (mut checked, mut kept) = (0u64, 0u64);
    // 20,000 pcs spread over the text (an odd stride): first, middle and last instructions of
    // functions alike.
    let stride = (text.size() / 20_000) | 1;
    for pc in (text.address()..text.address() + text.size()).step_by(stride as usize) {
        let mut probe = FileThread::new(&rows);
        let ours = row_of(&rows, pc);
        let regs = NativeRegs { pc, sp: probe.sp, fp: probe.fp };
        let step = native_step(&mut probe, regs, true);
        let fde = fdes.partition_point(|f| f.initial_address() <= pc).checked_sub(1).map(|i| &fdes[i]);
        let theirs = fde
            .filter(|f| pc < f.end_address())
            .and_then(|f| f.unwind_info_for_address(&eh_frame, &bases, &mut ctx, pc).ok());
        let Some(row) = theirs else {
            // Outside every FDE: no row, or frameless leaf code proven from its bytes (the
            // images keep no code bytes, so only a re-recorded fixture would have those).
            let leaf = UnwindRow { pc: ours.pc, ..super::leaf_gaps::leaf_row() };
            assert!(ours.kind == UNWIND_NONE || ours == leaf, "{name} {pc:#x}: gimli has no row, ours is {ours:?}");
            continue;
        };
        checked += 1;
        let ra = row.register(X86_64::RA);
        match ours.kind {
            UNWIND_SIGNAL => {
                // The kernel's saved registers, which the rows do not describe by rule.
                assert!(matches!(row.cfa(), CfaRule::Expression(_)), "{name} {pc:#x}: {row:?}");
                continue;
            }
            UNWIND_END => {
                assert_eq!(ra, Some(RegisterRule::Undefined), "{name} {pc:#x}");
                assert_eq!(step, NativeStep::End, "{name} {pc:#x}");
                continue;
            }
            UNWIND_NONE => {
                // Only a rule the rows cannot say is left out.
                let simple =
                    matches!(row.cfa(), CfaRule::RegisterAndOffset { register: X86_64::RSP | X86_64::RBP, .. })
                        && ra == Some(RegisterRule::Offset(-8))
                        && matches!(
                            row.register(X86_64::RBP),
                            None | Some(RegisterRule::SameValue | RegisterRule::Offset(_))
                        );
                let CfaRule::RegisterAndOffset { offset, .. } = row.cfa() else { continue };
                assert!(!simple || *offset > i64::from(i16::MAX), "{name} {pc:#x}: a simple rule dropped: {row:?}");
                continue;
            }
            _ => {}
        }
        kept += 1;
        let NativeStep::Caller { regs, interrupted: false } = step else {
            panic!("{name} {pc:#x}: {ours:?} stepped to {step:?}");
        };
        let read_at = |value: u64| (value & READ_MARK == READ_MARK).then_some(value & !READ_MARK);
        let ours_at = Locations {
            cfa: regs.sp,
            return_address_at: read_at(regs.pc).unwrap_or_else(|| panic!("{name} {pc:#x}: {regs:?}")),
            rbp_at: read_at(regs.fp),
        };
        let cfa = match row.cfa() {
            CfaRule::RegisterAndOffset { register: X86_64::RSP, offset } => probe.sp.wrapping_add(*offset as u64),
            CfaRule::RegisterAndOffset { register: X86_64::RBP, offset } => probe.fp.wrapping_add(*offset as u64),
            CfaRule::Expression(e) => {
                assert_eq!(ours.kind, UNWIND_PLT, "{name} {pc:#x}");
                evaluate(&eh_frame, e, pc, probe.sp)
            }
            other => panic!("{name} {pc:#x}: CFA {other:?} kept as {ours:?}"),
        };
        let offset_from = |rule: Option<RegisterRule<usize>>| match rule {
            Some(RegisterRule::Offset(o)) => Some(cfa.wrapping_add(o as u64)),
            None | Some(RegisterRule::SameValue) => None,
            other => panic!("{name} {pc:#x}: rule {other:?} kept as {ours:?}"),
        };
        let theirs_at = Locations {
            cfa,
            return_address_at: offset_from(ra).unwrap_or_else(|| panic!("{name} {pc:#x}: {row:?}")),
            rbp_at: offset_from(row.register(X86_64::RBP)),
        };
        assert_eq!(ours_at, theirs_at, "{name} {pc:#x}: {ours:?} against {row:?}");
    }
    eprintln!("{name}: {checked} pcs checked, {kept} stepped by a kept rule");
    assert!(checked > 1000 && kept * 100 >= checked * 99, "{name}: {kept} of {checked} kept");
}

/// A CFA expression evaluated by gimli with rsp and rip as the sampler saw them.
fn evaluate(
    eh_frame: &EhFrame<gimli::EndianSlice<LittleEndian>>,
    expr: &gimli::UnwindExpression<usize>,
    pc: u64,
    sp: u64,
) -> u64 {
    let expr = expr.get(eh_frame).unwrap();
    let mut eval = expr.evaluation(gimli::Encoding { format: gimli::Format::Dwarf64, version: 4, address_size: 8 });
    let mut result = eval.evaluate().unwrap();
    while let gimli::EvaluationResult::RequiresRegister { register, .. } = result {
        let value = match register {
            X86_64::RSP => sp,
            X86_64::RA => pc,
            other => panic!("the PLT expression reads {other:?}"),
        };
        result = eval.resume_with_register(gimli::Value::Generic(value)).unwrap();
    }
    assert_eq!(result, gimli::EvaluationResult::Complete);
    match eval.as_result()[..] {
        [gimli::Piece { location: gimli::Location::Address { address }, .. }] => address,
        ref other => panic!("{other:?}"),
    }
}

#[test]
fn libc_steps_equal_gimli_unwind_table() {
    check_against_gimli("libc.so.6");
}

#[test]
fn libjvm_steps_equal_gimli_unwind_table() {
    check_against_gimli("libjvm.so");
}

#[test]
fn plt_entries_get_the_plt_rule() {
    let bytes = image("libc.so.6");
    let rows = rows_of(&bytes);
    let plt = object::File::parse(&*bytes).unwrap().section_by_name(".plt").expect("libc has a .plt").address();
    let row = row_of(&rows, plt + 16);
    assert_eq!(row.kind, UNWIND_PLT, "{row:?}");
    assert!((10..=11).contains(&row.rbp_words), "{row:?}");
}

#[test]
fn libc_signal_trampoline_gets_the_signal_row() {
    let rows = rows_of(&image("libc.so.6"));
    let restore_rt = symbol("libc.so.6", "__restore_rt");
    // A handler returns to `__restore_rt`: the row the sampler takes is the one of pc - 1 (the
    // FDE starts one byte early for that), and the trampoline's own instructions.
    for pc in [restore_rt - 1, restore_rt, restore_rt + 7] {
        assert_eq!(row_of(&rows, pc).kind, UNWIND_SIGNAL, "{pc:#x}");
    }
    // The function before it is an ordinary one.
    assert_ne!(row_of(&rows, restore_rt - 0x20).kind, UNWIND_SIGNAL);
}

/// One recorded thread: its registers, gdb's frames (pc, sp) and its stack.
struct RecordedThread {
    name: String,
    regs: NativeRegs,
    gdb: Vec<(u64, u64, String)>,
    stack_at: u64,
    stack: Vec<u8>,
}

/// A recorded process (`<workload>.txt`): its executable mappings as maps lines, its threads.
struct Recorded {
    maps: Vec<(u64, u64, String)>,
    threads: Vec<RecordedThread>,
}

fn recorded(workload: &str) -> Recorded {
    let text = std::fs::read_to_string(fixture_dir().join(format!("{workload}.txt"))).unwrap();
    let mut out = Recorded { maps: Vec::new(), threads: Vec::new() };
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields[0] {
            "map" => {
                let (start, end) = fields[1].split_once('-').unwrap();
                out.maps.push((hex(start), hex(end), fields[1..].join(" ")));
            }
            "thread" => out.threads.push(RecordedThread {
                name: fields[5..].join(" "),
                regs: NativeRegs { pc: hex(fields[2]), sp: hex(fields[3]), fp: hex(fields[4]) },
                gdb: Vec::new(),
                stack_at: 0,
                stack: Vec::new(),
            }),
            "frame" => {
                let t = out.threads.last_mut().unwrap();
                t.gdb.push((hex(fields[1]), hex(fields[2]), fields[4..].join(" ")));
            }
            "stack" => {
                let t = out.threads.last_mut().unwrap();
                t.stack_at = hex(fields[1]);
                t.stack = (0..fields[2].len() / 2)
                    .map(|i| u8::from_str_radix(&fields[2][2 * i..2 * i + 2], 16).unwrap())
                    .collect();
            }
            other => panic!("unexpected line {other:?} in {workload}.txt"),
        }
    }
    out
}

/// The recorded process as /proc shows it to `UnwindTables`: its maps, `map_files/<range>` for
/// each file mapping (the file's image) and `mem` holding the vDSO at its address (a memfd,
/// which may be that large).
fn fake_proc(rec: &Recorded, root: &Path, pid: u32) -> std::fs::File {
    let dir = root.join(pid.to_string());
    std::fs::create_dir_all(dir.join("map_files")).unwrap();
    // SAFETY: a plain memfd_create call with a NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"fixture-mem".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: a descriptor just opened, owned by the File from here on.
    let mem = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let mut maps = String::new();
    for (start, end, line) in &rec.maps {
        let name = line.rsplit(' ').next().unwrap();
        if name == "[vdso]" {
            mem.write_all_at(&image("vdso"), *start).unwrap();
            maps.push_str(&format!("{line}\n"));
            continue;
        }
        std::fs::write(dir.join("map_files").join(format!("{start:x}-{end:x}")), image(name)).unwrap();
        let head = line.rsplit_once(' ').unwrap().0;
        maps.push_str(&format!("{head} /fixture/{name}\n"));
    }
    std::fs::write(dir.join("maps"), maps).unwrap();
    std::os::unix::fs::symlink(format!("/proc/self/fd/{fd}"), dir.join("mem")).unwrap();
    mem
}

/// A recorded thread as the sampler's step reads it: the process's table and rows, and the
/// thread's stack bytes (nothing else is readable).
struct CoreThread<'a> {
    table: &'a ProcUnwind,
    rows: &'a [UnwindRow],
    thread: &'a RecordedThread,
}

impl UnwindSource for CoreThread<'_> {
    fn row_at(&mut self, pc: u64) -> Lookup {
        find_row(self.table, self.rows, pc)
    }

    fn stack_words<const N: usize>(&mut self, at: u64) -> Option<[u64; N]> {
        let first = usize::try_from(at.checked_sub(self.thread.stack_at)?).ok()?;
        let bytes = self.thread.stack.get(first..first.checked_add(8 * N)?)?;
        Some(core::array::from_fn(|i| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap())))
    }
}

/// Walks a recorded thread as the sampler walks native frames: the leaf and a frame a signal
/// interrupted are looked up where they were, every other pc as a return address. Returns the
/// frames (pc, sp) and how the walk ended.
fn unwind(table: &ProcUnwind, rows: &[UnwindRow], thread: &RecordedThread) -> (Vec<(u64, u64)>, NativeStep) {
    let mut src = CoreThread { table, rows, thread };
    let (mut regs, mut where_it_was) = (thread.regs, true);
    let mut frames = Vec::new();
    loop {
        frames.push((regs.pc, regs.sp));
        assert!(frames.len() < 128, "{}: no end", thread.name);
        match native_step(&mut src, regs, where_it_was) {
            NativeStep::Caller { regs: caller, interrupted } => (regs, where_it_was) = (caller, interrupted),
            end => return (frames, end),
        }
    }
}

fn check_recorded_workload(workload: &str) {
    let rec = recorded(workload);
    let root = tempfile::tempdir().unwrap();
    let pid = 4242;
    let _mem = fake_proc(&rec, root.path(), pid);
    // The tables user space builds for the sampler, from the process's maps and files.
    let mut tables = UnwindTables::new(root.path(), 256 << 20);
    let table = tables.refresh(pid).expect("a table");
    assert_eq!(table.len(), rec.maps.len(), "every recorded mapping has rows: {:?}", tables.stats);
    let mut rows: Vec<UnwindRow> = Vec::new();
    let mut placed: HashMap<u64, (u32, u32)> = HashMap::new();
    let (value, _) = process_entry::<()>(&table, |m| {
        Ok(Some(*placed.entry(m.rows.id).or_insert_with(|| {
            rows.extend_from_slice(&m.rows.rows);
            ((rows.len() - m.rows.rows.len()) as u32, m.rows.rows.len() as u32)
        })))
    })
    .unwrap();
    let in_a_mapping = |pc: u64| rec.maps.iter().any(|m| m.0 <= pc && pc < m.1);
    for thread in &rec.threads {
        let (ours, end) = unwind(&value, &rows, thread);
        let gdb: Vec<(u64, u64)> = thread.gdb.iter().map(|f| (f.0, f.1)).collect();
        let names: Vec<&str> = thread.gdb.iter().map(|f| f.2.as_str()).collect();
        eprintln!("{workload} {}: {} frames ({}), then {end:?}", thread.name, ours.len(), names.join(" <- "));
        assert_eq!(ours, gdb, "{workload} {}: ours, then gdb's ({names:?})", thread.name);
        // gdb's backtrace ends at the thread's first frame or at JIT code, which the rows do
        // not cover (the sampler's HotSpot unwinder takes over there).
        let last = gdb.last().unwrap().0;
        let expected = if in_a_mapping(last) { NativeStep::End } else { NativeStep::Cut(DROP_NATIVE_UNMAPPED) };
        assert_eq!(end, expected, "{workload} {}: how the walk ends", thread.name);
    }
}

#[test]
fn recorded_jvm_threads_unwind_to_gdb_backtrace() {
    check_recorded_workload("native-unwind");
}

#[test]
fn recorded_signal_handler_unwinds_through_its_signal_frame_to_gdb_backtrace() {
    check_recorded_workload("signal-spin");
}

/// A hand-written leaf without CFI between two C functions (`tiny-leaf/`): the gap holding it
/// gets one CFA = rsp + 8 row, from the end of the FDE before it to the next FDE, and the
/// sampler's own step reads its return address at sp.
#[test]
fn a_frameless_leaf_between_two_fdes_gets_a_return_address_at_rsp_row() {
    let bytes = std::fs::read(fixture_dir().join("tiny-leaf/tiny-leaf.so")).unwrap();
    let rows = read_file_rows(&Image(&bytes), bytes.len() as u64, u64::MAX).unwrap().rows;
    // `outer`'s FDE ends at 0x1086, `leaf_copy` is 0x1090-0x10a5, `tail`'s FDE is
    // 0x10b0-0x10c0 (`nm`, `readelf -wf`).
    let leaf = row_of(&rows, 0x1090);
    assert_eq!(leaf, UnwindRow { pc: 0x1086, ..super::leaf_gaps::leaf_row() }, "{rows:x?}");
    assert_eq!(row_of(&rows, 0x10af), leaf, "up to the next FDE");
    assert_ne!(row_of(&rows, 0x1085), leaf, "outer's own row");
    // `tail` keeps nothing on the stack either: its FDE's row is the same, so one row serves.
    assert_eq!(row_of(&rows, 0x10b0), leaf, "tail's row");
    assert_eq!(row_of(&rows, 0x10c0).kind, UNWIND_NONE, "past the last FDE");
    for pc in [0x1090, 0x109d, 0x10a4] {
        let mut probe = FileThread::new(&rows);
        let regs = NativeRegs { pc, sp: probe.sp, fp: probe.fp };
        let NativeStep::Caller { regs: caller, interrupted: false } = native_step(&mut probe, regs, true) else {
            panic!("{pc:#x}: no step");
        };
        assert_eq!((caller.pc, caller.sp, caller.fp), (probe.sp | READ_MARK, probe.sp + 8, probe.fp), "{pc:#x}");
    }
}

/// A file may claim any section sizes: two `.eh_frame` sections of 2^63 bytes each (a sum
/// that wraps; the `unwind_elf` fuzz target's first finding) are refused as over the budget.
#[test]
fn section_sizes_whose_sum_wraps_are_refused_not_added() {
    let mut bytes = std::fs::read(fixture_dir().join("tiny-leaf/tiny-leaf.so")).unwrap();
    let (shoff, names) = {
        let file = object::File::parse(&*bytes).unwrap();
        let index = |name: &str| file.section_by_name(name).unwrap().index().0;
        let object::File::Elf64(elf) = &file else { panic!("not ELF64") };
        let shoff = elf.elf_header().e_shoff.get(elf.endian()) as usize;
        (shoff, [index(".eh_frame"), index(".eh_frame_hdr")])
    };
    let header = |i: usize| shoff + 64 * i;
    // sh_name at +0 (4 bytes), sh_size at +32 (8 bytes).
    let name: [u8; 4] = bytes[header(names[0])..][..4].try_into().unwrap();
    bytes[header(names[1])..][..4].copy_from_slice(&name);
    for i in names {
        bytes[header(i) + 32..][..8].copy_from_slice(&(1u64 << 63).to_le_bytes());
    }
    let err = read_file_rows(&Image(&bytes), bytes.len() as u64, 64 << 20).unwrap_err();
    assert!(matches!(err, super::elf_read::ReadError::OverBudget { .. }), "{err}");
}

/// A file whose code cannot be read once its CFI was (the target truncated it, a read failed):
/// its CFI's rows, without the leaf rows, rather than no rows at all.
#[test]
fn code_that_cannot_be_read_costs_the_leaf_rows_only() {
    struct CodeUnreadable<'a>(&'a [u8]);
    impl ByteSource for CodeUnreadable<'_> {
        fn read_bytes_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            // `.text` is file offsets 0x1030-0x10c0.
            if (0x1000..0x2000).contains(&offset) {
                return Err(std::io::Error::from_raw_os_error(libc::EIO));
            }
            Image(self.0).read_bytes_at(buf, offset)
        }
    }
    let bytes = std::fs::read(fixture_dir().join("tiny-leaf/tiny-leaf.so")).unwrap();
    let rows = read_file_rows(&CodeUnreadable(&bytes), bytes.len() as u64, u64::MAX).unwrap().rows;
    assert_eq!(row_of(&rows, 0x1090).kind, UNWIND_NONE, "no leaf row without its bytes");
    let all = read_file_rows(&Image(&bytes), bytes.len() as u64, u64::MAX).unwrap().rows;
    for pc in [0x1030, 0x1060, 0x1070, 0x10b0] {
        assert_eq!(row_of(&rows, pc).kind, row_of(&all, pc).kind, "{pc:#x}: the CFI's row");
        assert_eq!(row_of(&rows, pc).cfa_offset, row_of(&all, pc).cfa_offset, "{pc:#x}: the CFI's row");
    }
}
