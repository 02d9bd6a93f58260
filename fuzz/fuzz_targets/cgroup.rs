//! A process's `/proc/<pid>/stat` and `/proc/<pid>/cgroup`: its name and its cgroup path are its
//! own doing (a container may create sub-cgroups of any name). Input: stat bytes, NUL, cgroup
//! bytes. Labels are read from a fake proc tree, as in host mode.
#![no_main]

use std::sync::OnceLock;

use joular_user::fleet::labels::{cgroup_path, container_id, parse_stat};
use joular_user::fleet::{ProcFs, ProcessTable};
use libfuzzer_sys::fuzz_target;

const PID: u32 = 4242;

fn proc_root() -> &'static tempfile::TempDir {
    static ROOT: OnceLock<tempfile::TempDir> = OnceLock::new();
    ROOT.get_or_init(|| {
        let root = joular_fuzz::scratch_dir();
        std::fs::create_dir(root.path().join(PID.to_string())).expect("fake pid directory");
        root
    })
}

fuzz_target!(|data: &[u8]| {
    let (stat, cgroup) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b""[..]),
    };
    let stat_text = String::from_utf8_lossy(stat);
    let cgroup_text = String::from_utf8_lossy(cgroup);

    let path = cgroup_path(&cgroup_text);
    if let Some(path) = path {
        assert!(cgroup_text.contains(path));
    }
    if let Some(id) = path.and_then(container_id) {
        assert!(id.len() == 64 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{id}");
        assert!(path.unwrap().to_ascii_lowercase().contains(&id));
    }
    let parsed = parse_stat(&stat_text);

    let dir = proc_root().path().join(PID.to_string());
    std::fs::write(dir.join("stat"), stat).unwrap();
    std::fs::write(dir.join("cgroup"), cgroup).unwrap();
    let procs = ProcFs::new(proc_root().path());
    let labels = procs.labels(PID);
    // A process whose stat parses is alive, whatever bytes its name or cgroup hold.
    assert_eq!(labels.is_some(), parsed.is_some());
    if let (Some(labels), Some((comm, start))) = (labels, parsed) {
        assert_eq!((labels.comm, labels.start_ticks), (comm, start));
        assert_eq!(labels.cgroup.as_deref(), path);
        assert_eq!(labels.container_id, path.and_then(container_id));
    }
});
