use super::*;

#[inline(never)]
fn marker_function_for_native_lookup() -> u64 {
    std::hint::black_box(7)
}

fn marker() -> u64 {
    marker_function_for_native_lookup as *const () as usize as u64
}

#[test]
fn only_a_fuse_filesystem_is_taken_for_one() {
    let file = tempfile::tempfile().unwrap();
    assert!(!on_fuse(&file).unwrap(), "a temporary file");
    assert!(!on_fuse(&File::open("/proc/self/stat").unwrap()).unwrap(), "procfs");
}

#[test]
fn a_mapping_refused_once_is_not_opened_again_and_counted_by_reason() {
    let mut resolver = NativeResolver::new(Path::new("/proc"), 64 << 20);
    let pid = std::process::id();
    let mappings = read_file_mappings(Path::new("/proc"), pid).unwrap();
    let mapping = mappings.iter().find(|m| matches!(m.what, Mapped::File(_))).expect("a mapped file");
    resolver.refuse_mapping(pid, mapping, "on_fuse", "on a FUSE filesystem");
    assert_eq!(resolver.copy_for(pid, mapping), None, "not opened again");
    assert_eq!(resolver.stats().files_bad.get("on_fuse"), Some(&1));
    assert!(resolver.stats().bad_examples[0].ends_with(": on a FUSE filesystem"));
    resolver.process_ended(pid);
    assert!(resolver.copy_for(pid, mapping).is_some(), "a new process at that pid is another process");
}

fn named(name: NativeName) -> String {
    match name {
        NativeName::Named(name) => name,
        other => format!("{other:?}"),
    }
}

fn resolver() -> NativeResolver {
    NativeResolver::new(Path::new("/proc"), 256 << 20)
}

