//! `cargo xtask record-unwind-fixture --out tests/fixtures/native-unwind`: records what the native
//! unwinder's unit tests check against gdb (`joular-user/src/unwind/tests.rs`), from real
//! processes of the system's JDK 17, with no root needed to replay it.
//!
//! Each workload (a fixture JVM whose threads sit in native code without frame pointers, in
//! glibc's syscall wrappers, in the vDSO, in libjvm, and in a signal handler) is stopped,
//! dumped with `gcore`, and gdb's own backtrace of each kept thread is taken from that core
//! (`unwind_fixture.py`). Only what the test needs is kept: each thread's registers, its stack
//! from rsp to its last frame, gdb's frames, the process's executable mappings of the files
//! those frames are in, and of each such file an image the size of the file that is zero but
//! for what the row builder reads (ELF and section headers, section names, `.eh_frame`,
//! `.debug_frame`), gzipped.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context as _};
use object::{Object, ObjectSection, ObjectSymbol};

use crate::run::{compile_java, root, status};

const JDK: &str = "/usr/lib/jvm/java-17-openjdk-amd64";
/// Small heap and code cache: the core holds every mapping, and its size is written and read
/// twice.
const JVM_FLAGS: [&str; 4] =
    ["-Xmx32m", "-Xms16m", "-XX:ReservedCodeCacheSize=32m", "-XX:CompressedClassSpaceSize=32m"];
/// Attempts before giving up on a workload whose threads were not caught where wanted.
const ATTEMPTS: usize = 8;
/// The gdb script, written beside the core.
const GDB_SCRIPT: &str = include_str!("unwind_fixture.py");

/// One fixture JVM and the threads of it the fixture keeps.
struct Workload {
    name: &'static str,
    class: &'static str,
    /// Its JNI library's source in tests/java, built with -O2 -fomit-frame-pointer.
    jni_source: &'static str,
    /// Waited after "ready" so every thread is where it spends its time.
    settle: Duration,
    /// Threads kept, by name (`main`: the launcher's main thread; `java`: the one running Java's
    /// `main`).
    threads: &'static [&'static str],
    /// Whether a recording caught the threads where the test needs them.
    caught: fn(&BTreeMap<String, ThreadRecord>, &Maps) -> bool,
}

const WORKLOADS: [Workload; 2] = [
    Workload {
        name: "native-unwind",
        class: "NativeUnwind",
        jni_source: "native_unwind_spin.c",
        settle: Duration::from_millis(1500),
        threads: &[
            "main",
            "java",
            "jni",
            "readlink",
            "list",
            "millis",
            "VM Thread",
            "Signal Dispatch",
            "C2 CompilerThre",
            "G1 Service",
            "VM Periodic Tas",
            "GC Thread#0",
            "Reference Handl",
        ],
        // The JNI leaf in the library without frame pointers, readlink in libc's wrapper, the
        // clock read in the vDSO.
        caught: |threads, maps| {
            let leaf_in = |name: &str, file: &str| {
                threads.get(name).and_then(|t| t.frames.first()).is_some_and(|f| maps.file_of(f.pc) == Some(file))
            };
            leaf_in("jni", "libnativeunwind.so") && leaf_in("readlink", "libc.so.6") && leaf_in("millis", "[vdso]")
        },
    },
    Workload {
        name: "signal-spin",
        class: "SignalSpin",
        jni_source: "signal_spin.c",
        settle: Duration::from_millis(1500),
        threads: &["signal"],
        // In the handler, above the signal frame.
        caught: |threads, _| threads.get("signal").is_some_and(|t| t.frames.iter().any(|f| f.kind == "sigtramp")),
    },
];

struct Frame {
    pc: u64,
    kind: String,
    line: String,
}

struct ThreadRecord {
    /// `thread <lwp> <rip> <rsp> <rbp>`.
    head: String,
    frames: Vec<Frame>,
    /// `stack <address> <hex>`.
    stack: String,
}

/// The executable mappings of a process, as /proc/<pid>/maps listed them.
struct Maps {
    /// (start, end, the line's fields before the path, path).
    mappings: Vec<(u64, u64, String, String)>,
}

