//! Stub names on recorded JDK 11, 17, 21 and 25 memory (`cargo xtask dump-hotspot-fixture`):
//! the `StubCodeDesc` list read through libjvm's symbol table, and every pc named by the
//! range that holds it. The exported `StubRoutines` entries (VMStructs, a second source) must
//! get their own stub's name, and SHA-256's compression stub (which JDK 11 to 21 do not
//! export) its own rather than the one of the exported stub before it.

use std::path::PathBuf;

use jvm_symbols::hotspot::fixture::Manifest;
use jvm_symbols::hotspot::stub_names::STUB_CODE_DESC_LIST;
use jvm_symbols::hotspot::{CodeAt, HotspotJvm, SegmentsMemory};

fn load(jdk: u32) -> (SegmentsMemory, Manifest) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../tests/fixtures/hotspot-{jdk}"));
    let memory = SegmentsMemory::from_bytes(&std::fs::read(dir.join("memory.bin")).unwrap()).unwrap();
    let manifest = Manifest::parse(&std::fs::read_to_string(dir.join("manifest.txt")).unwrap()).unwrap();
    (memory, manifest)
}

fn stubs_are_named_by_their_own_range(jdk: u32) {
    let (mem, manifest) = load(jdk);
    assert!(manifest.symbols.addrs.contains_key(STUB_CODE_DESC_LIST), "JDK {jdk}: no StubCodeDesc::_list recorded");
    let mut jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
    let ranges = jvm.stub_ranges().to_vec();
    // How many depends on the recording CPU's features: JDK 17 described 117 stubs on a host
    // with AVX-512 (its `_avx3` arraycopy and base64 stubs), 96 on one with AVX2 only.
    assert!(ranges.len() > 80, "JDK {jdk}: {} stubs described", ranges.len());
    for r in &ranges {
        assert!(r.begin < r.end && r.name.contains("::"), "JDK {jdk}: {r:?}");
        assert_eq!(jvm.code_at(r.begin), CodeAt::Blob(r.name.clone()), "JDK {jdk}");
    }
    let entries: Vec<(u64, String)> = jvm.stub_entries().map(|(pc, n)| (pc, n.to_owned())).collect();
    // JDK 25 exports neither in VMStructs any more.
    for exported in ["StubRoutines::updateBytesCRC32", "StubRoutines::counterMode_AESCrypt"] {
        let Some(&(pc, _)) = entries.iter().find(|(_, n)| n == exported) else {
            assert!(jdk >= 25, "JDK {jdk}: {exported} is not exported");
            continue;
        };
        assert_eq!(jvm.code_at(pc), CodeAt::Blob(exported.into()), "JDK {jdk}: the exported entry {pc:#x}");
    }
    let sha = ranges.iter().find(|r| r.name.starts_with("StubRoutines::sha256_implCompress")).expect("a SHA-256 stub");
    let before = entries.iter().filter(|(pc, _)| *pc <= sha.begin).max_by_key(|(pc, _)| *pc);
    assert_eq!(jvm.code_at(sha.begin), CodeAt::Blob(sha.name.clone()), "JDK {jdk}: not {before:?}");
}

#[test]
fn jdk11_stubs_are_named_by_their_own_range() {
    stubs_are_named_by_their_own_range(11);
}

#[test]
fn jdk17_stubs_are_named_by_their_own_range() {
    stubs_are_named_by_their_own_range(17);
}

#[test]
fn jdk21_stubs_are_named_by_their_own_range() {
    stubs_are_named_by_their_own_range(21);
}

#[test]
fn jdk25_stubs_are_named_by_their_own_range() {
    stubs_are_named_by_their_own_range(25);
}
