use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::hotspot::UNKNOWN_JIT;
use super::*;

/// One cycle's symbolization of one stack, as the session's symbol worker runs it: begin,
/// look ahead, wait for the JVM jobs it needs (bounded), symbolize.
fn cycle(symbolizer: &mut Symbolizer, pid: u32, user: &[u64]) -> Stack {
    symbolizer.begin_cycle();
    symbolizer.prepare(pid, user);
    symbolizer.settle(Instant::now() + Duration::from_secs(20));
    symbolizer.symbolize(pid, user, &[])
}

fn options() -> SymbolizerOptions {
    SymbolizerOptions { kernel: true, attach: false, ..SymbolizerOptions::default() }
}

#[inline(never)]
fn marker_function_for_symbolization(x: u64) -> u64 {
    std::hint::black_box(x.wrapping_mul(31))
}

#[test]
fn own_native_function_is_resolved_and_stacks_are_shared() {
    let mut symbolizer = Symbolizer::new(options());
    let addr = marker_function_for_symbolization as *const () as u64 + 1;
    let pid = std::process::id();
    let stack = symbolizer.symbolize(pid, &[addr], &[]);
    assert_eq!(stack.len(), 1);
    assert!(stack[0].name.contains("marker_function_for_symbolization"), "{:?}", stack[0]);
    assert_eq!(stack[0].kind, FrameKind::Native);
    let again = symbolizer.symbolize(pid, &[addr], &[]);
    assert!(Arc::ptr_eq(&stack, &again));
    assert_eq!(symbolizer.stats().jvms, 0);
}

#[test]
fn kernel_address_from_kallsyms() {
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let addr = kallsyms
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            let (addr, kind, name) = (f.next()?, f.next()?, f.next()?);
            (matches!(kind, "T" | "t") && name == "vfs_read" && f.next().is_none())
                .then(|| u64::from_str_radix(addr, 16).unwrap())
        })
        .expect("vfs_read in /proc/kallsyms");
    assert_ne!(addr, 0, "/proc/kallsyms shows zero addresses: run this test as root (kptr_restrict)");
    let mut symbolizer = Symbolizer::new(options());
    let stack = symbolizer.symbolize(std::process::id(), &[], &[addr + 4]);
    assert_eq!(stack.len(), 1);
    assert_eq!(&*stack[0].name, "vfs_read");
    assert_eq!(stack[0].kind, FrameKind::Kernel);

    let user = marker_function_for_symbolization as *const () as u64 + 1;
    let mixed = symbolizer.symbolize(std::process::id(), &[user], &[addr + 4]);
    assert_eq!(mixed[0].kind, FrameKind::Native);
    assert_eq!(mixed[1].kind, FrameKind::Kernel, "kernel frames go on top of user frames");

    let mut no_kernel = Symbolizer::new(SymbolizerOptions { kernel: false, ..options() });
    assert!(no_kernel.symbolize(std::process::id(), &[], &[addr + 4]).is_empty());
}

/// A fake /proc with one JVM (pid 4190000, nspid 7) whose code cache is
/// 0x7f0000000000..0x7f0000100000.
fn fake_jvm(map: &str) -> (tempfile::TempDir, u32) {
    let dir = tempfile::tempdir().unwrap();
    let pid = 4_190_000;
    let p = dir.path().join(pid.to_string());
    std::fs::create_dir_all(p.join("root/tmp")).unwrap();
    std::fs::write(
        p.join("maps"),
        "7f0000000000-7f0000100000 rwxp 00000000 00:00 0 \n\
         7f1b24851000-7f1b255a4000 r-xp 00251000 fe:00 315160 /usr/lib/jvm/java-17/lib/server/libjvm.so\n",
    )
    .unwrap();
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    std::fs::write(
        p.join("status"),
        format!("Uid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{gid}\t{gid}\t{gid}\t{gid}\nNSpid:\t{pid}\t7\nSigCgt:\t0000000101005ccd\n"),
    )
    .unwrap();
    std::fs::write(p.join("cmdline"), b"java\0-XX:+PreserveFramePointer\0Main\0").unwrap();
    write_map(dir.path(), pid, map);
    (dir, pid)
}

fn write_map(proc_root: &Path, pid: u32, map: &str) {
    let path = proc_root.join(pid.to_string()).join("root/tmp/perf-7.map");
    std::fs::write(&path, map).unwrap();
    // Distinct mtimes even within one clock tick.
    let bump = SystemTime::now() + Duration::from_secs(map.len() as u64);
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(bump).unwrap();
}