impl Maps {
    fn parse(text: &str) -> Self {
        let mut mappings = Vec::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 6 || !fields[1].contains('x') {
                continue;
            }
            let path = fields[5..].join(" ");
            if path.starts_with('[') && path != "[vdso]" {
                continue;
            }
            let Some((start, end)) = fields[0].split_once('-') else { continue };
            let (Ok(start), Ok(end)) = (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16)) else {
                continue;
            };
            mappings.push((start, end, fields[..5].join(" "), path));
        }
        Maps { mappings }
    }

    fn path_of(&self, pc: u64) -> Option<&str> {
        self.mappings.iter().find(|m| m.0 <= pc && pc < m.1).map(|m| m.3.as_str())
    }

    /// The file name of the mapping holding `pc` (`[vdso]` for the vDSO).
    fn file_of(&self, pc: u64) -> Option<&str> {
        self.path_of(pc).map(|p| p.rsplit('/').next().unwrap_or(p))
    }
}

pub fn run(out: &Path) -> anyhow::Result<()> {
    let java_dir = compile_java()?;
    let scratch = crate::host_bench::tempdir("unwind-fixture")?;
    std::fs::create_dir_all(out)?;
    // Every image the workloads need, by file name.
    let mut images: BTreeMap<String, ImageSource> = BTreeMap::new();
    for w in &WORKLOADS {
        let library = build_jni_library(w, &scratch)?;
        let mut recorded = None;
        for attempt in 1..=ATTEMPTS {
            let r = record(w, &java_dir, &library, &scratch)?;
            if (w.caught)(&r.threads, &r.maps) {
                recorded = Some(r);
                break;
            }
            eprintln!("{}: attempt {attempt}: threads not where wanted, again", w.name);
        }
        let r = recorded.with_context(|| format!("{}: threads never caught where wanted", w.name))?;
        write_workload(w, &r, out, &mut images)?;
    }
    let mut manifest = String::from(
        "# Images of the files the recorded stacks are in: each file as long as the original, zero\n\
         # but for its ELF and section headers, section names, .eh_frame and .debug_frame; gzipped.\n\
         # image <name> <original path, or the JNI library's source> <build id>;\n\
         # symbol <image> <name> <file address>.\n",
    );
    for (name, source) in &images {
        let bytes = match source {
            ImageSource::File(path) => std::fs::read(path).with_context(|| path.display().to_string())?,
            ImageSource::Bytes(bytes) => bytes.clone(),
        };
        let (image, build_id) = cfi_image(&bytes).with_context(|| format!("image of {name}"))?;
        let origin = match source {
            ImageSource::File(path) => match WORKLOADS.iter().find(|w| jni_library_name(w) == *name) {
                Some(w) => format!("tests/java/{}", w.jni_source),
                None => path.display().to_string(),
            },
            ImageSource::Bytes(_) => "[vdso]".to_string(),
        };
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&image)?;
        let gz = gz.finish()?;
        std::fs::write(out.join(format!("{name}.gz")), &gz)?;
        manifest.push_str(&format!("image {name} {origin} {build_id}\n"));
        if name == "libc.so.6" {
            // `__restore_rt` is a local symbol: only libc's debug file (libc6-dbg) names it.
            let address = debug_symbol(&build_id, "__restore_rt")?;
            manifest.push_str(&format!("symbol {name} __restore_rt {address:#x}\n"));
        }
        eprintln!("{name}: {} bytes gzipped", gz.len());
    }
    std::fs::write(out.join("images.txt"), manifest)?;
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

enum ImageSource {
    File(PathBuf),
    Bytes(Vec<u8>),
}

struct Recording {
    maps: Maps,
    maps_text: String,
    threads: BTreeMap<String, ThreadRecord>,
    vdso: Option<Vec<u8>>,
    command: String,
}

fn jni_library_name(w: &Workload) -> String {
    format!("lib{}.so", w.class.to_lowercase())
}

fn build_jni_library(w: &Workload, scratch: &Path) -> anyhow::Result<PathBuf> {
    let out = scratch.join(jni_library_name(w));
    let include = Path::new(JDK).join("include");
    status(
        Command::new("gcc")
            .args(["-O2", "-fomit-frame-pointer", "-shared", "-fPIC", "-pthread", "-o"])
            .arg(&out)
            .arg("-I")
            .arg(&include)
            .arg("-I")
            .arg(include.join("linux"))
            .arg(root().join("tests/java").join(w.jni_source)),
    )?;
    Ok(out)
}

