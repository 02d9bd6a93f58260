//! Entry points are in `entry.rs`; maps live in `maps.rs`, the accounting logic in `account.rs`.
//! The programs exist only for the bpf target (aya-ebpf builds for nothing else); on the host
//! the binary is empty, so `cargo clippy --workspace --all-targets` builds the whole workspace.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]

#[cfg(target_arch = "bpf")]
mod account;
#[cfg(target_arch = "bpf")]
mod codeblob;
#[cfg(target_arch = "bpf")]
mod devices;
#[cfg(target_arch = "bpf")]
mod entry;
#[cfg(target_arch = "bpf")]
mod follow;
#[cfg(target_arch = "bpf")]
mod ksym;
#[cfg(target_arch = "bpf")]
mod maps;
#[cfg(target_arch = "bpf")]
mod native;
#[cfg(target_arch = "bpf")]
mod report;
#[cfg(target_arch = "bpf")]
mod stack_store;
#[cfg(target_arch = "bpf")]
mod walk;

#[cfg(not(target_arch = "bpf"))]
fn main() {}

#[cfg(all(target_arch = "bpf", not(test)))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[cfg(target_arch = "bpf")]
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
