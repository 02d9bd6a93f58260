//! The template interpreter's bounds on the recorded JDK 17 tables: the codelets the JVM
//! committed, not the buffer it reserved for them, and read again while they change.

use std::cell::RefCell;

use super::bounds_tests::fixture_17;
use super::codecache;
use super::jvm::HotspotJvm;
use super::layout::Field;
use super::memory::{MemoryReader, ReadError, SegmentsMemory};

/// The reserved size a live JDK 17 (17.0.15, x86_64) started under `record` had in
/// `StubQueue::_buffer_limit` when first read: 285 KiB for 95 KiB of codelets.
const UNTRIMMED_LIMIT_BYTES: u64 = 0x47600;

fn with_int(mem: &SegmentsMemory, object: u64, field: &Field, value: u64) -> SegmentsMemory {
    let mut out = mem.clone();
    out.insert(object + field.offset, &value.to_le_bytes()[..field.size_bytes]);
    out
}

#[test]
fn the_interpreter_ends_where_its_codelets_end_not_where_its_buffer_did() {
    let (mem, manifest) = fixture_17();
    let jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
    let code = jvm.layout().code.clone().unwrap();
    let queue_end = code.stub_queue_end.clone().expect("JDK 17 exports StubQueue::_queue_end");
    let queue = mem.read_u64(code.interpreter_code).unwrap();
    let used = queue_end.read(&mem, queue).unwrap();
    let limit = code.stub_queue_limit.read(&mem, queue).unwrap();
    let (start, end) = codecache::interpreter_bounds(&mem, &code).unwrap();
    assert!(used > 0 && used <= limit, "used {used:#x}, limit {limit:#x}");
    assert_eq!(end, start + used);

    // Read before the JVM trimmed its buffer: the tail past the codelets is not the
    // interpreter's (it goes to stubs and adapters).
    let untrimmed = with_int(&mem, queue, &code.stub_queue_limit, UNTRIMMED_LIMIT_BYTES);
    assert_eq!(codecache::interpreter_bounds(&untrimmed, &code).unwrap(), (start, start + used));

    // Codelets past the buffer, or none yet: no interpreter to walk.
    let past = with_int(&mem, queue, &queue_end, limit + 64);
    assert!(codecache::interpreter_bounds(&past, &code).is_err());
    let empty = with_int(&mem, queue, &queue_end, 0);
    assert!(codecache::interpreter_bounds(&empty, &code).is_err());

    // Tables without `_queue_end`: the buffer's limit, as before.
    let mut without = code.clone();
    without.stub_queue_end = None;
    assert_eq!(codecache::interpreter_bounds(&mem, &without).unwrap(), (start, start + limit));
}

/// Memory that changes between reads, as a starting JVM's does.
struct Changing(RefCell<SegmentsMemory>);

impl MemoryReader for Changing {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        self.0.borrow().read(addr, buf)
    }
}

#[test]
fn bounds_read_while_the_interpreter_is_generated_are_read_again_until_they_settle() {
    let (mem, manifest) = fixture_17();
    let code = HotspotJvm::new(&mem, &manifest.symbols).unwrap().layout().code.clone().unwrap();
    let queue_end = code.stub_queue_end.clone().unwrap();
    let queue = mem.read_u64(code.interpreter_code).unwrap();
    let used = queue_end.read(&mem, queue).unwrap();
    let (start, _) = codecache::interpreter_bounds(&mem, &code).unwrap();

    // First read halfway through the interpreter's generation.
    let memory = Changing(RefCell::new(with_int(&mem, queue, &queue_end, used / 2)));
    let mut jvm = HotspotJvm::new(&memory, &manifest.symbols).unwrap();
    assert_eq!(jvm.interpreter_bounds(), Some((start, start + used / 2)));

    // The cheap per-cycle refresh reads them again: generated now.
    *memory.0.borrow_mut() = mem.clone();
    jvm.refresh_code_heaps();
    assert_eq!(jvm.interpreter_bounds(), Some((start, start + used)));

    // Read the same once more, they are settled: later cycles no longer read them.
    jvm.refresh_code_heaps();
    *memory.0.borrow_mut() = with_int(&mem, queue, &queue_end, used / 4);
    jvm.refresh_code_heaps();
    assert_eq!(jvm.interpreter_bounds(), Some((start, start + used)));

    // A failed read keeps what was read: the buffer does not move.
    let mut jvm = HotspotJvm::new(&memory, &manifest.symbols).unwrap();
    *memory.0.borrow_mut() = with_int(&mem, queue, &queue_end, 0);
    jvm.refresh_code_heaps();
    assert_eq!(jvm.interpreter_bounds(), Some((start, start + used / 4)));
}
