//! Each attack on a results path, on a real file system. Ownership by another user needs root
//! (`cargo xtask test` runs the unit tests as root).

use super::*;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};

const NOBODY: u32 = 65534;

fn assert_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests chown files to another user: run them as root (`cargo xtask test`)"
    );
}

fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

/// A scratch directory with `mode`, optionally owned by nobody.
fn scratch(mode: u32, nobody: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(mode)).unwrap();
    if nobody {
        std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    }
    dir
}

fn nobody_symlink(target: &Path, link: &Path) {
    symlink(target, link).unwrap();
    std::os::unix::fs::lchown(link, Some(NOBODY), Some(NOBODY)).unwrap();
}

/// Root's secret, and a check that it is byte for byte what it was.
struct Victim {
    _dir: tempfile::TempDir,
    file: PathBuf,
}

impl Victim {
    fn new() -> Self {
        let dir = scratch(0o700, false);
        let file = dir.path().join("secret");
        fs::write(&file, "root's secret\n").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        Victim { _dir: dir, file }
    }

    fn assert_untouched(&self) {
        assert_eq!(fs::read_to_string(&self.file).unwrap(), "root's secret\n", "the victim was written");
        let meta = fs::metadata(&self.file).unwrap();
        assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, 0o600), "the victim's owner or mode changed");
    }
}

