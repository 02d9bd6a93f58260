//! Kernel addresses through kallsyms, parsed once. blazesym re-parses a kallsyms file whose
//! metadata changed (its kernel cache always auto-reloads), and /proc/kallsyms's inode, with its
//! times, can be recreated whenever the dentry cache is shrunk: a steady-state profiler spent half
//! its CPU formatting and parsing kallsyms (5 MB, ~50 ms a time). So blazesym is given a sealed
//! in-memory copy (a memfd nobody can change), and a new copy is made only when the list of
//! loaded modules changed since the last one (a module loaded after start is the one way
//! new kernel text appears). That list is checked at most once per `MODULES_CHECK_INTERVAL`, and
//! it must be checked even when every address resolves: kallsyms has no symbol sizes, so an
//! address in a module loaded later resolves to the last symbol below it, a wrong name.
//!
//! The first copy is made at the first kernel address, not at start: a profile of user code
//! may never need one, and start-up runs inside the target's first seconds.
//!
//! All of that is the fallback. When the profiler's eBPF object is loaded, the kernel names
//! the addresses itself (`KernelNames`, a `bpf_snprintf("%ps")` per address): no copy, no
//! parse, and always current, modules included.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use blazesym::symbolize::source::{Kernel, Source};
use blazesym::symbolize::{Input, Symbolizer};
use blazesym::MaybeDefault;

use super::native::resolve;
use crate::ebpf::kernel_names::KernelNames;

/// Modules files are small (a line per module); a bigger one is not what we think it is.
const MAX_MODULES_BYTES: u64 = 1 << 20;
const MODULES_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// kallsyms is ~5 MB with every module; far more is not kallsyms.
const MAX_KALLSYMS_BYTES: u64 = 256 << 20;

pub struct KernelResolver {
    /// The kernel's own lookup, while it works.
    kernel_names: Option<KernelNames>,
    symbolizer: Symbolizer,
    kallsyms: PathBuf,
    /// The copy blazesym reads, when one could be made (else it reads `kallsyms` itself).
    snapshot: Option<Snapshot>,
    /// Whether the kernel named an address yet (logged once).
    kernel_named: bool,
    /// Whether kallsyms was read yet (at the first kernel address it has to name).
    kallsyms_read: bool,
    modules: PathBuf,
    /// Hash of the modules list at the last parse (`None`: no such file, e.g. no module support).
    modules_seen: Option<u64>,
    last_check: Option<Instant>,
    min_check_interval: Duration,
    reloads: u64,
}

impl KernelResolver {
    /// `proc_root` is normally `/proc`; tests give a fake tree with `kallsyms` and `modules`.
    pub fn new(proc_root: &std::path::Path, kernel_names: Option<KernelNames>) -> Self {
        let modules = proc_root.join("modules");
        let kallsyms = proc_root.join("kallsyms");
        KernelResolver {
            kernel_names,
            symbolizer: symbolizer(),
            snapshot: None,
            kernel_named: false,
            kallsyms_read: false,
            kallsyms,
            modules_seen: None,
            modules,
            last_check: None,
            min_check_interval: MODULES_CHECK_INTERVAL,
            reloads: 0,
        }
    }

    #[cfg(test)]
    fn with_check_interval(mut self, interval: Duration) -> Self {
        self.min_check_interval = interval;
        self
    }

    /// Times kallsyms was parsed again after the first time (a module list change).
    pub fn reloads(&self) -> u64 {
        self.reloads
    }

    /// One name per address (`None` when unresolved), in input order.
    pub fn resolve(&mut self, addrs: &[u64]) -> Vec<Option<String>> {
        if addrs.is_empty() {
            return Vec::new();
        }
        if let Some(kernel) = &self.kernel_names {
            match kernel.names(addrs) {
                Ok(names) => {
                    if !self.kernel_named {
                        log::info!("kernel frames are named by the kernel's own symbol table");
                        self.kernel_named = true;
                    }
                    return names;
                }
                Err(e) => {
                    log::warn!("the kernel's symbol lookup failed ({e}); naming kernel frames through /proc/kallsyms from now on");
                    self.kernel_names = None;
                }
            }
        }
        if !self.kallsyms_read {
            log::info!("kernel frames are named through {}", self.kallsyms.display());
            self.kallsyms_read = true;
            self.modules_seen = fingerprint(&self.modules);
            self.last_check = Some(Instant::now());
            self.snapshot = Snapshot::of(&self.kallsyms);
        } else if self.modules_changed() {
            self.snapshot = Snapshot::of(&self.kallsyms);
            self.symbolizer = symbolizer();
            self.reloads += 1;
        }
        resolve(&self.symbolizer, &self.source(), Input::AbsAddr(addrs))
    }

    fn source(&self) -> Source<'static> {
        Source::Kernel(Kernel {
            kallsyms: MaybeDefault::Some(
                self.snapshot.as_ref().map_or_else(|| self.kallsyms.clone(), |s| s.path.clone()),
            ),
            // kallsyms is always there and covers modules; a vmlinux search costs disk reads.
            vmlinux: MaybeDefault::None,
            debug_syms: false,
            ..Kernel::default()
        })
    }

    fn modules_changed(&mut self) -> bool {
        if self.last_check.is_some_and(|at| at.elapsed() < self.min_check_interval) {
            return false;
        }
        self.last_check = Some(Instant::now());
        let now = fingerprint(&self.modules);
        let changed = now != self.modules_seen;
        self.modules_seen = now;
        changed
    }
}

