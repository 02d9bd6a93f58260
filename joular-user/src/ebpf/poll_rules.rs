//! The kernel unwinder's reading of HotSpot's safepoint poll (`joular_ebpf::poll`), on
//! instruction bytes as GNU as assembles them: the polls C1 and C2 emit (`testl(rax,
//! Address(reg, 0))`, any base register) are polls, and the nearby encodings that are not
//! (another register tested, a register operand, a 64-bit test, a call) are not. A false
//! "poll" lets a garbage return address through the walk's check.

use joular_ebpf::poll::{is_safepoint_poll, POLL_BYTES};

fn first(bytes: &[u8]) -> [u8; POLL_BYTES] {
    let mut b = [0x90; POLL_BYTES];
    b.copy_from_slice(&bytes[..POLL_BYTES]);
    b
}

/// (what, bytes, a poll?)
const CASES: [(&str, &[u8], bool); 11] = [
    ("test %eax,(%r10)", &[0x41, 0x85, 0x02], true),
    ("test %eax,(%rbx)", &[0x85, 0x03, 0x90], true),
    ("test %eax,(%rsi)", &[0x85, 0x06, 0x90], true),
    ("test %eax,(%r12)", &[0x41, 0x85, 0x04, 0x24], true),
    ("test %eax,0x0(%r13)", &[0x41, 0x85, 0x45, 0x00], true),
    ("test %ecx,(%r10)", &[0x41, 0x85, 0x0a], false),
    ("test %eax,%r10d", &[0x41, 0x85, 0xc2], false),
    ("test %rax,%rax", &[0x48, 0x85, 0xc0], false),
    ("test %eax,%eax", &[0x85, 0xc0, 0x90], false),
    ("call *(%r10)", &[0x41, 0xff, 0x12], false),
    ("mov %eax,(%r10)", &[0x41, 0x89, 0x02], false),
];

#[test]
fn the_polls_hotspot_emits_are_polls_on_any_base_register_and_nearby_encodings_are_not() {
    for (what, bytes, poll) in CASES {
        assert_eq!(is_safepoint_poll(first(bytes)), poll, "{what}: a poll is {poll}");
    }
    // Both kinds are in the table, so neither answer can pass the test alone.
    assert!(CASES.iter().any(|c| c.2) && CASES.iter().any(|c| !c.2));
}
