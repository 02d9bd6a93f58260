use std::cell::Cell;
use std::path::PathBuf;

use jvm_symbols::hotspot::fixture::Manifest;
use jvm_symbols::hotspot::{ReadError, SegmentsMemory};

use super::*;

fn fixture(jdk: u32) -> (SegmentsMemory, Manifest) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../tests/fixtures/hotspot-{jdk}"));
    let memory = SegmentsMemory::from_bytes(&std::fs::read(dir.join("memory.bin")).unwrap()).unwrap();
    let manifest = Manifest::parse(&std::fs::read_to_string(dir.join("manifest.txt")).unwrap()).unwrap();
    (memory, manifest)
}

fn frames(interner: &mut Interner, ids: &[FrameId]) -> Vec<crate::model::Frame> {
    interner.stack(ids).to_vec()
}

/// Compiled pcs of the recorded JDK 11, 17 and 21 workloads: the inlined callees first,
/// named in the perf map's full form with their lines, the nmethod's own method last.
#[test]
fn compiled_pcs_give_inlined_chains_stubs_and_misses() {
    for jdk in [11, 17, 21] {
        let (mem, manifest) = fixture(jdk);
        let mut h = HotspotProcess::new(HotspotJvm::new(&mem, &manifest.symbols).unwrap()).unwrap();
        let mut interner = Interner::default();
        let mut inlined_chains = 0;
        for &pc in &manifest.pcs {
            let (Code::Frames(ids), outcome) = h.code(&mut interner, pc, true, PcRole::AtOrAfter) else {
                panic!("JDK {jdk}: pc {pc:#x} not named");
            };
            assert!(!outcome.unknown);
            let chain = frames(&mut interner, &ids);
            let (last, inner) = chain.split_last().unwrap();
            assert_eq!(last.kind, FrameKind::JavaJit, "JDK {jdk}: {chain:?}");
            assert!(inner.iter().all(|f| f.kind == FrameKind::JavaInlined), "JDK {jdk}: {chain:?}");
            if let [callee, .., caller] = chain.as_slice() {
                if &*callee.short == "HotspotFixture.mix" && &*caller.short == "HotspotFixture.outer" {
                    inlined_chains += 1;
                    assert_eq!(&*callee.name, "int HotspotFixture.mix(int)");
                    assert_eq!(&*caller.name, "long HotspotFixture.outer(int)");
                    assert!(callee.line.is_some() && caller.line.is_some(), "JDK {jdk}: {chain:?}");
                }
            }
        }
        assert!(inlined_chains > 0, "JDK {jdk}: mix never inlined into outer");

        let stub = |h: &mut HotspotProcess<&SegmentsMemory>, interner: &mut Interner, pc: u64| match h
            .code(interner, pc, true, PcRole::AtOrAfter)
            .0
        {
            Code::Frames(ids) => frames(interner, &ids),
            other => panic!("JDK {jdk}: {pc:#x} is {other:?}"),
        };
        let call_stub = stub(&mut h, &mut interner, manifest.stub_pc.unwrap());
        assert_eq!((&*call_stub[0].name, call_stub[0].kind), ("StubRoutines::call_stub", FrameKind::Stub));
        let interp = stub(&mut h, &mut interner, manifest.interpreter_pc.unwrap());
        assert_eq!((&*interp[0].name, interp[0].kind), (INTERPRETER, FrameKind::Stub));
        // Outside the code cache: native code, unless other evidence says it is code.
        assert_eq!(h.code(&mut interner, 0x1000, false, PcRole::AtOrAfter).0, Code::Native);
        h.begin_cycle(ReadBudget::UNLIMITED, usize::MAX);
        let (code, outcome) = h.code(&mut interner, 0x1000, true, PcRole::AtOrAfter);
        assert_eq!(code, Code::UnknownJit);
        assert!(outcome.refreshed && outcome.unknown);
    }
}

