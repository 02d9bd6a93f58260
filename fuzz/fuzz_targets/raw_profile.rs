//! `profile.json`, which `joular-ebpf report` loads and re-renders (a saved file may be old,
//! hand-edited or corrupt): parsed, and when it is accepted, rendered to every format.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use joular_user::output::{parse_raw_profile, report_to, ReportArgs, ReportFormat, RAW_PROFILE_FILE};
use libfuzzer_sys::fuzz_target;

fn scratch() -> &'static tempfile::TempDir {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| joular_fuzz::scratch_dir())
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(profile) = parse_raw_profile(text, Path::new(RAW_PROFILE_FILE)) else { return };
    for s in &profile.stacks {
        assert!(s.energy_uj.is_finite() && s.energy_uj >= 0.0, "accepted {} µJ", s.energy_uj);
    }
    let dir = scratch().path();
    std::fs::write(dir.join(RAW_PROFILE_FILE), data).unwrap();
    let args = ReportArgs {
        result_dir: dir.to_owned(),
        output: Some(dir.join("out")),
        format: vec![ReportFormat::All],
        top: 10,
        filter: None,
        native_frames: false,
        output_mode: None,
    };
    let mut table = Vec::new();
    if let Err(e) = report_to(&args, &mut table) {
        panic!("an accepted profile failed to render: {e}");
    }
});
