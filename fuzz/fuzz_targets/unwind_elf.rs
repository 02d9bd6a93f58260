//! A target's ELF file, as the native unwinder reads it: headers, `.eh_frame`/`.debug_frame`
//! (parsed by gimli) and the bytes of the gaps between FDEs (decoded by iced-x86, for
//! frameless hand-written code). Any bytes may come in, claiming any sections, addresses and
//! offsets; the rows must come back sorted, or a refusal. A panic, an abort, a fault or a hang
//! is a finding.
#![no_main]

use std::io::Write;

use joular_user::unwind::elf_read::read_file_rows;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(data).unwrap();
    if let Ok(rows) = read_file_rows(&file, data.len() as u64, 1 << 20) {
        assert!(rows.rows.windows(2).all(|w| w[0].pc < w[1].pc), "rows out of order");
    }
});
