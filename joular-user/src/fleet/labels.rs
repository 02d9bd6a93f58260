//! Who a process is, for metric labels: comm, exe, cgroup path and container id, read from a proc
//! root (`/proc` on the host; a fake tree in tests).

use std::fs;
use std::path::PathBuf;

/// Identity of one process. `(pid, start_ticks)` tells a process from a later one that reuses its pid.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessLabels {
    pub pid: u32,
    pub comm: String,
    /// Target of `/proc/<pid>/exe`; `None` for kernel threads or when it may not be read.
    pub exe: Option<String>,
    /// The process's cgroup: the v2 path, or on a v1-only host the `name=systemd` (else `cpu`) path.
    pub cgroup: Option<String>,
    /// Full 64-hex id of the container (docker, containerd/CRI, CRI-O, podman) the process runs in.
    pub container_id: Option<String>,
    /// Start time in clock ticks after boot (field 22 of `stat`).
    pub start_ticks: u64,
}

/// Where the registry learns about processes; `ProcFs` is the real one.
pub trait ProcessTable {
    /// Labels of a live process, `None` once it has exited.
    fn labels(&self, pid: u32) -> Option<ProcessLabels>;
    /// Start time of whatever process holds `pid` now, `None` if none does (cheaper than `labels`:
    /// the registry asks it for every tracked process every cycle).
    fn start_ticks(&self, pid: u32) -> Option<u64>;
}

/// A proc filesystem mounted at `root`. In a container the host's `/proc` (with `hostPID`) is needed to
/// see every process.
#[derive(Debug, Clone)]
pub struct ProcFs {
    root: PathBuf,
}

impl ProcFs {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn stat(&self, pid: u32) -> Option<(String, u64)> {
        let text = read_bounded(&self.root.join(pid.to_string()).join("stat"))?;
        parse_stat(&text)
    }
}

/// A process's /proc file, at most 64 KiB of it: the kernel writes them, but their length and
/// bytes are the process's doing (cgroup paths, names). Not UTF-8 is read lossily: a name of
/// invalid bytes (`prctl(PR_SET_NAME)` takes any) must not make a live process look gone.
fn read_bounded(path: &std::path::Path) -> Option<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    fs::File::open(path).ok()?.take(64 << 10).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

impl ProcessTable for ProcFs {
    fn labels(&self, pid: u32) -> Option<ProcessLabels> {
        let dir = self.root.join(pid.to_string());
        let (comm, start_ticks) = self.stat(pid)?;
        let exe = fs::read_link(dir.join("exe")).ok().map(|p| p.to_string_lossy().into_owned());
        let cgroup = read_bounded(&dir.join("cgroup")).and_then(|text| cgroup_path(&text).map(str::to_owned));
        let container_id = cgroup.as_deref().and_then(container_id);
        Some(ProcessLabels { pid, comm, exe, cgroup, container_id, start_ticks })
    }

    fn start_ticks(&self, pid: u32) -> Option<u64> {
        self.stat(pid).map(|(_, start)| start)
    }
}

/// `(comm, starttime)` from a `stat` line. comm may hold spaces and parentheses, so it ends at the
/// last `)`.
pub fn parse_stat(text: &str) -> Option<(String, u64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_owned();
    // After the comm come fields 3 (state) ... 22 (starttime).
    let start = text[close + 1..].split_whitespace().nth(19)?.parse().ok()?;
    Some((comm, start))
}

/// The cgroup path that names the process's workload, from `/proc/<pid>/cgroup` lines
/// `hierarchy:controllers:path`: the unified (v2) line when there is one, else v1's `name=systemd`, else
/// `cpu`, else the first line.
pub fn cgroup_path(text: &str) -> Option<&str> {
    let lines: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _hierarchy = parts.next()?;
            Some((parts.next()?, parts.next()?))
        })
        .collect();
    let pick = |want: &str| lines.iter().find(|(controllers, _)| controllers.split(',').any(|c| c == want));
    // Only the unified hierarchy has an empty controller list.
    lines
        .iter()
        .find(|(controllers, _)| controllers.is_empty())
        .or_else(|| pick("name=systemd"))
        .or_else(|| pick("cpu"))
        .or(lines.first())
        .map(|(_, path)| *path)
}