#[test]
fn jit_frames_from_the_perf_map() {
    let (dir, pid) = fake_jvm(
        "0x00007f0000001000 0x0000000000000100 long com.acme.Foo.bar(int)\n\
         0x00007f0000002000 0x0000000000000100 Interpreter\n\
         garbage\n",
    );
    let mut symbolizer = Symbolizer::new(SymbolizerOptions { proc_root: dir.path().to_owned(), ..options() });
    let (bar, interp, missed, native) = (0x7f0000001010, 0x7f0000002010, 0x7f0000050000, 0x1234);
    // The map is read by the JVM's job; the first cycle waits for it.
    let stack = cycle(&mut symbolizer, pid, &[bar, interp, missed, native]);
    let got: Vec<(&str, &str, FrameKind)> = stack.iter().map(|f| (&*f.name, &*f.short, f.kind)).collect();
    assert_eq!(
        got,
        [
            (UNKNOWN, UNKNOWN, FrameKind::Native),
            (UNKNOWN_JIT, UNKNOWN_JIT, FrameKind::JavaJit),
            ("Interpreter", "Interpreter", FrameKind::Stub),
            ("long com.acme.Foo.bar(int)", "com.acme.Foo.bar", FrameKind::JavaJit),
        ]
    );
    let stats = symbolizer.stats();
    assert_eq!((stats.jvms, stats.perf_map_entries, stats.perf_map_bad_lines), (1, 2, 1));
    assert_eq!((stats.jit_misses, stats.unresolved_frames, stats.perf_map_reloads), (1, 1, 1));
    assert_eq!((stats.cut_java_stacks, stats.perf_map_dumps), (0, 0));

    // A stack that starts in Java code was cut, and says so at its root.
    let cut = symbolizer.symbolize(pid, &[bar, interp], &[]);
    assert_eq!(symbolizer.stats().cut_java_stacks, 1);
    let names: Vec<&str> = cut.iter().map(|f| &*f.name).collect();
    assert_eq!(names, ["[truncated: frame_pointer]", "Interpreter", "long com.acme.Foo.bar(int)"]);
    // One that reaches native code below its Java frames is whole.
    let whole = symbolizer.symbolize(pid, &[bar, native], &[]);
    assert_eq!(whole.iter().map(|f| &*f.name).collect::<Vec<_>>(), [UNKNOWN, "long com.acme.Foo.bar(int)"]);
    assert_eq!(symbolizer.stats().cut_java_stacks, 1);

    // A new version of the map replaces the cached JIT frames at the next cycle.
    write_map(
        dir.path(),
        pid,
        "0x00007f0000001000 0x0000000000000100 void com.acme.Foo.moved()\n\
         0x00007f0000050000 0x0000000000000100 int com.acme.Late.compiled(long)\n",
    );
    let before = symbolizer.symbolize(pid, &[missed], &[]);
    assert_eq!(&*before.last().unwrap().name, UNKNOWN_JIT, "no reload before begin_cycle");
    // Java frames only, below the root that says the stack was cut.
    let after = cycle(&mut symbolizer, pid, &[bar, missed]);
    assert_eq!(&*after[1].short, "com.acme.Late.compiled");
    assert_eq!(&*after[2].short, "com.acme.Foo.moved");
    let stats = symbolizer.stats();
    assert_eq!((stats.perf_map_reloads, stats.perf_map_bad_lines), (2, 0));

    symbolizer.forget_process(pid);
    assert_eq!(symbolizer.stats().jvms, 0);
}

/// A JVM running jvm-symbols' HotLoop fixture (with frame pointers), once it says it is ready;
/// killed when the returned guard drops, however the test ends.
fn hot_loop_jvm() -> (KilledOnDrop, u32) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let classes = tempfile::tempdir().unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../jvm-symbols/tests/java/HotLoop.java");
    assert!(Command::new("javac").arg("-d").arg(classes.path()).arg(source).status().unwrap().success());
    let mut java = Command::new("java")
        .args(["-XX:+PreserveFramePointer", "-cp"])
        .arg(classes.path())
        .arg("HotLoop")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(java.stdout.as_mut().unwrap()).read_line(&mut ready).unwrap();
    assert!(ready.starts_with("ready"), "{ready:?}");
    let pid = java.id();
    (KilledOnDrop { child: java, _classes: classes }, pid)
}

