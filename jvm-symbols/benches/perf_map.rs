//! Targets (issue 4): parse and index a 200,000-entry perf map in under 100 ms; more
//! than 10 million lookups per second.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use jvm_symbols::{Limits, PerfMapIndex};

const ENTRIES: u64 = 200_000;
const CODE_BASE: u64 = 0x7f1b_0940_0000;
const LOOKUPS: u64 = 100_000;

/// A HotSpot-style map: methods of realistic name length, 0x40..0x400 bytes apart,
/// written in code-cache order with every 50th entry re-dumped later (overlaps).
fn synthetic_map() -> Vec<u8> {
    let mut text = String::with_capacity(ENTRIES as usize * 90);
    let mut addr = CODE_BASE;
    for i in 0..ENTRIES {
        let size = 0x40 + (i * 7919) % 0x3c0;
        text.push_str(&format!(
            "{addr:#018x} {size:#018x} java.lang.Object com.acme.service.Handler{}.method{}(java.lang.String, int)\n",
            i % 997,
            i
        ));
        addr += size;
    }
    let mut addr = CODE_BASE;
    for i in (0..ENTRIES).step_by(50) {
        text.push_str(&format!("{:#018x} 0x0000000000000100 void com.acme.Recompiled.m{i}()\n", addr + i * 0x200));
    }
    addr += 1;
    black_box(addr);
    text.into_bytes()
}

/// Addresses spread over the whole map, deterministic.
fn probe_addresses(span: u64) -> Vec<u64> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..LOOKUPS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            CODE_BASE + x % span
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let map = synthetic_map();
    let limits = Limits::default();

    let mut group = c.benchmark_group("perf_map");
    group.sample_size(20);
    group.bench_function("parse_and_index_200k", |b| {
        b.iter(|| black_box(PerfMapIndex::parse(black_box(&map), &limits)))
    });

    let index = PerfMapIndex::parse(&map, &limits);
    assert_eq!(index.len() as u64, ENTRIES + ENTRIES / 50);
    let addresses = probe_addresses(ENTRIES * 0x200);
    group.throughput(Throughput::Elements(LOOKUPS));
    group.sample_size(50);
    group.bench_function("lookup_100k", |b| {
        b.iter_batched(
            || (),
            |()| {
                let mut found = 0usize;
                for &addr in &addresses {
                    found += index.lookup(black_box(addr)).map_or(0, |s| s.name.len());
                }
                found
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
