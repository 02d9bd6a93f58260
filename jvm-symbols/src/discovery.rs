//! Is a process a HotSpot JVM, and what do we need to know to talk to it?
//! Everything is read from a proc root (`/proc` in production, a fake tree in tests).

use std::fs;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::maps::parse_maps;

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
}

/// Returns `Ok(None)` when `pid` is alive but not a HotSpot JVM.
pub fn discover(proc_root: &Path, pid: u32) -> Result<Option<JvmInfo>> {
    let proc_dir = proc_root.join(pid.to_string());
    let maps_path = proc_dir.join("maps");
    let maps = fs::File::open(&maps_path).map_err(|e| Error::io(&maps_path, e))?;
    let Some(libjvm) = parse_maps(BufReader::new(maps))
        .into_iter()
        .filter_map(|m| m.path)
        .find(|p| p.ends_with("/libjvm.so"))
    else {
        return Ok(None);
    };
    let status_path = proc_dir.join("status");
    let status = fs::read_to_string(&status_path).map_err(|e| Error::io(&status_path, e))?;
    let status = parse_status(&status).ok_or_else(|| Error::Refused {
        path: status_path,
        reason: "no NSpid/Uid/Gid/SigCgt lines".into(),
    })?;
    let args = jvm_options(&proc_dir);
    // <home>/lib/server/libjvm.so (JDK 9+) or <home>/jre/lib/amd64/server/libjvm.so (8).
    let java_home = Path::new(&libjvm)
        .ancestors()
        .skip(3)
        .find(|home| {
            let release = proc_dir.join("root").join(home.strip_prefix("/").unwrap_or(home)).join("release");
            release.is_file()
        })
        .map(Path::to_path_buf);
    let jdk_version = java_home.as_ref().and_then(|home| {
        let release = proc_dir.join("root").join(home.strip_prefix("/").unwrap_or(home)).join("release");
        parse_release_version(&fs::read_to_string(release).ok()?)
    });
    let in_container = match (
        fs::read_link(proc_dir.join("ns/mnt")),
        fs::read_link(proc_root.join("self/ns/mnt")),
    ) {
        (Ok(theirs), Ok(ours)) => theirs != ours,
        _ => false,
    };
    Ok(Some(JvmInfo {
        pid,
        nspid: status.nspid,
        uid: status.euid,
        gid: status.egid,
        proc_dir,
        in_container,
        java_home,
        jdk_version,
        preserve_frame_pointer: bool_flag(&args, "PreserveFramePointer"),
        attach_disabled: bool_flag(&args, "DisableAttachMechanism") == FlagState::On,
        catches_sigquit: status.sig_caught & (1 << (libc::SIGQUIT - 1)) != 0,
    }))
}

struct Status {
    nspid: u32,
    euid: u32,
    egid: u32,
    sig_caught: u64,
}

fn parse_status(text: &str) -> Option<Status> {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .map(str::split_whitespace)
    };
    Some(Status {
        nspid: field("NSpid")?.last()?.parse().ok()?,
        euid: field("Uid")?.nth(1)?.parse().ok()?,
        egid: field("Gid")?.nth(1)?.parse().ok()?,
        sig_caught: u64::from_str_radix(field("SigCgt")?.next()?, 16).ok()?,
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
        bytes
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect()
    };
    let environ = nul_split(fs::read(proc_dir.join("environ")).unwrap_or_default());
    let env_options = |name: &str| -> Vec<String> {
        environ
            .iter()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .map(|v| v.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let mut options = env_options("JAVA_TOOL_OPTIONS");
    let cmdline = nul_split(fs::read(proc_dir.join("cmdline")).unwrap_or_default());
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
        None if options.iter().any(|o| o.starts_with('@') || o.starts_with("-XX:Flags=")) => {
            FlagState::Unknown
        }
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
            FakeProc {
                dir: tempfile::tempdir().unwrap(),
            }
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
}
