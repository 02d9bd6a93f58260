//! Makes sure the eBPF toolchain is present: the nightly's `rust-src`, and a `bpf-linker`
//! built against the nightly's own LLVM (a bpf-linker on another LLVM emits objects rustc's
//! bitcode does not match). Takes seconds when everything is there.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _};

use crate::run::{output, status};

const BPF_LINKER_VERSION: &str = "0.13.0";

pub fn ensure() -> anyhow::Result<()> {
    ensure_rust_src()?;
    ensure_bpf_linker()?;
    eprintln!("setup: eBPF toolchain ready");
    Ok(())
}

fn ensure_rust_src() -> anyhow::Result<()> {
    let installed = output(Command::new("rustup").args(["component", "list", "--toolchain", "nightly", "--installed"]))
        .context("`rustup` and a nightly toolchain are needed: `rustup toolchain install nightly`")?;
    if installed.lines().any(|l| l.starts_with("rust-src")) {
        return Ok(());
    }
    status(Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", "nightly"]))
}

fn nightly_sysroot() -> anyhow::Result<PathBuf> {
    let s = output(Command::new("rustc").args(["+nightly", "--print", "sysroot"]))
        .context("cannot run `rustc +nightly`: install a nightly toolchain")?;
    Ok(PathBuf::from(s.trim()))
}

/// The nightly's LLVM shared library, e.g. `libLLVM.so.22.1-rust-1.97.0-nightly`.
fn nightly_llvm(sysroot: &Path) -> anyhow::Result<(PathBuf, String)> {
    for entry in std::fs::read_dir(sysroot.join("lib"))? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if let Some(rest) = name.strip_prefix("libLLVM.so.") {
            let major = rest.split('.').next().unwrap_or_default().to_string();
            return Ok((sysroot.join("lib").join(&name), major));
        }
    }
    bail!("no libLLVM.so.* in {}/lib: the nightly toolchain looks incomplete", sysroot.display())
}

fn ensure_bpf_linker() -> anyhow::Result<()> {
    let sysroot = nightly_sysroot()?;
    let (llvm_lib, llvm_major) = nightly_llvm(&sysroot)?;
    let stamp = crate::run::target_dir().join("xtask-bpf-linker.stamp");
    let want = format!("{BPF_LINKER_VERSION} {}", llvm_lib.display());
    let have = output(Command::new("bpf-linker").arg("--version"));
    if have.as_deref().is_some_and(|v| v.contains(BPF_LINKER_VERSION))
        && std::fs::read_to_string(&stamp).ok().as_deref().is_none_or(|s| s == want)
    {
        return Ok(());
    }
    eprintln!(
        "setup: building bpf-linker {BPF_LINKER_VERSION} against the nightly's LLVM {llvm_major} (about a minute)"
    );
    // bpf-linker's build wants `$LLVM_PREFIX/lib/libLLVM.so`; the nightly ships it under a
    // versioned name, so point a prefix of symlinks at it.
    let prefix = crate::run::target_dir().join("llvm-prefix");
    let lib = prefix.join("lib");
    std::fs::create_dir_all(&lib)?;
    for name in ["libLLVM.so".to_string(), llvm_lib.file_name().unwrap().to_string_lossy().into_owned()] {
        let link = lib.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&llvm_lib, &link)?;
    }
    status(
        Command::new(env!("CARGO"))
            .args([
                "install",
                "bpf-linker",
                "--force",
                "--version",
                BPF_LINKER_VERSION,
                "--no-default-features",
                "--features",
            ])
            .arg(format!("llvm-{llvm_major}"))
            .env("LLVM_PREFIX", &prefix),
    )?;
    std::fs::create_dir_all(stamp.parent().unwrap())?;
    std::fs::write(&stamp, want)?;
    Ok(())
}
