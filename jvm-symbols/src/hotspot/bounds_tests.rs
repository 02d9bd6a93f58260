//! Each bound on what a target's tables say, broken on purpose: hand-built tables
//! ([`TableBuilder`]) and real recorded JDK 17 tables with one value made hostile. Every
//! case must end in [`HotspotError::Bound`] (final, the JVM is unreadable) or a bounded miss,
//! never in an allocation sized by the target.

use std::cell::Cell;
use std::path::PathBuf;

use super::codecache::{self, CodeHeap};
use super::error::HotspotError;
use super::fixture::Manifest;
use super::jvm::HotspotJvm;
use super::libjvm::TableSymbols;
use super::memory::{MemoryReader, ReadError, SegmentsMemory};
use super::vmstructs::tests::TableBuilder;
use super::vmstructs::{VmStructs, MAX_ENTRIES, MAX_NAME_BYTES, MAX_TABLE_NAME_BYTES};

fn assert_bound<T: std::fmt::Debug>(result: Result<T, HotspotError>, what: &str) {
    match result {
        Err(e @ HotspotError::Bound { .. }) => {
            assert!(e.to_string().contains(what), "{e}");
            assert!(!e.may_pass(), "a broken bound is final");
        }
        other => panic!("expected a bound on {what}, got {other:?}"),
    }
}

#[test]
fn a_table_longer_than_hotspot_makes_is_refused() {
    // The last table the builder lays out: the only one with room for this many entries.
    let names: Vec<String> = (0..=MAX_ENTRIES).map(|i| format!("C{i}")).collect();
    let longs: Vec<(&str, i64)> = names.iter().map(|n| (n.as_str(), 1)).collect();
    let (mem, syms) = TableBuilder::new().build(0x40_0000, &[], &[], &[], &longs);
    assert_bound(VmStructs::read(&mem, &syms), "gHotSpotVMLongConstants entries");
    let (mem, syms) = TableBuilder::new().build(0x40_0000, &[], &[], &[], &longs[..MAX_ENTRIES as usize]);
    assert_eq!(VmStructs::read(&mem, &syms).unwrap().long_constants.len(), MAX_ENTRIES as usize);
}

#[test]
fn a_name_longer_than_hotspot_makes_is_refused() {
    let long = "N".repeat(MAX_NAME_BYTES + 1);
    let (mem, syms) = TableBuilder::new().build(0x40_0000, &[(&long, None, 8)], &[], &[], &[]);
    assert_bound(VmStructs::read(&mem, &syms), "name length");
    let just = "N".repeat(MAX_NAME_BYTES - 1);
    let (mem, syms) = TableBuilder::new().build(0x40_0000, &[(&just, None, 8)], &[], &[], &[]);
    assert_eq!(VmStructs::read(&mem, &syms).unwrap().type_size(&just), Some(8));
}

/// The attack of issue 22: many entries with distinct long names, each table within its
/// entry bound, together far over what any HotSpot names.
#[test]
fn distinct_long_names_are_bounded_together() {
    let count = (MAX_TABLE_NAME_BYTES / (MAX_NAME_BYTES as u64 - 1)) as usize + 2;
    let names: Vec<String> = (0..count).map(|i| format!("{i:0>width$}", width = MAX_NAME_BYTES - 1)).collect();
    assert!((names.len() as u64) < MAX_ENTRIES);
    let longs: Vec<(&str, i64)> = names.iter().map(|n| (n.as_str(), 1)).collect();
    let (mem, syms) = TableBuilder::new().build(0x40_0000, &[], &[], &[], &longs);
    assert_bound(VmStructs::read(&mem, &syms), "bytes of all names");
}

#[test]
fn strides_and_entry_offsets_are_bounded() {
    let (mem, syms) = TableBuilder::new().build(0x40_0000, &[("int", None, 4)], &[], &[("i", 1)], &[("l", 2)]);
    for (symbol, value) in [
        ("gHotSpotVMStructEntryArrayStride", 1u64 << 40),
        ("gHotSpotVMTypeEntrySizeOffset", 1 << 40),
        ("gHotSpotVMIntConstantEntryValueOffset", 300),
        // Inside the bound on offsets, outside the entry.
        ("gHotSpotVMLongConstantEntryValueOffset", 200),
    ] {
        let mut bad = mem.clone();
        bad.insert(syms.get(symbol).unwrap(), &value.to_le_bytes());
        let result = VmStructs::read(&bad, &syms);
        assert!(matches!(result, Err(HotspotError::Bound { .. })), "{symbol} = {value}: {result:?}");
    }
}

