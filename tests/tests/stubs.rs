//! Issue 24 acceptance, HotSpot stubs: on JVMs with no flags, samples in vtable and itable
//! stubs, arraycopy stubs and the crypto and checksum intrinsics keep their Java callers up to
//! `Thread.run`, a megamorphic call's work split is right, and each stub is named as the JVM
//! itself names it: the names are checked against `-XX:+PrintStubCode` (the JVM's own
//! `StubCodeDesc` list, printed as `StubRoutines::<name> [begin, end]`) of a separate run of
//! the same fixture on the same JDK. Compiled code an intrinsic pushed a word in (C2's
//! `char_array_compress`) keeps its callers too. Run as root by `cargo xtask test`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::Duration;

use joular_tests::java_stack::{is_java, leaf_java, short, thread_stacks};
use joular_tests::*;
use serde_json::Value;

/// The stub names the JVM prints with `-XX:+PrintStubCode` (`group::name [begin, end]`).
fn jvm_stub_names(jdk: u32) -> BTreeSet<String> {
    let java = java_launcher(jdk);
    let argv = java_cmd_bare_on(&java, "Stubs", &["1"], &["-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintStubCode"]);
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start java -XX:+PrintStubCode");
    let out = wait_bounded(child, Duration::from_secs(60));
    assert!(out.status.success(), "java -XX:+PrintStubCode failed: {}", String::from_utf8_lossy(&out.stderr));
    let names: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(" [0x")?;
            (name.contains("::") && !name.contains(' ') && rest.contains(", 0x")).then(|| name.to_owned())
        })
        .collect();
    assert!(names.len() > 50, "JDK {jdk}: PrintStubCode listed only {names:?}");
    names
}

/// The user frames of a stack (kernel frames follow them).
fn user_frames(frames: &[Value]) -> &[Value] {
    let n = frames.iter().position(|f| f["kind"] == "kernel").unwrap_or(frames.len());
    &frames[..n]
}

fn has_method(frames: &[Value], method: &str) -> bool {
    frames.iter().any(|f| is_java(f) && short(f) == method)
}

/// One thread's samples: in all, keeping `Thread.run` (and `caller`, when given), and per
/// stub leaf name (samples, those keeping the chain).
#[derive(Default)]
struct ThreadCount {
    total: u64,
    rooted: u64,
    /// Cut in a compiled method's prologue (`[truncated: prologue]`).
    prologue_cut: u64,
    /// Samples in HotSpot's hand-written copy routines ([`is_cfi_less_copy`]), and of those the
    /// ones that keep their chain.
    in_copy_routines: (u64, u64),
    stubs: BTreeMap<String, (u64, u64)>,
    leaf_methods: BTreeMap<String, u64>,
}

fn count(cycles: &[Value], tid: u64, caller: &str) -> ThreadCount {
    let mut c = ThreadCount::default();
    for (frames, samples, _) in thread_stacks(cycles, tid) {
        let user = user_frames(frames);
        let chain = has_method(user, "java.lang.Thread.run") && has_method(user, caller);
        c.total += samples;
        if frames.first().is_some_and(|f| f["name"] == "[truncated: prologue]") {
            c.prologue_cut += samples;
        }
        if frames.iter().any(|f| f["name"].as_str().is_some_and(is_cfi_less_copy)) {
            c.in_copy_routines.0 += samples;
            c.in_copy_routines.1 += if chain { samples } else { 0 };
        }
        c.rooted += if chain { samples } else { 0 };
        if let Some(leaf) = user.last().filter(|f| f["kind"] == "stub") {
            let e = c.stubs.entry(leaf["name"].as_str().unwrap().to_owned()).or_default();
            e.0 += samples;
            e.1 += if chain { samples } else { 0 };
        }
        if let Some((_, m)) = leaf_java(user) {
            *c.leaf_methods.entry(short(m).to_owned()).or_default() += samples;
        }
    }
    c
}

/// HotSpot's hand-written x86_64 copy routines (`os_cpu/linux_x86/linux_x86_64.S`:
/// `_Copy_conjoint_jshorts_atomic` and its kin, with local labels `acs_CopyRight`,
/// `aci_CopyLeft`...). The assembly carries no CFI: they are stepped by the rows
/// `joular_user::unwind::leaf_gaps` proves from their bytes. JDK 11 to 25 run them for the
/// arraycopy workload on a CPU without AVX-512 (2.1-3.7% of that thread's samples on the AVX2
/// test machine, 2026-11-29, all cut before those rows); on an AVX-512 CPU the JVM's `_avx3`
/// stubs run instead and there are none.
fn is_cfi_less_copy(name: &str) -> bool {
    name.starts_with("_Copy_") || name.ends_with("_CopyRight") || name.ends_with("_CopyLeft")
}

