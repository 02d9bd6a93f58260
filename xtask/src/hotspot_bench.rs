//! What naming Java frames through HotSpot's tables costs, on a JVM with thousands of hot
//! methods (`tests/java/ManyMethods.java`: 2,000 class copies, 8,000 methods): each compiled
//! method's `Method*` read cold (first sight) and again (checked against the cache), and
//! each nmethod's pc resolved cold (debug info read) and again. The Method*s come from the
//! code heaps themselves, as the symbolizer would meet them.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use jvm_symbols::hotspot::codecache::{blocks, read_blob, BlobKind};
use jvm_symbols::hotspot::{CodeAt, HotspotJvm};

/// Kills the workload however the run ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn run(java_classes: &Path) -> anyhow::Result<()> {
    let mut child = Child(
        Command::new("java")
            .args(["-XX:+PreserveFramePointer", "-cp"])
            .arg(java_classes)
            .args(["ManyMethods", "120", "2000"])
            .stdout(Stdio::piped())
            .spawn()
            .context("starting java")?,
    );
    let mut ready = String::new();
    BufReader::new(child.0.stdout.as_mut().context("stdout")?).read_line(&mut ready)?;
    if !ready.starts_with("ready") {
        bail!("ManyMethods did not start: {ready:?}");
    }
    // Let the JIT compile the copies the warm-up made hot.
    std::thread::sleep(Duration::from_secs(5));
    let pid = child.0.id();
    let mut jvm = HotspotJvm::attach(Path::new("/proc"), pid)?;
    let code = jvm.layout().code.clone().context("no code-cache layout")?;
    let nmethods: Vec<(u64, u64)> = jvm
        .code_heaps()
        .iter()
        .flat_map(|heap| blocks(jvm.reader(), &code, heap, 1_000_000))
        .filter_map(|block| read_blob(jvm.reader(), &code, block + code.heap_block_size).ok())
        .filter_map(|blob| match blob.kind {
            BlobKind::Nmethod { method, .. } => Some((blob.code_begin, method)),
            BlobKind::Other => None,
        })
        .collect();
    let mut methods: Vec<u64> = nmethods.iter().map(|&(_, m)| m).collect();
    methods.sort_unstable();
    methods.dedup();

    let start = Instant::now();
    let named = methods.iter().filter(|&&m| jvm.method(m).is_some()).count();
    let cold = start.elapsed();
    let start = Instant::now();
    let named_again = methods.iter().filter(|&&m| jvm.method(m).is_some()).count();
    let warm = start.elapsed();
    let start = Instant::now();
    let chains = nmethods.iter().filter(|&&(pc, _)| matches!(jvm.code_at(pc + 1), CodeAt::Java(_))).count();
    let pcs_cold = start.elapsed();
    let start = Instant::now();
    let chains_again = nmethods.iter().filter(|&&(pc, _)| matches!(jvm.code_at(pc + 1), CodeAt::Java(_))).count();
    let pcs_warm = start.elapsed();
    // The JIT keeps replacing code while this runs, so the second pass may find fewer live
    // nmethods; the Method*s themselves stay.
    if named == 0 || named_again != named {
        bail!("inconsistent reads: {named} then {named_again} methods named");
    }
    let per = |d: Duration, n: usize| d.as_nanos() as f64 / n.max(1) as f64 / 1000.0;
    println!("\n== HotSpot symbolization: JVM with {} nmethods, {} distinct compiled Method*s ({named} named, {chains} then {chains_again} pcs with Java frames) ==", nmethods.len(), methods.len());
    println!("Method* first read (checked)   {:>8.1} us each", per(cold, methods.len()));
    println!("Method* again (cache + check)  {:>8.1} us each", per(warm, methods.len()));
    println!(
        "pc in an nmethod, first time   {:>8.1} us each (blob, debug info, inlined chain)",
        per(pcs_cold, nmethods.len())
    );
    println!(
        "pc in an nmethod, again        {:>8.1} us each (blob re-read, cached debug info)",
        per(pcs_warm, nmethods.len())
    );
    println!("reader caches: ~{} KiB; misses: {:?}", jvm.cached_bytes() / 1024, jvm.misses());
    Ok(())
}
