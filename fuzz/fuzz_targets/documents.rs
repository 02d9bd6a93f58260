//! Names a profiled process chose (its comm, its threads', its frames': `prctl(PR_SET_NAME)` and
//! symbol tables take any bytes) through the flame graph and `report.html` writers. Input: names
//! separated by NUL, the first the process's comm, the rest one stack's frames. Both documents
//! must parse as XML (the page's inline flame graph) with a strict parser, and the page must hold
//! no control character and show the comm escaped in its title.
#![no_main]

use std::path::Path;
use std::sync::{Arc, OnceLock};

use joular_user::attribution::stacks::thread_kind::ThreadKind;
use joular_user::model::{Frame, FrameKind};
use joular_user::output::{
    report_to, write_raw_profile, ProcessProfile, ReportArgs, ReportFormat, RunSummary, StackTotal, ThreadTotal,
    RAW_PROFILE_FILE,
};
use joular_user::safe_write::{Modes, OutDir};
use libfuzzer_sys::fuzz_target;

const PID: u32 = 4242;
const KINDS: [FrameKind; 4] = [FrameKind::Native, FrameKind::JavaJit, FrameKind::JavaInlined, FrameKind::Kernel];

fn scratch() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| joular_fuzz::scratch_dir())
}

fn frame(name: &str, i: usize) -> Frame {
    Frame::new(KINDS[i % KINDS.len()], name, name, None)
}

fn xml_root(xml: &str, what: &str) {
    let options = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    if let Err(e) = roxmltree::Document::parse_with_options(xml, options) {
        panic!("{what} is not well-formed XML: {e}");
    }
}

fuzz_target!(|data: &[u8]| {
    let names: Vec<String> =
        data.split(|&b| b == 0).take(17).map(|n| String::from_utf8_lossy(n).into_owned()).collect();
    let comm = names[0].clone();
    let frames: Vec<Frame> = names.iter().enumerate().map(|(i, n)| frame(n, i)).collect();
    let stacks = vec![
        StackTotal {
            carbon_g: 0.0,
            stack: Arc::from(frames.clone()),
            thread: ThreadKind::Application,
            energy_uj: 9_000.0,
            samples: 9,
        },
        StackTotal {
            carbon_g: 0.0,
            stack: Arc::from(&frames[..frames.len().div_ceil(2)]),
            thread: ThreadKind::Application,
            energy_uj: 1_000.0,
            samples: 1,
        },
    ];
    let profile = ProcessProfile {
        summary: RunSummary {
            pid: PID,
            comm: comm.clone(),
            duration_s: 1.0,
            cycles: 1,
            energy_source: "model".into(),
            estimated: true,
            energy_uj: 10_000.0,
            samples: 10,
            threads: vec![ThreadTotal {
                tid: PID,
                comm,
                energy_uj: 10_000.0,
                carbon_g: 0.0,
                on_cpu_ns: 1,
                samples: 10,
            }],
            ..RunSummary::default()
        },
        stacks,
        ..ProcessProfile::default()
    };
    let root = scratch().path();
    let input = root.join("in");
    let output = root.join("out");
    let dir = OutDir::create_all(&input, Modes::for_caller()).unwrap();
    write_raw_profile(&dir, RAW_PROFILE_FILE, &profile).unwrap();
    let args = ReportArgs {
        result_dir: input,
        output: Some(output.clone()),
        format: vec![ReportFormat::Svg, ReportFormat::Html],
        top: 10,
        filter: None,
        native_frames: true,
        output_mode: None,
    };
    if let Err(e) = report_to(&args, &mut Vec::new()) {
        panic!("a profile of hostile names failed to render: {e}");
    }
    let svg = std::fs::read_to_string(output.join("flamegraph-all.svg")).unwrap();
    xml_root(&svg, "flamegraph-all.svg");
    let html = std::fs::read_to_string(Path::new(&output).join("report.html")).unwrap();
    let bad: Vec<char> = html
        .chars()
        .filter(|&c| (c.is_control() && !matches!(c, '\t' | '\n' | '\r')) || c == '\u{FFFE}' || c == '\u{FFFF}')
        .collect();
    assert!(bad.is_empty(), "report.html holds {bad:?}");
    let inline =
        &html[html.find("<svg").expect("inline flame graph")..html.rfind("</svg>").expect("its end") + "</svg>".len()];
    xml_root(inline, "report.html's flame graph");
    for tag in ["title", "h1"] {
        let open = format!("<{tag}>");
        let at = html.find(&open).unwrap_or_else(|| panic!("no <{tag}>")) + open.len();
        let text =
            &html[at..at + html[at..].find(&format!("</{tag}>")).unwrap_or_else(|| panic!("<{tag}> never closed"))];
        assert!(!text.contains('<') && !text.contains('>'), "markup in <{tag}>: {text:?}");
    }
});
