//! The kernel unwinder's reading of compiled prologues (`joular_ebpf::prologue`), on the
//! prologues of real nmethods: each case's bytes run from the nmethod's code start to its
//! frame-complete offset, as JDK 11.0.13, 17.0.15, 21.0.8 and 25.0.2 (Temurin, x86_64)
//! compiled them for Jetty 9.4 (and, with -XX:+PreserveFramePointer, for a test fixture). A
//! state other than `PROLOGUE_UNKNOWN` lets the sampler step a leaf that today would be cut,
//! so a wrong one misplaces a return address: every instruction boundary is checked, and so
//! is every pc between boundaries.

use joular_ebpf::prologue::{
    prologue_state, PROLOGUE_ALLOCATED, PROLOGUE_COMPLETE, PROLOGUE_ENTRY, PROLOGUE_PUSHED, PROLOGUE_UNKNOWN,
    PROLOGUE_WINDOW_BYTES,
};

/// A prologue as recorded: its bytes from the nmethod's code start to its frame-complete
/// offset, the blob's frame size in words, and what the bytes prove at each pc.
struct Case {
    what: &'static str,
    hex: &'static str,
    frame_words: u32,
    /// Below this offset nothing is pushed yet: the inline-cache check, class-init barrier,
    /// bangs and `push %rbp` (or `sub`, without a bang) itself.
    entry_before: u32,
    /// The instruction boundaries after that, up to the frame's completion, and their state.
    at: &'static [(u32, u32)],
    /// Where the entry barrier (and the nop that aligns it) starts, if there is one: the
    /// frame is complete from there on.
    complete_from: Option<u32>,
}

