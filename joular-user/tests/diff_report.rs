//! `joular-ebpf diff` as a user runs it: on runs written by the result stage, its exit codes
//! (1 when `--fail-if-increase` trips, 2 for a run it cannot read, naming it and the fix),
//! and its `diff.html` with the differential flame graph in a real headless Chromium (loads
//! without a console error, the flame graph's script runs, the doubled method is a red
//! frame and the only flagged row). Fails when Chromium is missing (`cargo xtask test`
//! installs Debian's `chromium`).

mod cdp;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use joular_user::attribution::stacks::ThreadStacks;
use joular_user::model::{CycleReport, Frame, FrameKind, SocketReport, Stack, ThreadReport, ThreadStack};
use joular_user::output::{MethodFilter, ResultsConfig};
use joular_user::stages::Results;
use serde_json::{json, Value};

/// A run of 10 cycles written by the result stage: per method and cycle, `work` samples of
/// 10 mJ, plus 0 to 2 (so one run's cycles have a spread for the bootstrap).
fn write_run(dir: &Path, work: &[(&str, u64)]) {
    let java = |short: &str| Frame {
        name: Arc::from(format!("void {short}()")),
        short: Arc::from(short),
        kind: FrameKind::JavaJit,
        line: None,
        raw_name: None,
    };
    let mut results = Results::new(ResultsConfig {
        results_root: dir.to_owned(),
        write_files: true,
        filter: MethodFilter::default(),
        start_epoch_ms: 1_700_000_000_000,
        energy_source: "powercap".into(),
        estimated: false,
        energy_detail: String::new(),
        carbon: None,
        report_stacks: false,
        evolution: true,
        runtime_call_trees: false,
        top_n: 10,
        native_frames: false,
        html: false,
        modes: joular_user::safe_write::Modes::for_caller(),
        cpu_frequencies: Default::default(),
    })
    .unwrap();
    for n in 0..10u64 {
        let stacks: Vec<ThreadStack> = work
            .iter()
            .map(|(m, samples)| ThreadStack {
                stack: Arc::from(vec![java("java.lang.Thread.run"), java(m)]) as Stack,
                samples: samples + n % 3,
            })
            .collect();
        let energy_uj = stacks.iter().map(|s| s.samples).sum::<u64>() as f64 * 1e4;
        let mut report = CycleReport {
            cycle: n,
            start_ns: n * 1_000_000_000,
            end_ns: (n + 1) * 1_000_000_000,
            end_epoch_ms: 1_700_000_000_000 + (n + 1) * 1000,
            threads: vec![ThreadReport { pid: 7, tid: 8, comm: "worker".into(), energy_uj, ..ThreadReport::default() }],
            sockets: vec![SocketReport { socket: 0, energy_uj, source: "powercap".into(), ..SocketReport::default() }],
            ..CycleReport::default()
        };
        let stacks: Vec<ThreadStacks> = vec![(7, 8, stacks)];
        results.on_cycle(&mut report, &stacks).unwrap();
    }
    results.finish().unwrap();
}

/// BASE and NEW in `dir`: NEW's `a.Db.query` does twice the work.
fn base_and_new(dir: &Path) -> (String, String) {
    write_run(&dir.join("base"), &[("a.Shop.checkout", 100), ("a.Db.query", 50)]);
    write_run(&dir.join("new"), &[("a.Shop.checkout", 100), ("a.Db.query", 100)]);
    (dir.join("base").display().to_string(), dir.join("new").display().to_string())
}

