//! HotSpot introspection on recorded JDK 11, 17, 21 and 25 memory (`cargo xtask
//! dump-hotspot-fixture`): no JVM, no root. Expected names and lines come from the workload's
//! source (`tests/fixtures/hotspot-src/HotspotFixture.java`), not from the recording.

use std::path::PathBuf;

use jvm_symbols::hotspot::fixture::Manifest;
use jvm_symbols::hotspot::layout::{DebugInfoAt, MetadataAt};
use jvm_symbols::hotspot::stream::Encoding;
use jvm_symbols::hotspot::{CodeAt, FrameKind, HotspotJvm, JavaFrame, MemoryReader, SegmentsMemory};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn load(jdk: u32) -> (SegmentsMemory, Manifest) {
    let dir = fixtures().join(format!("hotspot-{jdk}"));
    let memory = SegmentsMemory::from_bytes(&std::fs::read(dir.join("memory.bin")).unwrap()).unwrap();
    let manifest = Manifest::parse(&std::fs::read_to_string(dir.join("manifest.txt")).unwrap()).unwrap();
    (memory, manifest)
}

/// The line of a `// LINE:<tag>` marker in the workload source.
fn source_line(tag: &str) -> u32 {
    let src = std::fs::read_to_string(fixtures().join("hotspot-src/HotspotFixture.java")).unwrap();
    let marker = format!("// LINE:{tag}");
    let idx = src.lines().position(|l| l.trim_end().ends_with(&marker)).expect("marker in source");
    idx as u32 + 1
}

/// Every Java chain the recorded pcs resolve to (innermost first).
fn chains(jvm: &mut HotspotJvm<&SegmentsMemory>, manifest: &Manifest) -> Vec<Vec<JavaFrame>> {
    manifest
        .pcs
        .iter()
        .filter_map(|&pc| match jvm.code_at(pc) {
            CodeAt::Java(frames) => Some(frames),
            _ => None,
        })
        .collect()
}

fn name(f: &JavaFrame) -> String {
    format!("{}{}", f.method.short_name(), f.method.signature)
}

const WORKLOAD: [&str; 3] = ["HotspotFixture.mix(I)I", "HotspotFixture.twist(I)I", "HotspotFixture.outer(I)J"];

fn check_tables_and_version(jdk: u32, encoding: Encoding) {
    let (mem, manifest) = load(jdk);
    let jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
    let layout = jvm.layout();
    assert_eq!(layout.version.major, jdk);
    assert_eq!(layout.encoding, encoding);
    assert!(layout.code.is_some() && layout.scopes.is_some());
    // x86_64 frame_x86.hpp, JDK 9+: Method* at fp-3 words, bcp at fp-8 words.
    assert_eq!((layout.interpreter_frame.method_slot, layout.interpreter_frame.bcp_slot), (-3, -8));
    assert_eq!(jvm.code_heaps().len(), 3, "segmented code cache: non-nmethods, profiled, non-profiled");
    let (lo, hi) = jvm.interpreter_bounds().unwrap();
    assert!(lo < hi && hi - lo < 1 << 20);
}

fn check_names_inlining_and_lines(jdk: u32) {
    let (mem, manifest) = load(jdk);
    let mut jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
    let chains = chains(&mut jvm, &manifest);
    assert!(!chains.is_empty());
    let names: Vec<String> = chains.iter().flatten().map(name).collect();
    for m in WORKLOAD {
        assert!(names.iter().any(|n| n == m), "JDK {jdk}: {m} not among {names:?}");
    }
    for chain in &chains {
        // Innermost first: only the last frame is the nmethod's own; the others are inlined.
        let last = chain.last().unwrap();
        assert_eq!(last.kind, FrameKind::Jit);
        assert!(chain[..chain.len() - 1].iter().all(|f| f.kind == FrameKind::Inlined));
    }
    // C2 inlines both small callees into outer, and the caller's line is the call's line.
    for (callee, call_site) in [("mix", "outer-mix"), ("twist", "outer-twist")] {
        let callee_name = format!("HotspotFixture.{callee}");
        let inlined: Vec<_> = chains
            .iter()
            .flat_map(|c| c.windows(2))
            .filter(|w| w[0].method.short_name() == callee_name && w[1].method.short_name() == "HotspotFixture.outer")
            .collect();
        assert!(!inlined.is_empty(), "JDK {jdk}: {callee} never inlined into outer");
        for w in inlined {
            assert_eq!(w[0].kind, FrameKind::Inlined);
            assert_eq!(w[0].line, Some(source_line(callee)), "JDK {jdk}: {callee} line");
            assert_eq!(w[1].line, Some(source_line(call_site)), "JDK {jdk}: outer's line calling {callee}");
        }
    }
    assert_eq!(jvm.misses().method_stale, 0);
    assert_eq!(jvm.misses().method_unreadable, 0);
}

