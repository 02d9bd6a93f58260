//! The perf map a JVM (or anything that owns `/tmp/perf-<pid>.map`) writes: parsed and indexed
//! by jvm-symbols, checked against a plain reference: every good line in file order, the newest
//! entry covering an address wins.
#![no_main]

use jvm_symbols::{parse_line, Limits, PerfMapIndex};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // An odd first byte also sets a small line limit, so the over-long path is taken too.
    let (limits, map) = match data.split_first() {
        Some((&b, rest)) if b & 1 == 1 => {
            (Limits { max_file_bytes: 1 << 20, max_line_bytes: usize::from(b >> 1) + 1 }, rest)
        }
        Some((_, rest)) => (Limits::default(), rest),
        None => (Limits::default(), data),
    };
    let index = PerfMapIndex::parse(map, &limits);

    let lines: Vec<&[u8]> = map.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    let entries: Vec<(u64, u64, String)> = lines
        .iter()
        .filter(|l| l.len() <= limits.max_line_bytes)
        .filter_map(|l| parse_line(l))
        .map(|p| (p.start, p.start + p.size, String::from_utf8_lossy(p.name).into_owned()))
        .collect();
    assert_eq!(index.len(), entries.len());
    assert_eq!(index.bad_lines(), (lines.len() - entries.len()) as u64);

    let mut probes = vec![0, u64::MAX];
    for &(start, end, _) in entries.iter().take(64) {
        probes.extend([start, start.wrapping_sub(1), end - 1, end, start + (end - start) / 2]);
    }
    for addr in probes {
        let want = entries.iter().rev().find(|(start, end, _)| (*start..*end).contains(&addr));
        let got = index.lookup(addr);
        match (want, got) {
            (None, None) => {}
            (Some((start, end, name)), Some(sym)) => {
                assert_eq!(
                    (sym.start, sym.start + sym.size, sym.name),
                    (*start, *end, name.as_str()),
                    "lookup({addr:#x})"
                );
            }
            _ => panic!("lookup({addr:#x}): index {got:?}, reference {want:?}"),
        }
    }
});
