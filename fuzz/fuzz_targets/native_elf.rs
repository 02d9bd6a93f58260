//! A target's ELF file, as the native symbolizer reads it: copied (headers, symbol and string
//! tables) into a private memfd, then named by blazesym. Any bytes may come in; the copy must
//! stay within its budget and within the file, and names come back one per offset. A panic of
//! blazesym is caught, as the profiler catches it (that file is then marked bad); only an
//! uncaught panic, an abort, a fault or a hang is a finding.
#![no_main]

use std::io::Write;
use std::sync::Once;

use joular_user::symbols::{names_at_file_offsets, NameError};
use libfuzzer_sys::fuzz_target;

/// The copy's budget: more than any input libFuzzer makes here, so a refusal means a bug.
const MAX_COPY_BYTES: u64 = 16 << 20;

/// libFuzzer's hook aborts on every panic, caught or not: the profiler catches blazesym's, so
/// they are only printed (once). An uncaught panic still aborts (libfuzzer-sys checks that).
fn quiet_caught_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let first = Once::new();
        std::panic::set_hook(Box::new(move |info| {
            first.call_once(|| eprintln!("caught (as the profiler does): {info}"))
        }));
    });
}

fuzz_target!(|data: &[u8]| {
    quiet_caught_panics();
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(data).unwrap();
    let len = data.len() as u64;
    // Offsets all over the file, the seeds' function entries, and past its end.
    let mut offsets: Vec<u64> = (0..len).step_by((len / 64).max(1) as usize).collect();
    offsets.extend([0x1109, 0x110d, 0x1110, len, u64::MAX]);
    match names_at_file_offsets(&file, len, MAX_COPY_BYTES, &offsets) {
        Ok((names, copied_bytes)) => {
            assert_eq!(names.len(), offsets.len());
            assert!(copied_bytes <= len, "copied {copied_bytes} bytes of a {len}-byte file");
        }
        Err(NameError::Copy(e)) => assert_ne!(e.kind(), "over_budget", "{e}"),
        Err(NameError::Panicked(_)) => {}
    }
});
