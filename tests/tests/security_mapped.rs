//! Issue 22, item 2: a process truncates or rewrites a library it has mapped while the root
//! profiler names its frames. The profiler used to map the target's file and died of SIGBUS
//! (rc 135), or its symbols thread panicked on data changing under a sort. Here a real library
//! (35 MB of data, named functions, and a symbol table large enough that parsing it takes a
//! while) is built with gcc, loaded by a real process run as `nobody` that spins in it, and
//! attacked under `--pid` and `--all`. Each run must end normally with its results, keep its
//! one-second cycles, stay within its memory, name the spinner's functions before the attack
//! and another process's functions all along, and say what it could not name.

use std::io::Read;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use joular_tests::attack::nobody_cmd;
use joular_tests::*;

const RUN_S: u64 = 8;
/// Cycles written before the attack starts: their stacks must be named.
const CLEAN_CYCLES: usize = 2;
const ATTACK: Duration = Duration::from_secs(4);
/// Named functions of the library (the spinner calls each in turn).
const NAMED_FUNCTIONS: usize = 200;
/// Extra one-byte functions: a symbol table of some megabytes, slow enough to parse that an
/// attack lands while it is read.
const EXTRA_SYMBOLS: usize = 150_000;
/// The run's peak RSS stays under the unit's MemoryMax.
const MAX_RSS_KB: i64 = 512 * 1024;

/// The library and the program that loads it, built once for every test.
struct Fixture {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    lib: PathBuf,
    spinner: PathBuf,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(build_fixture)
}

fn build_fixture() -> Fixture {
    // In memory: each attack round rewrites tens of MB, which on a disk would throttle every
    // writer of the machine behind its writeback, the profiler's result files included (a test of
    // disk load, not of mapped files).
    let dir = tempfile::Builder::new().prefix("joular-mapped-").tempdir_in("/dev/shm").unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().to_owned();
    let mut c = String::from("const char mapped_padding[35 << 20] = {1};\n");
    for i in 0..NAMED_FUNCTIONS {
        c += &format!(
            "__attribute__((noinline)) unsigned long mapped_fn_{i}(unsigned long x) {{ for (int i = 0; i < 20000; i++) x = x * {}UL + mapped_padding[i & 7]; return x; }}\n",
            6364136223846793005u64 + 2 * i as u64
        );
    }
    // Direct calls through a switch: nothing the loader relocates, so the code keeps running
    // once a truncated file is restored (a truncation also drops the private copies of pages).
    c += &format!("__attribute__((noinline, visibility(\"default\"))) unsigned long mapped_spin(unsigned long x, unsigned k) {{ for (int j = 0; j < 20; j++, k += 7) switch (k % {NAMED_FUNCTIONS}) {{\n");
    for i in 0..NAMED_FUNCTIONS {
        c += &format!("case {i}: x = mapped_fn_{i}(x); break;\n");
    }
    c += "} return x ^ 1; }\n";
    std::fs::write(path.join("lib.c"), c).unwrap();
    let asm = format!(
        ".text\n.macro extra\n.hidden extra_\\@\n.type extra_\\@, @function\nextra_\\@:\nret\n.size extra_\\@, 1\n.endm\n.rept {EXTRA_SYMBOLS}\nextra\n.endr\n.section .note.GNU-stack,\"\",@progbits\n"
    );
    std::fs::write(path.join("extra.S"), asm).unwrap();
    // The spinner survives its library's truncation: a fault waits and retries.
    std::fs::write(
        path.join("spinner.c"),
        r#"#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static sigjmp_buf env;
static void on_fault(int sig) { (void)sig; siglongjmp(env, 1); }
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    unsigned long (*spin)(unsigned long, unsigned) = (unsigned long (*)(unsigned long, unsigned))dlsym(h, "mapped_spin");
    struct sigaction sa = {0};
    sa.sa_handler = on_fault;
    sa.sa_flags = SA_NODEFER;
    sigaction(SIGBUS, &sa, 0);
    sigaction(SIGSEGV, &sa, 0);
    printf("ready\n");
    fflush(stdout);
    volatile unsigned long x = 1;
    volatile unsigned k = 0;
    if (sigsetjmp(env, 1)) usleep(1000);
    for (;;) { x = spin(x, k); k += 20 * 7; }
}
"#,
    )
    .unwrap();
    let gcc = |args: &[&str]| {
        let out = Command::new("gcc").args(args).current_dir(&path).output().expect("gcc");
        assert!(out.status.success(), "gcc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    gcc(&[
        "-O1",
        "-fno-omit-frame-pointer",
        "-fvisibility=hidden",
        "-shared",
        "-fPIC",
        "-o",
        "libmapped.so",
        "lib.c",
        "extra.S",
    ]);
    gcc(&["-O1", "-fno-omit-frame-pointer", "-o", "spinner", "spinner.c", "-ldl"]);
    let lib = path.join("libmapped.so");
    let size = std::fs::metadata(&lib).unwrap().len();
    assert!(size > 35 << 20, "a 35 MB library: {size} bytes");
    Fixture { spinner: path.join("spinner"), lib, dir: path, _dir: dir }
}

