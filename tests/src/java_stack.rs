//! Reading the Java frames of a `--json` stack (frames root first, as JSON objects with `name`
//! and `kind`), shared by the Java-frames and unwinder tests.

use serde_json::Value;

pub const JAVA_KINDS: [&str; 3] = ["java_jit", "java_inlined", "java_interpreted"];
pub const UNKNOWN_JIT: &str = "[unknown JIT code]";

/// A named Java frame.
pub fn is_java(frame: &Value) -> bool {
    JAVA_KINDS.contains(&frame["kind"].as_str().unwrap()) && frame["name"] != UNKNOWN_JIT
}

/// `com.acme.Foo.bar` from `long com.acme.Foo.bar(int)`.
pub fn short(frame: &Value) -> &str {
    let name = frame["name"].as_str().unwrap();
    let head = &name[..name.find('(').unwrap_or(name.len())];
    head.rsplit(' ').next().unwrap()
}

/// The innermost named Java frame (JoularJX's method of a sample) and its index.
pub fn leaf_java(frames: &[Value]) -> Option<(usize, &Value)> {
    frames.iter().enumerate().rev().find(|(_, f)| is_java(f))
}

/// A thread's stacks over all `--json` cycles: (frames root first, samples, energy µJ).
pub fn thread_stacks(cycles: &[Value], tid: u64) -> Vec<(&[Value], u64, f64)> {
    let mut out = Vec::new();
    for c in cycles {
        for t in c["threads"].as_array().unwrap().iter().filter(|t| t["tid"] == tid) {
            for s in t["stacks"].as_array().expect("threads[].stacks") {
                out.push((
                    s["frames"].as_array().unwrap().as_slice(),
                    s["samples"].as_u64().unwrap(),
                    s["energy_uj"].as_f64().unwrap(),
                ));
            }
        }
    }
    out
}
