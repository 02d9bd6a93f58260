//! User side of `joular_ksym` (joular-ebpf/src/ksym.rs): kernel addresses named by the kernel's
//! own symbol table, a few hundred microseconds for a cycle's new kernel frames where reading
//! /proc/kallsyms costs ~40 ms of CPU each time.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use aya::maps::{Array, MapData};
use aya::programs::RawTracePoint;
use aya::Ebpf;
use joular_ebpf::{KsymNames, KSYM_BATCH};

use super::ProbeError;

const BPF_PROG_TEST_RUN: libc::c_long = 10;

/// The `test` member of the kernel's `union bpf_attr` (include/uapi/linux/bpf.h).
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    /// Explicit so it is zero: the kernel refuses non-zero bytes past the fields it knows.
    _pad: u32,
}

/// A loaded `joular_ksym` and its output map; cheap to share (one user at a time: the
/// symbol worker). Shared handles serialize on the mutex, since every run writes one map value.
#[derive(Clone)]
pub struct KernelNames {
    inner: Arc<std::sync::Mutex<Inner>>,
}

struct Inner {
    prog: OwnedFd,
    names: Array<MapData, KsymNames>,
}

impl std::fmt::Debug for KernelNames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KernelNames")
    }
}

impl KernelNames {
    /// Loads `joular_ksym` from `ebpf` and takes its map; `Ok(None)`-like errors (an old
    /// kernel without `bpf_snprintf`) are for the caller to log: kallsyms then names frames.
    pub(super) fn load(ebpf: &mut Ebpf) -> Result<Self, ProbeError> {
        const NAME: &str = "joular_ksym";
        let prog: &mut RawTracePoint = ebpf
            .program_mut(NAME)
            .ok_or(ProbeError::Program(NAME, aya::programs::ProgramError::NotLoaded))?
            .try_into()
            .map_err(|e| ProbeError::Program(NAME, e))?;
        prog.load().map_err(|e| ProbeError::Program(NAME, e))?;
        let fd = prog.fd().map_err(|e| ProbeError::Program(NAME, e))?;
        let prog = fd
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| ProbeError::Io(format!("duplicating {NAME}'s descriptor"), e))?;
        let map = ebpf.take_map("KSYM_NAMES").ok_or(ProbeError::MissingMap("KSYM_NAMES"))?;
        let names = Array::try_from(map).map_err(|e| ProbeError::Map("KSYM_NAMES", e))?;
        Ok(KernelNames { inner: Arc::new(std::sync::Mutex::new(Inner { prog, names })) })
    }

    /// One name per address, in order: `None` where no kernel symbol covers it. An error
    /// means the lookup itself failed (the caller falls back to kallsyms).
    pub fn names(&self, addrs: &[u64]) -> std::io::Result<Vec<Option<String>>> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::with_capacity(addrs.len());
        for batch in addrs.chunks(KSYM_BATCH) {
            let mut args = [0u64; KSYM_BATCH + 1];
            args[0] = batch.len() as u64;
            args[1..=batch.len()].copy_from_slice(batch);
            inner.run(&args)?;
            let names = inner.names.get(&0, 0).map_err(std::io::Error::other)?;
            for i in 0..batch.len() {
                out.push(parse_name(&names.names[i], names.len[i]));
            }
        }
        Ok(out)
    }
}

impl Inner {
    fn run(&self, args: &[u64; KSYM_BATCH + 1]) -> std::io::Result<()> {
        let mut attr = TestRunAttr {
            prog_fd: self.prog.as_raw_fd() as u32,
            ctx_in: args.as_ptr() as u64,
            ctx_size_in: std::mem::size_of_val(args) as u32,
            ..TestRunAttr::default()
        };
        // SAFETY: `attr` is a valid BPF_PROG_TEST_RUN attribute whose ctx_in points at `args`,
        // alive for the call; the kernel only reads it and writes `retval`/`duration`.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_TEST_RUN,
                &mut attr as *mut TestRunAttr,
                std::mem::size_of::<TestRunAttr>(),
            )
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if attr.retval != 0 {
            return Err(std::io::Error::other("joular_ksym found no output map"));
        }
        Ok(())
    }
}

/// The symbol in one `%ps` result: `name`, or `name [module]` (the module is dropped, as
/// kallsyms-based naming does); `0x…` (no symbol covers the address), an error or a name cut
/// short by the buffer is `None`.
pub fn parse_name(buf: &[u8], len: i64) -> Option<String> {
    if len <= 1 || len as usize > buf.len() {
        return None;
    }
    let text = &buf[..len as usize - 1];
    let text = std::str::from_utf8(text).ok()?;
    let name = text.split(' ').next()?;
    if name.is_empty() || name.starts_with("0x") {
        return None;
    }
    Some(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(text: &str) -> ([u8; 128], i64) {
        let mut b = [0u8; 128];
        b[..text.len()].copy_from_slice(text.as_bytes());
        (b, text.len() as i64 + 1)
    }

    #[test]
    fn a_core_kernel_symbol_is_its_name() {
        let (b, len) = buf("vfs_read");
        assert_eq!(parse_name(&b, len).as_deref(), Some("vfs_read"));
    }

    #[test]
    fn a_module_symbol_loses_its_module() {
        let (b, len) = buf("e1000_clean [e1000]");
        assert_eq!(parse_name(&b, len).as_deref(), Some("e1000_clean"));
    }

    #[test]
    fn an_address_no_symbol_covers_is_unresolved() {
        let (b, len) = buf("0xffffffffc0001234");
        assert_eq!(parse_name(&b, len), None);
    }

    #[test]
    fn errors_and_cut_names_are_unresolved() {
        let (b, _) = buf("vfs_read");
        assert_eq!(parse_name(&b, -7), None, "bpf_snprintf error");
        assert_eq!(parse_name(&b, 0), None, "nothing written");
        assert_eq!(parse_name(&b, 129), None, "longer than the buffer: cut");
        let (b, len) = buf("vfs_read");
        assert_eq!(parse_name(&b[..4], len), None, "a length past the buffer is refused");
    }
}
