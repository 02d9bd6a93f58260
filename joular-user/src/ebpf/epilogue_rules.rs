//! The kernel unwinder's reading of compiled epilogues (`joular_ebpf::epilogue`), on the
//! epilogues of real nmethods: C2's and C1's `ReturnPoll.mix` (tests/java/ReturnPoll.java) as
//! JDK 11.0.13, 17.0.15 (Debian), 21.0.8 and 25.0.2 compiled them, dumped with gdb from the
//! running JVM. A state other than `EPILOGUE_NONE` makes the sampler take the return address
//! at or just above sp instead of stepping by the frame size, so a wrong one misplaces it:
//! every instruction boundary is checked, and so is every pc between boundaries.

use joular_ebpf::epilogue::{
    epilogue_state, EPILOGUE_AT_POP_RBP, EPILOGUE_BEHIND_BYTES, EPILOGUE_NONE, EPILOGUE_RETURN_AT_SP,
    EPILOGUE_WINDOW_BYTES,
};

/// (what, bytes from 8 before `add $F-16,%rsp` to 16 past `ret`, the offsets of `add`,
/// `pop %rbp`, the poll's load, the instruction after it and `ret`).
const CASES: [(&str, &str, [usize; 5]); 8] = [
    // add $0x10,%rsp; pop %rbp; mov 0x108(%r15),%r10; test %eax,(%r10); ret
    (
        "JDK 11 C2",
        "aff2488bc64803c24883c4105d4d8b9708010000418502c3f4f4f4f4f4f4e91b3a62f8e8000000",
        [8, 12, 13, 20, 23],
    ),
    // add $0x40,%rsp; pop %rbp; mov 0x108(%r15),%r10; test %eax,(%r10); ret
    (
        "JDK 11 C1",
        "9e480fafc64803c24883c4405d4d8b9708010000418502c349ba4806c005497f00004c89542408",
        [8, 12, 13, 20, 23],
    ),
    // add $0x10,%rsp; pop %rbp; cmp 0x340(%r15),%rsp; ja <poll stub>; ret
    (
        "JDK 17 C2",
        "aff2488bc64803c24883c4105d493ba7400300000f8701000000c349baaf9fec24a27f00004d89975803",
        [8, 12, 13, 20, 26],
    ),
    (
        "JDK 17 C1",
        "9e480fafc64803c24883c4405d493ba7400300000f871f000000c349ba000640afa17f00004c89542408",
        [8, 12, 13, 20, 26],
    ),
    // add $0x10,%rsp; pop %rbp; cmp 0x448(%r15),%rsp; ja <poll stub>; ret
    (
        "JDK 21 C2",
        "490faff2488d04164883c4105d493ba7480400000f8701000000c349babbc68c5cbf7f00004d89976004",
        [8, 12, 13, 20, 26],
    ),
    (
        "JDK 21 C1",
        "9e480fafc64803c24883c4405d493ba7480400000f871f000000c349baf805402cbf7f00004c89542408",
        [8, 12, 13, 20, 26],
    ),
    // add $0x10,%rsp; pop %rbp; cmp 0x28(%r15),%rsp (an 8-bit displacement); ja <poll stub>; ret
    (
        "JDK 25 C2",
        "490faff2488d04164883c4105d493b67280f8701000000c349babbc98cc0907f00004d89973805",
        [8, 12, 13, 17, 23],
    ),
    (
        "JDK 25 C1",
        "9e480fafc64803c24883c4405d493b67280f871f000000c349baf8054090907f00004c89542408",
        [8, 12, 13, 17, 23],
    ),
];

fn bytes(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

/// The window the sampler reads for a pc at `offset` of `code` (bytes past either end: nop).
fn state_at(code: &[u8], offset: usize) -> u32 {
    let mut w = [0x90u8; EPILOGUE_WINDOW_BYTES];
    for (k, slot) in w.iter_mut().enumerate() {
        if let Some(&b) = (offset + k).checked_sub(EPILOGUE_BEHIND_BYTES).and_then(|i| code.get(i)) {
            *slot = b;
        }
    }
    epilogue_state(&w)
}

#[test]
fn past_pop_rbp_the_return_address_is_at_sp_through_the_return_poll_on_every_jdk() {
    for (what, hex, [add, pop, load, after_load, ret]) in CASES {
        let code = bytes(hex);
        let expected = [
            (add, EPILOGUE_NONE, "add $F-16,%rsp: the frame is whole"),
            (pop, EPILOGUE_AT_POP_RBP, "pop %rbp"),
            (load, EPILOGUE_RETURN_AT_SP, "the poll's load"),
            (after_load, EPILOGUE_RETURN_AT_SP, "the instruction after the poll's load"),
            (ret, EPILOGUE_RETURN_AT_SP, "ret"),
        ];
        for (offset, state, at) in expected {
            assert_eq!(state_at(&code, offset), state, "{what}: {at} (offset {offset})");
        }
        // Inside an instruction: no pc stops there, so the bytes must prove nothing.
        for offset in add..ret {
            if !expected.iter().any(|e| e.0 == offset) {
                assert_eq!(state_at(&code, offset), EPILOGUE_NONE, "{what}: inside an instruction at {offset}");
            }
        }
    }
}

/// Each part of the rule for the pc after the poll's load is needed: `pop %rbp` before the
/// load, the load's base register r15 (the thread), the load's kind, and a `ret` after it.
#[test]
fn a_load_that_is_not_the_return_poll_after_pop_rbp_proves_nothing() {
    for (what, hex, [_, pop, load, after_load, ret]) in CASES {
        let code = bytes(hex);
        // (the byte changed, its new value, what the change makes of the code)
        let changes = [
            (pop, 0x5b, "pop %rbx instead of pop %rbp"),
            (load, 0x48, "no REX.B: the load's base is rdi, not r15"),
            (load + 2, code[load + 2] ^ 0x07, "the load's base register changed"),
            (load + 1, 0x33, "xor instead of cmp or mov"),
            (ret, 0x90, "no ret after the poll"),
        ];
        for (at, value, change) in changes {
            let mut changed = code.clone();
            changed[at] = value;
            assert_eq!(state_at(&changed, after_load), EPILOGUE_NONE, "{what}: {change}");
        }
    }
}
