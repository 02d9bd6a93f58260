use super::*;

fn index(text: &str) -> PerfMapIndex {
    PerfMapIndex::parse(text.as_bytes(), &Limits::default())
}

fn name_at(index: &PerfMapIndex, addr: u64) -> Option<&str> {
    index.lookup(addr).map(|s| s.name)
}

#[test]
fn lookup_respects_bounds() {
    let idx = index("0x100 0x10 a\n0x200 0x10 b\n");
    assert_eq!(name_at(&idx, 0xff), None);
    assert_eq!(name_at(&idx, 0x100), Some("a"));
    assert_eq!(name_at(&idx, 0x10f), Some("a"));
    assert_eq!(name_at(&idx, 0x110), None);
    assert_eq!(name_at(&idx, 0x205), Some("b"));
    assert_eq!(name_at(&idx, 0x210), None);
    assert_eq!(idx.lookup(0x205).unwrap().start, 0x200);
}

#[test]
fn the_highest_address_is_looked_up_without_overflow() {
    // Found by the perf_map fuzz target: one entry at address 0 (no bucket shift), then
    // a lookup of u64::MAX indexed past the buckets.
    let idx = index("0x0 0x10 zero\n");
    assert_eq!(name_at(&idx, u64::MAX), None);
    assert_eq!(name_at(&idx, 0xf), Some("zero"));
    assert_eq!(name_at(&index(""), u64::MAX), None);
}

#[test]
fn lookup_over_a_sparse_address_space() {
    let idx = index("10 10 low\n7f0000000000 100 mid\n7f0000000100 100 mid2\nffffffffffff0000 100 top\n");
    assert_eq!(name_at(&idx, 0x1f), Some("low"));
    assert_eq!(name_at(&idx, 0x20), None);
    assert_eq!(name_at(&idx, 0x7f00000000ff), Some("mid"));
    assert_eq!(name_at(&idx, 0x7f0000000100), Some("mid2"));
    assert_eq!(name_at(&idx, 0x7f0000000200), None);
    assert_eq!(name_at(&idx, 0xffffffffffff00ff), Some("top"));
    assert_eq!(name_at(&idx, u64::MAX), None);
    assert_eq!(name_at(&idx, 0xf), None);
    assert_eq!(name_at(&PerfMapIndex::default(), 0x10), None);
}

#[test]
fn newest_entry_wins_on_overlap() {
    // old covers 0x100..0x200; new covers 0x140..0x160; newer still at 0x1f0..0x220.
    let idx = index("0x100 0x100 old\n0x140 0x20 new\n0x1f0 0x30 newest\n");
    assert_eq!(name_at(&idx, 0x13f), Some("old"));
    assert_eq!(name_at(&idx, 0x140), Some("new"));
    assert_eq!(name_at(&idx, 0x15f), Some("new"));
    assert_eq!(name_at(&idx, 0x160), Some("old"));
    assert_eq!(name_at(&idx, 0x1ef), Some("old"));
    assert_eq!(name_at(&idx, 0x1f0), Some("newest"));
    assert_eq!(name_at(&idx, 0x21f), Some("newest"));
    assert_eq!(name_at(&idx, 0x220), None);
    // The symbol keeps its own range even where only part of it is visible.
    assert_eq!(idx.lookup(0x170).unwrap().size, 0x100);
}

#[test]
fn older_entry_does_not_hide_newer_one() {
    let idx = index("0x140 0x20 new-first\n0x100 0x100 big-later\n");
    assert_eq!(name_at(&idx, 0x150), Some("big-later"));
    let idx = index("0x100 0x10 dup\n0x100 0x10 dup-newer\n");
    assert_eq!(name_at(&idx, 0x100), Some("dup-newer"));
}

#[test]
fn bad_and_huge_lines_are_counted_not_fatal() {
    let huge = format!("0x300 0x10 {}", "x".repeat(100_000));
    let text = format!("garbage\n0x100 0x10 a\n{huge}\n\n0xZZ 1 b\n0x200 0x10 c\n");
    let idx = index(&text);
    assert_eq!(idx.bad_lines(), 3);
    assert_eq!(idx.len(), 2);
    assert_eq!(name_at(&idx, 0x300), None);
    assert_eq!(name_at(&idx, 0x200), Some("c"));
}

#[test]
fn invalid_utf8_is_replaced_not_dropped() {
    let idx = PerfMapIndex::parse(b"0x100 0x10 bad\xffname\n", &Limits::default());
    assert_eq!(name_at(&idx, 0x100), Some("bad\u{fffd}name"));
}

#[test]
fn a_blob_of_four_gib_is_a_bad_line() {
    let idx = index("0x100 0x100000000 huge\n0x100 0xffffffff ok\n");
    assert_eq!((idx.bad_lines(), idx.len()), (1, 1));
    assert_eq!(name_at(&idx, 0x100 + 0xfffffffe), Some("ok"));
}

