//! What a loaded perf map costs in memory, measured the same way for any version of this crate
//! (only `PerfMapFile::new`, `refresh` and `index().len()` are used):
//!
//! `cargo run --release -p jvm-symbols --example index_memory -- [LINES] [distinct|tiered]`
//!
//! Writes a HotSpot-style map of LINES lines (default 1,000,000) to a temporary directory,
//! loads it, and prints the RSS the index keeps per entry and the peak RSS while loading. Names
//! are `distinct` (every line its own method), or `tiered` (the default: each method twice, as
//! at two compilation tiers, and every tenth line an `I2C/C2I adapters` blob, as HotSpot writes).

use std::io::Write as _;

use jvm_symbols::{Identity, Limits, PerfMapFile};

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with(field)).expect("field in status");
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().expect("a number")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let lines: u64 = args.next().map_or(1_000_000, |a| a.parse().expect("LINES is a number"));
    let tiered = args.next().as_deref() != Some("distinct");
    // As the profiler does: large blocks stay mmapped, so freeing them shows in the RSS.
    // SAFETY: sets one allocator tunable before any other thread exists.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) };

    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::create_dir(dir.path().join("tmp")).expect("tmp");
    let path = dir.path().join("tmp/perf-1.map");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("map file"));
    for i in 0..lines {
        let addr = 0x7f00_0000_0000u64 + i * 0x100;
        let method = if tiered { i / 2 } else { i };
        if tiered && i % 10 == 0 {
            writeln!(out, "{addr:#018x} 0x00000000000001c0 I2C/C2I adapters").unwrap();
        } else {
            writeln!(
                out,
                "{addr:#018x} 0x0000000000000100 java.lang.Object com.acme.service.pkg{}.Handler{}.method{method}(java.lang.String, int)",
                method % 97,
                method % 991
            )
            .unwrap();
        }
    }
    drop(out);
    let file_bytes = std::fs::metadata(&path).expect("map file").len();

    let me = Identity::user(nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
    let mut map = PerfMapFile::new(dir.path(), "tmp/perf-1.map", me, Limits::default());
    let before_kib = status_kib("VmRSS:");
    // Resets VmHWM to the current RSS (Linux 4.0+).
    std::fs::write("/proc/self/clear_refs", "5").expect("clear_refs");
    let started = std::time::Instant::now();
    assert!(map.refresh().expect("load"), "loaded");
    let took = started.elapsed();
    let held_kib = status_kib("VmRSS:").saturating_sub(before_kib);
    let peak_kib = status_kib("VmHWM:").saturating_sub(before_kib);
    let entries = map.index().len() as u64;
    println!(
        "{lines} lines ({} names, {:.1} MB file): {entries} entries in {:.0} ms; held {:.1} MB = {:.1} bytes/entry; peak while loading +{:.1} MB",
        if tiered { "tiered" } else { "distinct" },
        file_bytes as f64 / 1e6,
        took.as_secs_f64() * 1e3,
        held_kib as f64 / 1024.0,
        held_kib as f64 * 1024.0 / entries as f64,
        peak_kib as f64 / 1024.0
    );
}
