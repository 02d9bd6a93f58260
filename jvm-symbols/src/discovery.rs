//! Is a process a HotSpot JVM, and what do we need to know to talk to it?
//! Everything is read from a proc root (`/proc` in production, a fake tree in tests).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::identity::Identity;
use crate::maps::{parse_maps, MAX_MAPS_BYTES};
use crate::safe_open::{open_readable, read_bounded};

/// Bounds on what is read of a process's /proc files (maps: [`MAX_MAPS_BYTES`]). They are the
/// kernel's, but their size is the target's doing (a huge environment, thousands of mappings).
const MAX_STATUS_BYTES: u64 = 64 << 10;
const MAX_ARGS_BYTES: u64 = 1 << 20;
/// A JDK's `release` file is a dozen lines; the target chooses what sits at that path.
const MAX_RELEASE_BYTES: u64 = 64 << 10;

/// Whether a boolean JVM flag is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagState {
    On,
    Off,
    /// Not decidable from the command line (e.g. an `@argfile` or `-XX:Flags=` is used).
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JvmInfo {
    pub pid: u32,
    /// The PID inside the JVM's own PID namespace (last `NSpid:` field): HotSpot names its
    /// files after it.
    pub nspid: u32,
    /// Effective uid/gid: HotSpot only trusts attach peers with these (or root).
    pub uid: u32,
    pub gid: u32,
    /// Permitted capabilities (`CapPrm:`): a root JVM has them all, an ordinary one none.
    pub cap_permitted: u64,
    /// `<proc root>/<pid>`; its `root/` is the JVM's file system (container or not).
    pub proc_dir: PathBuf,
    /// Whether the JVM lives in another mount namespace than the profiler (a container).
    pub in_container: bool,
    /// The JDK home as the JVM sees it (parent of `lib/server/libjvm.so`).
    pub java_home: Option<PathBuf>,
    /// `JAVA_VERSION` from `<java_home>/release`, e.g. `17.0.15`.
    pub jdk_version: Option<String>,
    pub preserve_frame_pointer: FlagState,
    pub attach_disabled: bool,
    /// Whether the JVM has a SIGQUIT handler; without one (`-Xrs`) SIGQUIT kills it.
    pub catches_sigquit: bool,
}

impl JvmInfo {
    /// The JVM's root directory as the profiler sees it.
    pub fn root(&self) -> PathBuf {
        self.proc_dir.join("root")
    }

    /// Who the profiler becomes to touch this JVM's files.
    pub fn identity(&self) -> Identity {
        Identity { uid: self.uid, gid: self.gid, caps: self.cap_permitted }
    }
}

/// Reads at most `max_bytes` of a /proc file (anything longer is cut).
fn read_proc(path: &Path, max_bytes: u64) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    File::open(path).and_then(|f| f.take(max_bytes).read_to_end(&mut data)).map_err(|e| Error::io(path, e))?;
    Ok(data)
}

/// Whether the process still has a SIGQUIT handler: checked again right before signalling,
/// since a pid can be reused by a process that SIGQUIT would kill.
pub(crate) fn catches_sigquit(proc_dir: &Path) -> bool {
    read_proc(&proc_dir.join("status"), MAX_STATUS_BYTES)
        .ok()
        .and_then(|bytes| parse_status(&String::from_utf8_lossy(&bytes)))
        .is_some_and(|status| status.catches_sigquit())
}

