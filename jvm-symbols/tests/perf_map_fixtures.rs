//! Perf-map fixtures in `tests/data/`, loaded the way the profiler loads them (through
//! the safe opener and the reloading index).

use std::os::unix::fs::symlink;
use std::path::Path;

use jvm_symbols::{classify, short_name, CodeKind, Error, Limits, PerfMapFile};

fn uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Copies a fixture to `<tmp>/tmp/perf-1.map` and loads it.
fn load(fixture: &str) -> (tempfile::TempDir, PerfMapFile) {
    let data = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(fixture)).unwrap();
    load_bytes(&data)
}

fn load_bytes(data: &[u8]) -> (tempfile::TempDir, PerfMapFile) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tmp")).unwrap();
    std::fs::write(dir.path().join("tmp/perf-1.map"), data).unwrap();
    let mut map = PerfMapFile::new(dir.path(), "tmp/perf-1.map", uid(), Limits::default());
    assert!(map.refresh().unwrap());
    (dir, map)
}

#[test]
fn hotspot_jdk17_dump() {
    let (_dir, map) = load("hotspot-jdk17.map");
    let index = map.index();
    assert_eq!(index.bad_lines(), 0);
    assert_eq!(index.len(), 15);
    let work = index.lookup(0x7f1b10ec7620 + 0x10).unwrap();
    assert_eq!(work.name, "long Spin.work(int)");
    assert_eq!(short_name(work.name), "Spin.work");
    assert_eq!(classify(work.name), CodeKind::JavaMethod);
    let interpreter = index.lookup(0x7f1b10940b80 + 0x17de0 - 1).unwrap();
    assert_eq!(interpreter.name, "Interpreter");
    assert_eq!(classify(interpreter.name), CodeKind::Stub);
    assert_eq!(index.lookup(0x7f1b10940b80 + 0x17de0), None);
    assert_eq!(index.lookup(0x7f1b10938c00 + 5).unwrap().name, "StubRoutines (1)");
}

#[test]
fn perf_map_agent_dump() {
    let (_dir, map) = load("perf-map-agent.map");
    let index = map.index();
    assert_eq!(index.bad_lines(), 0);
    let bar = index.lookup(0x7f3c2d000100 + 0x7f).unwrap().name;
    assert_eq!(short_name(bar), "com.acme.Foo.bar");
    assert_eq!(index.lookup(0x7f3c2d000180), None);
}

#[test]
fn overlaps_garbage_and_non_ascii() {
    let (_dir, map) = load("mixed-overlap.map");
    let index = map.index();
    assert_eq!(index.bad_lines(), 3);
    assert_eq!(index.lookup(0x1000).unwrap().name, "void old.Method.run()");
    assert_eq!(index.lookup(0x1041).unwrap().name, "void new.Method.run(int; java.lang.String)");
    assert_eq!(index.lookup(0x1060).unwrap().name, "void old.Method.run()");
    assert_eq!(index.lookup(0x2000).unwrap().name, "Ünïcödé.Klass.méthode()");
    assert_eq!(index.lookup(0x4000).unwrap().name, "void last.One.x()");
}

#[test]
fn huge_line_is_skipped() {
    let mut data = b"0x100 0x10 void a.B.c()\n0x200 0x10 ".to_vec();
    data.extend(std::iter::repeat_n(b'x', 1 << 20));
    data.extend_from_slice(b"\n0x300 0x10 void a.B.d()\n");
    let (_dir, map) = load_bytes(&data);
    assert_eq!(map.index().bad_lines(), 1);
    assert_eq!(map.index().lookup(0x200), None);
    assert_eq!(map.index().lookup(0x300).unwrap().name, "void a.B.d()");
}

#[test]
fn symlinked_map_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tmp")).unwrap();
    std::fs::write(dir.path().join("elsewhere"), b"0x100 0x10 void a.B.c()\n").unwrap();
    symlink("../elsewhere", dir.path().join("tmp/perf-1.map")).unwrap();
    let mut map = PerfMapFile::new(dir.path(), "tmp/perf-1.map", uid(), Limits::default());
    let err = map.refresh().unwrap_err();
    assert!(matches!(err, Error::Refused { .. }), "{err}");
    assert!(map.index().is_empty());
}
