//! What the security tests share: a real unprivileged attacker (`nobody`), sysctls set for a
//! test and restored, directories with the permissions an attack needs, and root's files that
//! must come out of an attack byte for byte as they went in.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const NOBODY: u32 = 65534;

/// Sets a sysctl for the test's lifetime and restores it even when the test fails.
pub struct Sysctl {
    name: &'static str,
    old: String,
}

impl Sysctl {
    pub fn set(name: &'static str, value: u8) -> Self {
        let path = Path::new("/proc/sys").join(name.replace('.', "/"));
        let old = std::fs::read_to_string(&path).unwrap().trim().to_string();
        std::fs::write(&path, value.to_string()).unwrap();
        Sysctl { name, old }
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = std::fs::write(Path::new("/proc/sys").join(self.name.replace('.', "/")), &self.old);
    }
}

/// A unique tag for this run's paths and processes.
pub fn tag() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    format!("{}-{}", std::process::id(), now.as_nanos())
}

/// The command to run `argv` as `nobody` (the attacker).
pub fn nobody_cmd(argv: &[&str]) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).args(argv);
    cmd
}

/// Runs a shell command as `nobody`.
pub fn as_nobody(script: &str) {
    let st = nobody_cmd(&["sh", "-c", script]).status().unwrap();
    assert!(st.success(), "attacker step failed: {script}");
}

/// A directory under /var/tmp with `mode`, optionally owned by nobody.
pub fn dir_with(mode: u32, owned_by_nobody: bool) -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix("joular-sec-").tempdir_in("/var/tmp").unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    if owned_by_nobody {
        std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    }
    dir
}

/// A directory `nobody` can use: 0755, optionally owned by nobody.
pub fn open_dir(owned_by_nobody: bool) -> tempfile::TempDir {
    dir_with(0o755, owned_by_nobody)
}

/// A private stand-in for `/tmp`: root's, mode 1777 (sticky, world-writable). Private so tests
/// running at once never meet in it.
pub fn sticky_dir() -> tempfile::TempDir {
    dir_with(0o1777, false)
}

/// Root's private files (0600 in a 0700 directory), which an attack tries to overwrite.
pub struct Victim {
    _parent: tempfile::TempDir,
    pub dir: PathBuf,
    names: Vec<String>,
}

impl Victim {
    pub fn new(names: &[&str]) -> Self {
        Self::with_dir_mode(names, 0o700)
    }

    /// Files still 0600, in a directory of `mode` (0755 lets nobody reach them to hard-link them).
    pub fn with_dir_mode(names: &[&str], mode: u32) -> Self {
        let parent = open_dir(false);
        let dir = parent.path().join("root-only");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        for name in names {
            let file = dir.join(name);
            std::fs::write(&file, Self::content(name)).unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        Victim { _parent: parent, dir, names: names.iter().map(|n| n.to_string()).collect() }
    }

    fn content(name: &str) -> String {
        format!("root's secret {name}\n")
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Nothing added, removed or changed: same names, bytes, owner and mode.
    pub fn assert_untouched(&self, what: &str) {
        let mut names: Vec<String> = std::fs::read_dir(&self.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut want = self.names.clone();
        want.sort();
        assert_eq!(names, want, "{what}: files appeared in or vanished from root's directory");
        for name in &self.names {
            let file = self.file(name);
            assert_eq!(
                std::fs::read_to_string(&file).unwrap(),
                Self::content(name),
                "{what}: {} was overwritten",
                file.display()
            );
            let meta = std::fs::metadata(&file).unwrap();
            assert_eq!(
                (meta.uid(), meta.mode() & 0o7777),
                (0, 0o600),
                "{what}: {} changed owner or mode",
                file.display()
            );
        }
    }
}
