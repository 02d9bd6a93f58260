//! `report.html` in a real headless Chromium: it loads without a console error, its method
//! tables hold the fixture's methods with summary.json's energy, the flame graph's script runs,
//! the charts decode, the view switch and sorting work, and a screenshot is taken
//! (`$CARGO_TARGET_TMPDIR/report-screenshot.png`). Fails when Chromium is missing
//! (`cargo xtask test` installs Debian's `chromium`).

mod cdp;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use joular_user::model::{CycleReport, Frame, FrameKind, SocketReport, Stack, ThreadReport, ThreadStack};
use joular_user::output::{MethodFilter, ResultsConfig, RunSummary, ThreadStacks};
use joular_user::stages::Results;
use serde_json::{json, Value};

const PID: u32 = 4242;

fn frame(short: &str, kind: FrameKind) -> Frame {
    Frame { name: Arc::from(format!("void {short}()")), short: Arc::from(short), kind, line: None, raw_name: None }
}

/// Three 1 s cycles of a JVM: a worker (3 J a cycle; modPow under checkout 3 samples in 4,
/// a writev under render 1 in 4) and a C2 compiler thread (0.5 J a cycle).
fn run(dir: &std::path::Path) -> std::path::PathBuf {
    let java = |s: &str| frame(s, FrameKind::JavaJit);
    let run = java("java.lang.Thread.run");
    let mod_pow: Stack =
        Arc::from(vec![run.clone(), java("com.acme.Shop.checkout"), java("java.math.BigInteger.modPow")]);
    let writev: Stack = Arc::from(vec![run, java("com.acme.Shop.render"), frame("writev", FrameKind::Native)]);
    let compile: Stack = Arc::from(vec![
        frame("thread_native_entry(Thread*)", FrameKind::Native),
        frame("C2Compiler::compile_method", FrameKind::Native),
    ]);
    let mut results = Results::new(ResultsConfig {
        results_root: dir.to_owned(),
        write_files: true,
        filter: MethodFilter::parse("com.acme"),
        start_epoch_ms: 1_700_000_000_000,
        energy_source: "model".into(),
        estimated: true,
        energy_detail: String::new(),
        carbon: None,
        report_stacks: false,
        evolution: true,
        runtime_call_trees: false,
        top_n: 10,
        native_frames: false,
        html: true,
        modes: joular_user::safe_write::Modes::for_caller(),
        cpu_frequencies: Default::default(),
    })
    .unwrap();
    for n in 0..3u64 {
        let thread = |tid, comm: &str, energy_uj| ThreadReport {
            pid: PID,
            tid,
            comm: comm.into(),
            on_cpu_ns: 500_000_000,
            energy_uj,
            ..ThreadReport::default()
        };
        let mut report = CycleReport {
            cycle: n,
            start_ns: n * 1_000_000_000,
            end_ns: (n + 1) * 1_000_000_000,
            end_epoch_ms: 1_700_000_000_000 + (n + 1) * 1000,
            threads: vec![thread(PID + 1, "worker", 3e6), thread(PID + 2, "C2 CompilerThre", 0.5e6)],
            sockets: vec![SocketReport {
                socket: 0,
                energy_uj: 5e6,
                unattributed_uj: 1.5e6,
                source: "model".into(),
                estimated: true,
                ..SocketReport::default()
            }],
            ..CycleReport::default()
        };
        let ts = |stack: &Stack, samples| ThreadStack { stack: stack.clone(), samples };
        let stacks: Vec<ThreadStacks> =
            vec![(PID, PID + 1, vec![ts(&mod_pow, 3), ts(&writev, 1)]), (PID, PID + 2, vec![ts(&compile, 2)])];
        results.on_cycle(&mut report, &stacks).unwrap();
    }
    results.finish().unwrap().outputs[0].dir.clone()
}

/// What the page shows, read in the browser.
const PROBE: &str = r#"JSON.stringify({
  all: Array.from(document.querySelectorAll('#jr-methods-all tbody tr')).map(r => [r.cells[1].textContent, Number(r.dataset.uj)]),
  app: Array.from(document.querySelectorAll('#jr-methods-app tbody tr')).map(r => [r.cells[1].textContent, Number(r.dataset.uj)]),
  unattributed: Array.from(document.querySelectorAll('#jr-unattributed-all tbody tr')).map(r => [r.cells[0].textContent, Number(r.dataset.uj)]),
  flameFrames: document.querySelectorAll('#jr-flamegraph #frames > g').length,
  flameScriptRan: typeof known_font_width === 'number' && known_font_width > 0,
  charts: Array.from(document.querySelectorAll('img[data-jr-chart]')).map(i => [i.dataset.jrChart, i.complete ? i.naturalWidth : 0]),
  trees: document.querySelectorAll('#jr-trees-all tbody tr').length,
  estimated: document.getElementById('jr-estimated') !== null,
  appHidden: document.querySelector('[data-jr-view="app"]').hidden,
})"#;

