//! The JVM's own names for its stubs, read from the lists HotSpot keeps of them:
//! - `StubCodeDesc::_list`: one descriptor per generated stub (`StubRoutines::...`,
//!   `ICache::...`, `VM_Version::...`), with its group, name and exact `[begin, end)`. This is
//!   the table `-XX:+PrintStubCode` prints and JVMTI's `DynamicCodeGenerated` reports. A pc
//!   is named only by the range that holds it, never by the nearest entry before it (a stub
//!   whose entry `StubRoutines` does not export, SHA-256's among them, would take its
//!   neighbour's name).
//! - `VtableStubs::_table`: the hash table of every vtable and itable stub, each a
//!   `VtableStub` header followed by its code; the header says which kind it is.
//!
//! Neither list is in `gHotSpotVMStructs`: the two statics are found in libjvm's symbol table
//! (`libjvm::STUB_SYMBOLS`), and the two classes' layouts are HotSpot's own on x86_64 from
//! JDK 11 to 25 (`stubCodeGenerator.hpp`, `vtableStubs.hpp`, neither class has a vtable):
//! `StubCodeDesc { _next, _group, _name, _begin, _end, ... }` and
//! `VtableStub { _next; short _index, _ame_offset, _npe_offset; bool _is_vtable_stub; }`
//! (16 bytes, the code right after). Everything read is checked before it is believed: a
//! range must lie in the code cache and be at most `MAX_STUB_BYTES`, a name must be a C
//! identifier, and both lists are walked a bounded number of steps.

use super::memory::{MemoryReader, ReadError};
use super::name_pages::NamePages;

/// `StubCodeDesc::_list` and `VtableStubs::_table`, mangled as in libjvm's `.symtab`.
pub const STUB_CODE_DESC_LIST: &str = "_ZN12StubCodeDesc5_listE";
pub const VTABLE_STUBS_TABLE: &str = "_ZN11VtableStubs6_tableE";

/// `StubCodeDesc` fields read: `_next`, `_group`, `_name`, `_begin`, `_end`.
const DESC_BYTES: usize = 40;
/// JDK 25 on x86_64 generates about 400 stubs.
const MAX_STUB_DESCS: usize = 8192;
/// The largest stubs (AVX-512 crypto) are some 10 KB.
const MAX_STUB_BYTES: u64 = 1 << 20;
const MAX_NAME_BYTES: usize = 128;
/// Pages of names kept while the list is read (the names are literals of libjvm's read-only
/// data, a few pages).
const MAX_NAME_PAGES: usize = 64;
/// `VtableStubs::N`, the table's buckets.
const VTABLE_BUCKETS: usize = 256;
/// `sizeof(VtableStub)`: the code starts right after the header.
const VTABLE_STUB_HEADER_BYTES: u64 = 16;
/// `VtableStub::_is_vtable_stub`.
const IS_VTABLE_OFFSET: u64 = 14;
/// A JVM makes one stub per (kind, index) called megamorphically: a few thousand at most.
const MAX_VTABLE_STUBS: usize = 1 << 16;
/// x86_64 vtable and itable stubs are under 200 bytes (`VtableStub::pd_code_size_limit`).
pub const MAX_VTABLE_STUB_BYTES: u64 = 1 << 10;

/// The name the JVM gives vtable and itable stubs' blob: the pc's own stub tells the kind.
pub const VTABLE_CHUNKS: &str = "vtable chunks";
pub const VTABLE_STUB: &str = "vtable stub";
pub const ITABLE_STUB: &str = "itable stub";

/// One stub of the `StubCodeDesc` list: `group::name` over `[begin, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubRange {
    pub begin: u64,
    pub end: u64,
    pub name: String,
}

/// The `StubCodeDesc` list, sorted by address; read again only from its head down to the
/// first descriptor already known (new stubs are put at the head, and JDK 21+ generates
/// some of them after startup).
#[derive(Debug, Default)]
pub struct StubDescs {
    ranges: Vec<StubRange>,
    /// The head the list had when last read: its descriptors are all in `ranges`.
    known_head: u64,
}

impl StubDescs {
    /// Reads the descriptors added since the last read (all of them the first time). `code`
    /// is the code cache's `[start, end)`: a range outside it is not a stub's.
    pub fn refresh(&mut self, reader: &impl MemoryReader, list: u64, code: (u64, u64)) -> Result<(), ReadError> {
        let head = reader.read_u64(list)?;
        let mut desc = head;
        let mut added = Vec::new();
        // Some 400 descriptors with two names each: the names' pages are read once each.
        let mut pages = NamePages::new(MAX_NAME_PAGES);
        for _ in 0..MAX_STUB_DESCS {
            if desc == 0 || desc == self.known_head {
                break;
            }
            let raw = reader.read_vec(desc, DESC_BYTES)?;
            let word = |i: usize| u64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
            let (next, group, name, begin, end) = (word(0), word(1), word(2), word(3), word(4));
            if begin < end && end - begin <= MAX_STUB_BYTES && begin >= code.0 && end <= code.1 {
                let mut identifier = |at| identifier(reader, &mut pages, at);
                if let (Some(group), Some(name)) = (identifier(group), identifier(name)) {
                    added.push(StubRange { begin, end, name: format!("{group}::{name}") });
                }
            }
            desc = next;
        }
        if !added.is_empty() {
            self.ranges.extend(added);
            self.ranges.sort_by_key(|r| (r.begin, r.end));
            self.ranges.dedup_by_key(|r| r.begin);
        }
        self.known_head = head;
        Ok(())
    }

