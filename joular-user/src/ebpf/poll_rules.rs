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

#[test]
fn the_polls_hotspot_emits_are_polls_on_any_base_register() {
    let polls: [(&str, &[u8]); 5] = [
        ("test %eax,(%r10)", &[0x41, 0x85, 0x02]),
        ("test %eax,(%rbx)", &[0x85, 0x03, 0x90]),
        ("test %eax,(%rsi)", &[0x85, 0x06, 0x90]),
        ("test %eax,(%r12)", &[0x41, 0x85, 0x04, 0x24]),
        ("test %eax,0x0(%r13)", &[0x41, 0x85, 0x45, 0x00]),
    ];
    for (what, bytes) in polls {
        assert!(is_safepoint_poll(first(bytes)), "{what} is a poll");
    }
}

#[test]
fn nearby_encodings_are_not_polls() {
    let others: [(&str, &[u8]); 6] = [
        ("test %ecx,(%r10)", &[0x41, 0x85, 0x0a]),
        ("test %eax,%r10d", &[0x41, 0x85, 0xc2]),
        ("test %rax,%rax", &[0x48, 0x85, 0xc0]),
        ("test %eax,%eax", &[0x85, 0xc0, 0x90]),
        ("call *(%r10)", &[0x41, 0xff, 0x12]),
        ("mov %eax,(%r10)", &[0x41, 0x89, 0x02]),
    ];
    for (what, bytes) in others {
        assert!(!is_safepoint_poll(first(bytes)), "{what} is not a poll");
    }
}