/// The JVM, and its class directory kept for as long as it runs.
struct KilledOnDrop {
    child: std::process::Child,
    _classes: tempfile::TempDir,
}

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real JVM: on first contact the symbolizer dumps its perf map over attach and
/// resolves an address of a compiled method; an address of its code cache that the map
/// does not cover triggers one re-dump at the next cycle.
#[test]
fn real_jvm_perf_map_is_dumped_and_used() {
    let (java, pid) = hot_loop_jvm();
    let map_path = format!("/tmp/perf-{pid}.map");

    // The perf-map path, as used for JVMs whose HotSpot tables cannot be read.
    let mut symbolizer = Symbolizer::new(SymbolizerOptions {
        attach: true,
        min_dump_interval: Duration::ZERO,
        hotspot: false,
        ..options()
    });
    // First contact dumps and loads the map, within its first cycle.
    cycle(&mut symbolizer, pid, &[]);
    let stats = symbolizer.stats();
    assert_eq!((stats.jvms, stats.perf_map_dumps, stats.perf_map_reloads), (1, 1, 1), "{stats:?}");
    assert!(stats.perf_map_entries > 50, "{stats:?}");

    let map = std::fs::read_to_string(&map_path).unwrap();
    let entries: Vec<(u64, u64, &str)> = map
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ' ');
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            Some((hex(f.next()?)?, hex(f.next()?)?, f.next()?))
        })
        .collect();
    let churn = entries.iter().find(|e| e.2 == "long HotLoop.churn(int)").expect("churn compiled");
    let stack = symbolizer.symbolize(pid, &[churn.0 + 2], &[]);
    let leaf = stack.last().unwrap();
    assert_eq!((&*leaf.short, leaf.kind), ("HotLoop.churn", FrameKind::JavaJit));

    // An address of the code cache that no entry covers asks for a re-dump next cycle.
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let code_cache = jvm_symbols::parse_maps(maps.as_bytes())
        .into_iter()
        .find(|m| m.is_anonymous_code())
        .expect("a code cache mapping");
    let uncovered = (code_cache.start..code_cache.end)
        .rev()
        .step_by(64)
        .find(|a| !entries.iter().any(|e| (e.0..e.0 + e.1).contains(a)))
        .expect("free space in the code cache");
    let stack = cycle(&mut symbolizer, pid, &[uncovered]);
    assert_eq!(&*stack.last().unwrap().name, UNKNOWN_JIT);
    assert_eq!(symbolizer.stats().perf_map_dumps, 2, "a miss in the code cache asks for a re-dump, in its own cycle");
    let next_cycle = Instant::now();
    symbolizer.begin_cycle();
    let jvm = symbolizer.processes[&pid].jvm.as_ref().unwrap();
    assert!(!jvm.dumped_since(next_cycle), "no miss, no dump");
    drop(java);
    let _ = std::fs::remove_file(&map_path);
}