fn write_whole(dir: &OutDir, name: &str, text: &str) {
    let mut f = dir.replace(name).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f.commit().unwrap();
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn output_mode_is_octal_permission_bits_that_keep_the_owner_reading_and_writing() {
    assert_eq!(parse_output_mode("0644"), Ok(0o644));
    assert_eq!(parse_output_mode("640"), Ok(0o640));
    assert_eq!(parse_output_mode("0o600"), Ok(0o600));
    for bad in ["0888", "rw-r--r--", "", "04755", "1777", "0444", "0200"] {
        assert!(parse_output_mode(bad).is_err(), "{bad} accepted");
    }
    assert_eq!((Modes::exact(0o644).file_mode(), Modes::exact(0o644).dir_mode()), (0o644, 0o755));
    assert_eq!(Modes::exact(0o640).dir_mode(), 0o750);
    assert_eq!(Modes::exact(0o600).dir_mode(), 0o700);
}

#[test]
fn as_root_results_are_private_and_an_exact_mode_beats_the_umask() {
    assert_root();
    let tmp = scratch(0o755, false);
    let root = tmp.path().join("a/b");
    let dir = OutDir::create_all(&root, Modes::for_caller()).unwrap();
    write_whole(&dir, "f.csv", "x\n");
    dir.append("e.csv").unwrap().write_all(b"1\n").unwrap();
    assert_eq!((mode_of(&tmp.path().join("a")), mode_of(&root)), (0o700, 0o700));
    assert_eq!((mode_of(&root.join("f.csv")), mode_of(&root.join("e.csv"))), (0o600, 0o600));

    // The umask of the test process is typically 022; 077 would also strip what 0644 asks for.
    let old = nix::sys::stat::umask(Mode::from_bits_truncate(0o077));
    let wide = OutDir::create_all(&tmp.path().join("wide/x"), Modes::exact(0o644)).unwrap();
    write_whole(&wide, "f.csv", "x\n");
    wide.append("e.csv").unwrap();
    let sub = wide.subdir("s").unwrap();
    let stream = create_stream(&tmp.path().join("wide/c.jsonl"), Modes::exact(0o644)).unwrap();
    nix::sys::stat::umask(old);
    drop((sub, stream));
    let w = tmp.path().join("wide");
    assert_eq!((mode_of(&w), mode_of(&w.join("x")), mode_of(&w.join("x/s"))), (0o755, 0o755, 0o755));
    assert_eq!(
        (mode_of(&w.join("x/f.csv")), mode_of(&w.join("x/e.csv")), mode_of(&w.join("c.jsonl"))),
        (0o644, 0o644, 0o644)
    );
}

#[test]
fn a_symlink_of_another_user_on_the_path_is_refused_and_roots_own_is_followed() {
    assert_root();
    let victim = Victim::new();
    let cwd = scratch(0o755, false);
    let link = cwd.path().join("joularjx-result");
    nobody_symlink(victim.file.parent().unwrap(), &link);
    let err = OutDir::create_all(&link.join("1-2"), Modes::for_caller()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("is a symlink owned by uid 65534"), "{err}");
    let msg = check_dir("--output", &link).unwrap_err();
    assert_eq!(
        msg,
        format!(
            "--output {}: {} is a symlink owned by uid 65534 (only root's and your own are followed): remove it, or choose another --output in a directory of your own",
            link.display(),
            link.display()
        )
    );
    assert_eq!(names(victim.file.parent().unwrap()), ["secret"]);
    victim.assert_untouched();

    // An administrator's own symlink is a choice, and is followed.
    let real = cwd.path().join("real");
    fs::create_dir(&real).unwrap();
    symlink(&real, cwd.path().join("admin-link")).unwrap();
    let dir = OutDir::create_all(&cwd.path().join("admin-link/sub"), Modes::for_caller()).unwrap();
    write_whole(&dir, "f", "ok");
    assert_eq!(fs::read_to_string(real.join("sub/f")).unwrap(), "ok");
    assert!(check_dir("--output", &cwd.path().join("admin-link/sub")).is_ok());
}

#[test]
fn in_a_sticky_world_writable_directory_only_our_own_components_are_used() {
    assert_root();
    let tmp = scratch(0o1777, false);
    // A directory nobody planted where the results would go.
    let planted = tmp.path().join("joularjx-result");
    fs::create_dir(&planted).unwrap();
    std::os::unix::fs::chown(&planted, Some(NOBODY), Some(NOBODY)).unwrap();
    let msg = check_dir("--output", &planted.join("7-8")).unwrap_err();
    assert!(
        msg.starts_with(&format!("--output {}/7-8: {} is owned by uid 65534", planted.display(), planted.display())),
        "{msg}"
    );
    assert!(msg.contains(&format!("sticky world-writable directory {}", tmp.path().display())), "{msg}");
    assert!(OutDir::create_all(&planted.join("7-8"), Modes::for_caller()).is_err());
    assert_eq!(names(&planted), Vec::<String>::new(), "nothing written into the planted directory");
    // A file nobody left there under the --json name.
    let jsonl = tmp.path().join("cycles.jsonl");
    fs::write(&jsonl, "").unwrap();
    std::os::unix::fs::chown(&jsonl, Some(NOBODY), Some(NOBODY)).unwrap();
    assert!(check_file("--json", &jsonl).unwrap_err().contains("is owned by uid 65534"));

    // Reading from it is fine (report's input); a symlink of theirs still is not followed.
    fs::write(planted.join("profile.json"), "{}").unwrap();
    assert_eq!(OutDir::open_to_read(&planted, Modes::for_caller()).unwrap().read("profile.json", 10).unwrap(), b"{}");
    assert!(OutDir::open(&planted, Modes::for_caller()).is_err());
    nobody_symlink(&planted, &tmp.path().join("link"));
    assert!(OutDir::open_to_read(&tmp.path().join("link"), Modes::for_caller()).is_err());
    fs::remove_file(planted.join("profile.json")).unwrap();

    // What we create there ourselves is fine, and so is the same planted directory elsewhere.
    assert!(check_dir("--output", &tmp.path().join("fresh/deeper")).is_ok());
    let fresh = OutDir::create_all(&tmp.path().join("fresh/deeper"), Modes::for_caller()).unwrap();
    write_whole(&fresh, "f", "ok");
    let plain = scratch(0o755, false);
    let theirs = plain.path().join("theirs");
    fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    assert!(check_dir("--output", &theirs).is_ok(), "only sticky world-writable parents are suspect");
}

#[test]
fn a_regular_file_on_the_path_is_not_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("f");
    fs::write(&file, "").unwrap();
    let below = file.join("results");
    assert_eq!(
        check_dir("--output", &below).unwrap_err(),
        format!("--output {}: {} is not a directory", below.display(), file.display())
    );
    assert_eq!(
        check_dir("--output", &file).unwrap_err(),
        format!("--output {}: {} is not a directory", file.display(), file.display())
    );
    let missing = tmp.path().join("nope/c.jsonl");
    assert_eq!(
        check_file("--json", &missing).unwrap_err(),
        format!(
            "--json {}: directory {} does not exist: create it first",
            missing.display(),
            tmp.path().join("nope").display()
        )
    );
    assert!(check_file("--json", tmp.path()).unwrap_err().contains("is a directory"));
    assert!(check_file("--json", &tmp.path().join("c.jsonl")).is_ok());
}