fn check_pc_lookup(jdk: u32) {
    let (mem, manifest) = load(jdk);
    let mut jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
    let mut found = std::collections::BTreeSet::new();
    for &pc in &manifest.pcs {
        let blob = jvm.blob_at(pc).unwrap_or_else(|| panic!("JDK {jdk}: pc {pc:#x} not in a blob"));
        assert!((blob.address..blob.address + blob.size_bytes).contains(&pc));
        assert!(blob.code_begin > blob.address && blob.code_begin <= pc);
        assert_eq!(blob.name, "nmethod");
        found.insert(blob.address);
    }
    let listed: std::collections::BTreeSet<u64> = manifest.nmethods.iter().copied().collect();
    assert_eq!(found, listed, "JDK {jdk}: every workload nmethod is found from its pcs, and only those");
    assert_eq!(jvm.code_at(manifest.interpreter_pc.unwrap()), CodeAt::Interpreter);
    let interp_blob = jvm.blob_at(manifest.interpreter_pc.unwrap()).unwrap();
    assert_eq!(interp_blob.name, "Interpreter");
    // The call stub's return address: the bottom of every Java stack.
    let stub_pc = manifest.stub_pc.unwrap();
    assert_eq!(jvm.code_at(stub_pc), CodeAt::Blob("StubRoutines::call_stub".into()));
    assert!(jvm.blob_at(stub_pc).unwrap().name.starts_with("StubRoutines ("));
    assert_eq!(jvm.code_at(manifest.adapter_pc.unwrap()), CodeAt::Blob("I2C/C2I adapters".into()));
    // Outside every heap.
    assert_eq!(jvm.code_at(0x1000), CodeAt::NotCode);
}

/// A `Method*` whose class no longer lists it (freed by class unloading or redefinition)
/// is refused and counted, and a pointer into the middle of a Method is refused too.
fn check_stale_method(jdk: u32) {
    let (mem, manifest) = load(jdk);
    let mut jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
    let frame = chains(&mut jvm, &manifest)
        .into_iter()
        .flatten()
        .find(|f| f.method.short_name() == "HotspotFixture.mix")
        .unwrap();
    let m = frame.method_ptr;
    let l = jvm.layout().methods.clone();
    // Walk Method -> ConstMethod -> ConstantPool -> holder -> _methods, and blank every slot
    // that lists `m` in a copy of the memory.
    let pool = mem.read_u64(frame.method.const_method + l.const_method_constants).unwrap();
    let holder = mem.read_u64(pool + l.constant_pool_holder).unwrap();
    let methods = mem.read_u64(holder + l.instance_klass_methods).unwrap();
    let len = u64::from(mem.read_u32(methods + l.array_length).unwrap());
    let mut unlisted = mem.clone();
    let mut blanked = 0;
    for i in 0..len {
        let slot = methods + l.method_array_data + i * 8;
        if mem.read_u64(slot).unwrap() == m {
            unlisted.insert(slot, &0u64.to_le_bytes());
            blanked += 1;
        }
    }
    assert_eq!(blanked, 1, "the holder lists the method once");
    let mut stale_jvm = HotspotJvm::new(&unlisted, &manifest.symbols).unwrap();
    assert_eq!(stale_jvm.method(m), None);
    assert_eq!(stale_jvm.misses().method_stale, 1);
    let before = jvm.misses();
    assert_eq!(jvm.method(m + 8), None);
    let after = jvm.misses();
    let counted = |x: jvm_symbols::hotspot::Misses| x.method_stale + x.method_unreadable + x.method_corrupt;
    assert_eq!(counted(after), counted(before) + 1);
    assert_eq!(jvm.method(m).as_deref(), Some(&*frame.method), "the real one still resolves");
}

