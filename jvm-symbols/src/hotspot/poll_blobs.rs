//! The entry of the handler blobs a loop's safepoint poll is sent to, where the blob's frame
//! does not yet say where it returns.
//!
//! A thread stopped at a loop's poll (`test %eax,(%reg)` on the armed polling page) faults;
//! the signal handler stores the poll's pc in `JavaThread::_saved_exception_pc` and resumes the
//! thread at `SharedRuntime::_polling_page_safepoint_handler_blob` (or its `_vectors_` twin,
//! for C2 loops with wide vectors). The blob (`SharedRuntime::generate_handler_blob`,
//! `cause_return` false) pushes `rbx` as a placeholder for its return address, builds its
//! frame (`push %rbp; mov %rsp,%rbp`, then every register, some 0.4-0.7 KB of stores), and
//! only then copies the saved pc into the placeholder:
//!
//! ```text
//! push %rbx ; push %rbp ; mov %rsp,%rbp ; ... ; mov <saved_exception_pc>(%r15),%rbx ; mov %rbx,0x8(%rbp)
//! ```
//!
//! Until that last store, the frame's return address is garbage: a walk that steps the blob
//! there cuts (JDK 25's JFR, which samples at polls, put 6-12% of the samples under the blob
//! there). Read from the blob's own bytes here, the window and the thread field let the
//! sampler find the frame the poll stopped (the pc from the thread, its sp from how far the
//! entry got). The return-poll blob (`_polling_page_return_handler_blob`) pushes no
//! placeholder: its frame returns to a real return address, and it has no window.

use super::codecache::read_blob;
use super::layout::CodeLayout;
use super::MemoryReader;

/// The statics holding the loop-poll handler blobs (`CodeBlob*`), in libjvm's full symbol
/// table (JDK 11 to 25 all have both).
pub const LOOP_POLL_HANDLER_BLOBS: [&str; 2] = [
    "_ZN13SharedRuntime36_polling_page_safepoint_handler_blobE",
    "_ZN13SharedRuntime44_polling_page_vectors_safepoint_handler_blobE",
];

/// `push %rbx; push %rbp; mov %rsp,%rbp` (HotSpot's assembler encodes the move as `8B /r`).
pub const ENTRY_BYTES: [u8; 5] = [0x53, 0x55, 0x48, 0x8b, 0xec];
/// `mov disp32(%r15),%rbx`, then 4 bytes of displacement.
const LOAD_SAVED_PC: [u8; 3] = [0x49, 0x8b, 0x9f];
/// `mov %rbx,0x8(%rbp)`: the placeholder gets the saved pc.
const STORE_RETURN: [u8; 4] = [0x48, 0x89, 0x5d, 0x08];
/// Most code bytes read from a blob's start for the store (JDK 11-25: 0x134-0x28f bytes in).
pub const MAX_ENTRY_BYTES: usize = 0x600;

/// The part of a loop-poll handler blob before its return address is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollEntryWindow {
    /// The blob's code start, where the thread resumes.
    pub start: u64,
    /// Just past the store of the return address: from here on the blob's frame is whole.
    pub end: u64,
    /// `JavaThread::_saved_exception_pc`'s offset, as the blob reads it (r15 holds the thread).
    pub saved_pc_offset: u32,
}

/// The window of a handler blob whose code starts with `code` (at `start`): `None` for one
/// that does not start by pushing a placeholder (the return-poll blob) or whose store is not
/// within the bytes given.
pub fn entry_window(start: u64, code: &[u8]) -> Option<PollEntryWindow> {
    if !code.starts_with(&ENTRY_BYTES) {
        return None;
    }
    let pattern_len = LOAD_SAVED_PC.len() + 4 + STORE_RETURN.len();
    let at = code.windows(pattern_len).position(|w| w.starts_with(&LOAD_SAVED_PC) && w.ends_with(&STORE_RETURN))?;
    let disp = i32::from_le_bytes(code[at + 3..at + 7].try_into().ok()?);
    let saved_pc_offset = u32::try_from(disp).ok().filter(|&d| d > 0 && d < 1 << 16)?;
    Some(PollEntryWindow { start, end: start + (at + pattern_len) as u64, saved_pc_offset })
}

/// The window of the handler blob at `blob_addr` (the `CodeBlob*` its static holds), if it has
/// one. At most `MAX_ENTRY_BYTES` of its code are read.
pub fn read_entry_window(reader: &impl MemoryReader, l: &CodeLayout, blob_addr: u64) -> Option<PollEntryWindow> {
    let blob = read_blob(reader, l, blob_addr).ok()?;
    let code_end = blob.address.checked_add(blob.size_bytes)?;
    let len = code_end.checked_sub(blob.code_begin)?.min(MAX_ENTRY_BYTES as u64) as usize;
    let code = reader.read_vec(blob.code_begin, len).ok()?;
    entry_window(blob.code_begin, &code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!("{}/../tests/fixtures/poll-blobs/{name}.bin", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The code of each JDK's three handler blobs, dumped from a running JVM (gdb, from the
    /// statics in libjvm's symbol table): the two loop-poll blobs have a window ending at the
    /// store, reading the thread field the JDK has; the return-poll blob has none.
    #[test]
    fn the_loop_poll_blobs_of_jdk_11_to_25_have_their_window_and_the_return_blob_none() {
        let cases = [
            (11, 0x3d0, [0x134, 0x244]),
            (17, 0x358, [0x16d, 0x28f]),
            (21, 0x460, [0x16d, 0x28f]),
            (25, 0x538, [0x16d, 0x28f]),
        ];
        for (jdk, saved_pc, ends) in cases {
            for (kind, end) in ["loop", "vectors"].into_iter().zip(ends) {
                let code = fixture(&format!("jdk{jdk}-{kind}"));
                let w = entry_window(0x1000, &code).unwrap_or_else(|| panic!("JDK {jdk} {kind}: no window"));
                assert_eq!(
                    w,
                    PollEntryWindow { start: 0x1000, end: 0x1000 + end, saved_pc_offset: saved_pc },
                    "JDK {jdk} {kind}"
                );
                // The store is the window's last instruction.
                assert_eq!(&code[end as usize - 4..end as usize], &STORE_RETURN, "JDK {jdk} {kind}");
            }
            assert_eq!(entry_window(0x1000, &fixture(&format!("jdk{jdk}-return"))), None, "JDK {jdk} return");
        }
    }

    #[test]
    fn bytes_that_are_not_a_loop_poll_blob_have_no_window() {
        let code = fixture("jdk17-loop");
        assert_eq!(entry_window(0, &code[..0x100]), None, "the store is past the bytes given");
        let mut other = code.clone();
        other[0] = 0x90;
        assert_eq!(entry_window(0, &other), None, "no placeholder pushed");
        assert_eq!(entry_window(0, &[]), None);
        // A displacement no JavaThread field has.
        let mut far = code.clone();
        let at = 0x16d - 11;
        far[at + 3..at + 7].copy_from_slice(&(-8i32).to_le_bytes());
        assert_eq!(entry_window(0, &far), None);
    }
}