#[test]
fn a_planted_file_symlink_or_hard_link_at_a_result_name_is_replaced_never_written_through() {
    assert_root();
    let victim = Victim::new();
    let tmp = scratch(0o777, false);
    let dir = OutDir::create_all(tmp.path(), Modes::for_caller()).unwrap();
    nobody_symlink(&victim.file, &tmp.path().join("summary.json"));
    fs::hard_link(&victim.file, tmp.path().join("profile.json")).unwrap();
    write_whole(&dir, "summary.json", "{}");
    write_whole(&dir, "profile.json", "[]");
    victim.assert_untouched();
    assert_eq!(fs::read_to_string(tmp.path().join("summary.json")).unwrap(), "{}");
    assert!(fs::symlink_metadata(tmp.path().join("summary.json")).unwrap().is_file());
    assert_eq!(fs::read_to_string(tmp.path().join("profile.json")).unwrap(), "[]");
    assert_eq!(names(tmp.path()), ["profile.json", "summary.json"], "no temporary file left");

    // --json, through a path: another user's symlink is refused, a hard link replaced.
    nobody_symlink(&victim.file, &tmp.path().join("link.jsonl"));
    let err = create_stream(&tmp.path().join("link.jsonl"), Modes::for_caller()).unwrap_err();
    assert!(err.to_string().contains("is a symlink owned by uid 65534"), "{err}");
    fs::hard_link(&victim.file, tmp.path().join("cycles.jsonl")).unwrap();
    let mut stream = create_stream(&tmp.path().join("cycles.jsonl"), Modes::for_caller()).unwrap();
    stream.write_all(b"{}\n").unwrap();
    victim.assert_untouched();
    assert_eq!(fs::read_to_string(tmp.path().join("cycles.jsonl")).unwrap(), "{}\n");
}

#[test]
fn an_unfinished_file_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = OutDir::create_all(tmp.path(), Modes::for_caller()).unwrap();
    write_whole(&dir, "f", "old");
    {
        let mut f = dir.replace("f").unwrap();
        f.write_all(b"half").unwrap();
    }
    assert_eq!(fs::read_to_string(tmp.path().join("f")).unwrap(), "old");
    assert_eq!(names(tmp.path()), ["f"]);
}

#[test]
fn appends_go_only_to_our_own_single_link_regular_files() {
    assert_root();
    let victim = Victim::new();
    let tmp = scratch(0o777, false);
    let dir = OutDir::create_all(tmp.path(), Modes::for_caller()).unwrap();
    dir.append("ok.csv").unwrap().write_all(b"1,2\n").unwrap();
    dir.append("ok.csv").unwrap().write_all(b"3,4\n").unwrap();
    assert_eq!(fs::read_to_string(tmp.path().join("ok.csv")).unwrap(), "1,2\n3,4\n");

    nobody_symlink(&victim.file, &tmp.path().join("link.csv"));
    let err = dir.append("link.csv").unwrap_err();
    assert!(err.to_string().contains("is a symlink"), "{err}");
    fs::hard_link(&victim.file, tmp.path().join("hard.csv")).unwrap();
    let err = dir.append("hard.csv").unwrap_err();
    assert!(err.to_string().contains("2 links"), "{err}");
    // A FIFO with no reader neither blocks nor is written.
    nix::unistd::mkfifo(&tmp.path().join("fifo.csv"), Mode::S_IRWXU).unwrap();
    assert!(dir.append("fifo.csv").is_err());
    let theirs = tmp.path().join("theirs.csv");
    fs::write(&theirs, "").unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    assert!(dir.append("theirs.csv").unwrap_err().to_string().contains("uid 65534"));
    victim.assert_untouched();
}