/// An interpreted frame is named from its `Method*`, its line from the bcp; a `Method*`
/// that does not check out is a counted miss, not a name.
#[test]
fn interpreted_frames_are_named_from_method_and_bcp() {
    let (mem, manifest) = fixture(17);
    let mut jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
    let outer = manifest
        .pcs
        .iter()
        .find_map(|&pc| match jvm.code_at(pc) {
            CodeAt::Java(chain) => chain.into_iter().find(|f| f.method.name == "outer" && f.bci.is_some()),
            _ => None,
        })
        .expect("outer in a chain");
    let mut h = HotspotProcess::new(jvm).unwrap();
    let mut interner = Interner::default();
    let bci = outer.bci.unwrap().max(0);
    let id = h.interpreted(&mut interner, outer.method_ptr, outer.method.code_start + bci as u64).unwrap();
    let frame = &frames(&mut interner, &[id])[0];
    assert_eq!((&*frame.name, frame.kind), ("long HotspotFixture.outer(int)", FrameKind::JavaInterpreted));
    assert_eq!(frame.line, outer.method.line_for_bci(bci));
    assert!(frame.line.is_some());
    // A bcp outside the method: named, without a line.
    let id = h.interpreted(&mut interner, outer.method_ptr, 8).unwrap();
    assert_eq!(frames(&mut interner, &[id])[0].line, None);
    assert_eq!(h.interpreted(&mut interner, 0x10, 0), None);
    assert_eq!(h.misses().method_unreadable, 1);
}

/// Memory in which one nmethod's block cannot be read until the code cache is read
/// again: code the JIT installed after the reader last looked.
struct Appearing<'a> {
    mem: &'a SegmentsMemory,
    hidden: (u64, u64),
    heaps_static: u64,
    heap_reads: Cell<u32>,
}

impl MemoryReader for Appearing<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        if addr == self.heaps_static {
            self.heap_reads.set(self.heap_reads.get() + 1);
        }
        let (lo, hi) = self.hidden;
        if self.heap_reads.get() < 2 && addr < hi && addr + buf.len() as u64 > lo {
            return Err(ReadError { addr, len: buf.len() });
        }
        self.mem.read(addr, buf)
    }
}

#[test]
fn a_code_cache_miss_is_read_again_and_named_in_the_same_cycle() {
    let (mem, manifest) = fixture(17);
    let heaps_static =
        HotspotJvm::new(&mem, &manifest.symbols).unwrap().layout().code.as_ref().unwrap().code_cache_heaps;
    let pc = manifest.pcs[0];
    let nmethod = manifest.nmethods.iter().copied().filter(|&n| n <= pc).max().unwrap();
    let reader =
        Appearing { mem: &mem, hidden: (nmethod - 64, nmethod + 0x400), heaps_static, heap_reads: Cell::new(0) };
    let mut h = HotspotProcess::new(HotspotJvm::new(reader, &manifest.symbols).unwrap()).unwrap();
    let mut interner = Interner::default();
    let (code, outcome) = h.code(&mut interner, pc, true, PcRole::AtOrAfter);
    assert!(matches!(code, Code::Frames(_)), "{code:?}");
    assert!(outcome.refreshed && !outcome.unknown, "{outcome:?}");
    // At most one re-read per cycle: another miss in the same cycle stays a miss.
    let (code, outcome) = h.code(&mut interner, 0x1000, true, PcRole::AtOrAfter);
    assert_eq!((code, outcome.refreshed), (Code::UnknownJit, false));
    // Resolved pcs are kept for the cycle only.
    h.begin_cycle(ReadBudget::UNLIMITED, usize::MAX);
    assert!(h.code(&mut interner, 0x1000, true, PcRole::AtOrAfter).1.refreshed);
}

