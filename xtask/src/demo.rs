//! Profiles the bundled Java demo workload end to end.

use std::process::Command;

use anyhow::bail;

use crate::run::{build_profiler, compile_java, is_root, root, status};

pub fn run(seconds: u32) -> anyhow::Result<()> {
    if !is_root() {
        bail!("the profiler loads eBPF programs and needs root: run `sudo -E cargo xtask demo`");
    }
    crate::setup::ensure()?;
    let bin = build_profiler()?;
    let java = compile_java()?;
    eprintln!("== profiling the demo workload for {seconds} s ==");
    status(
        Command::new(bin)
            .args(["record", "--html", "--"])
            .args(["java", "-XX:+PreserveFramePointer", "-cp"])
            .arg(&java)
            .arg("EnergyDemo")
            .arg(seconds.to_string())
            .current_dir(root()),
    )
}
