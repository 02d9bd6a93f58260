//! `cargo xtask clippy`: the Rust gates CI runs, as aya's own xtask does them: clippy on the
//! host workspace (every target, tests and benches included) and on the eBPF crate for its own
//! target, both with warnings denied, and the fuzz targets (`fuzz/`, a workspace of its own)
//! checked to compile. `cargo xtask fmt-check` is the formatting gate, on both workspaces.

use std::process::Command;

use crate::run::{root, status, target_dir};

pub fn clippy() -> anyhow::Result<()> {
    crate::setup::ensure()?;
    status(
        Command::new(env!("CARGO"))
            .args(["clippy", "--workspace", "--all-targets", "--", "--deny", "warnings"])
            .current_dir(root()),
    )?;
    if crate::run::output(Command::new("cargo").args(["+nightly", "clippy", "--version"])).is_none() {
        status(Command::new("rustup").args(["component", "add", "clippy", "--toolchain", "nightly"]))?;
    }
    // The eBPF crate only exists for the bpf target, which needs nightly and core rebuilt, as
    // aya-build compiles it; its own target dir keeps the host's build cache warm.
    status(
        Command::new("cargo")
            .args(["+nightly", "clippy", "--release", "--target", "bpfel-unknown-none", "-Z", "build-std=core"])
            .arg("--target-dir")
            .arg(target_dir().join("bpf-clippy"))
            .args(["--", "--deny", "warnings"])
            .env_remove("RUSTC")
            .env_remove("RUSTC_WRAPPER")
            .env_remove("CARGO")
            .current_dir(root().join("joular-ebpf")),
    )?;
    fuzz_check()
}

/// The fuzz targets build on stable too: checking them here fails early on a library change
/// that breaks one, instead of at the end of CI in `cargo xtask fuzz`. They need no eBPF
/// object, and a target dir of their own keeps the host workspace's build cache.
fn fuzz_check() -> anyhow::Result<()> {
    status(
        Command::new(env!("CARGO"))
            .args(["check", "--bins", "--locked"])
            .arg("--target-dir")
            .arg(target_dir().join("fuzz-check"))
            .env("JOULAR_SKIP_EBPF", "1")
            .current_dir(root().join("fuzz")),
    )
}

/// `cargo fmt --all -- --check` on the host workspace, then on `fuzz/`, which `--all` does not
/// reach (the root `rustfmt.toml` applies to both).
pub fn fmt_check() -> anyhow::Result<()> {
    status(Command::new(env!("CARGO")).args(["fmt", "--all", "--", "--check"]).current_dir(root()))?;
    status(Command::new(env!("CARGO")).args(["fmt", "--all", "--", "--check"]).current_dir(root().join("fuzz")))
}
