//! `/proc/<pid>/maps`: the kernel writes it, but the paths in it are the process's (any bytes but
//! `\n`). Parsing the whole file must find what parsing each line alone finds: one odd line may
//! not hide the mappings after it (libjvm.so, the code cache).
#![no_main]

use jvm_symbols::parse_maps;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let all = parse_maps(data);
    let one_by_one: Vec<_> = data.split(|&b| b == b'\n').flat_map(parse_maps).collect();
    assert_eq!(all, one_by_one);
    for m in &all {
        assert_eq!(m.contains(m.start), m.start < m.end);
        if m.is_anonymous_code() {
            assert!(m.executable && m.path.is_none());
        }
    }
});
