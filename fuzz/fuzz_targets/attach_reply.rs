//! What comes back on a HotSpot attach socket (bounded before this): the result code line, the
//! command's output, the `VM.flags` reply, and the text shown to the operator from it.
#![no_main]

use jvm_symbols::attach::decode_reply;
use jvm_symbols::{flag_from_vm_flags, printable_bytes, FlagState};
use libfuzzer_sys::fuzz_target;

const SHOWN_CHARS: usize = 64;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Some((code, output)) = decode_reply(data) {
        let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
        assert_eq!(first.trim().parse::<i32>().ok(), Some(code));
        assert_eq!(output, rest);
    }
    let shown = printable_bytes(data, SHOWN_CHARS);
    assert!(!shown.chars().any(char::is_control), "a control character is shown: {shown:?}");
    // The cut adds "… (N more bytes)".
    assert!(shown.chars().count() <= SHOWN_CHARS * 10 + 40, "{} chars shown", shown.chars().count());
    let flag = flag_from_vm_flags(&text, "PreserveFramePointer");
    if !text.contains("-XX:+PreserveFramePointer") {
        assert_eq!(flag, FlagState::Off);
    }
});