/// The value of `name` in the symbol table of libc's debug file (read with `object`, not
/// blazesym), and that file's path.
fn libc_debug_symbol(name: &str) -> (u64, PathBuf) {
    use object::{Object, ObjectSymbol};
    let libc = std::fs::read("/lib/x86_64-linux-gnu/libc.so.6").unwrap();
    let build_id = object::File::parse(&*libc).unwrap().build_id().unwrap().expect("libc has a build id").to_vec();
    let path = super::super::debug_file::build_id_path(Path::new(DEBUG_ROOT), &build_id).unwrap();
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (Debian's libc6-dbg must be installed)", path.display()));
    let debug = object::File::parse(&*bytes).unwrap();
    let sym = debug.symbols().find(|s| s.name() == Ok(name)).unwrap_or_else(|| panic!("{name} in {path:?}"));
    (sym.address(), path)
}

#[test]
fn libc_start_thread_is_named_from_its_debug_file() {
    let (getpid, _) = libc_debug_symbol("__getpid");
    let (start_thread, path) = libc_debug_symbol("start_thread");
    // libc's load bias, from a function this process calls through it.
    let bias = libc::getpid as *const () as u64 - getpid;
    let pc = bias + start_thread + 4;
    let pid = std::process::id();
    let mut r = resolver();
    assert_eq!(named(r.user(pid, &[pc])[0].clone()), "start_thread", "with {}", path.display());
    assert_eq!(r.stats().debug_files, 1, "{:?}", r.stats());
    let held = r.stats().copy_bytes;
    r.process_ended(pid);
    assert_eq!(r.stats().copy_bytes, 0, "the debug copy ({held} bytes with the rest) is released");

    // Without the debug directory, the stripped libc does not know the name.
    let empty = tempfile::tempdir().unwrap();
    let mut r = resolver();
    r.debug_root = empty.path().to_owned();
    assert_ne!(named(r.user(pid, &[pc])[0].clone()), "start_thread");
    assert_eq!(r.stats().debug_files, 0);
}

#[test]
fn our_own_functions_are_named_from_a_private_copy() {
    let mut r = resolver();
    let pid = std::process::id();
    let name = named(r.user(pid, &[marker(), 0])[0].clone());
    assert!(name.contains("marker_function_for_native_lookup"), "{name}");
    assert_eq!(r.user(pid, &[0]), [NativeName::Unknown], "an unmapped address");
    let st = r.stats().clone();
    assert!(st.files_copied >= 1 && st.copy_bytes > 0, "{st:?}");
    // Asking again uses the same copy.
    r.user(pid, &[marker()]);
    assert_eq!(r.stats().files_copied, st.files_copied);
    r.process_ended(pid);
    assert_eq!((r.stats().copy_bytes, r.copies.len()), (0, 0), "nothing is held for an ended process");
    assert!(named(r.user(pid, &[marker()])[0].clone()).contains("marker_function_for_native_lookup"));
}

#[test]
fn a_file_over_the_budget_is_not_copied_and_counted() {
    let mut r = NativeResolver::new(Path::new("/proc"), 1024);
    assert_eq!(r.user(std::process::id(), &[marker()]), [NativeName::Unavailable]);
    assert_eq!(r.stats().files_bad.get("over_budget"), Some(&1), "{:?}", r.stats());
    assert!(r.stats().bad_examples[0].contains("over the"), "{:?}", r.stats().bad_examples);
    r.user(std::process::id(), &[marker()]);
    assert_eq!(r.stats().files_bad.get("over_budget"), Some(&1), "a bad version is tried once");
}

/// A copy of our test binary mapped whole at some address, and the address in it of the
/// marker function.
struct MappedCopy {
    _dir: tempfile::TempDir,
    path: PathBuf,
    base: *mut libc::c_void,
    len: usize,
    marker: u64,
}

impl MappedCopy {
    fn new() -> Self {
        let own = read_file_mappings(Path::new("/proc"), std::process::id()).unwrap();
        let marker_offset = find(&own, marker()).expect("marker is mapped").file_offset(marker());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libmarker.so");
        std::fs::copy(std::env::current_exe().unwrap(), &path).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let len = file.metadata().unwrap().len() as usize;
        // SAFETY: a fresh private read-only mapping of a file we own; unmapped on drop,
        // and never read through (only its address range is looked up).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        MappedCopy { _dir: dir, path, base, len, marker: base as u64 + marker_offset }
    }
}

impl Drop for MappedCopy {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

#[test]
fn a_truncated_library_is_not_named_and_a_restored_one_is_again() {
    let lib = MappedCopy::new();
    let original = std::fs::read(&lib.path).unwrap();
    let mut r = resolver();
    let pid = std::process::id();
    let lookup = |r: &mut NativeResolver| r.user(pid, &[lib.marker])[0].clone();
    assert!(named(lookup(&mut r)).contains("marker_function_for_native_lookup"));
    std::fs::OpenOptions::new().write(true).open(&lib.path).unwrap().set_len(0).unwrap();
    std::thread::sleep(RECOPY_AFTER);
    assert_eq!(lookup(&mut r), NativeName::Unavailable, "an empty file names nothing, and faults nothing");
    assert_eq!(r.stats().files_bad.get("not_elf"), Some(&1), "{:?}", r.stats());
    std::fs::write(&lib.path, &original).unwrap();
    // A mapping that could not be read is tried again after a while, not at every stack, and
    // a mapping's file is copied at most once a second.
    std::thread::sleep(RETRY_UNAVAILABLE_AFTER.max(RECOPY_AFTER));
    assert!(named(lookup(&mut r)).contains("marker_function_for_native_lookup"), "restored");
    // Its tail rewritten with garbage (the section headers and symbol tables): whatever the
    // copy names, nothing faults.
    let mut garbage = original.clone();
    let half = garbage.len() / 2;
    garbage[half..].iter_mut().enumerate().for_each(|(i, b)| *b = (i * 7919 % 251) as u8);
    std::fs::write(&lib.path, &garbage).unwrap();
    let _ = lookup(&mut r);
    assert!(r.stats().copy_bytes < original.len() as u64, "one version held at a time: {:?}", r.stats());
}

#[test]
fn a_copy_names_its_file_after_the_file_was_truncated() {
    let lib = MappedCopy::new();
    let own = read_file_mappings(Path::new("/proc"), std::process::id()).unwrap();
    let offset = find(&own, lib.marker).expect("mapped").file_offset(lib.marker);
    let file = std::fs::File::open(&lib.path).unwrap();
    let copy = copy_symbol_sections(&file, file.metadata().unwrap().len(), u64::MAX).unwrap();
    std::fs::OpenOptions::new().write(true).open(&lib.path).unwrap().set_len(0).unwrap();
    let mut elf = Elf::new(copy.path());
    elf.debug_syms = false;
    let r = resolver();
    let names = resolve(&r.user, &Source::Elf(elf), Input::FileOffset(&[offset]));
    assert!(names[0].as_deref().unwrap_or_default().contains("marker_function_for_native_lookup"), "{names:?}");
}

#[test]
fn the_vdso_is_named() {
    let mut r = resolver();
    let pid = std::process::id();
    let mappings = read_file_mappings(Path::new("/proc"), pid).unwrap();
    let Some(vdso) = mappings.iter().find(|m| m.what == Mapped::Vdso) else {
        panic!("no vDSO mapped: {mappings:?}");
    };
    // SAFETY: getauxval has no preconditions.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    assert_eq!(base, vdso.start);
    // Some address inside the vDSO's text names one of its functions.
    let names = r.user(pid, &(vdso.start..vdso.end).step_by(16).collect::<Vec<_>>());
    assert!(names.into_iter().map(named).any(|n| n.contains("vdso") || n.contains("clock_gettime")));
}