/// A compiled frame is named only while the nmethod at its pc has the compile id the
/// unwinder read: code freed and reused in between is `[unknown JIT code]`, counted.
#[test]
fn compiled_frames_are_named_only_with_their_compile_id() {
    let (mem, manifest) = fixture(17);
    let mut jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
    let pc = manifest.pcs[0];
    let id = jvm.compile_id_at(pc).expect("an nmethod at a recorded pc");
    let mut h = HotspotProcess::new(jvm).unwrap();
    let mut interner = Interner::default();
    let (code, outcome) = h.compiled(&mut interner, pc, id, PcRole::AtOrAfter);
    assert!(matches!(code, Code::Frames(_)), "{code:?}");
    assert!(!outcome.stale && !outcome.by_method, "{outcome:?}");
    let (code, outcome) = h.compiled(&mut interner, pc, id + 1, PcRole::AtOrAfter);
    assert_eq!((code, outcome.unknown, outcome.stale), (Code::UnknownJit, true, true));
}

/// A JVM that spends its read budget is backed off for 1, then 2, then 4 cycles, and
/// nothing of it is read meanwhile.
#[test]
fn a_jvm_over_its_read_budget_is_backed_off_exponentially() {
    let (mem, manifest) = fixture(17);
    let mut h = HotspotProcess::new(HotspotJvm::new(&mem, &manifest.symbols).unwrap()).unwrap();
    let mut interner = Interner::default();
    let tiny = ReadBudget { max_bytes: 64, max_time: std::time::Duration::MAX };
    let mut starts = Vec::new();
    for (cycle, &pc) in manifest.pcs.iter().cycle().take(12).enumerate() {
        let start = h.begin_cycle(tiny, usize::MAX);
        let read_before = h.jvm.bytes_read();
        let (code, _) = h.code(&mut interner, pc, true, PcRole::AtOrAfter);
        if start != CycleStart::Read && !matches!(start, CycleStart::BackedOff { .. }) {
            assert_eq!(h.jvm.bytes_read(), read_before, "cycle {cycle}: read while backed off");
            assert_eq!(code, Code::UnknownJit);
        }
        starts.push(match start {
            CycleStart::Read => 'R',
            CycleStart::Skipped => 's',
            CycleStart::BackedOff { cycles, .. } => char::from_digit(cycles, 10).unwrap(),
        });
    }
    assert_eq!(starts.iter().collect::<String>(), "R1R2sR4sssR8");
    assert!(h.first_back_off() && !h.first_back_off(), "warned once");
    // Within budget, a cycle names again, and ends the streak.
    for _ in 0..12 {
        h.begin_cycle(ReadBudget::UNLIMITED, usize::MAX);
    }
    let (code, _) = h.code(&mut interner, manifest.pcs[0], true, PcRole::AtOrAfter);
    assert!(matches!(code, Code::Frames(_)), "{code:?}");
}

/// Memory whose reads panic once armed: a bug the tables might find in the reader.
struct Bomb<'a> {
    mem: &'a SegmentsMemory,
    armed: &'a Cell<bool>,
}

impl MemoryReader for Bomb<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        assert!(!self.armed.get(), "reader bug");
        self.mem.read(addr, buf)
    }
}

#[test]
fn a_panic_in_the_reader_is_caught_and_the_jvm_read_no_more() {
    let (mem, manifest) = fixture(17);
    let armed = Cell::new(false);
    let mut h =
        HotspotProcess::new(HotspotJvm::new(Bomb { mem: &mem, armed: &armed }, &manifest.symbols).unwrap()).unwrap();
    let mut interner = Interner::default();
    armed.set(true);
    let (code, _) = h.code(&mut interner, manifest.pcs[0], true, PcRole::AtOrAfter);
    assert_eq!(code, Code::UnknownJit);
    assert!(h.panicked());
    assert_eq!(h.take_panic().as_deref(), Some("reader bug"));
    assert_eq!(h.take_panic(), None, "said once");
    h.begin_cycle(ReadBudget::UNLIMITED, usize::MAX);
    assert_eq!(h.begin_cycle(ReadBudget::UNLIMITED, usize::MAX), CycleStart::Skipped);
    assert_eq!(
        h.code(&mut interner, manifest.pcs[1], true, PcRole::AtOrAfter).0,
        Code::UnknownJit,
        "no read, no second panic"
    );
    assert_eq!(h.interpreted(&mut interner, 0x1000, 0x2000), None);
}

