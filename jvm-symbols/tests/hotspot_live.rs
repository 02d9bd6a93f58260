//! HotSpot introspection against a live JDK 17 JVM (runs as root, like the rest of the
//! suite: `process_vm_readv` and ptrace). The workload's busy thread is stopped briefly
//! with ptrace to read real pcs and frame pointers, which are then resolved from outside.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use jvm_symbols::hotspot::{CodeAt, FrameKind, HotspotJvm, MemoryReader, ProcessMemory};

const CLASS: &str = "HotspotFixture";
const SAMPLES: usize = 40;

struct Jvm {
    child: Child,
    _classes: tempfile::TempDir,
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Jvm {
    fn start(flags: &[&str]) -> Jvm {
        let classes = tempfile::tempdir().unwrap();
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hotspot-src/HotspotFixture.java");
        let ok = Command::new("javac")
            .args(["--release", "11", "-d"])
            .arg(classes.path())
            .arg(source)
            .status()
            .unwrap()
            .success();
        assert!(ok, "javac failed");
        let mut child = Command::new("java")
            .args(flags)
            .arg("-cp")
            .arg(classes.path())
            .args([CLASS, "60"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert!(line.starts_with("ready"), "JVM did not warm up: {line:?}");
        Jvm { child, _classes: classes }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The thread that used the most CPU: the workload's main Java thread.
    fn busiest_thread(&self) -> i32 {
        let task = format!("/proc/{}/task", self.pid());
        std::fs::read_dir(task)
            .unwrap()
            .filter_map(|e| {
                let tid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
                let stat = std::fs::read_to_string(format!("/proc/{}/task/{tid}/stat", self.pid())).ok()?;
                let after_comm = &stat[stat.rfind(')')? + 2..];
                let utime: u64 = after_comm.split(' ').nth(11)?.parse().ok()?;
                Some((utime, tid))
            })
            .max()
            .unwrap()
            .1
    }
}

/// The bcp the eBPF sampler keeps for an interpreted leaf (`walk.rs`, `interpreted_step`):
/// the live r13 when it lies within 64 KiB (a method's most bytecodes) of the frame slot's
/// word, else that word.
fn leaf_bcp(r13: u64, saved: u64) -> u64 {
    const MAX_BYTECODE_BYTES: u64 = 1 << 16;
    match r13.wrapping_sub(saved).wrapping_add(MAX_BYTECODE_BYTES) < 2 * MAX_BYTECODE_BYTES {
        true => r13,
        false => saved,
    }
}

/// Stops `tid` (PTRACE_SEIZE + PTRACE_INTERRUPT: no signal reaches the JVM) and returns its
/// (pc, fp).
fn sample(tid: i32) -> (u64, u64) {
    sample_then(tid, |pc, fp, _| (pc, fp))
}

/// Stops the thread, reads its pc, fp and r13 (the template interpreter's live bcp), and runs
/// `f` on them before the thread goes on:
/// what `f` reads of the thread's frames is the frames of that pc (read after the thread
/// resumed, the frame at fp may already be gone).
fn sample_then<T>(tid: i32, f: impl FnOnce(u64, u64, u64) -> T) -> T {
    // SAFETY: plain ptrace calls on a thread of a child we own; `regs` is written by the
    // kernel only while the thread is stopped.
    unsafe {
        assert_eq!(libc::ptrace(libc::PTRACE_SEIZE, tid, 0, 0), 0, "PTRACE_SEIZE");
        assert_eq!(libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0), 0, "PTRACE_INTERRUPT");
        let mut status = 0;
        assert_eq!(libc::waitpid(tid, &mut status, libc::__WALL), tid);
        let mut regs: libc::user_regs_struct = std::mem::zeroed();
        assert_eq!(libc::ptrace(libc::PTRACE_GETREGS, tid, 0, &mut regs as *mut _), 0, "PTRACE_GETREGS");
        let out = f(regs.rip, regs.rbp, regs.r13);
        libc::ptrace(libc::PTRACE_DETACH, tid, 0, 0);
        out
    }
}

/// `jcmd <pid> Compiler.perfmap` entries: (start, size, name).
fn perf_map(pid: u32) -> Vec<(u64, u64, String)> {
    let ok = Command::new("jcmd")
        .arg(pid.to_string())
        .arg("Compiler.perfmap")
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "jcmd failed");
    let path = format!("/tmp/perf-{pid}.map");
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ' ');
            let start = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
            let size = u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok()?;
            Some((start, size, f.next()?.to_owned()))
        })
        .collect()
}