/// Shares (%) of the four implementations among the samples whose Java leaf is one of them.
fn split(c: &ThreadCount, class: &[&str; 4]) -> Vec<f64> {
    let counts: Vec<u64> =
        class.iter().map(|k| c.leaf_methods.get(&format!("Stubs${k}.work")).copied().unwrap_or(0)).collect();
    let sum = counts.iter().sum::<u64>().max(1) as f64;
    counts.iter().map(|&n| n as f64 * 100.0 / sum).collect()
}

/// Profiles the fixture running `workloads` for 10 s at 1 kHz (enough samples for a split
/// within 3 pp): its cycles after the first
/// two (the first loads the native unwind rows while the JIT warms up), and the JVM.
fn profile_workloads(jdk: u32, workloads: &str) -> (Vec<Value>, Jvm) {
    let jvm = Jvm::start_bare_on(&java_launcher(jdk), "Stubs", &["40", workloads], &[]);
    let run = profile_outputs(jvm.pid(), &["--duration", "12", "--frequency", "1000"]);
    (run.cycles[2..].to_vec(), jvm)
}

/// The share of a thread's samples that must keep their chain: of all of them, or of those
/// not cut in a compiled method's prologue.
#[derive(Clone, Copy)]
struct Floor {
    share: f64,
    without_prologue_cuts: bool,
}

/// The name of HotSpot's interpreter/compiled adapters' blob.
const ADAPTERS: &str = "I2C/C2I adapters";