/// A real JVM is named through its HotSpot tables first: no perf map is asked for, the
/// kernel is told how to walk it, and a compiled pc found by walking its code heaps (not
/// from any perf map) resolves to the method.
#[test]
fn real_jvm_is_named_through_its_hotspot_tables_without_a_perf_map() {
    use jvm_symbols::hotspot::codecache::{blocks, read_blob, BlobKind};
    use jvm_symbols::hotspot::HotspotJvm;

    use crate::model::{WalkedFrame, WalkedStack};

    let (java, pid) = hot_loop_jvm();

    let mut symbolizer =
        Symbolizer::new(SymbolizerOptions { attach: true, min_dump_interval: Duration::ZERO, ..options() });
    symbolizer.watch(pid);
    let updates = symbolizer.take_kernel_updates();
    // The walk configuration, then the JVM's native unwind table (libjvm and libc among it).
    let [KernelUpdate::WalkJvm { pid: walked_pid, config }, KernelUpdate::NativeUnwind { pid: unwound_pid, table }] =
        updates.as_slice()
    else {
        panic!("one walk configuration and one unwind table expected: {} updates", updates.len());
    };
    assert_eq!(*unwound_pid, pid);
    assert!(table.len() >= 2 && table.iter().all(|m| !m.rows.rows.is_empty()), "{} mappings", table.len());
    assert_eq!(*walked_pid, pid);
    assert_eq!((config.method_slot, config.bcp_slot), (-3, -8));
    assert!(config.interpreter_start < config.interpreter_end && config.code_start < config.code_end, "{config:?}");
    // Both loop-poll handler blobs, in the code cache, each window past its entry.
    for e in &config.poll_entries {
        assert!(e.start >= config.code_start && e.end > e.start + 5 && e.end < config.code_end, "{e:?}");
        assert_ne!(e.saved_pc_offset, 0, "{e:?}");
    }
    assert_ne!(config.poll_entries[0].start, config.poll_entries[1].start);

    // churn's compiled code, found by walking the code heaps.
    let mut hs = HotspotJvm::attach(Path::new("/proc"), pid).unwrap();
    let code = hs.layout().code.clone().unwrap();
    let nmethods: Vec<(u64, u64)> = hs
        .code_heaps()
        .iter()
        .flat_map(|heap| blocks(hs.reader(), &code, heap, 100_000))
        .filter_map(|block| read_blob(hs.reader(), &code, block + code.heap_block_size).ok())
        .filter_map(|blob| match blob.kind {
            BlobKind::Nmethod { method, .. } => Some((blob.code_begin, method)),
            BlobKind::Other => None,
        })
        .collect();
    let pc = nmethods
        .iter()
        .find(|(_, m)| hs.method(*m).is_some_and(|m| m.class == "HotLoop" && m.name == "churn"))
        .map(|(code_begin, _)| code_begin + 1)
        .expect("churn is compiled");
    let walked = WalkedStack { frames: vec![WalkedFrame::Code(pc)], ..WalkedStack::default() };
    let stack = symbolizer.symbolize_walked(pid, &walked, &[], 1);
    let leaf = stack.last().unwrap();
    assert_eq!(
        (&*leaf.name, &*leaf.short, leaf.kind),
        ("long HotLoop.churn(int)", "HotLoop.churn", FrameKind::JavaJit)
    );
    assert_eq!(&*stack[0].name, "[truncated: unknown]", "a Java frame alone was cut");

    symbolizer.begin_cycle();
    let stats = symbolizer.stats();
    assert_eq!((stats.hotspot_jvms, stats.perf_map_dumps, stats.perf_map_reloads), (1, 0, 0), "{stats:?}");
    assert!(stats.hotspot_nmethods_read >= 1 && stats.walked_stacks == 1, "{stats:?}");
    assert!(!Path::new(&format!("/tmp/perf-{pid}.map")).exists(), "a perf map was written");

    symbolizer.forget_process(pid);
    assert_eq!(symbolizer.take_kernel_updates(), [KernelUpdate::ForgetJvm { pid }]);
    drop(java);
}

/// A target watched before it is a JVM (`record`'s command before its exec) is looked at
/// between cycles: it is found as soon as libjvm is mapped, its tables are tried while they
/// are not readable, and none of that spends the cycles' discovery attempts; the looks stop
/// after a bounded number.
#[test]
fn a_starting_target_is_looked_at_between_cycles_a_bounded_number_of_times() {
    let dir = tempfile::tempdir().unwrap();
    let pid = 4_190_002;
    let p = dir.path().join(pid.to_string());
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("maps"), "55d0a0000000-55d0a0001000 r-xp 00000000 fe:00 1 /usr/bin/joular-launcher\n")
        .unwrap();
    let mut symbolizer = Symbolizer::new(SymbolizerOptions { proc_root: dir.path().to_owned(), ..options() });
    symbolizer.watch(pid);
    assert!(symbolizer.poll_young().is_some(), "a watched process that is no JVM yet is looked at");
    assert!(symbolizer.processes[&pid].jvm.is_none());
    std::fs::write(
        p.join("maps"),
        "7f1b24851000-7f1b255a4000 r-xp 00251000 fe:00 315160 /usr/lib/jvm/java-17/lib/server/libjvm.so\n",
    )
    .unwrap();
    let (uid, gid) = (nix::unistd::geteuid().as_raw(), nix::unistd::getegid().as_raw());
    std::fs::write(p.join("status"), format!("Uid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{gid}\t{gid}\t{gid}\t{gid}\nNSpid:\t{pid}\nSigCgt:\t0000000101005ccd\n")).unwrap();
    std::fs::write(p.join("cmdline"), b"java\0Main\0").unwrap();
    assert!(symbolizer.poll_young().is_some(), "its tables are not readable yet: looked at again");
    let process = &symbolizer.processes[&pid];
    assert!(process.jvm.is_some(), "found as soon as libjvm is mapped");
    assert!(matches!(process.hotspot, Hotspot::Pending { attempts_left: 10, wait_cycles: 0 }), "no attempt spent");
    let mut polls = 2;
    while symbolizer.poll_young().is_some() {
        polls += 1;
        assert!(polls <= 1000, "looked at without end");
    }
    assert!(matches!(symbolizer.processes[&pid].hotspot, Hotspot::Pending { attempts_left: 10, .. }));
    assert!(symbolizer.take_kernel_updates().is_empty(), "nothing walkable");
}
