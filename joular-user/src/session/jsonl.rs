//! `--json FILE`: one `CycleReport` per line, flushed every cycle so a crash loses at most one.
//! The file is a new one put in place of whatever was at that name (never opened through a
//! symlink or truncated in place: see `safe_write`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Context as _;
use joular_user::model::CycleReport;
use joular_user::safe_write::{self, Modes};

pub struct JsonLines {
    out: BufWriter<File>,
}

impl JsonLines {
    pub fn create(path: &Path, modes: Modes) -> anyhow::Result<Self> {
        let f = safe_write::create_stream(path, modes).with_context(|| format!("cannot create --json file {}", path.display()))?;
        Ok(Self { out: BufWriter::new(f) })
    }

    pub fn write(&mut self, report: &CycleReport) -> anyhow::Result<()> {
        serde_json::to_writer(&mut self.out, report)?;
        self.out.write_all(b"\n")?;
        self.out.flush()?;
        Ok(())
    }
}