/// A spinner (as nobody) in its own copy of the library; killed on drop.
struct Spinner {
    child: KillOnDrop,
    lib: PathBuf,
}

impl Spinner {
    fn start(name: &str) -> Self {
        let f = fixture();
        let lib = f.dir.join(name);
        std::fs::copy(&f.lib, &lib).unwrap();
        let mut child =
            nobody_cmd(&[f.spinner.to_str().unwrap(), lib.to_str().unwrap()]).stdout(Stdio::piped()).spawn().unwrap();
        let mut ready = [0u8; 6];
        child.stdout.take().unwrap().read_exact(&mut ready).expect("the spinner starts");
        assert_eq!(&ready, b"ready\n");
        Spinner { child: KillOnDrop::new(child), lib }
    }

    /// The spinner's own pid (setpriv execs it).
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.child.kill_now();
        let _ = std::fs::remove_file(&self.lib);
    }
}

#[derive(Clone, Copy, Debug)]
enum Attack {
    /// Truncate to 0 bytes, then write the library back (as `cat lib > mapped.so` does).
    Truncate,
    /// Overwrite the last 40% (symbol tables, section headers) with garbage, then put it back,
    /// the file keeping its size all along.
    RewriteTail,
}

/// Attacks `lib` until `stop`; returns the rounds done.
fn attack(lib: &Path, how: Attack, stop: &AtomicBool) -> u32 {
    let original = std::fs::read(lib).unwrap();
    let tail_at = original.len() * 3 / 5;
    let garbage: Vec<u8> = (0..original.len() - tail_at).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let file = std::fs::OpenOptions::new().write(true).open(lib).unwrap();
    let mut rounds = 0;
    while !stop.load(Ordering::Relaxed) {
        match how {
            Attack::Truncate => {
                // Truncated most of the time: the profiler reads a new version of the file
                // about once a cycle, at any point of the round, and must meet it truncated
                // (with 20 ms of 40+, one CI run's 4 reads all met the file whole).
                file.set_len(0).unwrap();
                std::thread::sleep(Duration::from_millis(150));
                file.write_all_at(&original, 0).unwrap();
            }
            Attack::RewriteTail => {
                file.write_all_at(&garbage, tail_at as u64).unwrap();
                std::thread::sleep(Duration::from_millis(20));
                file.write_all_at(&original[tail_at..], tail_at as u64).unwrap();
            }
        }
        rounds += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    rounds
}

fn epoch_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Samples of `pid` in `cycles`, and those with a frame of the library's named functions.
fn named_samples<'a>(cycles: impl Iterator<Item = &'a serde_json::Value>, pid: u32) -> (u64, u64) {
    let (mut all, mut named) = (0, 0);
    for c in cycles {
        for t in c["threads"].as_array().unwrap().iter().filter(|t| t["pid"].as_u64() == Some(pid.into())) {
            for s in t["stacks"].as_array().into_iter().flatten() {
                let n = s["samples"].as_u64().unwrap();
                all += n;
                let frames = s["frames"].as_array().unwrap();
                if frames
                    .iter()
                    .any(|f| f["name"].as_str().is_some_and(|n| n.starts_with("mapped_fn_") || n == "mapped_spin"))
                {
                    named += n;
                }
            }
        }
    }
    (all, named)
}

/// `summary.json` of `pid` under `results`.
fn summary_of(results: &Path, pid: u32) -> serde_json::Value {
    for entry in std::fs::read_dir(results).unwrap() {
        let path = entry.unwrap().path().join("summary.json");
        if let Ok(text) = std::fs::read_to_string(&path) {
            let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
            if summary["pid"].as_u64() == Some(pid.into()) {
                return summary;
            }
        }
    }
    panic!("no summary.json for process {pid} under {}", results.display());
}

