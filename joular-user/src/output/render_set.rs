//! Which end-of-run files to write of a process, and their names: read by `render.rs` and by
//! the device trees it calls (`device_tree.rs`, `device_graphs.rs`).

pub const SUMMARY_FILE: &str = "summary.json";
pub const PPROF_FILE: &str = "profile.pb.gz";

/// Which files to write.
#[derive(Debug, Clone, Copy, Default)]
pub struct RenderSet {
    /// JoularJX `total/` CSVs (methods and call trees, both views).
    pub csv: bool,
    pub folded: bool,
    pub svg: bool,
    pub pprof: bool,
    /// `summary.json` and the raw profile.
    pub summary: bool,
    /// `report.html`.
    pub html: bool,
}

impl RenderSet {
    /// Every file but the HTML report (`--html`).
    pub const ALL: Self = Self { csv: true, folded: true, svg: true, pprof: true, summary: true, html: false };
}
