//! Issue 24, signal frames: a JNI function spinning in a signal handler is sampled with the
//! handler, libc's `__restore_rt` (the signal frame), the native function the signal
//! interrupted and its callers up to the Java thread's root, on a JVM with no flags: the
//! sampler steps out of the signal frame with the registers the kernel saved in it.
//! Run as root by `cargo xtask test`.

use std::time::Duration;

use joular_tests::java_stack::{is_java, short, thread_stacks};
use joular_tests::*;
use serde_json::Value;

/// Root first, the frames a stack sampled in the handler has, in this order (gcc may add a
/// suffix such as `.isra.0` to a static function's name).
const CHAIN: [&str; 7] = [
    "java.lang.Thread.run",
    "SignalSpin.caller",
    "Java_SignalSpin_spin",
    "spin_outer",
    "spin_inner",
    "__restore_rt",
    "signal_spin_handler",
];

fn name(frame: &Value) -> &str {
    if is_java(frame) {
        short(frame)
    } else {
        frame["name"].as_str().unwrap_or("?")
    }
}

/// Whether the root-first frames hold `CHAIN` in order, each link right after the one before
/// it from `Java_SignalSpin_spin` on (no native frame lost or made up in between).
fn has_chain(frames: &[Value]) -> bool {
    let names: Vec<&str> = frames.iter().map(name).collect();
    let find = |from: usize, want: &str| {
        names[from..].iter().position(|n| *n == want || n.starts_with(&format!("{want}."))).map(|i| from + i)
    };
    let (Some(run), Some(caller)) = (find(0, CHAIN[0]), find(0, CHAIN[1])) else { return false };
    let Some(mut at) = find(caller, CHAIN[2]) else { return false };
    if run > caller {
        return false;
    }
    for want in &CHAIN[3..] {
        match find(at + 1, want) {
            Some(next) if next == at + 1 => at = next,
            _ => return false,
        }
    }
    true
}

/// The `signal` thread's stacks over `seconds` of profiling, after the first cycle (the one
/// the rows load in; the signal arrives 0.2 s in).
fn profile_signal_thread(jvm: &Jvm, seconds: u32) -> Vec<(Vec<Value>, u64)> {
    let run = profile_outputs(jvm.pid(), &["--duration", &seconds.to_string(), "--frequency", "250"]);
    let cycles = run.cycles[1..].to_vec();
    let tid = u64::from(jvm.tid_of("signal"));
    thread_stacks(&cycles, tid).into_iter().map(|(frames, samples, _)| (frames.to_vec(), samples)).collect()
}

#[test]
fn jdk17_native_unwind_steps_out_of_a_signal_frame_to_the_interrupted_function() {
    statistical::two_attempts(
        "jdk17_native_unwind_steps_out_of_a_signal_frame_to_the_interrupted_function",
        native_signal_attempt,
    );
}

/// One attempt; the 98% floor is a statistical bar.
fn native_signal_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let library = build_jni_library(dir.path(), "signal_spin.c", "libsignalspin.so");
    let jvm = Jvm::start_bare_on(&java_launcher(17), "SignalSpin", &["30", library.to_str().unwrap()], &[]);
    let (mut total, mut kept) = (0, 0);
    let mut lost = Vec::new();
    for (frames, samples) in profile_signal_thread(&jvm, 8) {
        let frames = frames.as_slice();
        total += samples;
        if has_chain(frames) {
            kept += samples;
        } else if lost.len() < 20 {
            lost.push(format!("{samples} {}", frames.iter().map(name).collect::<Vec<_>>().join(";")));
        }
    }
    let share = kept as f64 / total.max(1) as f64;
    eprintln!("signal: {kept}/{total} samples keep the whole chain ({:.1}%)", share * 100.0);
    statistical::check(total >= 200 && share >= 0.98, || {
        format!("{kept} of {total} samples keep {CHAIN:?} (floor 98%); the others:\n{}", lost.join("\n"))
    });
}

/// A signal that interrupts compiled Java code: the handler's stacks go on through the signal
/// frame to the interrupted Java frame, stepped where it was (it is in no call, and may be in
/// its prologue), and its callers up to the thread's root.
#[test]
fn jdk17_java_code_a_signal_interrupted_keeps_its_callers() {
    statistical::two_attempts("jdk17_java_code_a_signal_interrupted_keeps_its_callers", java_signal_attempt);
}

/// One attempt; the 98% floor is a statistical bar.
fn java_signal_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let library = build_jni_library(dir.path(), "signal_spin.c", "libsignalspin.so");
    let jvm = Jvm::start_bare_on(&java_launcher(17), "SignalSpin", &["30", library.to_str().unwrap(), "java"], &[]);
    // The signal arrives after 1.5 s of warm-up in Java: profile past it.
    std::thread::sleep(Duration::from_secs(2));
    let (mut total, mut kept) = (0, 0);
    let mut lost = Vec::new();
    for (frames, samples) in profile_signal_thread(&jvm, 6) {
        let names: Vec<&str> = frames.iter().map(name).collect();
        let Some(restore) = names.iter().position(|n| *n == "__restore_rt") else { continue };
        total += samples;
        let outermost_java = frames.iter().find(|f| is_java(f)).map(name);
        let whole = outermost_java == Some("java.lang.Thread.run")
            && names[..restore].contains(&"SignalSpin.javaCaller")
            && restore > 0
            && is_java(&frames[restore - 1])
            && names.get(restore + 1) == Some(&"signal_spin_handler");
        if whole {
            kept += samples;
        } else if lost.len() < 20 {
            lost.push(format!("{samples} {}", names.join(";")));
        }
    }
    let share = kept as f64 / total.max(1) as f64;
    eprintln!(
        "signal in Java: {kept}/{total} handler samples keep the interrupted Java frame and its callers ({:.1}%)",
        share * 100.0
    );
    statistical::check(total >= 200 && share >= 0.98, || {
        format!(
            "{kept} of {total} handler samples keep Thread.run, SignalSpin.javaCaller and the interrupted Java frame \
             under __restore_rt (floor 98%); the others:\n{}",
            lost.join("\n")
        )
    });
}