/// Returns `Ok(None)` when `pid` is alive but not a HotSpot JVM.
pub fn discover(proc_root: &Path, pid: u32) -> Result<Option<JvmInfo>> {
    let proc_dir = proc_root.join(pid.to_string());
    let maps_path = proc_dir.join("maps");
    let maps = File::open(&maps_path).map_err(|e| Error::io(&maps_path, e))?;
    let Some(libjvm) = parse_maps(BufReader::new(maps.take(MAX_MAPS_BYTES)))
        .into_iter()
        .filter_map(|m| m.path)
        .find(|p| p.ends_with("/libjvm.so"))
    else {
        return Ok(None);
    };
    let status_path = proc_dir.join("status");
    let status = String::from_utf8_lossy(&read_proc(&status_path, MAX_STATUS_BYTES)?).into_owned();
    let status = parse_status(&status)
        .ok_or_else(|| Error::Refused { path: status_path, reason: "no NSpid/Uid/Gid/SigCgt lines".into() })?;
    let args = jvm_options(&proc_dir);
    let identity = Identity { uid: status.euid, gid: status.egid, caps: status.cap_permitted };
    let (java_home, jdk_version) = java_home_and_version(&proc_dir, Path::new(&libjvm), identity);
    let in_container =
        match (std::fs::read_link(proc_dir.join("ns/mnt")), std::fs::read_link(proc_root.join("self/ns/mnt"))) {
            (Ok(theirs), Ok(ours)) => theirs != ours,
            _ => false,
        };
    Ok(Some(JvmInfo {
        pid,
        nspid: status.nspid,
        uid: status.euid,
        gid: status.egid,
        cap_permitted: status.cap_permitted,
        proc_dir,
        in_container,
        java_home,
        jdk_version,
        preserve_frame_pointer: bool_flag(&args, "PreserveFramePointer"),
        attach_disabled: bool_flag(&args, "DisableAttachMechanism") == FlagState::On,
        catches_sigquit: status.catches_sigquit(),
    }))
}

/// The JDK home (`<home>/lib/server/libjvm.so` on JDK 9+, `<home>/jre/lib/amd64/server/libjvm.so`
/// on 8) and its `JAVA_VERSION`, from the `release` file beside it. That file is the target's:
/// it is read as the JVM's user, without following symlinks, non-blocking and size-capped; a
/// refusal is said once (discovery runs once per JVM) and costs only the version.
fn java_home_and_version(proc_dir: &Path, libjvm: &Path, identity: Identity) -> (Option<PathBuf>, Option<String>) {
    let root = proc_dir.join("root");
    for home in libjvm.ancestors().skip(3).take(2) {
        let release = home.strip_prefix("/").unwrap_or(home).join("release");
        match open_readable(&root, &release, identity, MAX_RELEASE_BYTES)
            .and_then(|mut file| read_bounded(&mut file, MAX_RELEASE_BYTES))
        {
            Ok(bytes) => {
                return (Some(home.to_owned()), parse_release_version(&String::from_utf8_lossy(&bytes)));
            }
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                log::warn!("JVM {}: not reading its JDK release file: {e}", proc_dir.display());
                return (Some(home.to_owned()), None);
            }
        }
    }
    (None, None)
}

struct Status {
    nspid: u32,
    euid: u32,
    egid: u32,
    sig_caught: u64,
    cap_permitted: u64,
}

impl Status {
    fn catches_sigquit(&self) -> bool {
        self.sig_caught & (1 << (libc::SIGQUIT - 1)) != 0
    }
}

fn parse_status(text: &str) -> Option<Status> {
    let field =
        |key: &str| text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':')).map(str::split_whitespace);
    Some(Status {
        nspid: field("NSpid")?.last()?.parse().ok()?,
        euid: field("Uid")?.nth(1)?.parse().ok()?,
        egid: field("Gid")?.nth(1)?.parse().ok()?,
        sig_caught: u64::from_str_radix(field("SigCgt")?.next()?, 16).ok()?,
        // Absent only in fake trees: no capability is the safe reading.
        cap_permitted: field("CapPrm")
            .and_then(|mut f| f.next())
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .unwrap_or(0),
    })
}

fn parse_release_version(release: &str) -> Option<String> {
    let value = release.lines().find_map(|l| l.strip_prefix("JAVA_VERSION="))?;
    Some(value.trim().trim_matches('"').to_owned())
}