/// Kills the workload however the recording ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn record(w: &Workload, java_dir: &Path, library: &Path, scratch: &Path) -> anyhow::Result<Recording> {
    let java = Path::new(JDK).join("bin/java");
    let mut cmd = Command::new(&java);
    cmd.args(JVM_FLAGS).arg("-cp").arg(java_dir).args([w.class, "60"]).arg(library);
    let command =
        format!("java {} {} 60 {}", JVM_FLAGS.join(" "), w.class, library.file_name().unwrap().to_string_lossy());
    let mut child = Child(cmd.stdout(Stdio::piped()).spawn().context("starting java")?);
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().context("no stdout")?).read_line(&mut line)?;
    if !line.starts_with("ready") {
        bail!("{}: no ready line: {line:?}", w.name);
    }
    std::thread::sleep(w.settle);
    let pid = child.0.id();
    // Stopped, so the maps, the thread names and the core describe one moment.
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    let maps_text = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let mut names = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let task = task?;
        let comm = std::fs::read_to_string(task.path().join("comm"))?;
        let lwp: u32 = task.file_name().to_string_lossy().parse()?;
        names.insert(lwp, comm.trim_end().to_string());
    }
    let core = scratch.join("core");
    status(Command::new("gcore").arg("-o").arg(&core).arg(pid.to_string()).stdout(Stdio::null()))?;
    drop(child);
    let core = scratch.join(format!("core.{pid}"));
    let (maps_file, out_file, vdso_file, script) =
        (scratch.join("maps"), scratch.join("gdb.out"), scratch.join("vdso"), scratch.join("record.py"));
    std::fs::write(&maps_file, &maps_text)?;
    std::fs::write(&script, GDB_SCRIPT)?;
    let _ = std::fs::remove_file(&vdso_file);
    let gdb = Command::new("gdb")
        .args(["-batch", "-nx", "-x"])
        .arg(&script)
        .arg(&java)
        .arg(&core)
        .env("JOULAR_FIXTURE_MAPS", &maps_file)
        .env("JOULAR_FIXTURE_OUT", &out_file)
        .env("JOULAR_FIXTURE_VDSO", &vdso_file)
        .output()
        .context("running gdb (apt-get install gdb)")?;
    let _ = std::fs::remove_file(&core);
    if !gdb.status.success() {
        bail!("gdb failed: {}", String::from_utf8_lossy(&gdb.stderr));
    }
    let text = std::fs::read_to_string(&out_file)?;
    let mut threads = BTreeMap::new();
    let mut current: Option<(String, ThreadRecord)> = None;
    for line in text.lines() {
        let mut fields = line.splitn(2, ' ');
        match (fields.next(), fields.next()) {
            (Some("thread"), Some(rest)) => {
                let lwp: u32 = rest.split(' ').next().unwrap_or_default().parse()?;
                let name = match names.get(&lwp) {
                    _ if lwp == pid => "main".to_string(),
                    Some(n) => n.clone(),
                    None => format!("lwp-{lwp}"),
                };
                let head = format!("thread {rest}");
                if let Some((name, t)) =
                    current.replace((name, ThreadRecord { head, frames: vec![], stack: String::new() }))
                {
                    threads.entry(name).or_insert(t);
                }
            }
            (Some("frame"), Some(rest)) => {
                let f: Vec<&str> = rest.splitn(4, ' ').collect();
                let pc = u64::from_str_radix(f[0].trim_start_matches("0x"), 16)?;
                if let Some((_, t)) = current.as_mut() {
                    t.frames.push(Frame { pc, kind: f.get(2).unwrap_or(&"").to_string(), line: line.to_string() });
                }
            }
            (Some("stack"), Some(_)) => {
                if let Some((_, t)) = current.as_mut() {
                    t.stack = line.to_string();
                }
            }
            _ => bail!("unexpected gdb output line {line:?}"),
        }
    }
    if let Some((name, t)) = current {
        threads.entry(name).or_insert(t);
    }
    // The first of several threads of one name (GC workers) is kept.
    threads.retain(|name, _| w.threads.contains(&name.as_str()));
    let vdso = std::fs::read(&vdso_file).ok();
    Ok(Recording { maps: Maps::parse(&maps_text), maps_text, threads, vdso, command })
}