#[test]
fn walk_config_carries_the_interpreter_and_its_frame_slots_once() {
    let (mem, manifest) = fixture(21);
    let mut h = HotspotProcess::new(HotspotJvm::new(&mem, &manifest.symbols).unwrap()).unwrap();
    let config = h.take_walk_config().expect("a config");
    assert_eq!((config.method_slot, config.bcp_slot, config.sender_sp_slot), (-3, -8, -1));
    // The HotSpot unwinder, whether or not the JVM keeps frame pointers, with the heaps
    // holding every pc.
    assert_eq!(config.unwind, JVM_UNWIND_HOTSPOT);
    let heaps = &config.heaps[..config.heap_count as usize];
    assert!(manifest.pcs.iter().all(|pc| heaps.iter().any(|hp| (hp.low..hp.high).contains(pc))));
    // Entry frames are known by the call stub's return address, the pc the call stub
    // is named at.
    assert_eq!(Some(config.call_stub_return), manifest.stub_pc);
    assert_ne!(config.call_stub_return, 0);
    let interp = manifest.interpreter_pc.unwrap();
    assert!((config.interpreter_start..config.interpreter_end).contains(&interp));
    assert!(config.code_start <= config.interpreter_start && config.interpreter_end <= config.code_end);
    assert!(manifest.pcs.iter().all(|pc| (config.code_start..config.code_end).contains(pc)));
    assert_eq!(h.take_walk_config(), None, "unchanged: nothing to publish again");
    assert_eq!(h.published_unwind(), Some(JVM_UNWIND_HOTSPOT));
}

/// The sampler's report of an nmethod (its compile id and `Method*`) names that nmethod's
/// frames once it is freed, by its method alone, said so; a report of another JVM with this pid
/// names nothing; a method named once is not read again.
#[test]
fn reported_code_names_frames_of_freed_nmethods_by_their_method() {
    use joular_ebpf::{CodeReport, REPORT_METHOD, REPORT_NMETHOD};
    use jvm_symbols::hotspot::codecache::BlobKind;
    for jdk in [11, 17, 21, 25] {
        let (mem, manifest) = fixture(jdk);
        let mut jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
        let pc = manifest.pcs[0];
        let Some(BlobKind::Nmethod { method, compile_id }) = jvm.blob_at(pc).map(|b| b.kind) else {
            panic!("JDK {jdk}: no nmethod at a recorded pc");
        };
        let mut h = HotspotProcess::new(jvm).unwrap();
        let mut interner = Interner::default();
        // A compile id no nmethod has: the one at `pc` was freed, and its space reused.
        let freed = compile_id + 1_000_000;
        assert_eq!(
            h.compiled(&mut interner, pc, freed, PcRole::AtOrAfter).0,
            Code::UnknownJit,
            "JDK {jdk}: nothing named it yet"
        );
        let jvm_id = h.walk_config().expect("a config").interpreter_start;
        let report = CodeReport { jvm: jvm_id, method, tgid: 1, kind: REPORT_NMETHOD, compile_id: freed, _pad: 0 };
        let elsewhere = CodeReport { jvm: jvm_id + 4096, compile_id: freed + 1, ..report };
        assert_eq!(h.learn(&[report]), 0, "JDK {jdk}: the kernel walks no JVM not published");
        h.take_walk_config().expect("a config");
        assert_eq!(h.learn(&[report, elsewhere]), 1, "JDK {jdk}: only this JVM's report is named");
        assert_eq!(h.learn(&[report]), 0, "JDK {jdk}: named once");
        let (code, outcome) = h.compiled(&mut interner, pc, freed, PcRole::AtOrAfter);
        let Code::Frames(ids) = code else { panic!("JDK {jdk}: {code:?}") };
        let named = frames(&mut interner, &ids);
        assert_eq!(named.len(), 1, "JDK {jdk}: the method alone: {named:?}");
        assert_eq!((named[0].kind, named[0].line), (FrameKind::JavaJit, None), "JDK {jdk}");
        let own = h.jvm.method(method).unwrap();
        assert_eq!(&*named[0].name, own.full_name(), "JDK {jdk}");
        assert!(outcome.by_method && !outcome.stale && !outcome.unknown, "JDK {jdk}: {outcome:?}");
        assert!(
            h.compiled(&mut interner, pc, freed + 1, PcRole::AtOrAfter).1.stale,
            "JDK {jdk}: another JVM's report names nothing"
        );
        // An interpreted method's report names it for when it cannot be read any more.
        let interpreted = CodeReport { kind: REPORT_METHOD, compile_id: 0, ..report };
        assert_eq!(h.learn(&[interpreted]), 1, "JDK {jdk}");
        assert_eq!(h.method_names.lookup(method).map(|f| f.kind), Some(FrameKind::JavaInterpreted));
    }
}