    /// The stub whose range holds `pc`.
    pub fn name_at(&self, pc: u64) -> Option<&str> {
        let i = self.ranges.partition_point(|r| r.begin <= pc).checked_sub(1)?;
        let r = &self.ranges[i];
        (pc < r.end).then_some(r.name.as_str())
    }

    pub fn ranges(&self) -> &[StubRange] {
        &self.ranges
    }
}

/// A C identifier of at most `MAX_NAME_BYTES` at `at` (stub and group names are).
fn identifier(reader: &impl MemoryReader, pages: &mut NamePages, at: u64) -> Option<String> {
    let bytes = pages.read_c_string(reader, at, MAX_NAME_BYTES).ok()?;
    let ok = !bytes.is_empty() && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_');
    ok.then(|| String::from_utf8_lossy(&bytes).into_owned())
}

/// Every vtable and itable stub of `VtableStubs::_table`: (code start, is a vtable stub),
/// sorted. Stubs in `[code.0, code.1)` only.
pub fn read_vtable_stubs(
    reader: &impl MemoryReader,
    table: u64,
    code: (u64, u64),
) -> Result<Vec<(u64, bool)>, ReadError> {
    let buckets = reader.read_vec(table, VTABLE_BUCKETS * 8)?;
    let mut stubs = Vec::new();
    for bucket in buckets.chunks_exact(8) {
        let mut stub = u64::from_le_bytes(bucket.try_into().expect("8 bytes"));
        while stub != 0 && stubs.len() < MAX_VTABLE_STUBS {
            if stub < code.0 || stub >= code.1 {
                break;
            }
            let header = reader.read_vec(stub, VTABLE_STUB_HEADER_BYTES as usize)?;
            let is_vtable = match header[IS_VTABLE_OFFSET as usize] {
                0 => false,
                1 => true,
                _ => break,
            };
            stubs.push((stub + VTABLE_STUB_HEADER_BYTES, is_vtable));
            stub = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
        }
    }
    stubs.sort_unstable();
    stubs.dedup();
    Ok(stubs)
}

/// Non-nmethod blobs (stubs, adapters, vtable chunks) kept at most per JVM: a JVM has a few
/// hundred; past it, later ones are not kept.
const MAX_STUB_BLOBS: usize = 4096;

/// The non-nmethod blobs a pc was named in: `[start, end)` and the blob's name, sorted. HotSpot
/// never frees them, so a pc named in one names the same way later, when the JVM's memory
/// cannot be read any more (its last cycle is named after it exited).
#[derive(Debug, Default)]
pub struct StubBlobs {
    blobs: Vec<(u64, u64, String)>,
}

impl StubBlobs {
    pub fn remember(&mut self, start: u64, end: u64, name: &str) {
        let i = self.blobs.partition_point(|b| b.0 < start);
        if self.blobs.get(i).is_some_and(|b| b.0 == start) || self.blobs.len() >= MAX_STUB_BLOBS || start >= end {
            return;
        }
        self.blobs.insert(i, (start, end, name.to_owned()));
    }

    /// The name of the blob seen holding `pc`.
    pub fn name_at(&self, pc: u64) -> Option<&str> {
        let i = self.blobs.partition_point(|b| b.0 <= pc).checked_sub(1)?;
        let (_, end, name) = &self.blobs[i];
        (pc < *end).then_some(name.as_str())
    }
}

