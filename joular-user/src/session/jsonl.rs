//! `--json FILE`: one `CycleReport` per line, written every cycle so a crash loses at most one.
//! The file is a new one put in place of whatever was at that name (never opened through a
//! symlink or truncated in place: see `safe_write`).
//!
//! Each line is built in memory and written whole; a write that fails or falls short (a full
//! disk) cuts the file back to its last whole line, so a reader never meets half a report.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use joular_user::attribution::stacks::AttributedCycle;
use joular_user::model::CycleReport;
use joular_user::output::{FailedOutput, Sink, SinkError};
use joular_user::safe_write::{self, Modes};

pub struct JsonLines {
    out: WholeLines<File>,
    path: PathBuf,
}

impl JsonLines {
    pub fn create(path: &Path, modes: Modes) -> anyhow::Result<Self> {
        let f = safe_write::create_stream(path, modes)
            .with_context(|| format!("cannot create --json file {}", path.display()))?;
        Ok(Self { out: WholeLines::new(f), path: path.to_owned() })
    }

    /// Appends the report as one line; on an error the file ends with the previous line.
    pub fn write(&mut self, report: &CycleReport) -> io::Result<()> {
        let mut line = serde_json::to_vec(report)?;
        line.push(b'\n');
        self.out.write_line(&line)
    }
}

impl Sink for JsonLines {
    /// On an error the file is left whole and the output stops.
    fn on_cycle(&mut self, cycle: &AttributedCycle) -> Result<(), SinkError> {
        self.write(&cycle.report).map_err(|e| SinkError {
            failed: FailedOutput::new("--json", &self.path, e),
            outcome: "JSON output stopped, the run goes on",
            stopped: true,
        })
    }
}

/// Where a writer can be cut back to a length (and go on writing from there).
pub trait Truncate {
    fn truncate_to(&mut self, len_bytes: u64) -> io::Result<()>;
}

impl Truncate for File {
    fn truncate_to(&mut self, len_bytes: u64) -> io::Result<()> {
        self.set_len(len_bytes)?;
        self.seek(SeekFrom::Start(len_bytes)).map(|_| ())
    }
}

/// A writer that holds only whole lines: what a failed write left is cut off.
pub struct WholeLines<W> {
    out: W,
    /// Bytes of the whole lines written so far.
    len_bytes: u64,
}

impl<W: Write + Truncate> WholeLines<W> {
    pub fn new(out: W) -> Self {
        Self { out, len_bytes: 0 }
    }

    /// Writes `line` (ending in `\n`) in one go. On an error the part written is cut off, and
    /// the error says if that failed too.
    pub fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        match self.out.write_all(line).and_then(|()| self.out.flush()) {
            Ok(()) => {
                self.len_bytes += line.len() as u64;
                Ok(())
            }
            Err(e) => match self.out.truncate_to(self.len_bytes) {
                Ok(()) => Err(e),
                Err(cut) => {
                    Err(io::Error::new(e.kind(), format!("{e}; cutting the partial line off failed too: {cut}")))
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A disk that fills after `room` bytes, taking what fits of the write that fills it (a
    /// short write), as a file system does.
    struct FullAfter {
        bytes: Vec<u8>,
        room: usize,
    }

    impl Write for FullAfter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.room - self.bytes.len());
            if n == 0 && !buf.is_empty() {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.bytes.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Truncate for FullAfter {
        fn truncate_to(&mut self, len_bytes: u64) -> io::Result<()> {
            self.bytes.truncate(len_bytes as usize);
            Ok(())
        }
    }

    #[test]
    fn a_write_that_fills_the_disk_leaves_only_whole_lines() {
        let mut lines = WholeLines::new(FullAfter { bytes: Vec::new(), room: 18 });
        lines.write_line(b"{\"cycle\":0}\n").unwrap();
        let e = lines.write_line(b"{\"cycle\":1}\n").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
        assert_eq!(lines.out.bytes, b"{\"cycle\":0}\n", "the half-written second line is cut off");
        // Room again (space freed): writing goes on after the last whole line.
        lines.out.room = 100;
        lines.write_line(b"{\"cycle\":2}\n").unwrap();
        assert_eq!(lines.out.bytes, b"{\"cycle\":0}\n{\"cycle\":2}\n");
    }

    #[test]
    fn a_real_file_is_cut_back_to_its_last_whole_line() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("c.jsonl");
        let mut file = File::create(&path).unwrap();
        file.write_all(b"{\"a\":1}\n{\"b\":").unwrap();
        file.truncate_to(8).unwrap();
        file.write_all(b"{\"c\":3}\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\":1}\n{\"c\":3}\n");
    }
}
