//! The whole test suite: unit tests, then the root integration tests against real JVMs and
//! real eBPF. It installs what it needs (toolchain, Debian packages, JDK 11 and 21) first.

use std::process::Command;

use anyhow::bail;

use crate::run::{build_profiler, compile_java, is_root, root, status};

/// Debian packages the tests use, each with a command or file it installs: `go tool pprof`
/// reads our pprof files, a real Prometheus scrapes the exporter, `setcap` gives the
/// least-privilege test its file capabilities, a headless Chromium opens report.html, libc's
/// debug file names `start_thread`, `bpftool` lists the programs a run has loaded, and the real
/// applications ([`APP_PACKAGES`]).
const DEBIAN_PACKAGES: [(&str, &str); 6] = [
    ("golang-go", "go"),
    ("bpftool", "bpftool"),
    ("prometheus", "prometheus"),
    ("libcap2-bin", "setcap"),
    ("chromium", "chromium"),
    ("libc6-dbg", "/usr/share/doc/libc6-dbg/copyright"),
];

/// The real applications of the Jetty test and `compare-jfr`: Jetty 9.4 and H2 2.1 from Debian,
/// `wrk` to load Jetty over loopback, and bpftrace, which tells which threads JFR's signals
/// found on a CPU (`joular_tests::jfr_signals`).
pub const APP_PACKAGES: [(&str, &str); 4] = [
    ("jetty9", "/usr/share/jetty9/start.jar"),
    ("libh2-java", "/usr/share/java/h2.jar"),
    ("wrk", "wrk"),
    ("bpftrace", "bpftrace"),
];

pub fn run(filter: Option<&str>) -> anyhow::Result<()> {
    if !is_root() {
        bail!("the test suite loads eBPF programs and needs root: run it as root (e.g. `sudo -E cargo xtask test`)");
    }
    crate::setup::ensure()?;
    ensure_debian_packages(&DEBIAN_PACKAGES)?;
    ensure_debian_packages(&APP_PACKAGES)?;
    let filter_args: Vec<&str> = filter.into_iter().collect();

    // The eBPF crate only builds for the BPF target (joular-user's build script does that).
    eprintln!("== unit tests ==");
    status(
        Command::new(env!("CARGO"))
            .args(["test", "--workspace", "--exclude", "joular-tests", "--exclude", "joular-ebpf"])
            .args(&filter_args)
            .current_dir(root()),
    )?;

    eprintln!("== root integration tests (real JVMs, real eBPF) ==");
    let bin = build_profiler()?;
    let java = compile_java()?;
    let mut tests = Command::new(env!("CARGO"));
    tests
        // Every root test runs even after one fails: a CI log then shows all that failed.
        .args(["test", "-p", "joular-tests", "--no-fail-fast"])
        .args(&filter_args)
        .args(["--", "--test-threads=1"])
        .env("JOULAR_BIN", bin)
        .env("JOULAR_JAVA_DIR", java)
        .current_dir(root());
    // The Java-frames tests run on JDK 11, 21 and 25 as well as the system's 17.
    for (jdk, launcher) in crate::jdks::ensure()? {
        tests.env(format!("JOULAR_JAVA_{jdk}"), launcher);
    }
    status(&mut tests)
}

/// Installs the (package, command or absolute file) pairs whose command or file is missing.
pub fn ensure_debian_packages(packages: &[(&str, &str)]) -> anyhow::Result<()> {
    let missing: Vec<&str> = packages.iter().filter(|(_, what)| !installed(what)).map(|(pkg, _)| *pkg).collect();
    if missing.is_empty() {
        return Ok(());
    }
    status(Command::new("apt-get").arg("update").arg("-q"))?;
    status(
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    if missing.contains(&"jetty9") {
        // The package starts a Jetty service on a machine run by systemd; the tests start their
        // own, and an idle server beside them would only add a JVM to every host-wide run.
        let _ = Command::new("systemctl").args(["disable", "--now", "jetty9.service", "jetty9.timer"]).status();
    }
    Ok(())
}

fn installed(what: &str) -> bool {
    if what.starts_with('/') {
        return std::path::Path::new(what).exists();
    }
    Command::new("sh").args(["-c", &format!("command -v {what}")]).output().is_ok_and(|o| o.status.success())
}