fn write_workload(
    w: &Workload,
    r: &Recording,
    out: &Path,
    images: &mut BTreeMap<String, ImageSource>,
) -> anyhow::Result<()> {
    let missing: Vec<_> = w.threads.iter().filter(|t| !r.threads.contains_key(**t)).collect();
    if !missing.is_empty() {
        bail!("{}: threads not found: {missing:?}", w.name);
    }
    // The files any kept frame is in, and every executable mapping of them.
    let mut files: Vec<&str> = Vec::new();
    for t in r.threads.values() {
        for f in &t.frames {
            if let Some(path) = r.maps.path_of(f.pc) {
                if !files.contains(&path) {
                    files.push(path);
                }
            }
        }
    }
    let mut text = format!(
        "# Recorded by `cargo xtask record-unwind-fixture` from a gcore core of\n\
         #   {}\n\
         # (the system's JDK 17, its JNI library built with gcc -O2 -fomit-frame-pointer).\n\
         # map: the process's executable mappings of the files below (/proc/<pid>/maps, the path\n\
         #   replaced by the image's name, images.txt).\n\
         # thread <lwp> <rip> <rsp> <rbp> <name>: a thread's registers in the core, then its frame lines:\n\
         #   gdb's backtrace of it, `frame <pc> <sp> <kind> <gdb's name>`, inline and tail-call frames\n\
         #   left out (gdb makes them up from debug information; they share a machine frame), up to\n\
         #   the first pc in no file mapping (JIT code: gdb goes on from there by heuristics), and its\n\
         #   stack from rsp to the highest sp of those frames, `stack <address> <hex>`.\n",
        r.command
    );
    for line in r.maps_text.lines() {
        let m = Maps::parse(line);
        let Some((_, _, head, path)) = m.mappings.first() else { continue };
        if !files.contains(&path.as_str()) {
            continue;
        }
        let name = path.rsplit('/').next().unwrap_or(path);
        let image = if path == "[vdso]" { "vdso" } else { name };
        text.push_str(&format!("map {head} {}\n", if path == "[vdso]" { "[vdso]" } else { image }));
        if !images.contains_key(image) {
            let source = match path.as_str() {
                "[vdso]" => ImageSource::Bytes(r.vdso.clone().context("no vDSO dumped")?),
                p => ImageSource::File(PathBuf::from(p)),
            };
            images.insert(image.to_string(), source);
        }
    }
    for name in w.threads {
        let t = &r.threads[*name];
        // Names may hold spaces: the name goes last, after the registers.
        text.push_str(&format!("{} {name}\n", t.head));
        for f in &t.frames {
            text.push_str(&f.line);
            text.push('\n');
        }
        text.push_str(&t.stack);
        text.push('\n');
    }
    std::fs::write(out.join(format!("{}.txt", w.name)), text)?;
    Ok(())
}

/// The file with every byte zeroed but what the row builder reads, and its build id (hex).
fn cfi_image(bytes: &[u8]) -> anyhow::Result<(Vec<u8>, String)> {
    let file = object::File::parse(bytes)?;
    let object::File::Elf64(elf) = &file else { bail!("not a 64-bit ELF file") };
    let e = elf.endian();
    let header = elf.elf_header();
    use object::read::elf::FileHeader as _;
    let mut keep: Vec<(u64, u64)> = vec![
        (0, 64),
        (header.e_phoff(e), u64::from(header.e_phnum(e)) * 56),
        (header.e_shoff(e), u64::from(header.e_shnum(e)) * 64),
    ];
    let shstrndx = usize::from(header.e_shstrndx(e));
    for section in file.sections() {
        let name = section.name().unwrap_or_default();
        if section.index().0 == shstrndx || matches!(name, ".eh_frame" | ".debug_frame") {
            keep.extend(section.file_range());
        }
    }
    let mut image = vec![0u8; bytes.len()];
    for (offset, len) in keep {
        let (start, end) = (offset as usize, (offset + len) as usize);
        let end = end.min(bytes.len());
        image[start.min(end)..end].copy_from_slice(&bytes[start.min(end)..end]);
    }
    let build_id = file.build_id()?.map(|id| id.iter().map(|b| format!("{b:02x}")).collect()).unwrap_or_default();
    Ok((image, build_id))
}

/// A symbol's address in the debug file of the build id (Debian's `*-dbg` packages).
fn debug_symbol(build_id: &str, symbol: &str) -> anyhow::Result<u64> {
    let path = format!("/usr/lib/debug/.build-id/{}/{}.debug", &build_id[..2], &build_id[2..]);
    let bytes = std::fs::read(&path).with_context(|| format!("{path} (apt-get install libc6-dbg)"))?;
    let file = object::File::parse(&*bytes)?;
    let found = file.symbols().find(|s| s.name() == Ok(symbol)).with_context(|| format!("{symbol} in {path}"))?;
    Ok(found.address())
}
