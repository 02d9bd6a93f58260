//! Compiled Java code that calls native code directly (a leaf runtime call, no safepoint, no
//! debug info of its own) is charged to the method that made the call. C2 turns
//! `BigInteger.montgomerySquare`/`montgomeryMultiply` into calls of libjvm's
//! `SharedRuntime::montgomery_square`/`montgomery_multiply`; with -XX:+DebugNonSafepoints the
//! PcDesc at such a call's return address describes the code after it, which was
//! `BigInteger.equals` (inlined into `oddModPow` at its entry) on JDK 17. The call's scope is
//! the PcDesc before it.

use std::time::Duration;

use joular_tests::java_stack::{is_java, short, UNKNOWN_JIT};
use joular_tests::*;
use serde_json::Value;

/// The methods that are on the stack when C2's Montgomery intrinsics call libjvm: the
/// intrinsic's own method and the methods it is inlined into.
const CALLERS: [&str; 5] = [
    "java.math.BigInteger.montgomerySquare",
    "java.math.BigInteger.montgomeryMultiply",
    "java.math.BigInteger.implMontgomerySquare",
    "java.math.BigInteger.implMontgomeryMultiply",
    "java.math.BigInteger.oddModPow",
];

fn montgomery_callers(jdk: u32) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.jsonl");
    let out_dir = dir.path().join("results");
    let mut args: Vec<String> =
        ["record", "--json", json.to_str().unwrap(), "--output"].iter().map(|s| s.to_string()).collect();
    args.extend([out_dir.display().to_string(), "--".into()]);
    // 4096-bit RSA: C2 compiles oddModPow within the run and its time is in the intrinsics.
    let flags = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints"];
    args.extend(java_cmd_bare_on(&java_launcher(jdk), "Rsa", &["4096", "96"], &flags));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = profile(&argv, Duration::from_secs(90));
    assert_success(&out);
    let (mut in_runtime, mut wrong) = (0u64, Vec::new());
    for cycle in read_jsonl(&json) {
        for thread in cycle["threads"].as_array().unwrap() {
            for stack in thread["stacks"].as_array().expect("threads[].stacks") {
                let frames = stack["frames"].as_array().unwrap();
                let name = |f: &Value| f["name"].as_str().unwrap_or_default().to_owned();
                // Root first: the last libjvm Montgomery frame's caller is the frame before it.
                let Some(at) = frames.iter().position(|f| name(f).starts_with("SharedRuntime::montgomery_")) else {
                    continue;
                };
                let samples = stack["samples"].as_u64().unwrap();
                in_runtime += samples;
                let caller = frames[..at].iter().rev().find(|f| is_java(f) || name(f) == UNKNOWN_JIT);
                match caller {
                    Some(f) if name(f) == UNKNOWN_JIT || CALLERS.contains(&short(f)) => {}
                    other => wrong.push((other.map(name), samples)),
                }
            }
        }
    }
    assert!(
        in_runtime >= 50,
        "JDK {jdk}: only {in_runtime} samples in SharedRuntime::montgomery_*: C2's intrinsic did not run\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        wrong.is_empty(),
        "JDK {jdk}: of {in_runtime} samples in SharedRuntime::montgomery_*, callers other than {CALLERS:?}: {wrong:?}"
    );
}

#[test]
fn jdk17_a_leaf_runtime_call_is_charged_to_the_method_that_made_it() {
    montgomery_callers(17);
}

#[test]
fn jdk21_a_leaf_runtime_call_is_charged_to_the_method_that_made_it() {
    montgomery_callers(21);
}

#[test]
fn jdk25_a_leaf_runtime_call_is_charged_to_the_method_that_made_it() {
    montgomery_callers(25);
}