fn fixture_17() -> (SegmentsMemory, Manifest) {
    fixture(17)
}

/// The recorded memory and manifest of `tests/fixtures/hotspot-<jdk>`.
pub(super) fn fixture(jdk: u32) -> (SegmentsMemory, Manifest) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../tests/fixtures/hotspot-{jdk}"));
    let memory = SegmentsMemory::from_bytes(&std::fs::read(dir.join("memory.bin")).unwrap()).unwrap();
    let manifest = Manifest::parse(&std::fs::read_to_string(dir.join("manifest.txt")).unwrap()).unwrap();
    (memory, manifest)
}

/// Address of the `gHotSpotVMStructs` entry of `type_name::field`, in recorded memory.
fn struct_entry(mem: &SegmentsMemory, syms: &TableSymbols, type_name: &str, field: &str) -> (u64, u64) {
    let word = |sym: &str| mem.read_u64(syms.get(sym).unwrap()).unwrap();
    let (base, stride) = (word("gHotSpotVMStructs"), word("gHotSpotVMStructEntryArrayStride"));
    let (type_off, field_off) =
        (word("gHotSpotVMStructEntryTypeNameOffset"), word("gHotSpotVMStructEntryFieldNameOffset"));
    let offset_off = word("gHotSpotVMStructEntryOffsetOffset");
    for i in 0..MAX_ENTRIES {
        let entry = base + i * stride;
        let name = |off: u64| mem.read_c_string(mem.read_u64(entry + off).unwrap(), 256).unwrap();
        if name(type_off) == type_name.as_bytes() && name(field_off) == field.as_bytes() {
            return (entry, offset_off);
        }
    }
    panic!("no {type_name}::{field} in the recorded tables");
}

/// Issue 22: `CodeBlob::_name` at offset 2^40 made the blob reader allocate a terabyte.
#[test]
fn absurd_field_offsets_make_the_jvm_unreadable() {
    let (mem, manifest) = fixture_17();
    for (type_name, field, offset) in
        [("CodeBlob", "_name", 1u64 << 40), ("Method", "_constMethod", 5000), ("nmethod", "_compile_id", u64::MAX)]
    {
        let mut bad = mem.clone();
        let (entry, offset_off) = struct_entry(&mem, &manifest.symbols, type_name, field);
        bad.insert(entry + offset_off, &offset.to_le_bytes());
        assert_bound(HotspotJvm::new(&bad, &manifest.symbols).map(|_| ()), &format!("{type_name}::{field}"));
    }
    assert!(HotspotJvm::new(&mem, &manifest.symbols).is_ok(), "the recorded tables themselves are in bounds");
}

#[test]
fn absurd_object_sizes_make_the_jvm_unreadable() {
    let (mem, manifest) = fixture_17();
    let vm = VmStructs::read(&mem, &manifest.symbols).unwrap();
    assert!(vm.type_size("ConstMethod").is_some());
    // Find the gHotSpotVMTypes entry of ConstMethod and give it a 2^40-byte size.
    let word = |sym: &str| mem.read_u64(manifest.symbols.get(sym).unwrap()).unwrap();
    let (base, stride) = (word("gHotSpotVMTypes"), word("gHotSpotVMTypeEntryArrayStride"));
    let (name_off, size_off) = (word("gHotSpotVMTypeEntryTypeNameOffset"), word("gHotSpotVMTypeEntrySizeOffset"));
    let entry = (0..MAX_ENTRIES)
        .map(|i| base + i * stride)
        .find(|&e| mem.read_c_string(mem.read_u64(e + name_off).unwrap(), 256).unwrap() == b"ConstMethod")
        .unwrap();
    let mut bad = mem.clone();
    bad.insert(entry + size_off, &(1u64 << 40).to_le_bytes());
    assert_bound(HotspotJvm::new(&bad, &manifest.symbols).map(|_| ()), "sizeof(ConstMethod)");
}

/// Counts reads, to show what one lookup costs.
struct Counting<'a> {
    mem: &'a SegmentsMemory,
    reads: Cell<u64>,
}

impl MemoryReader for Counting<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        self.reads.set(self.reads.get() + 1);
        self.mem.read(addr, buf)
    }
}