#[test]
fn an_overwrite_keeps_our_file_in_place_and_replaces_anything_else() {
    use std::os::unix::fs::MetadataExt;
    assert_root();
    let victim = Victim::new();
    let tmp = scratch(0o777, false);
    let dir = OutDir::create_all(tmp.path(), Modes::for_caller()).unwrap();
    dir.overwrite("runtime.csv", b"a,1.0000\nb,2.0000\n").unwrap();
    let inode = fs::metadata(tmp.path().join("runtime.csv")).unwrap().ino();
    // Shorter content: cut to its length, same inode (no new file per cycle).
    dir.overwrite("runtime.csv", b"c,3.0000\n").unwrap();
    assert_eq!(fs::read_to_string(tmp.path().join("runtime.csv")).unwrap(), "c,3.0000\n");
    assert_eq!(fs::metadata(tmp.path().join("runtime.csv")).unwrap().ino(), inode);
    dir.overwrite("runtime.csv", b"").unwrap();
    assert_eq!(fs::read_to_string(tmp.path().join("runtime.csv")).unwrap(), "");

    // Planted entries are replaced by a file of ours, never written through.
    nobody_symlink(&victim.file, &tmp.path().join("link.csv"));
    fs::hard_link(&victim.file, tmp.path().join("hard.csv")).unwrap();
    nix::unistd::mkfifo(&tmp.path().join("fifo.csv"), Mode::S_IRWXU).unwrap();
    let theirs = tmp.path().join("theirs.csv");
    fs::write(&theirs, "theirs").unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    for name in ["link.csv", "hard.csv", "fifo.csv", "theirs.csv"] {
        dir.overwrite(name, b"ours\n").unwrap();
        let path = tmp.path().join(name);
        let meta = fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file() && meta.nlink() == 1 && meta.uid() == 0, "{name}: {meta:?}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "ours\n", "{name}");
    }
    victim.assert_untouched();
}

#[test]
fn a_directory_swapped_for_a_symlink_mid_run_keeps_receiving_our_files() {
    assert_root();
    let victim = Victim::new();
    let shared = scratch(0o777, false);
    let root = OutDir::create_all(shared.path(), Modes::for_caller()).unwrap();
    let run = root.subdir("42-1700000000000").unwrap();
    let sub = run.subdir("all").unwrap();
    // The attacker moves the directory away and points its name at root's secrets.
    fs::rename(shared.path().join("42-1700000000000"), shared.path().join("moved")).unwrap();
    nobody_symlink(victim.file.parent().unwrap(), &shared.path().join("42-1700000000000"));
    let victim_dir_secret = victim.file.parent().unwrap().join("summary.json");
    fs::write(&victim_dir_secret, "root's secret\n").unwrap();
    write_whole(&run, "summary.json", "ours");
    write_whole(&sub, "t.csv", "ours");
    run.append("evolution.csv").unwrap().write_all(b"1\n").unwrap();
    assert_eq!(fs::read_to_string(&victim_dir_secret).unwrap(), "root's secret\n");
    assert_eq!(names(victim.file.parent().unwrap()), ["secret", "summary.json"]);
    assert_eq!(fs::read_to_string(shared.path().join("moved/summary.json")).unwrap(), "ours");
    assert_eq!(fs::read_to_string(shared.path().join("moved/all/t.csv")).unwrap(), "ours");
    // Reopening by name refuses the symlink now there.
    let err = root.subdir("42-1700000000000").unwrap_err();
    assert!(err.to_string().contains("is a symlink"), "{err}");
    assert!(root.open_subdir("42-1700000000000/all").is_err());
    victim.assert_untouched();
}

