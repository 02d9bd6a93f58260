//! Builds the eBPF object with aya-build and leaves it in OUT_DIR for `include_bytes_aligned!`.
//!
//! Without bpf-linker (or with `JOULAR_SKIP_EBPF=1`) it writes an empty stub instead, as aya's
//! own integration tests do, so `cargo check`, `clippy` and the pure unit tests work anywhere.
//! The loader refuses a stub object with a message that names `cargo xtask setup`.

use std::path::PathBuf;

use anyhow::{anyhow, Context as _};

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=JOULAR_SKIP_EBPF");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let stub = out_dir.join("joular-ebpf");
    if std::env::var_os("JOULAR_SKIP_EBPF").is_some_and(|v| v != "0") || !has_bpf_linker() {
        println!("cargo:warning=bpf-linker not found or JOULAR_SKIP_EBPF set: embedding an empty eBPF stub (run `cargo xtask setup`)");
        std::fs::write(&stub, [])?;
        return Ok(());
    }
    let root_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?)
        .parent()
        .ok_or_else(|| anyhow!("joular-user has no parent directory"))?
        .join("joular-ebpf");
    let root_dir = root_dir.to_str().context("non-UTF-8 path to joular-ebpf")?;
    let ebpf_package = aya_build::Package { name: "joular-ebpf", root_dir, ..Default::default() };
    aya_build::build_ebpf([ebpf_package], aya_build::Toolchain::default())
}

fn has_bpf_linker() -> bool {
    std::process::Command::new("bpf-linker").arg("--version").output().is_ok_and(|o| o.status.success())
}