/// Brute force over random overlapping maps: the index must agree with
/// "the last entry in file order that covers the address".
#[test]
fn painting_matches_brute_force() {
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut rand = move |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    };
    for _ in 0..200 {
        let n = 1 + rand(12);
        let ranges: Vec<(u64, u64)> = (0..n).map(|_| (rand(64), 1 + rand(24))).collect();
        let text: String = ranges.iter().enumerate().map(|(i, (s, z))| format!("{s:x} {z:x} e{i}\n")).collect();
        let idx = index(&text);
        for addr in 0..100 {
            let expected = ranges
                .iter()
                .enumerate()
                .rev()
                .find(|(_, (s, z))| (*s..s + z).contains(&addr))
                .map(|(i, _)| format!("e{i}"));
            assert_eq!(name_at(&idx, addr).map(str::to_owned), expected, "{text} at {addr}");
        }
    }
}

/// Lines split across read chunks, and a reader that hands out a few bytes at a time.
#[test]
fn streaming_reads_agree_with_whole_reads() {
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let mut text = String::new();
    for i in 0..20_000u64 {
        text.push_str(&format!("{:#x} 0x40 void com.acme.K{}.m{i}()\n", 0x7f00_0000_0000 + i * 0x40, i % 7));
    }
    text.push_str("0x10 0x10 no-newline-at-end");
    let whole = index(&text);
    for step in [1, 7, 4096, CHUNK_BYTES + 3] {
        let idx =
            PerfMapIndex::read(&mut Trickle(text.as_bytes(), step), &Limits::default(), Reservation::unlimited(), None)
                .unwrap();
        assert_eq!((idx.len(), idx.bad_lines()), (whole.len(), 0), "step {step}");
        for addr in
            [0x10, 0x1f, 0x7f00_0000_0000, 0x7f00_0000_0000 + 19_999 * 0x40 + 0x3f, 0x7f00_0000_0000 + 12_345 * 0x40]
        {
            assert_eq!(idx.lookup(addr), whole.lookup(addr), "step {step} at {addr:#x}");
        }
    }
    let late =
        PerfMapIndex::read(&mut text.as_bytes(), &Limits::default(), Reservation::unlimited(), Some(Instant::now()));
    assert!(matches!(late, Err(ReadError::TimedOut)));
}

#[test]
fn equal_names_are_stored_once() {
    let mut text = String::new();
    for i in 0..1000u64 {
        text.push_str(&format!("{:#x} 0x100 I2C/C2I adapters\n", 0x1000 + i * 0x100));
    }
    let idx = index(&text);
    assert_eq!((idx.len(), idx.distinct_names()), (1000, 1));
    assert_eq!(name_at(&idx, 0x1000 + 999 * 0x100), Some("I2C/C2I adapters"));
    // 16 bytes an entry, about 2 for the buckets, the name once.
    assert!(idx.bytes() < 1000 * 20 + 200, "{} bytes", idx.bytes());
}

/// A cap smaller than the map: the first lines that fit are indexed, the rest counted, and
/// the index never holds more than its cap.
#[test]
fn a_capped_index_is_partial_and_counts_what_it_left_out() {
    for (order, text) in
        [("in order", ordered_map(5000)), ("reversed", reversed_map(5000)), ("overlapping", overlapping_map(5000))]
    {
        let full = index(&text);
        let cap = full.bytes() / 3;
        let idx = PerfMapIndex::read(&mut text.as_bytes(), &Limits::default(), Reservation::capped(cap), None).unwrap();
        assert!(idx.bytes() <= cap, "{order}: {} > {cap}", idx.bytes());
        assert!(idx.len() > 100 && idx.len() < full.len(), "{order}: {} of {}", idx.len(), full.len());
        assert_eq!(idx.len() as u64 + idx.not_indexed(), full.len() as u64, "{order}: every line indexed or counted");
        let found = (0..5000u64).filter(|i| idx.lookup(0x10_0000 + i * 0x100 + 0x90).is_some()).count();
        assert!(found > 100, "{order}: {found} found");
        if order == "overlapping" {
            // A newer entry left out can leave the older one it covered visible.
            continue;
        }
        for i in 0..5000u64 {
            if let Some(s) = idx.lookup(0x10_0000 + i * 0x100 + 1) {
                assert_eq!(
                    Some(s),
                    full.lookup(0x10_0000 + i * 0x100 + 1),
                    "{order}: a partial index never answers wrong"
                );
            }
        }
    }
}

fn ordered_map(n: u64) -> String {
    (0..n).map(|i| format!("{:#x} 0x100 void com.acme.K.m{i}()\n", 0x10_0000 + i * 0x100)).collect()
}

fn reversed_map(n: u64) -> String {
    (0..n).rev().map(|i| format!("{:#x} 0x100 void com.acme.K.m{i}()\n", 0x10_0000 + i * 0x100)).collect()
}

/// Every entry, then a newer one over every tenth.
fn overlapping_map(n: u64) -> String {
    let mut text = reversed_map(n);
    for i in (0..n).step_by(10) {
        text.push_str(&format!("{:#x} 0x80 void com.acme.K.newer{i}()\n", 0x10_0000 + i * 0x100));
    }
    text
}