/// Memory that can go away: a JVM that exited before its last cycle was named.
#[derive(Clone, Copy)]
struct Exiting<'a> {
    mem: &'a SegmentsMemory,
    gone: &'a Cell<bool>,
}

impl MemoryReader for Exiting<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        if self.gone.get() {
            return Err(ReadError { addr, len: buf.len() });
        }
        self.mem.read(addr, buf)
    }
}

/// A stub keeps its name once its JVM's memory is gone, at any pc of the blob a pc was named
/// in before (HotSpot never frees stubs); a pc in no blob named before stays unknown.
#[test]
fn stubs_are_named_after_the_jvm_exited_in_blobs_named_before() {
    for jdk in [11, 17, 21, 25] {
        let (mem, manifest) = fixture(jdk);
        let gone = Cell::new(false);
        let reader = Exiting { mem: &mem, gone: &gone };
        let mut h = HotspotProcess::new(HotspotJvm::new(reader, &manifest.symbols).unwrap()).unwrap();
        let mut interner = Interner::default();
        let stub = manifest.stub_pc.unwrap();
        let named = |h: &mut HotspotProcess<Exiting>, interner: &mut Interner, pc: u64| match h
            .code(interner, pc, true, PcRole::AtOrAfter)
            .0
        {
            Code::Frames(ids) => Some(frames(interner, &ids)[0].name.to_string()),
            _ => None,
        };
        assert_eq!(named(&mut h, &mut interner, stub).as_deref(), Some("StubRoutines::call_stub"), "JDK {jdk}");
        gone.set(true);
        h.begin_cycle(ReadBudget::UNLIMITED, usize::MAX);
        assert_eq!(named(&mut h, &mut interner, stub).as_deref(), Some("StubRoutines::call_stub"), "JDK {jdk}");
        assert_eq!(named(&mut h, &mut interner, stub - 1).as_deref(), Some("StubRoutines::call_stub"), "JDK {jdk}");
        assert_eq!(
            h.code(&mut interner, manifest.pcs[0], true, PcRole::AtOrAfter).0,
            Code::UnknownJit,
            "JDK {jdk}: never named"
        );
        // A stub the sampler reported is named while the JVM runs, its pcs after it exited.
        gone.set(false);
        let mut h = HotspotProcess::new(HotspotJvm::new(reader, &manifest.symbols).unwrap()).unwrap();
        let jvm = h.take_walk_config().expect("a config").interpreter_start;
        let report = joular_ebpf::CodeReport {
            jvm,
            method: stub,
            tgid: 1,
            kind: joular_ebpf::REPORT_STUB,
            compile_id: 0,
            _pad: 0,
        };
        assert_eq!(h.learn(&[report]), 1, "JDK {jdk}");
        assert_eq!(h.learn(&[report]), 0, "JDK {jdk}: named once");
        gone.set(true);
        assert_eq!(named(&mut h, &mut interner, stub - 1).as_deref(), Some("StubRoutines::call_stub"), "JDK {jdk}");
    }
}