fn evaluate(browser: &mut cdp::Browser, session: &str, expression: &str) -> Value {
    let result =
        browser.call(Some(session), "Runtime.evaluate", json!({"expression": expression, "returnByValue": true}));
    assert!(result.get("exceptionDetails").is_none(), "{expression}: {result}");
    result["result"]["value"].clone()
}

#[test]
fn the_report_works_in_headless_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = run(tmp.path());
    let page = dir.join("report.html");
    let summary: RunSummary =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();

    let mut browser = cdp::Browser::start();
    let target = browser.call(None, "Target.createTarget", json!({"url": "about:blank"}));
    let attached =
        browser.call(None, "Target.attachToTarget", json!({"targetId": target["targetId"], "flatten": true}));
    let session = attached["sessionId"].as_str().expect("a session").to_owned();
    for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
        browser.call(Some(&session), domain, json!({}));
    }
    browser.call(Some(&session), "Page.navigate", json!({"url": format!("file://{}", page.display())}));
    assert!(browser.wait_event("Page.loadEventFired", Duration::from_secs(60)), "the page never loaded");
    // The flame graph lays itself out in a timeout after its load event.
    browser.settle(Duration::from_millis(500));

    let shown: Value = serde_json::from_str(evaluate(&mut browser, &session, PROBE).as_str().unwrap()).unwrap();
    let rows = |view: &str| -> BTreeMap<String, f64> {
        shown[view]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r[0].as_str().unwrap().to_owned(), r[1].as_f64().unwrap()))
            .collect()
    };
    // 3 cycles × 3 J: modPow (and the checkout above it) ¾, render's writev ¼; the compiler's
    // 1.5 J is not a method.
    assert_eq!(
        rows("all"),
        BTreeMap::from([
            ("java.math.BigInteger.modPow".to_owned(), 6.75e6),
            ("com.acme.Shop.render".to_owned(), 2.25e6)
        ])
    );
    assert_eq!(
        rows("app"),
        BTreeMap::from([("com.acme.Shop.checkout".to_owned(), 6.75e6), ("com.acme.Shop.render".to_owned(), 2.25e6)])
    );
    assert_eq!(rows("unattributed"), BTreeMap::from([("[JIT compiler]".to_owned(), 1.5e6)]));
    // Within rounding of summary.json: the table plus what no method stands for is the process.
    let table_uj: f64 = rows("all").values().sum::<f64>() + rows("unattributed").values().sum::<f64>();
    let unattributed_uj: f64 = summary.unattributed.all.values().map(|s| s.energy_uj).sum();
    assert!((table_uj - summary.energy_uj).abs() <= 3.0, "table {table_uj} µJ, summary {} µJ", summary.energy_uj);
    assert!((rows("unattributed").values().sum::<f64>() - unattributed_uj).abs() <= 1.0);
    assert!(shown["flameFrames"].as_u64().unwrap() >= 4, "flame graph frames: {shown}");
    assert_eq!(shown["flameScriptRan"], json!(true), "the flame graph's script did not run: {shown}");
    let charts: Vec<(String, u64)> = shown["charts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c[0].as_str().unwrap().to_owned(), c[1].as_u64().unwrap()))
        .collect();
    assert_eq!(charts.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), ["power", "threads"]);
    assert!(charts.iter().all(|c| c.1 > 0), "a chart did not decode: {charts:?}");
    assert_eq!(shown["trees"], json!(2));
    assert_eq!(shown["estimated"], json!(true));
    assert_eq!(shown["appHidden"], json!(true), "the all view shows first");

    // The view switch and sorting.
    let after = evaluate(
        &mut browser,
        &session,
        r#"document.querySelector('[data-jr-view-button="app"]').click();
           const th = document.querySelector('#jr-methods-all th:nth-child(3)');
           th.click(); th.click();
           JSON.stringify([document.querySelector('[data-jr-view="all"]').hidden,
                           document.querySelector('[data-jr-view="app"]').hidden,
                           Array.from(document.querySelectorAll('#jr-methods-all tbody tr')).map(r => Number(r.dataset.uj))])"#,
    );
    assert_eq!(after.as_str().unwrap(), "[true,false,[2250000,6750000]]", "switch to app, sort by J ascending");

    // The viewport only: capturing beyond it resizes the page's viewport, and the flame graph's
    // own script lays itself out again on that resize from an SVG width Chromium may report as 0
    // mid-resize ("<svg> attribute width: A negative value", seen once in a CI run).
    let shot = browser.call(
        Some(&session),
        "Page.captureScreenshot",
        json!({"format": "png", "captureBeyondViewport": false}),
    );
    let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "{} bytes", png.len());
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshot.png");
    std::fs::write(&out, &png).unwrap();

    browser.settle(Duration::from_millis(200));
    let errors = browser.errors();
    assert!(errors.is_empty(), "console errors: {errors:#?}");
}