/// Exit code and stderr of `joular-ebpf diff ARGS`.
fn diff(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_joular-ebpf")).arg("diff").args(args).output().unwrap();
    (out.status.code().expect("exited"), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn diff_exits_1_when_the_gate_trips_and_2_on_a_run_it_cannot_read() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, new) = base_and_new(tmp.path());
    let path = |name: &str| tmp.path().join(name).display().to_string();
    let out = path("out");
    let (code, stderr) = diff(&[&base, &new, "--fail-if-increase", "20", "-o", &out]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("--fail-if-increase 20: a.Db.query rose +"), "{stderr}");
    for file in ["diff.html", "flamegraph-diff.svg", "diff.json"] {
        assert!(tmp.path().join("out").join(file).is_file(), "{file}");
    }
    for (gate, want) in [("20:a.Shop", 0), ("20:a.Db", 1), ("150", 0)] {
        assert_eq!(diff(&[&base, &new, "--fail-if-increase", gate, "--no-files"]).0, want, "{gate}");
    }
    assert_eq!(diff(&[&new, &base, "--fail-if-increase", "0", "--no-files"]).0, 0, "a decrease passes");
    // Quoted globs are expanded by diff itself.
    assert_eq!(diff(&[&path("bas*"), &path("ne?"), "--fail-if-increase", "20", "--no-files"]).0, 1);

    std::fs::create_dir(tmp.path().join("garbage")).unwrap();
    std::fs::write(tmp.path().join("garbage/profile.json"), "[1, 2").unwrap();
    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    for (bad, names) in [
        (path("missing"), "missing"),
        (path("garbage"), "garbage/profile.json"),
        (path("empty"), "no raw profile"),
        (path("nothing-*"), "matches no directory"),
    ] {
        let (code, stderr) = diff(&[&base, &bad, "--no-files"]);
        assert_eq!(code, 2, "{stderr}");
        assert!(
            stderr.contains("error: diff NEW ")
                && stderr.contains(names)
                && stderr.contains("or a quoted glob of them"),
            "{stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    }
    let (code, stderr) = diff(&[&base, &new, "--confidence", "100", "--no-files"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--confidence 100: expected a percentage between 0 and 100"), "{stderr}");
}

const PROBE: &str = r#"JSON.stringify({
  rows: Array.from(document.querySelectorAll('#jr-diff-methods tbody tr')).map(r => [r.cells[0].textContent, r.dataset.change]),
  total: document.getElementById('jr-total').dataset.change,
  flameFrames: document.querySelectorAll('#jr-flamegraph #frames > g').length,
  flameScriptRan: typeof known_font_width === 'number' && known_font_width > 0,
  redQuery: Array.from(document.querySelectorAll('#jr-flamegraph #frames > g'))
    .filter(g => g.querySelector('title').textContent.startsWith('a.Db.query'))
    .map(g => g.querySelector('rect').getAttribute('fill')),
})"#;

fn evaluate(browser: &mut cdp::Browser, session: &str, expression: &str) -> Value {
    let result =
        browser.call(Some(session), "Runtime.evaluate", json!({"expression": expression, "returnByValue": true}));
    assert!(result.get("exceptionDetails").is_none(), "{expression}: {result}");
    result["result"]["value"].clone()
}

#[test]
fn the_diff_report_and_its_flame_graph_work_in_headless_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, new) = base_and_new(tmp.path());
    let out = tmp.path().join("out");
    assert_eq!(diff(&[&base, &new, "-o", &out.display().to_string()]).0, 0);

    let mut browser = cdp::Browser::start();
    let target = browser.call(None, "Target.createTarget", json!({"url": "about:blank"}));
    let attached =
        browser.call(None, "Target.attachToTarget", json!({"targetId": target["targetId"], "flatten": true}));
    let session = attached["sessionId"].as_str().expect("a session").to_owned();
    for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
        browser.call(Some(&session), domain, json!({}));
    }
    let page = out.join("diff.html");
    browser.call(Some(&session), "Page.navigate", json!({"url": format!("file://{}", page.display())}));
    assert!(browser.wait_event("Page.loadEventFired", Duration::from_secs(60)), "the page never loaded");
    // The flame graph lays itself out in a timeout after its load event.
    browser.settle(Duration::from_millis(500));
    let shown: Value = serde_json::from_str(evaluate(&mut browser, &session, PROBE).as_str().unwrap()).unwrap();
    assert_eq!(shown["rows"], json!([["a.Db.query", "MORE"], ["a.Shop.checkout", "-"]]), "{shown}");
    assert_eq!(shown["total"], json!("MORE"));
    assert!(shown["flameFrames"].as_u64().unwrap() >= 3, "{shown}");
    assert_eq!(shown["flameScriptRan"], json!(true), "the flame graph's script did not run: {shown}");
    // inferno's differential red: full red channel, the others lower by how much it grew.
    let fill = shown["redQuery"][0].as_str().unwrap_or_default().to_owned();
    assert!(fill.starts_with("rgb(255,") && fill != "rgb(255,255,255)", "{shown}");
    browser.settle(Duration::from_millis(200));
    let errors = browser.errors();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
}
