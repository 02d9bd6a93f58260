//! `cargo xtask dump-hotspot-fixture --java <java> --out <dir>`: runs the HotSpot fixture
//! workload on a given JVM and records, through jvm-symbols' own readers, the memory its
//! queries read (tables, the workload's nmethods, their scopes and line tables).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context as _};
use jvm_symbols::hotspot::{fixture, locate_tables, ProcessMemory};

use crate::run::{root, status, target_dir};

const CLASS: &str = "HotspotFixture";
/// Fixtures are committed: keep them small.
const MAX_FIXTURE_BYTES: usize = 5 << 20;

/// Kills the workload however the dump ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn run(java: &Path, out: &Path) -> anyhow::Result<()> {
    let classes = target_dir().join("hotspot-fixture-classes");
    std::fs::create_dir_all(&classes)?;
    let source: PathBuf = root().join("tests/fixtures/hotspot-src").join(format!("{CLASS}.java"));
    status(Command::new("javac").args(["--release", "11", "-d"]).arg(&classes).arg(&source))?;
    let mut child = Child(
        Command::new(java)
            .args(["-XX:+PreserveFramePointer", "-cp"])
            .arg(&classes)
            .args([CLASS, "60"])
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", java.display()))?,
    );
    let stdout = child.0.stdout.take().context("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    if !line.starts_with("ready") {
        bail!("workload did not warm up: {line:?}");
    }
    // Let C2 finish the compilations the warm-up queued.
    std::thread::sleep(Duration::from_secs(3));
    let pid = child.0.id();
    let (_lib, symbols) = locate_tables(Path::new("/proc"), pid)?;
    let (memory, manifest) = fixture::record(ProcessMemory { pid }, &symbols, CLASS)?;
    drop(child);
    let bytes = memory.to_bytes();
    if bytes.len() > MAX_FIXTURE_BYTES {
        bail!("fixture is {} bytes, over {MAX_FIXTURE_BYTES}", bytes.len());
    }
    if manifest.nmethods.is_empty() {
        bail!("no compiled {CLASS} method found");
    }
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("memory.bin"), &bytes)?;
    std::fs::write(out.join("manifest.txt"), manifest.to_text())?;
    eprintln!(
        "HotSpot {}: {} nmethods, {} pcs, {} bytes -> {}",
        manifest.version,
        manifest.nmethods.len(),
        manifest.pcs.len(),
        bytes.len(),
        out.display()
    );
    Ok(())
}