/// The container id in a cgroup path, leaf first so a nested container wins over its host container.
/// Runtimes name the leaf `docker-<id>.scope`, `cri-containerd-<id>.scope`, `crio-<id>.scope`,
/// `libpod-<id>.scope` (systemd driver) or `<id>`, `libpod-<id>` (cgroupfs driver: `/docker/<id>`,
/// `/kubepods/burstable/pod<uid>/<id>`). `crio-conmon-`/`libpod-conmon-` scopes hold the monitor
/// process, which is not in the container, and are skipped.
pub fn container_id(cgroup: &str) -> Option<String> {
    const PREFIXES: [&str; 4] = ["docker-", "cri-containerd-", "crio-", "libpod-"];
    cgroup.rsplit('/').find_map(|segment| {
        let name = segment.strip_suffix(".scope").unwrap_or(segment);
        let id = PREFIXES.iter().find_map(|prefix| name.strip_prefix(prefix)).unwrap_or(name);
        let is_id = id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit());
        is_id.then(|| id.to_ascii_lowercase())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const ID: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904a1b2c3d4e5f60718293a4b5c";

    fn stat_line(pid: u32, comm: &str, start: u64) -> String {
        // Fields 3..=21 are filler; field 22 is starttime.
        let filler: Vec<String> = (3..22).map(|n| n.to_string()).collect();
        format!("{pid} ({comm}) {} {start} 0 0\n", filler.join(" "))
    }

    fn fake_process(root: &Path, pid: u32, comm: &str, start: u64, cgroup: &str, exe: Option<&str>) {
        let dir = root.join(pid.to_string());
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("stat"), stat_line(pid, comm, start)).unwrap();
        fs::write(dir.join("cgroup"), cgroup).unwrap();
        if let Some(exe) = exe {
            std::os::unix::fs::symlink(exe, dir.join("exe")).unwrap();
        }
    }

    #[test]
    fn reads_labels_of_a_containerd_pod_from_a_fake_proc() {
        let root = tempfile::tempdir().unwrap();
        let cgroup = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1f2e.slice/cri-containerd-{ID}.scope"
        );
        let file = format!("0::{cgroup}\n");
        fake_process(root.path(), 4242, "java", 987_654, &file, Some("/usr/lib/jvm/bin/java"));
        let labels = ProcFs::new(root.path()).labels(4242).unwrap();
        assert_eq!(labels.pid, 4242);
        assert_eq!(labels.comm, "java");
        assert_eq!(labels.exe.as_deref(), Some("/usr/lib/jvm/bin/java"));
        assert_eq!(labels.cgroup.as_deref(), Some(cgroup.as_str()));
        assert_eq!(labels.container_id.as_deref(), Some(ID));
        assert_eq!(labels.start_ticks, 987_654);
        assert_eq!(ProcFs::new(root.path()).start_ticks(4242), Some(987_654));
    }

    #[test]
    fn a_vanished_process_has_no_labels_and_an_unreadable_exe_only_leaves_exe_empty() {
        let root = tempfile::tempdir().unwrap();
        fake_process(root.path(), 7, "kworker/0:1", 5, "0::/\n", None);
        let proc_fs = ProcFs::new(root.path());
        let labels = proc_fs.labels(7).unwrap();
        assert_eq!(labels.exe, None);
        assert_eq!(labels.cgroup.as_deref(), Some("/"));
        assert_eq!(labels.container_id, None);
        assert_eq!(proc_fs.labels(8), None);
        assert_eq!(proc_fs.start_ticks(8), None);
    }

    #[test]
    fn a_name_that_is_not_utf8_neither_hides_the_process_nor_its_container() {
        let root = tempfile::tempdir().unwrap();
        fake_process(root.path(), 9, "x", 77, "", None);
        let dir = root.path().join("9");
        let mut stat = stat_line(9, "x", 77).into_bytes();
        stat.splice(3..4, *b"\xff\x1b");
        fs::write(dir.join("stat"), stat).unwrap();
        fs::write(dir.join("cgroup"), [&b"0::/docker/"[..], ID.as_bytes(), b"/\xfe\n"].concat()).unwrap();
        let proc_fs = ProcFs::new(root.path());
        let labels = proc_fs.labels(9).expect("a live process");
        assert_eq!((labels.comm.as_str(), labels.start_ticks), ("\u{fffd}\u{1b}", 77));
        assert_eq!(labels.container_id.as_deref(), Some(ID), "a sub-cgroup of odd bytes under the container's");
        assert_eq!(labels.cgroup, Some(format!("/docker/{ID}/\u{fffd}")));
        assert_eq!(proc_fs.start_ticks(9), Some(77));
    }

    #[test]
    fn comm_with_spaces_and_parentheses_keeps_the_start_time_right() {
        let (comm, start) = parse_stat(&stat_line(12, "a) b (c", 31_337)).unwrap();
        assert_eq!(comm, "a) b (c");
        assert_eq!(start, 31_337);
        assert_eq!(parse_stat("12 (truncated"), None);
    }

    #[test]
    fn container_ids_of_each_runtime_and_driver() {
        let cases = [
            (format!("/system.slice/docker-{ID}.scope"), Some(ID)),
            (format!("/docker/{ID}"), Some(ID)),
            (format!("/kubepods/burstable/pod1f2e-77/{ID}"), Some(ID)),
            (format!("/kubepods.slice/kubepods-pod1.slice/crio-{ID}.scope"), Some(ID)),
            (format!("/kubepods.slice/kubepods-pod1.slice/crio-conmon-{ID}.scope"), None),
            (format!("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container"), Some(ID)),
            (format!("/machine.slice/libpod-conmon-{ID}.scope"), None),
            (format!("/libpod_parent/libpod-{ID}"), Some(ID)),
            (format!("/default/{ID}"), Some(ID)),
            (format!("/../../system.slice/docker-{}.scope", ID.to_ascii_uppercase()), Some(ID)),
            ("/system.slice/sshd.service".to_owned(), None),
            (format!("/docker-{}.scope", &ID[..63]), None),
            ("/".to_owned(), None),
        ];
        for (path, want) in cases {
            assert_eq!(container_id(&path).as_deref(), want, "{path}");
        }
    }

    #[test]
    fn nested_container_wins_over_the_outer_one() {
        let inner = "a".repeat(64);
        let path = format!("/system.slice/docker-{ID}.scope/docker/{inner}");
        assert_eq!(container_id(&path), Some(inner));
    }

    #[test]
    fn cgroup_v2_line_wins_then_v1_systemd_then_cpu() {
        let hybrid = "12:cpu,cpuacct:/cpu-path\n1:name=systemd:/systemd-path\n0::/unified-path\n";
        assert_eq!(cgroup_path(hybrid), Some("/unified-path"));
        let v1 = "12:cpu,cpuacct:/cpu-path\n3:memory:/mem\n1:name=systemd:/systemd-path\n";
        assert_eq!(cgroup_path(v1), Some("/systemd-path"));
        let v1_no_systemd = "3:memory:/mem\n12:cpu,cpuacct:/cpu-path\n";
        assert_eq!(cgroup_path(v1_no_systemd), Some("/cpu-path"));
        assert_eq!(cgroup_path("5:blkio:/only\n"), Some("/only"));
        assert_eq!(cgroup_path(""), None);
    }
}