/// Each thread's samples, checked for their callers (`floor` of them, and 95% of those in
/// stubs other than the adapters, keep their chain), reported in `report`.
fn count_threads(
    jdk: u32,
    cycles: &[Value],
    jvm: &Jvm,
    callers: &[(&'static str, &str)],
    floor: Floor,
    report: &mut String,
    failures: &mut Vec<String>,
) -> BTreeMap<&'static str, ThreadCount> {
    let mut counts = BTreeMap::new();
    for &(thread, caller) in callers {
        let c = count(cycles, u64::from(jvm.tid_of(thread)), caller);
        // The I2C/C2I adapters are not held to the stubs' 95%: the walker cannot step out of
        // an adapter yet (it moves the return address off the stack; issue 24 leaves this
        // open), and since the sampler's reports are named while a cycle is named, their pcs
        // are named as adapters rather than left unknown. They still count in the thread's
        // floor below, as every sample does.
        let judged_stubs = || c.stubs.iter().filter(|(name, _)| name.as_str() != ADAPTERS).map(|(_, s)| s);
        let stub_samples: u64 = judged_stubs().map(|s| s.0).sum();
        let stub_rooted: u64 = judged_stubs().map(|s| s.1).sum();
        report.push_str(&format!(
            "JDK {jdk} {thread}: {}/{} samples keep {caller} and Thread.run ({:.1}%), {} cut in a prologue, {}/{} in CFI-less copy routines keep them; stub leaves {stub_rooted}/{stub_samples} keep them: {:?}\n",
            c.rooted,
            c.total,
            c.rooted as f64 * 100.0 / c.total.max(1) as f64,
            c.prologue_cut,
            c.in_copy_routines.1,
            c.in_copy_routines.0,
            c.stubs
        ));
        let judged = if floor.without_prologue_cuts { c.total - c.prologue_cut } else { c.total };
        if c.total < 100 || (c.rooted as f64) < floor.share * judged as f64 {
            failures.push(format!("{thread}: {} of {} samples keep {caller} and Thread.run", c.rooted, c.total));
        }
        let (copy_samples, copy_rooted) = c.in_copy_routines;
        if (copy_rooted as f64) < 0.95 * copy_samples as f64 {
            failures.push(format!(
                "{thread}: {copy_rooted} of {copy_samples} samples in libjvm's copy routines keep their callers"
            ));
        }
        if (stub_rooted as f64) < 0.95 * stub_samples as f64 {
            failures.push(format!("{thread}: {stub_rooted} of {stub_samples} stub samples keep their callers"));
        }
        counts.insert(thread, c);
    }
    counts
}

fn stubs_keep_callers_and_names(jdk: u32) {
    let table = jvm_stub_names(jdk);
    let mut report = String::new();
    let mut failures = Vec::new();
    // Megamorphic calls: the stubs are named by kind and charged to their callers, and each
    // implementation gets its share of the work.
    let (cycles, jvm) = profile_workloads(jdk, "virtual,interface");
    let callers = [("virtual", "Stubs.megaVirtual"), ("interface", "Stubs.megaInterface")];
    // `tiny` is nearly all prologue and epilogue, and a compiled method caught in its prologue
    // is cut (not a stub's doing): those samples are reported, not judged.
    let counts = count_threads(
        jdk,
        &cycles,
        &jvm,
        &callers,
        Floor { share: 0.98, without_prologue_cuts: true },
        &mut report,
        &mut failures,
    );
    let mut lost = lost_stacks(&cycles, &jvm, &callers);
    for (thread, stub, classes) in [
        ("virtual", "vtable stub", ["One", "Two", "Three", "Four"]),
        ("interface", "itable stub", ["JobOne", "JobTwo", "JobThree", "JobFour"]),
    ] {
        let c = &counts[thread];
        let shares = split(c, &classes);
        report.push_str(&format!(
            "JDK {jdk} {thread}: implementation split {shares:.1?} (expected 10/20/30/40); Java leaves {:?}\n",
            c.leaf_methods
        ));
        for (share, expected) in shares.iter().zip([10.0, 20.0, 30.0, 40.0]) {
            if (share - expected).abs() > 3.0 {
                failures.push(format!("{thread}: split {shares:.1?}, expected 10/20/30/40 within 3 pp"));
                break;
            }
        }
        let named = c.stubs.get(stub).map_or(0, |s| s.0);
        if named < 5 {
            failures.push(format!("{thread}: {named} samples in a `{stub}` frame: {:?}", c.stubs));
        }
        let other = if stub == "vtable stub" { "itable stub" } else { "vtable stub" };
        if c.stubs.get(other).map_or(0, |s| s.0) * 10 > named.max(1) {
            failures.push(format!("{thread}: `{other}` frames in a thread that makes {stub} calls: {:?}", c.stubs));
        }
    }
    drop(jvm);
    // Arraycopy and intrinsics: whole chains, and every `StubRoutines::` leaf is a name from
    // the JVM's own table, the thread's main stub the one of its algorithm.
    let (cycles, jvm) = profile_workloads(jdk, "arraycopy,string,sha256,aesgcm,crc32");
    let callers = [
        ("arraycopy", "Stubs.copyArrays"),
        ("string", "Stubs.editStrings"),
        ("sha256", "Stubs.digest"),
        ("aesgcm", "Stubs.encrypt"),
        ("crc32", "Stubs.checksum"),
    ];
    // 97%: AES/GCM loses a few samples under `GHASH.processBlocks`, a compiled frame whose
    // caller is sometimes unmapped (not a stub's doing).
    let counts = count_threads(
        jdk,
        &cycles,
        &jvm,
        &callers,
        Floor { share: 0.97, without_prologue_cuts: false },
        &mut report,
        &mut failures,
    );
    lost.push_str(&lost_stacks(&cycles, &jvm, &callers));
    // AES/GCM's time goes to its AES stubs or to GHASH's (`ghash_processBlocks`), by JDK.
    for (thread, expected, least) in [
        ("sha256", &["sha256"][..], 20),
        ("aesgcm", &["aes", "ghash"][..], 3),
        ("crc32", &["updatebytescrc32"][..], 20),
    ] {
        let c = &counts[thread];
        for name in c.stubs.keys().filter(|n| n.contains("::")) {
            // A name is right or wrong, not a matter of samples: never retried.
            assert!(
                table.contains(name),
                "JDK {jdk} {thread}: stub `{name}` is not in the JVM's PrintStubCode table\n{report}"
            );
        }
        let top = c.stubs.iter().filter(|(n, _)| n.contains("::")).max_by_key(|(_, s)| s.0);
        match top {
            Some((name, s)) if expected.iter().any(|e| name.to_lowercase().contains(e)) && s.0 >= least => {}
            _ => failures.push(format!("{thread}: the most sampled stub is not a {expected:?} one: {:?}", c.stubs)),
        }
    }
    eprint!("{report}");
    // Every bar above counts samples of a real JVM: a miss is statistical, measured once more.
    statistical::check(failures.is_empty(), || format!("JDK {jdk}: {failures:#?}\n{report}{lost}"));
}

/// Stacks that lost their callers, for the failure message.
fn lost_stacks(cycles: &[Value], jvm: &Jvm, callers: &[(&str, &str)]) -> String {
    let mut out = Vec::new();
    for &(thread, _) in callers {
        for (frames, n, _) in thread_stacks(cycles, u64::from(jvm.tid_of(thread))) {
            if has_method(frames, "java.lang.Thread.run") {
                continue;
            }
            let names: Vec<&str> = frames.iter().map(|x| x["name"].as_str().unwrap_or("?")).collect();
            out.push(format!("{thread} {n} {}", names.join(";")));
        }
    }
    out.sort_by_key(|l| std::cmp::Reverse(l.split(' ').nth(1).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0)));
    out.truncate(20);
    out.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn jdk11_stubs_keep_java_callers_and_jvm_names() {
    statistical::two_attempts("jdk11_stubs_keep_java_callers_and_jvm_names", || stubs_keep_callers_and_names(11));
}

#[test]
fn jdk17_stubs_keep_java_callers_and_jvm_names() {
    statistical::two_attempts("jdk17_stubs_keep_java_callers_and_jvm_names", || stubs_keep_callers_and_names(17));
}

#[test]
fn jdk21_stubs_keep_java_callers_and_jvm_names() {
    statistical::two_attempts("jdk21_stubs_keep_java_callers_and_jvm_names", || stubs_keep_callers_and_names(21));
}

#[test]
fn jdk25_stubs_keep_java_callers_and_jvm_names() {
    statistical::two_attempts("jdk25_stubs_keep_java_callers_and_jvm_names", || stubs_keep_callers_and_names(25));
}

/// A compiled method whose inlined intrinsic pushed a word (C2's `char_array_compress`,
/// `push len` ... `pop result`) keeps its callers: the leaf step takes the return address a
/// word up when the one at the frame's base is not in the code cache. Before that step this
/// fixture's samples kept their callers in 90.4-94.8% on JDK 11 and 17 (2026-12-02) and missed
/// the 99% bar twice on JDK 21, and H2's `BigDecimal(String)` ~1.2% of its samples on JDK 17; JDK 25's
/// intrinsic pushes nothing (99.97% kept before), its test guards the step's other cases.
fn samples_in_a_pushed_word_keep_their_callers(jdk: u32) {
    let flags = ["-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,CompressLoop::*"];
    let jvm = Jvm::start_bare_on(&java_launcher(jdk), "CompressLoop", &["40"], &flags);
    let run = profile_outputs(jvm.pid(), &["--duration", "8", "--frequency", "1000"]);
    let c = count(&run.cycles[2..], u64::from(jvm.tid_of("compressor")), "CompressLoop.spin");
    let rooted = c.rooted as f64 / c.total.max(1) as f64;
    eprintln!("JDK {jdk}: {} of {} compressor samples keep CompressLoop.spin and Thread.run", c.rooted, c.total);
    statistical::check(c.total >= 2000 && rooted >= 0.99, || {
        format!(
            "JDK {jdk}: {:.2}% of {} compressor samples keep CompressLoop.spin and Thread.run (bar 99%); lost:\n{}",
            rooted * 100.0,
            c.total,
            lost_stacks(&run.cycles[2..], &jvm, &[("compressor", "CompressLoop.spin")])
        )
    });
}

#[test]
fn jdk17_samples_in_a_pushed_word_keep_their_callers() {
    statistical::two_attempts("jdk17_samples_in_a_pushed_word_keep_their_callers", || {
        samples_in_a_pushed_word_keep_their_callers(17)
    });
}

#[test]
fn jdk21_samples_in_a_pushed_word_keep_their_callers() {
    statistical::two_attempts("jdk21_samples_in_a_pushed_word_keep_their_callers", || {
        samples_in_a_pushed_word_keep_their_callers(21)
    });
}

#[test]
fn jdk11_samples_in_a_pushed_word_keep_their_callers() {
    statistical::two_attempts("jdk11_samples_in_a_pushed_word_keep_their_callers", || {
        samples_in_a_pushed_word_keep_their_callers(11)
    });
}

#[test]
fn jdk25_samples_in_a_pushed_word_keep_their_callers() {
    statistical::two_attempts("jdk25_samples_in_a_pushed_word_keep_their_callers", || {
        samples_in_a_pushed_word_keep_their_callers(25)
    });
}