/// Issue 22: a segment map of 1s made every pc cost 65,536 reads. Now the walk stops at the
/// largest blob HotSpot allocates, reading the map a window at a time.
#[test]
fn a_segment_map_of_ones_costs_a_few_reads_per_pc() {
    let (mem, manifest) = fixture_17();
    let jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
    let code = jvm.layout().code.clone().unwrap();
    let log2_segment_size = 6;
    let segments = 1u64 << 20;
    let heap = CodeHeap {
        low: 0x1000_0000_0000,
        high: 0x1000_0000_0000 + (segments << log2_segment_size),
        reserved_high: 0x1000_0000_0000 + (segments << log2_segment_size),
        segmap: 0x2000_0000_0000,
        log2_segment_size,
    };
    let mut hostile = SegmentsMemory::new();
    hostile.insert(heap.segmap, &vec![1u8; segments as usize]);
    let reader = Counting { mem: &hostile, reads: Cell::new(0) };
    let pc = heap.high - 1;
    assert_eq!(codecache::find_block(&reader, &code, &heap, pc), Ok(None));
    let max_hops = (codecache::MAX_BLOB_BYTES >> log2_segment_size) / 254 + 1;
    assert!(reader.reads.get() <= max_hops / 4096 + 2, "{} reads for one pc", reader.reads.get());
}

/// A heap or an interpreter spanning more than the largest code cache HotSpot reserves is
/// not taken as code: its pcs are not looked up.
#[test]
fn code_spans_over_the_largest_code_cache_are_ignored() {
    let (mem, manifest) = fixture_17();
    let jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
    let code = jvm.layout().code.clone().unwrap();
    let heaps = codecache::read_heaps(&mem, &code).unwrap();
    assert_eq!(heaps.len(), 3);
    let mut bad = mem.clone();
    let array = mem.read_u64(code.code_cache_heaps).unwrap();
    let first_heap = mem.read_u64(mem.read_u64(array + code.growable_array_data).unwrap()).unwrap();
    let high_at = first_heap + code.code_heap_memory + code.virtual_space_high;
    bad.insert(high_at, &(heaps[0].low + codecache::MAX_CODE_SPAN_BYTES + 1).to_le_bytes());
    assert_eq!(
        codecache::read_heaps(&bad, &code).unwrap(),
        heaps[1..].to_vec(),
        "the heap spanning over 2 GB is left out"
    );

    assert!(codecache::interpreter_code(&mem, &code).is_ok());
    let queue = mem.read_u64(code.interpreter_code).unwrap();
    let mut bad = mem.clone();
    bad.insert(queue + code.stub_queue_limit.offset, &u32::MAX.to_le_bytes()[..code.stub_queue_limit.size_bytes]);
    assert!(codecache::interpreter_code(&bad, &code).is_err());
}

/// Recorded memory with the 8 bytes at `at` unreadable.
struct Refusing<'a> {
    mem: &'a SegmentsMemory,
    at: u64,
}

impl MemoryReader for Refusing<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        match addr < self.at + 8 && self.at < addr + buf.len() as u64 {
            true => Err(ReadError { addr, len: buf.len() }),
            false => self.mem.read(addr, buf),
        }
    }
}

/// A heap's reserved end is `VirtualSpace::_high_boundary` where it can be read and lies
/// between the committed end and the largest code cache; otherwise the committed end.
#[test]
fn a_heap_reserves_up_to_its_high_boundary_within_bounds() {
    let (mem, manifest) = fixture_17();
    let jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
    let code = jvm.layout().code.clone().unwrap();
    let boundary = code.virtual_space_high_boundary.expect("JDK 17 exports VirtualSpace::_high_boundary");
    // A live JDK 17 reserves more than it has committed in each heap.
    let heaps = codecache::read_heaps(&mem, &code).unwrap();
    assert!(heaps.iter().all(|h| h.reserved_high > h.high), "{heaps:?}");
    let array = mem.read_u64(code.code_cache_heaps).unwrap();
    let first_heap = mem.read_u64(mem.read_u64(array + code.growable_array_data).unwrap()).unwrap();
    let at = first_heap + code.code_heap_memory + boundary;
    // `_high_boundary` unreadable: the committed end.
    let refusing = Refusing { mem: &mem, at };
    assert_eq!(codecache::read_heaps(&refusing, &code).unwrap()[0].reserved_high, heaps[0].high);
    let with = |reserved: u64| {
        let mut m = mem.clone();
        m.insert(at, &reserved.to_le_bytes());
        codecache::read_heaps(&m, &code).unwrap()[0].reserved_high
    };
    let h = heaps[0];
    assert_eq!(with(h.high + (1 << 20)), h.high + (1 << 20));
    assert_eq!(with(h.high - 1), h.high, "below the committed end");
    assert_eq!(with(h.low + codecache::MAX_CODE_SPAN_BYTES + 1), h.high, "over the largest code cache");
}