#[test]
fn sampled_jit_pcs_resolve_to_the_hot_methods_and_agree_with_the_perf_map() {
    let jvm = Jvm::start(&["-XX:+PreserveFramePointer"]);
    // Let C2 replace the C1 code the warm-up left.
    std::thread::sleep(Duration::from_secs(2));
    let mut hs = HotspotJvm::attach(Path::new("/proc"), jvm.pid()).unwrap();
    let tid = jvm.busiest_thread();
    let mut resolved = Vec::new();
    for _ in 0..SAMPLES {
        let (pc, _) = sample(tid);
        hs.refresh_code_cache();
        if let CodeAt::Java(frames) = hs.code_at(pc) {
            resolved.push((pc, frames));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let workload = |name: &str| ["mix", "twist", "outer", "main"].contains(&name);
    let in_workload =
        resolved.iter().filter(|(_, f)| f.iter().all(|f| f.method.class == CLASS && workload(&f.method.name))).count();
    eprintln!("{in_workload} of {SAMPLES} JIT samples named in the workload");
    assert!(in_workload * 10 >= SAMPLES * 8, "{in_workload} of {SAMPLES} samples named in the workload: {resolved:?}");
    // The perf map names the nmethod, i.e. the outermost frame of each chain.
    let map = perf_map(jvm.pid());
    let mut checked = 0;
    for (pc, frames) in &resolved {
        let Some((_, _, name)) = map.iter().find(|(s, z, _)| (*s..s + z).contains(pc)) else {
            continue;
        };
        let outer = frames.last().unwrap();
        assert_eq!(outer.kind, FrameKind::Jit);
        let expected = format!("{}.{}(", outer.method.class, outer.method.name);
        assert!(name.contains(&expected), "perf map says {name:?} at {pc:#x}, we say {expected}");
        checked += 1;
    }
    eprintln!("{checked} of {} agree with the perf map", resolved.len());
    assert!(checked * 2 >= resolved.len(), "only {checked} of {} pcs in the perf map", resolved.len());
    let misses = hs.misses();
    assert_eq!(misses.method_stale + misses.method_corrupt, 0, "{misses:?}");
}

/// Each code heap reserves more than it commits at first (the JIT commits as it places
/// code), and what it reserves lies in the code cache HotSpot reserved as a whole.
#[test]
fn code_heaps_reserve_beyond_what_they_commit_inside_the_code_cache() {
    let jvm = Jvm::start(&[]);
    let hs = HotspotJvm::attach(Path::new("/proc"), jvm.pid()).unwrap();
    let heaps = hs.code_heaps();
    let (start, end) = hs.code_cache_bounds().expect("CodeCache::_low_bound, _high_bound");
    assert!(!heaps.is_empty());
    for h in heaps {
        assert!(h.low < h.high && h.high <= h.reserved_high, "{h:?}");
        assert!(start <= h.low && h.reserved_high <= end, "{h:?} outside [{start:#x}, {end:#x})");
    }
    assert!(heaps.iter().any(|h| h.reserved_high > h.high), "every heap fully committed: {heaps:?}");
}

/// Under -Xint every Java frame is interpreted: the pc is in the interpreter, and the
/// frame's Method* and bcp sit at the fp-relative slots the layout gives (what the eBPF
/// sampler will read).
///
/// The Method* slot names the frame at every sample. The bcp slot alone does not always
/// give a line: HotSpot's method entry writes the Method* slot a few instructions before
/// the bcp slot (`generate_fixed_frame`), so a thread stopped in between has a stale word
/// there, often the caller's bcp; on this fixture of tiny methods called in a loop that
/// window held 10-31% of the samples (69 to 90 of 100 had a line from the slot alone).
/// r13 is already the method's first bytecode there, and the sampler takes the live r13
/// for the leaf when it lies within a method's reach of the slot's word (`leaf_bcp`), as
/// this test does; then every sample but a rare one (a stale word far from r13) has a line.
/// A bcp outside the method's bytecodes must give no bci (never the caller's line).
#[test]
fn interpreted_frames_resolve_from_their_frame_slots() {
    const INTERPRETED_SAMPLES: usize = 100;
    let jvm = Jvm::start(&["-Xint", "-XX:+PreserveFramePointer"]);
    let mut hs = HotspotJvm::attach(Path::new("/proc"), jvm.pid()).unwrap();
    let slots = hs.layout().interpreter_frame;
    let mem = ProcessMemory { pid: jvm.pid() };
    let tid = jvm.busiest_thread();
    let mut in_interpreter = 0;
    let mut named: HashMap<String, usize> = HashMap::new();
    let mut with_line = 0;
    for _ in 0..INTERPRETED_SAMPLES {
        // The frame slots are read while the thread is stopped at the sampled pc, as the eBPF
        // sampler reads them.
        let (pc, m, bcp) = sample_then(tid, |pc, fp, r13| {
            let slot = |words: i64| fp.wrapping_add_signed(words * 8);
            let saved_bcp = mem.read_u64(slot(slots.bcp_slot));
            (pc, mem.read_u64(slot(slots.method_slot)), saved_bcp.map(|saved| leaf_bcp(r13, saved)))
        });
        if hs.code_at(pc) != CodeAt::Interpreter {
            continue;
        }
        in_interpreter += 1;
        let (Ok(m), Ok(bcp)) = (m, bcp) else {
            continue;
        };
        if let Some(frame) = hs.interpreted_frame(m, bcp) {
            *named.entry(frame.method.short_name()).or_default() += 1;
            if frame.bci.is_some() && frame.line.is_some() {
                with_line += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!(
        "{in_interpreter} of {INTERPRETED_SAMPLES} pcs in the interpreter; named from frame slots: {named:?}; \
         {with_line} with a bci and a line"
    );
    assert!(
        in_interpreter * 10 >= INTERPRETED_SAMPLES * 7,
        "only {in_interpreter} of {INTERPRETED_SAMPLES} pcs in the interpreter"
    );
    let workload: usize = ["mix", "twist", "outer", "main"]
        .iter()
        .map(|m| named.get(&format!("{CLASS}.{m}")).copied().unwrap_or(0))
        .sum();
    assert!(
        workload * 100 >= in_interpreter * 95,
        "{workload} of {in_interpreter} interpreted samples named in the workload: {named:?}"
    );
    assert!(
        with_line * 100 >= in_interpreter * 95,
        "{with_line} of {in_interpreter} interpreted samples have a bci and a line: {named:?}"
    );
}

/// A live JVM's two loop-poll handler blobs are found from libjvm's symbol table, each with
/// the window before its return address is stored: at the blob's entry bytes, ending after the
/// store, and reading the thread's saved exception pc at the offset JDK 17 has.
#[test]
fn the_loop_poll_handler_blobs_of_a_live_jvm_have_their_entry_windows() {
    use jvm_symbols::hotspot::poll_blobs::ENTRY_BYTES;
    let jvm = Jvm::start(&[]);
    let hs = HotspotJvm::attach(Path::new("/proc"), jvm.pid()).unwrap();
    let windows = hs.poll_entry_windows();
    assert_eq!(windows.len(), 2, "{windows:?}");
    let memory = ProcessMemory { pid: jvm.pid() };
    for w in windows {
        assert_eq!(memory.read_vec(w.start, ENTRY_BYTES.len()).unwrap(), ENTRY_BYTES, "{w:?}");
        assert!(w.end > w.start + 0x100 && w.end < w.start + 0x400, "{w:?}");
        assert_eq!(memory.read_vec(w.end - 4, 4).unwrap(), [0x48, 0x89, 0x5d, 0x08], "{w:?}");
        assert_eq!(w.saved_pc_offset, 0x358, "JavaThread::_saved_exception_pc of JDK 17.0.15");
    }
    assert_ne!(windows[0].start, windows[1].start);
}