/// The run directory is renamed into place already open: no moment exists in which its name
/// is ours but not yet opened (the swap the test above makes after the open could otherwise
/// come between `mkdir` and `open`, and end the run). Nothing temporary is left.
#[test]
fn a_new_run_directory_is_opened_before_it_has_its_name() {
    assert_root();
    let shared = scratch(0o777, false);
    let root = OutDir::create_all(shared.path(), Modes::exact(0o750)).unwrap();
    let run = root.new_subdir("42-1700000000000").unwrap();
    assert_eq!(run.path(), shared.path().join("42-1700000000000"));
    assert_eq!(mode_of(&shared.path().join("42-1700000000000")), 0o750);
    assert_eq!(names(shared.path()), ["42-1700000000000"]);
    // Moved away and replaced by a symlink after that: our files follow the directory.
    fs::rename(shared.path().join("42-1700000000000"), shared.path().join("moved")).unwrap();
    symlink("/", shared.path().join("42-1700000000000")).unwrap();
    write_whole(&run, "summary.json", "ours");
    assert_eq!(fs::read_to_string(shared.path().join("moved/summary.json")).unwrap(), "ours");
    // A name that exists already is opened as subdir() does: a directory is used, a symlink
    // refused.
    fs::create_dir(shared.path().join("7-1")).unwrap();
    assert_eq!(root.new_subdir("7-1").unwrap().path(), shared.path().join("7-1"));
    let err = root.new_subdir("42-1700000000000").unwrap_err();
    assert!(err.to_string().contains("is a symlink"), "{err}");
    assert_eq!(names(shared.path()), ["42-1700000000000", "7-1", "moved"]);
}

#[test]
fn reads_refuse_symlinks_fifos_and_oversized_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = OutDir::open(tmp.path(), Modes::for_caller()).unwrap();
    fs::write(tmp.path().join("profile.json"), "{}").unwrap();
    assert_eq!(dir.read("profile.json", 10).unwrap(), b"{}");
    assert!(dir.has_file("profile.json"));
    assert!(dir.read("profile.json", 1).unwrap_err().to_string().contains("over the limit"));
    symlink("/etc/passwd", tmp.path().join("link.json")).unwrap();
    assert!(!dir.has_file("link.json"));
    assert!(dir.read("link.json", 1 << 20).unwrap_err().to_string().contains("is a symlink"));
    nix::unistd::mkfifo(&tmp.path().join("fifo.json"), Mode::S_IRWXU).unwrap();
    assert!(dir.read("fifo.json", 1 << 20).unwrap_err().to_string().contains("not a regular file"));
    assert!(OutDir::open(&tmp.path().join("missing"), Modes::for_caller()).is_err());
}

#[test]
fn entries_are_listed_as_lstat_sees_them_and_removed_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = OutDir::open(tmp.path(), Modes::for_caller()).unwrap();
    write_whole(&dir, "a", "123");
    symlink("a", tmp.path().join("l")).unwrap();
    fs::create_dir(tmp.path().join("d")).unwrap();
    let mut entries = dir.entries().unwrap();
    entries.sort_by(|x, y| x.name.cmp(&y.name));
    let got: Vec<(String, bool, u64)> = entries
        .iter()
        .map(|e| (e.name.to_string_lossy().into_owned(), e.is_file, if e.is_file { e.size_bytes } else { 0 }))
        .collect();
    assert_eq!(got, [("a".into(), true, 3), ("d".into(), false, 0), ("l".into(), false, 0)]);
    dir.remove(OsStr::new("l")).unwrap();
    dir.remove(OsStr::new("missing")).unwrap();
    assert!(dir.remove(OsStr::new("d")).is_err(), "directories are never removed");
    assert_eq!(names(tmp.path()), ["a", "d"]);
}

#[test]
fn names_inside_the_tree_are_single_components() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = OutDir::open(tmp.path(), Modes::for_caller()).unwrap();
    for bad in ["", ".", "..", "a/b", "../x"] {
        assert!(dir.replace(bad).is_err(), "{bad:?}");
        assert!(dir.subdir(bad).is_err(), "{bad:?}");
    }
}
