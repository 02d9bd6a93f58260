//! Issue 24 acceptance, native code without frame pointers: Java callers are kept under a JNI
//! library built with -fomit-frame-pointer, and under glibc's syscall wrappers and the vDSO
//! (`Files.readSymbolicLink`, `File.list`, `System.currentTimeMillis`), on JVMs with no flags,
//! JDK 17 and 21: the sampler steps native frames by their files' call-frame information.
//! Run as root by `cargo xtask test`.

use joular_tests::java_stack::{is_java, short, thread_stacks};
use joular_tests::*;
use serde_json::Value;

/// A worker thread's samples, those keeping `method` and `java.lang.Thread.run` above it (and,
/// in the JNI library, `middle` above `leaf`: frame pointers skip it), those with no Java
/// frame, and those whose native root names libc's `start_thread` (a local symbol of the
/// stripped libc: only its debug file, Debian's `libc6-dbg`, names it).
fn chains(cycles: &[Value], tid: u64, method: &str) -> (u64, u64, u64, u64) {
    let (mut total, mut kept, mut no_java, mut start_thread) = (0, 0, 0, 0);
    for (frames, samples, _) in thread_stacks(cycles, tid) {
        total += samples;
        let has = |name: &str| frames.iter().any(|f| is_java(f) && short(f) == name);
        let native = |name: &str| frames.iter().any(|f| f["name"] == name);
        let whole_native_chain = !native("leaf") || native("middle");
        if has(method) && has("java.lang.Thread.run") && whole_native_chain {
            kept += samples;
        }
        if !frames.iter().any(is_java) {
            no_java += samples;
        }
        if native("start_thread") {
            start_thread += samples;
        }
    }
    (total, kept, no_java, start_thread)
}

fn native_callers_are_kept(jdk: u32) {
    let dir = tempfile::tempdir().unwrap();
    let library = build_jni_library(dir.path(), "native_unwind_spin.c", "libnativeunwind.so");
    let jvm = Jvm::start_bare_on(&java_launcher(jdk), "NativeUnwind", &["40", library.to_str().unwrap()], &[]);
    let run = profile_outputs(jvm.pid(), &["--duration", "12", "--frequency", "250"]);
    // The first cycle is the one the rows load in (some 2 s for libjvm's, on a busy machine):
    // its native frames are stepped by frame pointers, as before.
    let cycles = run.cycles[1..].to_vec();
    let mut report = String::new();
    let mut failures = Vec::new();
    for (thread, method, floor) in [
        ("jni", "NativeUnwind.jniCaller", 0.99),
        ("readlink", "NativeUnwind.readLinks", 0.98),
        ("list", "NativeUnwind.listDir", 0.98),
        ("millis", "NativeUnwind.millis", 0.98),
    ] {
        let tid = u64::from(jvm.tid_of(thread));
        let (total, kept, no_java, start_thread) = chains(&cycles, tid, method);
        let share = kept as f64 / total.max(1) as f64;
        let named_root = start_thread as f64 / total.max(1) as f64;
        report.push_str(&format!(
            "JDK {jdk} {thread}: {kept}/{total} samples keep {method} and Thread.run ({:.1}%), {no_java} with no Java frame, {start_thread} rooted in start_thread\n",
            share * 100.0
        ));
        if total < 200 || share < floor {
            failures.push(format!("{thread}: {:.1}% of {total} samples (floor {:.0}%)", share * 100.0, floor * 100.0));
        }
        if named_root < floor {
            failures.push(format!(
                "{thread}: start_thread named in {:.1}% of {total} samples (floor {:.0}%)",
                named_root * 100.0,
                floor * 100.0
            ));
        }
    }
    eprint!("{report}");
    statistical::check(failures.is_empty(), || {
        format!(
            "JDK {jdk}: callers lost: {failures:?}\n{report}stacks without their callers:\n{}",
            lost_stacks(&cycles, &jvm)
        )
    });
}

/// The stacks of the workers that lost their callers, for the failure message.
fn lost_stacks(cycles: &[Value], jvm: &Jvm) -> String {
    let mut out = Vec::new();
    for thread in ["jni", "readlink", "list", "millis"] {
        for (frames, n, _) in thread_stacks(cycles, u64::from(jvm.tid_of(thread))) {
            if frames.iter().any(|f| is_java(f) && short(f) == "java.lang.Thread.run") {
                continue;
            }
            let names: Vec<&str> = frames.iter().map(|x| x["name"].as_str().unwrap_or("?")).collect();
            out.push(format!("{thread} {n} {}", names.join(";")));
        }
    }
    out.truncate(30);
    out.join("\n")
}

#[test]
fn jdk17_native_unwind_keeps_java_callers_of_native_code_without_frame_pointers() {
    statistical::two_attempts("jdk17_native_unwind_keeps_java_callers_of_native_code_without_frame_pointers", || {
        native_callers_are_kept(17)
    });
}

#[test]
fn jdk21_native_unwind_keeps_java_callers_of_native_code_without_frame_pointers() {
    statistical::two_attempts("jdk21_native_unwind_keeps_java_callers_of_native_code_without_frame_pointers", || {
        native_callers_are_kept(21)
    });
}

/// `--unwind-cache`: the first run builds every file's rows and keeps them; a second run of
/// another profiler process reads them back instead (the vDSO, a page in memory, is always
/// read anew), and its stacks keep their native callers as well: rows read back are the rows
/// built. The directory is created 0700.
#[test]
fn unwind_rows_kept_on_disk_serve_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let library = build_jni_library(dir.path(), "native_unwind_spin.c", "libnativeunwind.so");
    let jvm = Jvm::start_bare_on(&java_launcher(17), "NativeUnwind", &["40", library.to_str().unwrap()], &[]);
    let cache = dir.path().join("cache").join("unwind");
    let flags = ["--duration", "5", "--frequency", "250", "--unwind-cache", cache.to_str().unwrap()];
    let counts = |stderr: &str| -> (u64, u64) {
        let line = stderr.lines().find(|l| l.contains("native unwind rows:")).unwrap_or_else(|| panic!("{stderr}"));
        let built = line.split("rows: ").nth(1).and_then(|t| t.split(' ').next()).and_then(|n| n.parse().ok());
        let cached =
            line.split(" file(s) built (").nth(1).and_then(|t| t.split(' ').next()).and_then(|n| n.parse().ok());
        (built.unwrap_or_else(|| panic!("{line}")), cached.unwrap_or_else(|| panic!("{line}")))
    };
    let first = profile_outputs(jvm.pid(), &flags);
    let (built, cached) = counts(&first.stderr);
    assert!(built >= 5 && cached == 0, "first run: {built} built, {cached} from the cache\n{}", first.stderr);
    let entries = std::fs::read_dir(&cache)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".rows"))
        .count();
    assert_eq!(entries as u64, built - 1, "every file's rows but the vDSO's are kept");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&cache).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o700);
    let second = profile_outputs(jvm.pid(), &flags);
    assert_eq!(counts(&second.stderr), (built, built - 1), "second run\n{}", second.stderr);
    let tid = u64::from(jvm.tid_of("jni"));
    let (total, kept, _, _) = chains(&second.cycles[1..], tid, "NativeUnwind.jniCaller");
    assert!(
        total >= 100 && kept as f64 >= 0.99 * total as f64,
        "second run: {kept} of {total} jni samples keep their callers"
    );
}