/// The kind of the vtable or itable stub holding `pc`: the one whose code starts last at
/// or before it (a chunk holds only stubs, one after another), if `pc` is within a stub's
/// size of it.
pub fn vtable_stub_name(stubs: &[(u64, bool)], pc: u64) -> Option<&'static str> {
    let i = stubs.partition_point(|(begin, _)| *begin <= pc).checked_sub(1)?;
    let (begin, is_vtable) = stubs[i];
    (pc - begin < MAX_VTABLE_STUB_BYTES).then_some(if is_vtable { VTABLE_STUB } else { ITABLE_STUB })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stub_blobs_name_the_pcs_they_hold_and_are_bounded() {
        let mut blobs = StubBlobs::default();
        blobs.remember(0x2000, 0x2400, "I2C/C2I adapters");
        blobs.remember(0x1000, 0x1800, VTABLE_CHUNKS);
        blobs.remember(0x1000, 0x1800, "again");
        assert_eq!(blobs.name_at(0x1000), Some(VTABLE_CHUNKS));
        assert_eq!(blobs.name_at(0x17ff), Some(VTABLE_CHUNKS));
        assert_eq!(blobs.name_at(0x1800), None, "past its end");
        assert_eq!(blobs.name_at(0x23ff), Some("I2C/C2I adapters"));
        assert_eq!(blobs.name_at(0xfff), None);
        for i in 0..MAX_STUB_BLOBS as u64 {
            blobs.remember(0x10_0000 + i * 0x100, 0x10_0000 + i * 0x100 + 0x80, "x");
        }
        assert_eq!(blobs.blobs.len(), MAX_STUB_BLOBS);
    }
    use crate::hotspot::memory::SegmentsMemory;

    const CODE: (u64, u64) = (0x10_0000, 0x20_0000);

    fn desc(next: u64, group: u64, name: u64, begin: u64, end: u64) -> Vec<u8> {
        [next, group, name, begin, end, 0].iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn memory() -> SegmentsMemory {
        let mut m = SegmentsMemory::new();
        m.insert(0x1000, b"StubRoutines\0");
        m.insert(0x1100, b"sha256_implCompress\0");
        m.insert(0x1200, b"counterMode_AESCrypt\0");
        m.insert(0x1300, b"bad name\0");
        // The list: head -> AES -> SHA (-> a range outside the code cache -> a bad name).
        m.insert(0x8000, &0x2000u64.to_le_bytes());
        m.insert(0x2000, &desc(0x2100, 0x1000, 0x1200, 0x10_1000, 0x10_1800));
        m.insert(0x2100, &desc(0x2200, 0x1000, 0x1100, 0x10_2000, 0x10_2300));
        m.insert(0x2200, &desc(0x2300, 0x1000, 0x1100, 0x30_0000, 0x30_0100));
        m.insert(0x2300, &desc(0, 0x1000, 0x1300, 0x10_3000, 0x10_3100));
        m
    }

    #[test]
    fn a_pc_is_named_by_the_stub_range_that_holds_it_only() {
        let mut descs = StubDescs::default();
        descs.refresh(&memory(), 0x8000, CODE).unwrap();
        assert_eq!(descs.ranges().len(), 2, "the range outside the code cache and the bad name are left out");
        assert_eq!(descs.name_at(0x10_2000), Some("StubRoutines::sha256_implCompress"));
        assert_eq!(descs.name_at(0x10_22ff), Some("StubRoutines::sha256_implCompress"));
        assert_eq!(descs.name_at(0x10_1800), None, "past AES's end, before SHA: no name, not AES's");
        assert_eq!(descs.name_at(0x10_2300), None);
        assert_eq!(descs.name_at(0x10_0fff), None);
    }

    #[test]
    fn only_descriptors_added_at_the_head_are_read_again() {
        let mut m = memory();
        let mut descs = StubDescs::default();
        descs.refresh(&m, 0x8000, CODE).unwrap();
        m.insert(0x1400, b"ghash_processBlocks\0");
        m.insert(0x2400, &desc(0x2000, 0x1000, 0x1400, 0x10_4000, 0x10_4400));
        m.insert(0x8000, &0x2400u64.to_le_bytes());
        descs.refresh(&m, 0x8000, CODE).unwrap();
        assert_eq!(descs.ranges().len(), 3);
        assert_eq!(descs.name_at(0x10_4010), Some("StubRoutines::ghash_processBlocks"));
    }

    #[test]
    fn a_list_that_loops_is_walked_a_bounded_number_of_times() {
        let mut m = memory();
        m.insert(0x2000, &desc(0x2000, 0x1000, 0x1200, 0x10_1000, 0x10_1800));
        let mut descs = StubDescs::default();
        descs.refresh(&m, 0x8000, CODE).unwrap();
        assert_eq!(descs.ranges().len(), 1);
    }

    #[test]
    fn vtable_and_itable_stubs_are_told_apart_by_their_header() {
        let mut m = SegmentsMemory::new();
        let mut table = vec![0u8; VTABLE_BUCKETS * 8];
        table[8..16].copy_from_slice(&0x10_0100u64.to_le_bytes());
        table[16..24].copy_from_slice(&0x40_0000u64.to_le_bytes());
        m.insert(0x9000, &table);
        let header = |next: u64, vtable: u8| {
            let mut h = next.to_le_bytes().to_vec();
            h.extend_from_slice(&[3, 0, 0xff, 0xff, 0xff, 0xff, vtable, 0]);
            h
        };
        m.insert(0x10_0100, &header(0x10_0200, 1));
        m.insert(0x10_0200, &header(0, 0));
        let stubs = read_vtable_stubs(&m, 0x9000, CODE).unwrap();
        assert_eq!(stubs, vec![(0x10_0110, true), (0x10_0210, false)]);
        assert_eq!(vtable_stub_name(&stubs, 0x10_0110), Some(VTABLE_STUB));
        assert_eq!(vtable_stub_name(&stubs, 0x10_01ff), Some(VTABLE_STUB));
        assert_eq!(vtable_stub_name(&stubs, 0x10_0240), Some(ITABLE_STUB));
        assert_eq!(vtable_stub_name(&stubs, 0x10_0100), None);
        assert_eq!(vtable_stub_name(&stubs, 0x10_0210 + MAX_VTABLE_STUB_BYTES), None);
    }
}