/// The JVM options in the order HotSpot applies them, later winning:
/// `JAVA_TOOL_OPTIONS`, the command line, `_JAVA_OPTIONS`.
fn jvm_options(proc_dir: &Path) -> Vec<String> {
    let nul_split = |bytes: Vec<u8>| -> Vec<String> {
        bytes.split(|&b| b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
    };
    let environ = nul_split(read_proc(&proc_dir.join("environ"), MAX_ARGS_BYTES).unwrap_or_default());
    let env_options = |name: &str| -> Vec<String> {
        environ
            .iter()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .map(|v| v.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let mut options = env_options("JAVA_TOOL_OPTIONS");
    let cmdline = nul_split(read_proc(&proc_dir.join("cmdline"), MAX_ARGS_BYTES).unwrap_or_default());
    // Options end at the main class or `-jar`; flags after it belong to the application.
    options.extend(
        cmdline
            .into_iter()
            .skip(1)
            .take_while(|a| a.starts_with('-') || a.starts_with('@'))
            .take_while(|a| a != "-jar" && a != "-m" && a != "--module"),
    );
    options.extend(env_options("_JAVA_OPTIONS"));
    options
}

fn bool_flag(options: &[String], flag: &str) -> FlagState {
    let on = format!("-XX:+{flag}");
    let off = format!("-XX:-{flag}");
    let last = options.iter().rev().find(|o| **o == on || **o == off);
    match last {
        Some(o) if *o == on => FlagState::On,
        Some(_) => FlagState::Off,
        None if options.iter().any(|o| o.starts_with('@') || o.starts_with("-XX:Flags=")) => FlagState::Unknown,
        None => FlagState::Off,
    }
}

/// Reads a flag from `VM.flags` output, which lists every flag not at its default
/// (`-XX:+PreserveFramePointer`) and so is authoritative: absent means off.
pub fn flag_from_vm_flags(vm_flags: &str, flag: &str) -> FlagState {
    let on = format!("-XX:+{flag}");
    let off = format!("-XX:-{flag}");
    match vm_flags.split_whitespace().rev().find(|t| *t == on || *t == off) {
        Some(t) if t == on => FlagState::On,
        _ => FlagState::Off,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIBJVM: &str = "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so";

    struct FakeProc {
        dir: tempfile::TempDir,
    }

    impl FakeProc {
        fn new() -> Self {
            use std::os::unix::fs::PermissionsExt;
            let dir = tempfile::tempdir().unwrap();
            // The JDK's files are read as the JVM's user (uid 1001 below), who must see them.
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            FakeProc { dir }
        }

        fn release(&self, pid: u32) -> PathBuf {
            self.dir.path().join(format!("{pid}/root/usr/lib/jvm/java-17-openjdk-amd64/release"))
        }

        fn add(&self, pid: u32, maps_path: &str, nspid: &str, sigcgt: &str, cmdline: &[&str], environ: &[&str]) {
            let p = self.dir.path().join(pid.to_string());
            std::fs::create_dir_all(p.join("root/usr/lib/jvm/java-17-openjdk-amd64")).unwrap();
            std::fs::write(
                p.join("maps"),
                format!("7f1b24851000-7f1b255a4000 r-xp 00251000 fe:00 315160 {maps_path}\n"),
            )
            .unwrap();
            std::fs::write(
                p.join("status"),
                format!(
                    "Name:\tjava\nUid:\t1000\t1001\t1001\t1001\nGid:\t50\t51\t51\t51\nNSpid:\t{nspid}\nSigCgt:\t{sigcgt}\n"
                ),
            )
            .unwrap();
            let nul = |v: &[&str]| v.iter().flat_map(|s| [s.as_bytes(), b"\0"].concat()).collect::<Vec<u8>>();
            std::fs::write(p.join("cmdline"), nul(cmdline)).unwrap();
            std::fs::write(p.join("environ"), nul(environ)).unwrap();
            std::fs::write(
                p.join("root/usr/lib/jvm/java-17-openjdk-amd64/release"),
                "IMPLEMENTOR=\"Debian\"\nJAVA_VERSION=\"17.0.15\"\n",
            )
            .unwrap();
        }
    }

    #[test]
    fn discovers_a_jvm_in_a_container() {
        let fake = FakeProc::new();
        fake.add(
            4242,
            LIBJVM,
            "4242\t7",
            "0000000101005ccd",
            &["java", "-XX:+PreserveFramePointer", "-cp", ".", "Main", "-XX:-PreserveFramePointer"],
            &["HOME=/root"],
        );
        let jvm = discover(fake.dir.path(), 4242).unwrap().unwrap();
        assert_eq!(jvm.nspid, 7);
        assert_eq!((jvm.uid, jvm.gid), (1001, 51));
        assert_eq!(jvm.java_home.as_deref(), Some(Path::new("/usr/lib/jvm/java-17-openjdk-amd64")));
        assert_eq!(jvm.jdk_version.as_deref(), Some("17.0.15"));
        // The application's own `-XX:-PreserveFramePointer` argument after Main does not count.
        assert_eq!(jvm.preserve_frame_pointer, FlagState::On);
        assert!(!jvm.attach_disabled);
        assert!(jvm.catches_sigquit);
        assert_eq!(jvm.root(), fake.dir.path().join("4242/root"));
    }

    #[test]
    fn reads_flags_from_environment_and_signal_mask() {
        let fake = FakeProc::new();
        fake.add(
            10,
            LIBJVM,
            "10",
            "0000000101005cc9", // bit 3 (SIGQUIT) clear: -Xrs
            &["java", "-XX:+DisableAttachMechanism", "-jar", "app.jar"],
            &["JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer -Xmx1g", "_JAVA_OPTIONS=-XX:-PreserveFramePointer"],
        );
        let jvm = discover(fake.dir.path(), 10).unwrap().unwrap();
        assert_eq!(jvm.preserve_frame_pointer, FlagState::Off);
        assert!(jvm.attach_disabled);
        assert!(!jvm.catches_sigquit);
    }

    #[test]
    fn argfile_makes_the_flag_unknown() {
        let fake = FakeProc::new();
        fake.add(11, LIBJVM, "11", "0", &["java", "@opts", "Main"], &[]);
        let jvm = discover(fake.dir.path(), 11).unwrap().unwrap();
        assert_eq!(jvm.preserve_frame_pointer, FlagState::Unknown);
    }

    #[test]
    fn not_a_jvm() {
        let fake = FakeProc::new();
        fake.add(12, "/usr/bin/python3", "12", "0", &["python3"], &[]);
        assert_eq!(discover(fake.dir.path(), 12).unwrap(), None);
        assert!(discover(fake.dir.path(), 13).is_err());
    }

    #[test]
    fn vm_flags_output() {
        let out = "-XX:CICompilerCount=3 -XX:+PreserveFramePointer -XX:+UseG1GC";
        assert_eq!(flag_from_vm_flags(out, "PreserveFramePointer"), FlagState::On);
        assert_eq!(flag_from_vm_flags("-XX:+UseG1GC", "PreserveFramePointer"), FlagState::Off);
    }

    #[test]
    fn a_hostile_release_file_costs_only_the_version() {
        let fake = FakeProc::new();
        let add = |pid| fake.add(pid, LIBJVM, &pid.to_string(), "0", &["java", "Main"], &[]);
        // 3 GB (sparse): refused by size, not read.
        add(20);
        let big = std::fs::File::options().write(true).open(fake.release(20)).unwrap();
        big.set_len(3 << 30).unwrap();
        // A symlink to a file that would block a reader forever.
        add(21);
        std::fs::remove_file(fake.release(21)).unwrap();
        std::os::unix::fs::symlink("/proc/kmsg", fake.release(21)).unwrap();
        // A FIFO nobody writes to.
        add(22);
        std::fs::remove_file(fake.release(22)).unwrap();
        nix::unistd::mkfifo(&fake.release(22), nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
        for pid in [20, 21, 22] {
            let started = std::time::Instant::now();
            let jvm = discover(fake.dir.path(), pid).unwrap().unwrap();
            assert!(started.elapsed() < std::time::Duration::from_secs(2), "pid {pid} took {:?}", started.elapsed());
            assert_eq!(jvm.jdk_version, None, "pid {pid}");
            assert_eq!(jvm.java_home.as_deref(), Some(Path::new("/usr/lib/jvm/java-17-openjdk-amd64")));
        }
    }
}
