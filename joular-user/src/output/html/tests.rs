//! `report.html` of the results fixture, read as text (the browser test is in
//! `tests/html_report.rs`).

use std::fs;

use base64::Engine;

use super::*;
use crate::output::ResultsConfig;
use crate::stages::results::tests::{config, csv_rows, fixture, PID};
use crate::stages::Results;

/// The fixture run with `--html`; returns the page and the run directory.
fn page() -> (tempfile::TempDir, String, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let mut results = Results::new(ResultsConfig { html: true, ..config(tmp.path()) }).unwrap();
    for (mut report, stacks) in fixture() {
        results.on_cycle(&mut report, &stacks).unwrap();
    }
    let finished = results.finish().unwrap();
    let dir = finished.outputs[0].dir.clone();
    assert!(finished.outputs[0].files.contains(&dir.join(HTML_FILE)));
    let html = fs::read_to_string(dir.join(HTML_FILE)).unwrap();
    (tmp, html, dir)
}

/// `data-uj` of the row whose method cell is `name`, in the table with id `table`.
fn row_uj(html: &str, table: &str, name: &str) -> Option<f64> {
    let table_at = html.find(&format!("id=\"{table}\""))?;
    let body = &html[table_at..html[table_at..].find("</table>")? + table_at];
    let cell = body.find(&format!("<td class=\"jr-name\">{name}</td>"))?;
    let row = body[..cell].rfind("<tr data-uj=\"")? + "<tr data-uj=\"".len();
    body[row..].split('"').next()?.parse().ok()
}

#[test]
fn the_page_holds_every_method_with_its_csv_energy_and_the_buckets_apart() {
    let (_tmp, html, dir) = page();
    for (view, infix) in [("all", "all"), ("app", "filtered")] {
        let csv = csv_rows(&dir.join(format!("{view}/total/methods/joularJX-{PID}-{infix}-methods-energy.csv")));
        assert!(!csv.is_empty());
        for (method, joules) in csv {
            let uj = row_uj(&html, &format!("jr-methods-{view}"), &method)
                .unwrap_or_else(|| panic!("{method} not in the {view} table"));
            assert!((uj / 1e6 - joules).abs() <= 1e-4, "{view} {method}: {uj} µJ vs {joules} J");
        }
    }
    // Buckets are not methods: they are in their own table.
    assert!(row_uj(&html, "jr-methods-all", "[GC]").is_none());
    assert_eq!(row_uj(&html, "jr-unattributed-all", "[GC]"), Some(300_000.0));
    assert_eq!(row_uj(&html, "jr-unattributed-app", "(no app frame)"), Some(500_000.0));
    assert!(html.contains("id=\"jr-estimated\""), "the fixture's model source is flagged");
    assert!(html.contains("model (estimated): utilisation (Cloud Carbon Footprint) model: test coefficients"));
    assert!(html.contains("JIT compiler 0.4000 J (5.6%)"));
}

#[test]
fn the_flame_graph_is_the_only_inline_svg_and_nothing_is_fetched() {
    let (_tmp, html, _dir) = page();
    let first_svg = html.find("<svg").unwrap();
    assert!(html[..first_svg].ends_with("id=\"jr-flamegraph\">"), "the flame graph comes first");
    let flamegraph = fs::read_to_string(_dir.join("flamegraph-all.svg")).unwrap();
    assert_eq!(html.matches("<svg").count(), flamegraph.matches("<svg").count(), "charts are images");
    assert!(html[first_svg..].contains("id=\"frames\""));
    assert!(!html.contains("<?xml"), "no XML prolog inside HTML");
    // Self-contained: every src is a data: URL, no stylesheet or script is linked.
    for (at, _) in html.match_indices(" src=\"") {
        assert!(html[at..].starts_with(" src=\"data:image/svg+xml;base64,"), "{}", &html[at..at + 60]);
    }
    assert!(!html.contains("<link") && !html.contains("<script src"));
}