/// Profiles the attacked spinner (`--pid`, or `--all` beside a spinner left alone) while `how`
/// is done to its library, and checks the run.
fn run_attack(how: Attack, all: bool) {
    let what = format!("{how:?} {}", if all { "--all" } else { "--pid" });
    let victim = Spinner::start("victim.so");
    let bystander = all.then(|| Spinner::start("bystander.so"));
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("cycles.jsonl");
    let results = out.path().join("results");
    let mut cmd = Command::new(bin());
    match all {
        // Host mode names every process's libraries: room for them beside the spinners'. The
        // JVMs of other tests, hostile ones among them, are not this test's subject: their
        // HotSpot tables are left unread.
        true => cmd.args(["--all", "--max-symbol-mb", "512", "--java-symbols", "perf-map"]),
        false => cmd.args(["--pid", &victim.pid().to_string()]),
    };
    let started = Instant::now();
    let mut child = cmd
        .args(["--duration", &RUN_S.to_string(), "--energy-source", "model", "--json"])
        .arg(&json)
        .arg("--output")
        .arg(&results)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    // The attack starts once clean cycles are written (and named: symbols come with them).
    while std::fs::read_to_string(&json).map(|t| t.lines().count()).unwrap_or(0) < CLEAN_CYCLES {
        // Host mode loads for a few seconds before its first cycle.
        assert!(started.elapsed() < Duration::from_secs(RUN_S + 20), "{what}: no cycles written");
        std::thread::sleep(Duration::from_millis(50));
    }
    let attack_from_ms = epoch_ms();
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = {
        let (lib, stop) = (victim.lib.clone(), Arc::clone(&stop));
        std::thread::spawn(move || attack(&lib, how, &stop))
    };
    std::thread::sleep(ATTACK);
    stop.store(true, Ordering::Relaxed);
    let rounds = attacker.join().unwrap();
    let (code, max_rss_kb) = wait_with_rusage(&mut child, Duration::from_secs(RUN_S + 60));
    let stderr = reader.join().unwrap();
    let cycles = read_jsonl(&json);
    let lengths_s: Vec<f64> =
        cycles.iter().map(|c| (c["end_ns"].as_u64().unwrap() - c["start_ns"].as_u64().unwrap()) as f64 / 1e9).collect();
    let before = cycles.iter().filter(|c| c["end_epoch_ms"].as_u64().unwrap() < attack_from_ms);
    let (victim_before, victim_named_before) = named_samples(before, victim.pid());
    let (victim_all, victim_named_all) = named_samples(cycles.iter(), victim.pid());
    eprintln!(
        "{what}: rc {code} in {:?}, {rounds} attack rounds, peak RSS {max_rss_kb} kB, cycles {lengths_s:.3?}; victim named {victim_named_before}/{victim_before} before the attack, {victim_named_all}/{victim_all} in all",
        started.elapsed()
    );

    assert_eq!(code, 0, "{what}: the run ends normally (rc 135 was SIGBUS):\n{stderr}");
    assert!(rounds >= 3, "{what}: the attack ran ({rounds} rounds)");
    if all {
        // Host mode's first result files for every process of a busy machine can stretch one
        // cycle without any attack (1.4-1.6 s measured on a loaded 2-CPU host); the next cycle
        // ends on the boundary. The run keeps its length and goes on.
        let span_s: f64 = lengths_s.iter().sum();
        assert!(cycles.len() as u64 >= RUN_S - 1, "{what}: the cycles are written: {lengths_s:.3?}\n{stderr}");
        assert!(
            (RUN_S as f64 * 0.9..=RUN_S as f64 * 1.1).contains(&span_s),
            "{what}: the cycles span the run: {lengths_s:.3?}"
        );
        assert!(lengths_s.iter().all(|&s| s < 2.5), "{what}: no cycle stalls: {lengths_s:.3?}\n{stderr}");
    } else {
        assert_eq!(cycles.len() as u64, RUN_S, "{what}: one cycle per second of the run, all written:\n{stderr}");
        assert!(
            lengths_s.iter().all(|s| (0.9..=1.1).contains(s)),
            "{what}: every cycle lasts 1 s ± 10%: {lengths_s:.3?}\n{stderr}"
        );
    }
    assert!(max_rss_kb < MAX_RSS_KB, "{what}: peak RSS {max_rss_kb} kB");
    assert!(victim_before > 0 && victim_named_before * 2 > victim_before, "{what}: the spinner's functions are named before the attack ({victim_named_before} of {victim_before} samples)\n{stderr}");
    assert!(!stderr.contains("panicked"), "{what}: no thread panicked:\n{stderr}");
    let summary = summary_of(&results, victim.pid());
    assert!(summary["samples"].as_u64().unwrap() > 0, "{what}: the victim's results are written: {summary}");
    if let Attack::Truncate = how {
        // A truncated library cannot be read: the run says so, at the end and in summary.json.
        // Whether the profiler's reads (about one a cycle) met the file truncated is a race with
        // the attack's rounds, which one CI run lost in --all mode (2026-12-04; 5 reruns met it):
        // a statistical bar, measured once more when missed. A crash or a stall above is not.
        statistical::check(stderr.contains("symbolization degraded"), || {
            format!("{what}: the end of the run says what was not named:\n{stderr}")
        });
        statistical::check(summary["degraded"]["native_files_not_elf"].as_u64().unwrap_or(0) > 0, || {
            format!("{what}: {}", summary["degraded"])
        });
    }
    if let Some(bystander) = &bystander {
        let during = cycles.iter().filter(|c| c["end_epoch_ms"].as_u64().unwrap() > attack_from_ms + 1000);
        let (all, named) = named_samples(during, bystander.pid());
        assert!(
            all > 0 && named * 2 > all,
            "{what}: another process's functions are named through the attack ({named} of {all} samples)\n{stderr}"
        );
    }
}

#[test]
fn a_library_truncated_under_the_profiler_faults_nothing() {
    statistical::two_attempts("a_library_truncated_under_the_profiler_faults_nothing (--pid)", || {
        run_attack(Attack::Truncate, false)
    });
    statistical::two_attempts("a_library_truncated_under_the_profiler_faults_nothing (--all)", || {
        run_attack(Attack::Truncate, true)
    });
}

#[test]
fn a_library_rewritten_under_the_profiler_faults_nothing() {
    run_attack(Attack::RewriteTail, false);
    run_attack(Attack::RewriteTail, true);
}