#[test]
fn jdk11_tables_and_version() {
    check_tables_and_version(11, Encoding::Classic);
}

#[test]
fn jdk11_names_inlining_and_lines() {
    check_names_inlining_and_lines(11);
}

#[test]
fn jdk11_pc_lookup() {
    check_pc_lookup(11);
}

#[test]
fn jdk11_stale_method() {
    check_stale_method(11);
}

#[test]
fn jdk17_tables_and_version() {
    check_tables_and_version(17, Encoding::Classic);
}

#[test]
fn jdk21_tables_and_version() {
    check_tables_and_version(21, Encoding::Unsigned5);
}

#[test]
fn jdk17_names_inlining_and_lines() {
    check_names_inlining_and_lines(17);
}

#[test]
fn jdk21_names_inlining_and_lines() {
    check_names_inlining_and_lines(21);
}

#[test]
fn jdk17_pc_lookup() {
    check_pc_lookup(17);
}

#[test]
fn jdk21_pc_lookup() {
    check_pc_lookup(21);
}

#[test]
fn jdk17_stale_method() {
    check_stale_method(17);
}

#[test]
fn jdk21_stale_method() {
    check_stale_method(21);
}

#[test]
fn jdk25_tables_and_version() {
    check_tables_and_version(25, Encoding::Unsigned5);
}

#[test]
fn jdk25_names_inlining_and_lines() {
    check_names_inlining_and_lines(25);
}

#[test]
fn jdk25_pc_lookup() {
    check_pc_lookup(25);
}

#[test]
fn jdk25_stale_method() {
    check_stale_method(25);
}

/// Each JDK's tables choose the layout their fields describe: debug info in the blob up to
/// JDK 22, in `_immutable_data` with the metadata after the relocations in
/// `_mutable_data` on 25.
#[test]
fn debug_info_layout_follows_the_exported_fields() {
    for jdk in [11, 17, 21, 25] {
        let (mem, manifest) = load(jdk);
        let jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
        let at = &jvm.layout().scopes.as_ref().unwrap().debug_info;
        match (jdk, at) {
            (25, DebugInfoAt::Immutable { metadata: MetadataAt::Mutable { .. }, .. }) => {}
            (11 | 17 | 21, DebugInfoAt::InBlob { .. }) => {}
            _ => panic!("JDK {jdk}: {at:?}"),
        }
        assert!(jvm.layout().missing.is_empty(), "JDK {jdk}: {:?}", jvm.layout().missing);
    }
}

/// A JDK whose tables lack a field the debug-info reader needs keeps its method names and
/// code cache, and says which field is missing.
#[test]
fn a_missing_field_is_named() {
    use jvm_symbols::hotspot::layout::Layout;
    use jvm_symbols::hotspot::VmStructs;
    let (mem, manifest) = load(25);
    let mut vm = VmStructs::read(&mem, &manifest.symbols).unwrap();
    vm.fields.remove(&("CodeBlob".to_owned(), "_relocation_size".to_owned()));
    let layout = Layout::new(&vm, &mem).unwrap();
    assert!(layout.scopes.is_none() && layout.code.is_some());
    assert!(layout.missing.iter().any(|m| m.contains("CodeBlob::_relocation_size")), "{:?}", layout.missing);
}

/// Flags come from the JVM's own flag table: the fixture JVMs run with frame pointers
/// (`-XX:+PreserveFramePointer`) and without `DebugNonSafepoints`.
#[test]
fn flags_are_read_from_the_jvms_flag_table() {
    for jdk in [11, 17, 21, 25] {
        let (mem, manifest) = load(jdk);
        let jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
        assert_eq!(jvm.bool_flag("PreserveFramePointer"), Some(true), "JDK {jdk}");
        assert_eq!(jvm.bool_flag("DebugNonSafepoints"), Some(false), "JDK {jdk}");
        assert_eq!(jvm.bool_flag("NoSuchFlagAnywhere"), None, "JDK {jdk}");
    }
}