fn bytes(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

/// The window the sampler reads: the bytes that end at the frame-complete offset, the ones
/// before the code start (the nmethod's header) zero.
fn window(code: &[u8]) -> [u8; PROLOGUE_WINDOW_BYTES] {
    let mut w = [0u8; PROLOGUE_WINDOW_BYTES];
    let n = code.len().min(PROLOGUE_WINDOW_BYTES);
    w[PROLOGUE_WINDOW_BYTES - n..].copy_from_slice(&code[code.len() - n..]);
    w
}

fn state_at(code: &[u8], offset: u32, frame_words: u32) -> u32 {
    prologue_state(&window(code), code.len() as u32 - offset, frame_words * 8)
}

const CASES: &[Case] = &[
    Case {
        what: "JDK 11 C2, bang, sub imm8 (ModuleDescriptor.name)",
        hex: "448b560849bc00000000080000004d03d44d33e44c3bd00f85233358f866669089842400c0feff554883ec30",
        frame_words: 8,
        entry_before: 40,
        at: &[(40, PROLOGUE_PUSHED)],
        complete_from: None,
    },
    Case {
        what: "JDK 11 C2 static, a call before the bang, sub imm32 (ConcurrentHashMap.transfer)",
        hex: "e83b08d00e6666660f1f84000000000089842400c0feff554881ecc0000000",
        frame_words: 26,
        entry_before: 24,
        at: &[(24, PROLOGUE_PUSHED)],
        complete_from: None,
    },
    Case {
        what: "JDK 11 C2 without a bang (SetN$SetNIterator.hasNext)",
        hex: "448b560849bc00000000080000004d03d44d33e4493bc20f85431d58f86666904881ec1800000048896c2410",
        frame_words: 4,
        entry_before: 39,
        at: &[(39, PROLOGUE_ALLOCATED)],
        complete_from: None,
    },
    Case {
        what: "JDK 11 JNI wrapper, mov %rsp,%rbp (Unsafe.getObjectVolatile)",
        hex: "448b560849bc00000000080000004d03d44d33e4493bc20f840b000000e99e3e58f8660f1f44000089842400c0feff55488bec4883ec40",
        frame_words: 10,
        entry_before: 48,
        at: &[(48, PROLOGUE_PUSHED), (51, PROLOGUE_PUSHED)],
        complete_from: None,
    },
    Case {
        what: "JDK 17 C1, bang, sub imm8 (UTF8ZipCoder.isUTF8)",
        hex: "448b560849bb0000003bd07f00004d03d34c3bd00f854613acff660f1f44000089842400c0feff554883ec30",
        frame_words: 8,
        entry_before: 40,
        at: &[(40, PROLOGUE_PUSHED)],
        complete_from: None,
    },
    Case {
        what: "JDK 17 C2, bang, sub imm32 (XmlConfiguration lambda)",
        hex: "448b560849bb0000003bd07f00004d03d3493bc20f85069fa4ff66900f1f400089842400c0feff554881ec80000000",
        frame_words: 18,
        entry_before: 40,
        at: &[(40, PROLOGUE_PUSHED)],
        complete_from: None,
    },
    Case {
        what: "JDK 17 C2 without a bang (DirectByteBuffer.ix)",
        hex: "448b560849bb0000003bd07f00004d03d3493bc20f856695abff66900f1f40004881ec1800000048896c2410",
        frame_words: 4,
        entry_before: 39,
        at: &[(39, PROLOGUE_ALLOCATED)],
        complete_from: None,
    },
    Case {
        what: "JDK 21 C2, bang, sub imm32, entry barrier after a 1-byte nop (CollationElementIterator.next)",
        hex: "448b560849bb00000000080000004d03d3493bc20f85064ea9ff66900f1f400089842400c0feff554881ec800000009041817f20020000000f85f0360000",
        frame_words: 18,
        entry_before: 40,
        at: &[(40, PROLOGUE_PUSHED)],
        complete_from: Some(47),
    },
    Case {
        what: "JDK 21 C1, bang, sub imm8, entry barrier je + call (KeyValueHolder.getKey)",
        hex: "448b560849bb00000000080000004d03d34c3bd00f8546deabff660f1f44000089842400c0feff554883ec2041817f20020000007405e84542aaff",
        frame_words: 6,
        entry_before: 40,
        at: &[(40, PROLOGUE_PUSHED)],
        complete_from: Some(44),
    },
    Case {
        what: "JDK 21 C2 without a bang, entry barrier (String.coder)",
        hex: "448b560849bb00000000080000004d03d3493bc20f85e630abff66900f1f40004881ec1800000048896c241041817f20030000000f852d000000",
        frame_words: 4,
        entry_before: 39,
        at: &[(39, PROLOGUE_ALLOCATED)],
        complete_from: Some(44),
    },
    Case {
        what: "JDK 21 C1 with a class-init barrier, entry barrier after a 2-byte nop (Parser.computeReverseTable)",
        hex: "49ba38982a00080000004180ba31010000040f84120000004d3bba380100000f8405000000e956a2170789842400c0feff554883ec50669041817f20000000007405e859771a07",
        frame_words: 12,
        entry_before: 50,
        at: &[(50, PROLOGUE_PUSHED)],
        complete_from: Some(54),
    },
    Case {
        what: "JDK 25 C1, bang, sub imm8, entry barrier je + call (KeyValueHolder.getKey)",
        hex: "660f1f840000000000660f1f840000000000448b5608443b50080f8540f2abff89842400c0feff554883ec2041817f20020000007405e8856daaff",
        frame_words: 6,
        entry_before: 40,
        at: &[(40, PROLOGUE_PUSHED)],
        complete_from: Some(44),
    },
    Case {
        what: "JDK 25 C2 without a bang, entry barrier (Byte.toUnsignedInt)",
        hex: "4881ec1800000048896c241041817f20020000000f852a000000",
        frame_words: 4,
        entry_before: 7,
        at: &[(7, PROLOGUE_ALLOCATED)],
        complete_from: Some(12),
    },
    Case {
        what: "JDK 25 JNI wrapper, mov %rsp,%rbp, entry barrier (Unsafe.getReferenceVolatile)",
        hex: "6690448b5608443b50080f85d0fcabff89842400c0feff55488bec4883ec409041817f20030000007405e81178aaff",
        frame_words: 10,
        entry_before: 24,
        at: &[(24, PROLOGUE_PUSHED), (27, PROLOGUE_PUSHED)],
        complete_from: Some(31),
    },
    // -XX:+PreserveFramePointer, C2 without a bang: `mov %rsp,%rbp` and `add $F-16,%rbp`
    // after rbp is saved (tests/java/ReturnPoll.java's static `mix`, dumped with gdb).
    Case {
        what: "JDK 11 and 17 (the same bytes) C2 without a bang, -XX:+PreserveFramePointer (ReturnPoll.mix)",
        hex: "4881ec1800000048896c2410488bec4883c510",
        frame_words: 4,
        entry_before: 7,
        at: &[(7, PROLOGUE_ALLOCATED), (12, PROLOGUE_COMPLETE), (15, PROLOGUE_COMPLETE)],
        complete_from: None,
    },
    Case {
        what: "JDK 21 C2 without a bang, -XX:+PreserveFramePointer, entry barrier (ReturnPoll.mix)",
        hex: "4881ec1800000048896c2410488bec4883c5109041817f20010000000f8545000000",
        frame_words: 4,
        entry_before: 7,
        at: &[(7, PROLOGUE_ALLOCATED), (12, PROLOGUE_COMPLETE), (15, PROLOGUE_COMPLETE)],
        complete_from: Some(19),
    },
    Case {
        what: "JDK 25 C2 without a bang, -XX:+PreserveFramePointer, entry barrier (ReturnPoll.mix)",
        hex: "4881ec1800000048896c2410488bec4883c5109041817f20010000000f8542000000",
        frame_words: 4,
        entry_before: 7,
        at: &[(7, PROLOGUE_ALLOCATED), (12, PROLOGUE_COMPLETE), (15, PROLOGUE_COMPLETE)],
        complete_from: Some(19),
    },
];

#[test]
fn every_pc_of_real_prologues_gets_the_state_its_bytes_prove() {
    for case in CASES {
        let code = bytes(case.hex);
        for offset in 0..code.len() as u32 {
            let expected = match case.at.iter().find(|(o, _)| *o == offset) {
                _ if offset < case.entry_before => PROLOGUE_ENTRY,
                Some(&(_, state)) => state,
                None if case.complete_from.is_some_and(|from| offset >= from) => PROLOGUE_COMPLETE,
                // Inside an instruction: no pc stops there, so the bytes prove nothing.
                None => PROLOGUE_UNKNOWN,
            };
            assert_eq!(state_at(&code, offset, case.frame_words), expected, "{} at offset {offset}", case.what);
        }
    }
}

#[test]
fn a_prologue_that_does_not_match_its_frame_size_or_its_shape_proves_nothing() {
    for case in CASES {
        let code = bytes(case.hex);
        // Another frame size: the immediates no longer agree with the blob.
        for frame_words in [case.frame_words + 2, case.frame_words - 2] {
            for offset in 0..code.len() as u32 {
                assert_eq!(
                    state_at(&code, offset, frame_words),
                    PROLOGUE_UNKNOWN,
                    "{frame_words} words: {}",
                    case.what
                );
            }
        }
        // The last byte of `push %rbp` (then `push %rbx`) or of `sub`'s immediate changed.
        let mut changed = code.clone();
        changed[case.entry_before as usize - 1] ^= 0x06;
        for offset in 0..code.len() as u32 {
            assert_eq!(state_at(&changed, offset, case.frame_words), PROLOGUE_UNKNOWN, "changed: {}", case.what);
        }
    }
}

/// An nmethod made not entrant has its entry patched into a jump (`jmp` over the bang's
/// first bytes); a thread still in its prologue is not stepped.
#[test]
fn an_entry_patched_into_a_jump_proves_nothing() {
    let patched = [
        ("JDK 11", "448b560849bc00000000080000004d03d44d33e4493bc20f85430d58f8666690e9bbde53f8feff554883ec10", 4),
        ("JDK 17", "448b560849bb0000003bd07f00004d03d3493bc20f85a6daa4ff66900f1f4000e99bd4a4fffeff554881ec90000000", 20),
        ("JDK 21", "448b560849bb00000000080000004d03d3493bc20f85c63eabff66900f1f4000e9bbcda6fffeff554883ec2041817f20020000000f85b8000000", 6),
        ("JDK 25", "6690448b5608443b50080f85d0ffabffe94b8ea7ff000048896c241041817f20020000000f8526000000", 4),
    ];
    for (jdk, hex, frame_words) in patched {
        let code = bytes(hex);
        for offset in 0..code.len() as u32 {
            assert_eq!(state_at(&code, offset, frame_words), PROLOGUE_UNKNOWN, "{jdk} at {offset}");
        }
    }
}

#[test]
fn frames_too_small_to_hold_a_return_address_and_rbp_prove_nothing() {
    let code = bytes(CASES[0].hex);
    for frame_words in 0..2 {
        assert_eq!(state_at(&code, 0, frame_words), PROLOGUE_UNKNOWN);
    }
}