/// A sealed memfd holding one copy of kallsyms, and the `/proc/self/fd` path that opens it.
struct Snapshot {
    _file: std::fs::File,
    path: PathBuf,
}

impl Snapshot {
    fn of(kallsyms: &std::path::Path) -> Option<Self> {
        match Self::copy(kallsyms) {
            Ok(s) => Some(s),
            Err(e) => {
                log::debug!("no in-memory copy of {}: {e}; reading it in place", kallsyms.display());
                None
            }
        }
    }

    fn copy(kallsyms: &std::path::Path) -> std::io::Result<Self> {
        use std::io::{Read, Write};
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: a valid NUL-terminated name and flags; the fd is owned by the File below.
        let fd =
            unsafe { libc::memfd_create(c"joular-kallsyms".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd was just created and is not owned elsewhere.
        let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
        let copied = std::io::copy(&mut std::fs::File::open(kallsyms)?.take(MAX_KALLSYMS_BYTES), &mut file)?;
        file.flush()?;
        if copied == 0 {
            return Err(std::io::Error::other("empty"));
        }
        let seals = libc::F_SEAL_WRITE | libc::F_SEAL_GROW | libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL;
        // SAFETY: fcntl on our own fd.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        Ok(Snapshot { _file: file, path })
    }
}

fn symbolizer() -> Symbolizer {
    Symbolizer::builder().enable_code_info(false).enable_inlined_fns(false).build()
}

fn fingerprint(modules: &std::path::Path) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    use std::io::Read;
    let file = std::fs::File::open(modules).ok()?;
    let mut text = Vec::new();
    file.take(MAX_MODULES_BYTES).read_to_end(&mut text).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    Some(h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CORE: &str = "ffffffff81000000 T _stext\nffffffff81000100 T do_work\nffffffff81000200 T do_more\n";

    fn fake_proc(kallsyms: &str, modules: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kallsyms"), kallsyms).unwrap();
        std::fs::write(dir.path().join("modules"), modules).unwrap();
        dir
    }

    #[test]
    fn a_module_loaded_after_start_resolves_once_the_modules_change() {
        let proc = fake_proc(CORE, "");
        let mut k = KernelResolver::new(proc.path(), None).with_check_interval(Duration::ZERO);
        let module_fn = 0xffff_ffff_c000_0010;
        assert_eq!(k.resolve(&[0xffff_ffff_8100_0110]), vec![Some("do_work".to_string())]);
        // Not loaded yet: kallsyms has no sizes, so the address falls to the last symbol below it.
        assert_eq!(k.resolve(&[module_fn]), vec![Some("do_more".to_string())]);
        // The module appears: new text in kallsyms and a new line in the modules list.
        std::fs::write(proc.path().join("kallsyms"), format!("{CORE}ffffffffc0000000 t mod_fn\t[mymod]\n")).unwrap();
        std::fs::write(proc.path().join("modules"), "mymod 16384 0 - Live 0xffffffffc0000000\n").unwrap();
        assert_eq!(
            k.resolve(&[module_fn, 0xffff_ffff_8100_0210]),
            vec![Some("mod_fn".to_string()), Some("do_more".to_string())]
        );
        assert_eq!(k.reloads(), 1);
    }

    #[test]
    fn kallsyms_is_read_at_the_first_kernel_address_not_at_start() {
        let proc = fake_proc("ffffffff81000000 T _stext\nffffffff81000100 T at_start\n", "");
        let mut k = KernelResolver::new(proc.path(), None).with_check_interval(Duration::ZERO);
        // No kernel address yet: nothing is read (a missing kallsyms is not even noticed).
        std::fs::remove_file(proc.path().join("kallsyms")).unwrap();
        assert_eq!(k.resolve(&[]), Vec::<Option<String>>::new());
        // The copy is made now, so it holds kallsyms as it is at the first kernel address.
        std::fs::write(proc.path().join("kallsyms"), CORE).unwrap();
        assert_eq!(k.resolve(&[0xffff_ffff_8100_0110]), vec![Some("do_work".to_string())]);
        assert_eq!(k.reloads(), 0);
    }

    #[test]
    fn kallsyms_is_not_parsed_again_while_the_modules_stay_the_same() {
        let proc = fake_proc(CORE, "a 1 0 - Live 0x0\n");
        let mut k = KernelResolver::new(proc.path(), None).with_check_interval(Duration::ZERO);
        assert_eq!(k.resolve(&[0xffff_ffff_8100_0110]), vec![Some("do_work".to_string())]);
        // kallsyms changes under us (as /proc's inode and times can) but no module was loaded:
        // the parsed copy is kept, and so is the name.
        std::fs::write(proc.path().join("kallsyms"), "ffffffff81000000 T _stext\nffffffff81000100 T renamed\n")
            .unwrap();
        assert_eq!(k.resolve(&[0xffff_ffff_8100_0110, 0xffff_ffff_8000_0000]), vec![Some("do_work".to_string()), None]);
        assert_eq!(k.reloads(), 0);
    }
}