/// The SVG of the chart image `id`.
fn chart(html: &str, id: &str) -> String {
    let at = html.find(&format!("data-jr-chart=\"{id}\"")).unwrap_or_else(|| panic!("no {id} chart"));
    let data_at = html[at..].find("base64,").unwrap() + at + "base64,".len();
    let data = html[data_at..].split('"').next().unwrap();
    let bytes = base64::engine::general_purpose::STANDARD.decode(data).unwrap();
    String::from_utf8(bytes).unwrap()
}

/// plotters writes each text on its own line.
fn has_text(svg: &str, text: &str) -> bool {
    svg.contains(&format!(">\n{text}\n</text>"))
}

#[test]
fn charts_plot_the_process_its_top_methods_and_its_threads() {
    let (_tmp, html, _) = page();
    let power = chart(&html, "power");
    assert!(power.starts_with("<svg"), "{power}");
    // The fixture's top methods have evolution files: each is a series.
    for method in ["java.math.BigInteger.multiply", "com.acme.App.compute", "java.util.HashMap.get"] {
        assert!(has_text(&power, method), "{method} missing from the power chart");
    }
    assert!(has_text(&power, "worker (process)"), "{power}");
    let threads = chart(&html, "threads");
    for thread in ["worker (101)", "C2 CompilerThre (105)", "GC Thread#0 (106)"] {
        assert!(has_text(&threads, thread), "{thread} missing from the thread chart");
    }
}

#[test]
fn report_renders_html_from_the_raw_profile() {
    let (tmp, _, dir) = page();
    let out = tmp.path().join("rerendered");
    crate::output::report::report_to(
        &crate::output::report::ReportArgs {
            result_dir: dir.clone(),
            output: Some(out.clone()),
            format: vec![crate::output::report::ReportFormat::Html],
            top: 5,
            filter: None,
            native_frames: false,
            output_mode: None,
        },
        &mut Vec::new(),
    )
    .unwrap();
    let again = fs::read_to_string(out.join(HTML_FILE)).unwrap();
    assert_eq!(row_uj(&again, "jr-methods-all", "java.math.BigInteger.multiply"), Some(4e6));
    // The evolution files are read from the profile's own directory.
    assert!(has_text(&chart(&again, "power"), "java.math.BigInteger.multiply"));
    assert!(!out.join("all").exists(), "only the asked format");
}

#[test]
fn dates_are_utc() {
    assert_eq!(utc(0), "1970-01-01 00:00:00");
    assert_eq!(utc(1_700_000_000_000), "2023-11-14 22:13:20");
    assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
}

/// `serve --results` (html on): a process that exits gets its report.html with its files.
#[test]
fn a_retired_process_gets_its_report() {
    let tmp = tempfile::tempdir().unwrap();
    let mut results = Results::new(ResultsConfig { html: true, ..config(tmp.path()) }).unwrap();
    for (mut report, stacks) in fixture() {
        results.on_cycle(&mut report, &stacks).unwrap();
    }
    let files = results.take_retired(PID).expect("files of the process").write().unwrap();
    let html = fs::read_to_string(files.dir.join(HTML_FILE)).unwrap();
    assert_eq!(row_uj(&html, "jr-methods-all", "java.math.BigInteger.multiply"), Some(4e6));
}

/// A comm with an escape sequence and markup (what `prctl(PR_SET_NAME)` allows), on every thread.
const HOSTILE: &str = "\x1b[31m<a&\"'>";

