//! The attach client against real JDK 17 JVMs (`java`/`javac` on PATH). Runs as root
//! here, which lets one test start its JVM as another user.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use jvm_symbols::{
    attach, classify, discover, dump_perf_map, flag_from_vm_flags, CodeKind, Error, FlagState, Identity, Limits,
    PerfMapFile,
};

const TIMEOUT: Duration = Duration::from_secs(15);
const NOBODY: u32 = 65534;

struct Jvm {
    child: Child,
    _classes: tempfile::TempDir,
}

impl Jvm {
    fn start(flags: &[&str], uid: Option<u32>) -> Jvm {
        let classes = tempfile::tempdir().unwrap();
        std::fs::set_permissions(classes.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/HotLoop.java");
        let status = Command::new("javac").arg("-d").arg(classes.path()).arg(source).status().unwrap();
        assert!(status.success(), "javac failed");
        let mut command = Command::new("java");
        command
            .args(flags)
            .arg("-cp")
            .arg(classes.path())
            .arg("HotLoop")
            .current_dir(classes.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if let Some(uid) = uid {
            command.uid(uid).gid(uid);
        }
        let mut child = command.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert!(line.starts_with("ready"), "JVM did not start: {line:?}");
        Jvm { child, _classes: classes }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn assert_map_has_hot_method(jvm: &jvm_symbols::JvmInfo) {
    let mut map = PerfMapFile::for_jvm(&jvm.proc_dir, jvm.nspid, jvm.identity(), Limits::default());
    assert!(map.refresh().unwrap(), "{} not loaded", map.path().display());
    let index = map.index();
    assert!(index.len() > 50, "only {} entries", index.len());
    assert_eq!(index.bad_lines(), 0);
    let text = std::fs::read_to_string(map.path()).unwrap();
    let churn = text.lines().find(|l| l.contains("HotLoop.churn(int)")).expect("churn compiled");
    let start = u64::from_str_radix(churn.split(' ').next().unwrap().trim_start_matches("0x"), 16).unwrap();
    let symbol = index.lookup(start + 1).unwrap();
    assert_eq!(symbol.name, "long HotLoop.churn(int)");
    assert_eq!(classify(symbol.name), CodeKind::JavaMethod);
    assert!(text.lines().any(|l| l.ends_with(" Interpreter")));
}

#[test]
fn compiler_perfmap_over_attach() {
    let mut java = Jvm::start(&["-XX:+PreserveFramePointer"], None);
    let jvm = discover(Path::new("/proc"), java.pid()).unwrap().expect("a HotSpot JVM");
    assert!(jvm.jdk_version.as_deref().unwrap().starts_with("17"), "{:?}", jvm.jdk_version);
    assert_eq!(jvm.preserve_frame_pointer, FlagState::On);
    assert!(!jvm.in_container);
    let map_path = jvm.root().join(format!("tmp/perf-{}.map", jvm.nspid));
    let _ = std::fs::remove_file(&map_path);

    dump_perf_map(&jvm, TIMEOUT).unwrap();
    assert_map_has_hot_method(&jvm);
    let flags = attach::jcmd(&jvm, "VM.flags", TIMEOUT).unwrap();
    assert_eq!(flag_from_vm_flags(&flags, "PreserveFramePointer"), FlagState::On, "{flags}");
    assert!(java.alive());
    let _ = std::fs::remove_file(&map_path);
}

#[test]
fn attach_to_a_jvm_of_another_user() {
    let mut java = Jvm::start(&[], Some(NOBODY));
    let jvm = discover(Path::new("/proc"), java.pid()).unwrap().expect("a HotSpot JVM");
    assert_eq!((jvm.uid, jvm.gid), (NOBODY, NOBODY));
    assert_eq!(jvm.preserve_frame_pointer, FlagState::Off);
    let map_path = jvm.root().join(format!("tmp/perf-{}.map", jvm.nspid));
    let _ = std::fs::remove_file(&map_path);

    dump_perf_map(&jvm, TIMEOUT).unwrap();
    assert_map_has_hot_method(&jvm);
    // A map owned by someone else than the JVM's user is refused.
    let root = Identity { uid: 0, gid: 0, caps: u64::MAX };
    let mut wrong_owner = PerfMapFile::for_jvm(&jvm.proc_dir, jvm.nspid, root, Limits::default());
    assert!(matches!(wrong_owner.refresh(), Err(Error::Refused { .. })));
    let flags = attach::jcmd(&jvm, "VM.flags", TIMEOUT).unwrap();
    assert_eq!(flag_from_vm_flags(&flags, "PreserveFramePointer"), FlagState::Off);
    assert!(java.alive());
    let _ = std::fs::remove_file(&map_path);
}

#[test]
fn disabled_attach_mechanism_is_reported_without_signalling() {
    let mut java = Jvm::start(&["-XX:+DisableAttachMechanism"], None);
    let jvm = discover(Path::new("/proc"), java.pid()).unwrap().unwrap();
    let err = dump_perf_map(&jvm, TIMEOUT).unwrap_err();
    assert!(matches!(err, Error::AttachDisabled { .. }), "{err}");
    assert!(err.to_string().contains("-XX:+DisableAttachMechanism"));
    assert!(java.alive());
}

#[test]
fn xrs_jvm_is_attached_without_a_signal() {
    // -Xrs: SIGQUIT would terminate this JVM, but HotSpot then opens its attach socket
    // at startup, so no signal is needed.
    let mut java = Jvm::start(&["-Xrs"], None);
    let jvm = discover(Path::new("/proc"), java.pid()).unwrap().unwrap();
    assert!(!jvm.catches_sigquit);
    let flags = attach::jcmd(&jvm, "VM.flags", TIMEOUT).unwrap();
    assert!(flags.contains("-XX:+ReduceSignalUsage"), "{flags}");
    assert!(java.alive());
}

#[test]
fn process_without_sigquit_handler_is_not_signalled() {
    // `sleep` has no SIGQUIT handler: a signal would kill it.
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id();
    let jvm = jvm_symbols::JvmInfo {
        pid,
        nspid: pid,
        uid: 0,
        gid: 0,
        cap_permitted: u64::MAX,
        proc_dir: Path::new("/proc").join(pid.to_string()),
        in_container: false,
        java_home: None,
        jdk_version: None,
        preserve_frame_pointer: FlagState::Unknown,
        attach_disabled: false,
        catches_sigquit: false,
    };
    let err = attach::jcmd(&jvm, "Compiler.perfmap", TIMEOUT).unwrap_err();
    assert!(matches!(err, Error::SigquitNotCaught { .. }), "{err}");
    std::thread::sleep(Duration::from_millis(100));
    assert!(sleeper.try_wait().unwrap().is_none(), "sleep was signalled");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[test]
fn not_a_jvm_is_not_discovered() {
    assert_eq!(discover(Path::new("/proc"), std::process::id()).unwrap(), None);
}
