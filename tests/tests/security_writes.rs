//! Issue 10, item 4 ("write results safely"): a local user (`nobody`) tries to make the root
//! profiler write its results, its `--json` file, its `--profile-dir` profiles or a `report`
//! through a symlink, a hard link or a swapped directory onto root's files. Each test performs
//! the attack for real, then checks that root's files are byte for byte untouched and that the
//! legitimate results are written (where the attack did not move them, or where it moved our
//! directory) or a clear error is given before anything is loaded. Run under
//! `fs.protected_symlinks=0` and `=1`. Also: target-controlled names reach the terminal escaped.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use joular_tests::attack::{as_nobody, dir_with, nobody_cmd, open_dir, sticky_dir, tag, Sysctl, Victim, NOBODY};
use joular_tests::tmpfs::Tmpfs;
use joular_tests::*;

/// The attacker's interpreter (a pyenv shim under /root is out of nobody's reach).
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

const RESULT_FILES: [&str; 5] =
    ["summary.json", "profile.json", "profile.pb.gz", "stacks-all.folded", "flamegraph-all.svg"];

/// Runs the profiler as root in `cwd` to completion (bounded).
fn run_in(cwd: &Path, args: &[&str]) -> Output {
    let child =
        Command::new(bin()).args(args).current_dir(cwd).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    wait_bounded(child, Duration::from_secs(120))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit code 2 with one line naming the flag, the planted component, why, and the fix, and
/// nothing loaded (no "profiling" line).
fn assert_refused(out: &Output, flag_and_path: &str, component: &Path, why: &str, what: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{what}: exit code\n{err}");
    let want = format!("{flag_and_path}: {} {why}", component.display());
    assert!(err.contains(&want), "{what}: expected `{want}` in\n{err}");
    assert!(
        err.contains("remove it, or choose another") || err.contains("render it elsewhere with --output DIR"),
        "{what}: no fix said\n{err}"
    );
    assert!(!err.contains("profiling"), "{what}: refused only after loading\n{err}");
    assert_eq!(err.lines().count(), 1, "{what}: one line expected\n{err}");
}

fn mode_of(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

/// The `<pid>-<ms>` directories under `root`.
fn run_dirs(root: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(root).unwrap().flatten().map(|e| e.path()).filter(|p| p.join("summary.json").is_file()).collect()
}

#[test]
fn a_planted_result_symlink_in_a_world_writable_cwd_is_refused_and_a_fresh_output_is_ours() {
    let jvm = Jvm::method_split();
    let pid = jvm.pid().to_string();
    for protected in [0, 1] {
        let _sysctl = Sysctl::set("fs.protected_symlinks", protected);
        let what = format!("protected_symlinks={protected}");
        let victim = Victim::new(&RESULT_FILES);
        let tmp = sticky_dir();
        as_nobody(&format!("ln -s {} {}/joularjx-result", victim.dir.display(), tmp.path().display()));

        let out = run_in(tmp.path(), &["--pid", &pid, "--duration", "3", "--energy-source", "model"]);
        assert_refused(
            &out,
            "--output joularjx-result",
            &tmp.path().join("joularjx-result"),
            "is a symlink owned by uid 65534",
            &what,
        );
        victim.assert_untouched(&what);

        // What the message advises works: a fresh directory there is ours, private to root.
        let out =
            run_in(tmp.path(), &["--pid", &pid, "--duration", "3", "--energy-source", "model", "--output", "mine"]);
        assert_success(&out);
        let mine = tmp.path().join("mine");
        let runs = run_dirs(&mine);
        assert_eq!(runs.len(), 1, "{what}: {runs:?}");
        assert_eq!(
            (mode_of(&mine), mode_of(&runs[0]), mode_of(&runs[0].join("summary.json"))),
            (0o700, 0o700, 0o600),
            "{what}"
        );
        victim.assert_untouched(&what);
    }
}

/// `nobody` watches a world-writable results directory and, as soon as the run creates its
/// `<pid>-<ms>` directory, moves it away and puts a symlink to a directory of its own there,
/// whose files are symlinks to root's files.
const SWAPPER: &str = r#"
import os, re, sys, time
shared, evil, deadline = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
while time.time() < deadline:
    for name in os.listdir(shared):
        path = os.path.join(shared, name)
        if re.fullmatch(r"\d+-\d+", name) and os.path.isdir(path) and not os.path.islink(path):
            os.rename(path, os.path.join(shared, "moved-" + name))
            os.symlink(evil, path)
            print("swapped " + name, flush=True)
            sys.exit(0)
    time.sleep(0.002)
print("nothing to swap", flush=True)
"#;

#[test]
fn a_result_directory_swapped_for_a_symlink_during_the_run_keeps_the_results_and_spares_roots_files() {
    let jvm = Jvm::method_split();
    let pid = jvm.pid().to_string();
    for protected in [0, 1] {
        let _sysctl = Sysctl::set("fs.protected_symlinks", protected);
        let what = format!("protected_symlinks={protected}");
        let victim = Victim::new(&RESULT_FILES);
        let base = open_dir(false);
        // A shared results directory anyone may write to (not sticky): the start-up check lets
        // it through, so only the descriptors held during the run protect it.
        let shared = base.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let evil = base.path().join("evil");
        std::fs::create_dir(&evil).unwrap();
        std::os::unix::fs::chown(&evil, Some(NOBODY), Some(NOBODY)).unwrap();
        let mut plant = format!("cd {} && mkdir -p all/runtime/methods all/runtime/calltrees all/total/methods all/total/calltrees all/evolution && cp -r all app", evil.display());
        for f in RESULT_FILES {
            plant.push_str(&format!(" && ln -s {} {f}", victim.file(f).display()));
        }
        plant.push_str(&format!(
            " && ln -s {} all/total/methods/joularJX-{pid}-all-methods-energy.csv",
            victim.file("summary.json").display()
        ));
        as_nobody(&plant);
        let swapper =
            nobody_cmd(&[SYSTEM_PYTHON, "-c", SWAPPER, shared.to_str().unwrap(), evil.to_str().unwrap(), "60"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();

        let out = run_in(
            base.path(),
            &["--pid", &pid, "--duration", "6", "--energy-source", "model", "--output", shared.to_str().unwrap()],
        );
        let swapped = wait_bounded(swapper, Duration::from_secs(70));
        assert!(swapped.status.success(), "{what}: the attacker failed: {}", String::from_utf8_lossy(&swapped.stderr));
        let said = String::from_utf8_lossy(&swapped.stdout);
        let name = said
            .trim()
            .strip_prefix("swapped ")
            .unwrap_or_else(|| panic!("{what}: the attacker found no directory to swap: {said}"));
        assert_success(&out);
        victim.assert_untouched(&what);
        assert!(
            std::fs::symlink_metadata(shared.join(name)).unwrap().file_type().is_symlink(),
            "{what}: the swap is in place"
        );
        for f in RESULT_FILES {
            assert!(
                std::fs::symlink_metadata(evil.join(f)).unwrap().file_type().is_symlink(),
                "{what}: {f} in the attacker's directory was replaced"
            );
        }
        // The results went on into the directory the run created, wherever it was moved.
        let moved = shared.join(format!("moved-{name}"));
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(moved.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["pid"].as_u64(), Some(jvm.pid() as u64), "{what}");
        assert!(summary["cycles"].as_u64().unwrap() >= 3, "{what}: {summary}");
        let csv =
            std::fs::read_to_string(moved.join(format!("all/total/methods/joularJX-{pid}-all-methods-energy.csv")))
                .unwrap();
        assert!(csv.contains("MethodSplit.alpha"), "{what}: {csv}");
        assert!(
            moved.join("all/runtime/methods").join(format!("joularJX-{pid}-all-methods-power.csv")).is_file(),
            "{what}"
        );
        let stderr = stderr(&out);
        assert!(stderr.contains("profiling"), "{stderr}");
    }
}

#[test]
fn a_json_path_symlinked_or_hard_linked_to_a_root_file_never_writes_it() {
    let _hardlinks = Sysctl::set("fs.protected_hardlinks", 0);
    let jvm = Jvm::method_split();
    let pid = jvm.pid().to_string();
    for protected in [0, 1] {
        let _sysctl = Sysctl::set("fs.protected_symlinks", protected);
        let what = format!("protected_symlinks={protected}");
        let victim = Victim::with_dir_mode(&["shadow"], 0o755);
        let results = tempfile::tempdir().unwrap();
        let output = results.path().join("r");
        let output = output.to_str().unwrap();

        let tmp = sticky_dir();
        let link = tmp.path().join("cycles.jsonl");
        as_nobody(&format!("ln -s {} {}", victim.file("shadow").display(), link.display()));
        let out = run_in(
            results.path(),
            &[
                "--pid",
                &pid,
                "--duration",
                "2",
                "--energy-source",
                "model",
                "--output",
                output,
                "--json",
                link.to_str().unwrap(),
            ],
        );
        assert_refused(&out, &format!("--json {}", link.display()), &link, "is a symlink owned by uid 65534", &what);
        victim.assert_untouched(&what);

        // In a shared directory a hard link passes every path check (it is root's own file):
        // the run puts a new file at that name instead of writing into the linked one.
        let shared = dir_with(0o777, false);
        let hard = shared.path().join("cycles.jsonl");
        as_nobody(&format!("ln {} {}", victim.file("shadow").display(), hard.display()));
        let out = run_in(
            results.path(),
            &[
                "--pid",
                &pid,
                "--duration",
                "3",
                "--energy-source",
                "model",
                "--output",
                output,
                "--json",
                hard.to_str().unwrap(),
            ],
        );
        assert_success(&out);
        victim.assert_untouched(&what);
        let meta = std::fs::symlink_metadata(&hard).unwrap();
        assert!(meta.is_file() && meta.nlink() == 1 && meta.mode() & 0o7777 == 0o600, "{what}: {meta:?}");
        let cycles = read_jsonl(&hard);
        assert!(cycles.len() >= 2 && cycles.iter().all(|c| c["threads"].is_array()), "{what}: {} cycles", cycles.len());
    }
}

/// `nobody` plants symlinks to root's files at every name the profile writer could use in the
/// next `seconds`: the final names and the temporary names the old writer used.
const PLANTER: &str = r#"
import os, sys, time
d, host, target, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
now = int(time.time() * 1000)
for ms in range(now - 1000, now + seconds * 1000):
    for ext in ("pprof.gz", "folded"):
        name = "%d-%s.%s" % (ms, host, ext)
        os.symlink(target, os.path.join(d, name))
        os.symlink(target, os.path.join(d, "." + name + ".tmp"))
print("planted", flush=True)
"#;

#[test]
fn a_profile_dir_symlink_is_refused_and_planted_profile_names_are_replaced_not_followed() {
    for protected in [0, 1] {
        let _sysctl = Sysctl::set("fs.protected_symlinks", protected);
        let what = format!("protected_symlinks={protected}");
        let victim = Victim::new(&["profile"]);
        let cwd = tempfile::tempdir().unwrap();

        let tmp = sticky_dir();
        let link = tmp.path().join("profiles");
        as_nobody(&format!("ln -s {} {}", victim.dir.display(), link.display()));
        let serve = |dir: &Path| {
            run_in(
                cwd.path(),
                &[
                    "serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--duration",
                    "4",
                    "--energy-source",
                    "model",
                    "--host-name",
                    "evilhost",
                    "--profile-interval",
                    "1",
                    "--profile-dir",
                    dir.to_str().unwrap(),
                ],
            )
        };
        let out = serve(&link);
        assert_refused(
            &out,
            &format!("--profile-dir {}", link.display()),
            &link,
            "is a symlink owned by uid 65534",
            &what,
        );
        victim.assert_untouched(&what);

        // On a tmpfs: planting 184,000 symlinks (and removing them) on this machine's disk
        // took 25-60 s a round, on the journal of a disk that had just deleted as many.
        let shared = Tmpfs::mount("size=64m,mode=0777");
        let planted = nobody_cmd(&[
            SYSTEM_PYTHON,
            "-c",
            PLANTER,
            shared.path().to_str().unwrap(),
            "evilhost",
            victim.file("profile").to_str().unwrap(),
            "45",
        ])
        .output()
        .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&planted.stdout).trim(),
            "planted",
            "{what}: {}",
            String::from_utf8_lossy(&planted.stderr)
        );
        let out = serve(shared.path());
        assert_success(&out);
        victim.assert_untouched(&what);
        let ours: Vec<_> = std::fs::read_dir(shared.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            ours.iter().any(|n| n.ends_with("-evilhost.pprof.gz"))
                && ours.iter().any(|n| n.ends_with("-evilhost.folded")),
            "{what}: {ours:?}"
        );
        assert!(ours.iter().all(|n| !n.starts_with('.')), "{what}: temporary files left: {ours:?}");
        let err = stderr(&out);
        assert!(err.contains(" 0 failed"), "{what}: {err}");
    }
}

#[test]
fn report_replaces_planted_files_in_a_users_result_directory_and_refuses_planted_paths() {
    // A real run's raw profile, re-rendered where another user can plant things.
    let jvm = Jvm::method_split();
    let results = tempfile::tempdir().unwrap();
    let out = run_in(
        results.path(),
        &["--pid", &jvm.pid().to_string(), "--duration", "2", "--energy-source", "model", "--output", "r"],
    );
    assert_success(&out);
    let run = run_dirs(&results.path().join("r")).pop().expect("a result directory");
    let profile = std::fs::read(run.join("profile.json")).unwrap();
    for protected in [0, 1] {
        let _sysctl = Sysctl::set("fs.protected_symlinks", protected);
        let what = format!("protected_symlinks={protected}");
        let victim = Victim::new(&RESULT_FILES[..4]);

        // nobody's own result directory, outside any sticky directory, with its files pointed at root's.
        let base = open_dir(false);
        let theirs = tempfile::tempdir_in(base.path()).unwrap();
        std::fs::set_permissions(theirs.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(theirs.path(), Some(NOBODY), Some(NOBODY)).unwrap();
        std::fs::write(theirs.path().join("profile.json"), &profile).unwrap();
        std::os::unix::fs::chown(theirs.path().join("profile.json"), Some(NOBODY), Some(NOBODY)).unwrap();
        for f in ["summary.json", "profile.pb.gz", "stacks-all.folded", "flamegraph-all.svg"] {
            let target = if f == "flamegraph-all.svg" { "summary.json" } else { f };
            as_nobody(&format!("ln -s {} {}/{f}", victim.file(target).display(), theirs.path().display()));
        }
        let dir = theirs.path().to_str().unwrap();
        let out = run_in(results.path(), &["report", dir, "--format", "all"]);
        assert_success(&out);
        victim.assert_untouched(&what);
        for f in ["summary.json", "profile.pb.gz", "stacks-all.folded", "flamegraph-all.svg"] {
            let meta = std::fs::symlink_metadata(theirs.path().join(f)).unwrap();
            assert!(meta.is_file() && meta.uid() == 0, "{what}: {f} is not root's new file");
        }

        // In a sticky world-writable directory, nobody's directory is refused, and so is nobody's
        // symlink as --output; rendering elsewhere works.
        let tmp = sticky_dir();
        let planted = tmp.path().join("theirs");
        as_nobody(&format!("mkdir {}", planted.display()));
        std::fs::write(planted.join("profile.json"), &profile).unwrap();
        std::os::unix::fs::chown(planted.join("profile.json"), Some(NOBODY), Some(NOBODY)).unwrap();
        let out = run_in(results.path(), &["report", planted.to_str().unwrap(), "--format", "svg"]);
        assert_refused(&out, &format!("report {}", planted.display()), &planted, "is owned by uid 65534", &what);
        let link = tmp.path().join("rendered");
        as_nobody(&format!("ln -s {} {}", victim.dir.display(), link.display()));
        let out = run_in(
            results.path(),
            &["report", planted.to_str().unwrap(), "--format", "svg", "--output", link.to_str().unwrap()],
        );
        assert_refused(&out, &format!("--output {}", link.display()), &link, "is a symlink owned by uid 65534", &what);
        let elsewhere = results.path().join(format!("rendered-{protected}"));
        let out = run_in(
            results.path(),
            &["report", planted.to_str().unwrap(), "--format", "svg", "--output", elsewhere.to_str().unwrap()],
        );
        assert_success(&out);
        assert!(elsewhere.join("flamegraph-all.svg").is_file(), "{what}");
        victim.assert_untouched(&what);
    }
}

#[test]
fn thread_names_with_terminal_escapes_reach_the_terminal_escaped() {
    // A process names itself with an OSC title sequence and a screen clear, then spins.
    let marker = tag();
    let script = format!("printf '\\033]0;pwned\\007\\033[2J' > /proc/self/comm; while :; do :; done # {marker}");
    let mut spinner = Command::new("sh").args(["-c", &script]).spawn().unwrap();
    let pid = spinner.id();
    std::thread::sleep(Duration::from_millis(300));
    let comm = std::fs::read(format!("/proc/{pid}/comm")).unwrap();
    assert!(comm.starts_with(b"\x1b]0;pwned"), "the name was not set: {comm:?}");
    let out = Command::new(bin())
        .args(["--pid", &pid.to_string(), "--duration", "3", "--energy-source", "model", "--verbose", "--output"])
        .arg(tempfile::tempdir().unwrap().path().join("r"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(out, Duration::from_secs(60));
    let _ = spinner.kill();
    let _ = spinner.wait();
    assert_success(&out);
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let raw: Vec<u8> = bytes.iter().copied().filter(|b| matches!(b, 0x1b | 0x07)).collect();
        assert!(raw.is_empty(), "{stream} carries raw control bytes {raw:?}");
    }
    let mut all = String::from_utf8_lossy(&out.stdout).into_owned();
    all.push_str(&String::from_utf8_lossy(&out.stderr));
    assert!(all.contains("\\u{1b}]0;pwned\\u{7}"), "the name is not shown escaped:\n{all}");
}