#[test]
fn a_hostile_comm_is_escaped_in_the_title_and_heading_and_no_control_character_is_left() {
    let tmp = tempfile::tempdir().unwrap();
    let mut results = Results::new(ResultsConfig { html: true, ..config(tmp.path()) }).unwrap();
    for (mut report, stacks) in fixture() {
        for t in &mut report.threads {
            t.comm = HOSTILE.into();
        }
        results.on_cycle(&mut report, &stacks).unwrap();
    }
    let dir = results.finish().unwrap().outputs[0].dir.clone();
    let html = fs::read_to_string(dir.join(HTML_FILE)).unwrap();
    let shown = "Energy of \\x1b[31m&lt;a&amp;&quot;'&gt; (pid";
    assert!(html.contains(&format!("<title>{shown}")), "title: {}", &html[html.find("<title>").unwrap()..][..80]);
    assert!(html.contains(&format!("<h1>{shown}")));
    let bad: Vec<char> = html.chars().filter(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r')).collect();
    assert!(bad.is_empty(), "control characters left: {bad:?}");
    // The inlined flame graph is XML and says the name.
    let svg = &html[html.find("<svg").unwrap()..html.rfind("</svg>").unwrap() + "</svg>".len()];
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut texts = String::new();
    loop {
        match reader.read_event().unwrap() {
            quick_xml::events::Event::Eof => break,
            quick_xml::events::Event::Text(t) => texts.push_str(&t.unescape().unwrap()),
            _ => {}
        }
    }
    assert!(texts.contains("\\x1b[31m<a&\"'>"), "flame graph title");
}

/// Issue 23: a JVM without -XX:+DebugNonSafepoints gets the approximate share and the advice.
#[test]
fn the_inlining_approximate_share_and_its_advice_are_in_the_header() {
    let (_tmp, html, _dir) = page();
    assert!(!html.contains("jr-inlining-approximate"), "no unwinder, no line");

    let tmp = tempfile::tempdir().unwrap();
    let mut results = Results::new(ResultsConfig { html: true, ..config(tmp.path()) }).unwrap();
    let unwinder = crate::model::JavaUnwinder {
        unwinder: "hotspot".into(),
        debug_non_safepoints: Some(false),
        inlining_approximate_share: Some(0.4213),
        ..Default::default()
    };
    for (mut report, stacks) in fixture() {
        results.on_cycle(&mut report, &stacks).unwrap();
        // As the session does: after the cycle that saw the JVM.
        results.set_java_unwinder(PID, &unwinder);
    }
    let dir = results.finish().unwrap().outputs[0].dir.clone();
    let html = fs::read_to_string(dir.join(HTML_FILE)).unwrap();
    assert!(html.contains("id=\"jr-inlining-approximate\" data-share=\"0.4213\""), "{html}");
    assert!(html.contains("42.1% of the Java samples"));
    assert!(html.contains("-XX:+UnlockDiagnosticVMOptions -XX:+DebugNonSafepoints"));
}

#[test]
fn device_energy_is_a_stacked_bar_per_method_and_absent_without_it() {
    let (_tmp, plain, _dir) = page();
    assert!(!plain.contains("jr-device-bars") && !plain.contains("Energy by device"));
    let tmp = tempfile::tempdir().unwrap();
    let mut results = Results::new(ResultsConfig { html: true, ..config(tmp.path()) }).unwrap();
    for (mut report, stacks) in crate::output::device_tree::tests::device_fixture() {
        results.on_cycle(&mut report, &stacks).unwrap();
    }
    let dir = results.finish().unwrap().outputs[0].dir.clone();
    let html = fs::read_to_string(dir.join(HTML_FILE)).unwrap();
    // compute: 1 J CPU + 3 J network; save: 1 J disk; multiply: 4 J CPU.
    assert_eq!(row_uj(&html, "jr-device-bars", "com.acme.App.compute"), Some(4e6));
    assert_eq!(row_uj(&html, "jr-device-bars", "com.acme.App.save"), Some(1e6));
    assert_eq!(row_uj(&html, "jr-device-bars", "java.math.BigInteger.multiply"), Some(4e6));
    let table = &html[html.find("id=\"jr-device-bars\"").unwrap()..];
    let row = &table[table.find("com.acme.App.compute").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("<td>1.0000</td><td>3.0000</td><td>0.0000</td>"), "{row}");
    // Widths are of the widest bar (4 J): 25% CPU, 75% network, no disk segment.
    assert!(row.contains("jr-bar jr-bar-cpu\" style=\"width:25.00%\""), "{row}");
    assert!(row.contains("jr-bar jr-bar-network\" style=\"width:75.00%\""), "{row}");
    assert!(!row.contains("jr-bar jr-bar-disk"), "{row}");
    assert!(html.contains("network 3.0000 J (estimated), disk 1.0000 J (estimated)"));
}
