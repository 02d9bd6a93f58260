//! HotSpot introspection costs on the recorded JDK 17 fixture, in memory: the CPU cost of
//! the readers without the `process_vm_readv` calls (12 per new `Method*`, about 6 per pc in
//! a known nmethod; see the report of issue 12 for live timings).

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion};
use jvm_symbols::hotspot::fixture::Manifest;
use jvm_symbols::hotspot::{CodeAt, HotspotJvm, SegmentsMemory};

fn load() -> (SegmentsMemory, Manifest) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hotspot-17");
    let memory = SegmentsMemory::from_bytes(&std::fs::read(dir.join("memory.bin")).unwrap()).unwrap();
    let manifest = Manifest::parse(&std::fs::read_to_string(dir.join("manifest.txt")).unwrap()).unwrap();
    (memory, manifest)
}

fn bench(c: &mut Criterion) {
    let (mem, manifest) = load();
    c.bench_function("hotspot_parse_tables", |b| b.iter(|| HotspotJvm::new(&mem, &manifest.symbols).unwrap()));
    let mut jvm = HotspotJvm::new(&mem, &manifest.symbols).unwrap();
    let mut methods: Vec<u64> = Vec::new();
    for &pc in &manifest.pcs {
        if let CodeAt::Java(frames) = jvm.code_at(pc) {
            methods.extend(frames.iter().map(|f| f.method_ptr));
        }
    }
    methods.sort_unstable();
    methods.dedup();
    c.bench_function("hotspot_new_method", |b| {
        b.iter(|| {
            jvm.clear_caches();
            black_box(jvm.method(methods[0]))
        })
    });
    c.bench_function("hotspot_cached_method", |b| b.iter(|| black_box(jvm.method(methods[0]))));
    let pc = manifest.pcs[manifest.pcs.len() / 2];
    c.bench_function("hotspot_pc_new_nmethod", |b| {
        b.iter(|| {
            jvm.clear_caches();
            black_box(jvm.code_at(pc))
        })
    });
    c.bench_function("hotspot_pc_cached", |b| b.iter(|| black_box(jvm.code_at(pc))));
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
