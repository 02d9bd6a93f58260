//! The template interpreter's bounds on the recorded tables of JDK 11, 17, 21 and 25: the
//! codelets the JVM committed, not the buffer it reserved for them, and final only once the
//! JVM has generated them.

use std::cell::RefCell;

use super::bounds_tests;
use super::codecache::{self, InterpreterCode};
use super::fixture::Manifest;
use super::jvm::{HotspotJvm, UNTRIMMED_FINAL_AFTER};
use super::layout::{CodeLayout, Field};
use super::memory::{MemoryReader, ReadError, SegmentsMemory};

/// The reserved size a live JDK 17 (17.0.15, x86_64) started under `record` had in
/// `StubQueue::_buffer_limit` when first read: 285 KiB for 95 KiB of codelets.
const UNTRIMMED_LIMIT_BYTES: u64 = 0x47600;

/// A fixture with its code layout and the interpreter's `StubQueue*`.
fn fixture(jdk: u32) -> (SegmentsMemory, Manifest, CodeLayout, u64) {
    let (mem, manifest) = bounds_tests::fixture(jdk);
    let code = HotspotJvm::new(&mem, &manifest.symbols).unwrap().layout().code.clone().unwrap();
    let queue = mem.read_u64(code.interpreter_code).unwrap();
    (mem, manifest, code, queue)
}

fn with_int(mem: &SegmentsMemory, object: u64, field: &Field, value: u64) -> SegmentsMemory {
    let mut out = mem.clone();
    out.insert(object + field.offset, &value.to_le_bytes()[..field.size_bytes]);
    out
}

#[test]
fn every_jdk_trims_its_interpreter_to_its_codelets() {
    for jdk in [11, 17, 21, 25] {
        let (mem, _, code, _) = fixture(jdk);
        let now = codecache::interpreter_code(&mem, &code).unwrap();
        assert!(code.stub_queue_end.is_some(), "JDK {jdk} exports StubQueue::_queue_end");
        assert!(now.trimmed(), "JDK {jdk}: {now:x?}");
        // Some 100 KiB of codelets on x86_64.
        assert!((64 << 10..256 << 10).contains(&now.committed_bytes), "JDK {jdk}: {now:x?}");
    }
}

#[test]
fn the_interpreter_ends_where_its_codelets_end_not_where_its_buffer_did() {
    let (mem, _, code, queue) = fixture(17);
    let queue_end = code.stub_queue_end.unwrap();
    let now = codecache::interpreter_code(&mem, &code).unwrap();
    let (start, used) = (now.start, now.committed_bytes);
    assert_eq!(now.bounds(), (start, start + used));

    // Read before the JVM trimmed its buffer: the tail past the codelets is not the
    // interpreter's (it goes to stubs and adapters), and the bounds are not final.
    let untrimmed = with_int(&mem, queue, &code.stub_queue_limit, UNTRIMMED_LIMIT_BYTES);
    let before = codecache::interpreter_code(&untrimmed, &code).unwrap();
    assert_eq!((before.bounds(), before.trimmed()), ((start, start + used), false));

    // Codelets past the buffer, or none yet: no interpreter to walk.
    let past = with_int(&mem, queue, &queue_end, used + 64);
    assert!(codecache::interpreter_code(&past, &code).is_err());
    let empty = with_int(&untrimmed, queue, &queue_end, 0);
    assert!(codecache::interpreter_code(&empty, &code).is_err());

    // Tables without `_queue_end`: the buffer's limit, taken as final.
    let mut without = code.clone();
    without.stub_queue_end = None;
    let old = codecache::interpreter_code(&untrimmed, &without).unwrap();
    assert_eq!(
        old,
        InterpreterCode { start, committed_bytes: UNTRIMMED_LIMIT_BYTES, limit_bytes: UNTRIMMED_LIMIT_BYTES }
    );
    assert!(old.trimmed());
}

/// Memory that changes between reads, as a starting JVM's does.
struct Changing(RefCell<SegmentsMemory>);

impl MemoryReader for Changing {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        self.0.borrow().read(addr, buf)
    }
}

impl Changing {
    fn set(&self, mem: SegmentsMemory) {
        *self.0.borrow_mut() = mem;
    }
}

#[test]
fn bounds_wait_until_the_interpreter_is_generated() {
    let (mem, manifest, code, queue) = fixture(17);
    let queue_end = code.stub_queue_end.unwrap();
    let InterpreterCode { start, committed_bytes: used, .. } = codecache::interpreter_code(&mem, &code).unwrap();
    let untrimmed = with_int(&mem, queue, &code.stub_queue_limit, UNTRIMMED_LIMIT_BYTES);
    let generating = |committed| with_int(&untrimmed, queue, &queue_end, committed);

    // Before any codelet, then halfway through the generation: no bounds yet.
    let memory = Changing(RefCell::new(generating(0)));
    let mut jvm = HotspotJvm::new(&memory, &manifest.symbols).unwrap();
    assert_eq!(jvm.interpreter_bounds(), None);
    memory.set(generating(used / 2));
    jvm.refresh_code_cache();
    assert_eq!(jvm.interpreter_bounds(), None, "a partial interpreter is not final");
    // Generated, trimmed: final at once, by the cheap per-cycle refresh too.
    memory.set(mem.clone());
    jvm.refresh_code_heaps();
    assert_eq!(jvm.interpreter_bounds(), Some((start, start + used)));
    // Final bounds are not read again.
    memory.set(generating(used / 4));
    jvm.refresh_code_cache();
    jvm.refresh_code_heaps();
    assert_eq!(jvm.interpreter_bounds(), Some((start, start + used)));

    // A JVM that generated its interpreter but has not trimmed the buffer (or never does):
    // taken once the same code reads the same for a while, and still read again.
    let memory = Changing(RefCell::new(generating(used / 2)));
    let mut jvm = HotspotJvm::new(&memory, &manifest.symbols).unwrap();
    memory.set(generating(used));
    jvm.refresh_code_heaps();
    assert_eq!(jvm.interpreter_bounds(), None, "grown since the last read: maybe still generating");
    jvm.refresh_code_heaps();
    assert_eq!(jvm.interpreter_bounds(), None, "the same, but just read");
    std::thread::sleep(UNTRIMMED_FINAL_AFTER);
    jvm.refresh_code_heaps();
    assert_eq!(jvm.interpreter_bounds(), Some((start, start + used)));
    memory.set(mem.clone());
    jvm.refresh_code_heaps();
    assert_eq!(jvm.interpreter_bounds(), Some((start, start + used)), "trimmed later: the same code");
}
