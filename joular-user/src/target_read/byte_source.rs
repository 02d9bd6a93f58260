//! Where bytes of a target's file or memory image come from, read at offsets (never mapped: a
//! target may truncate its file under us).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Where a copy's bytes come from: a file, or the process memory holding a vDSO image.
pub trait ByteSource {
    fn read_bytes_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl ByteSource for File {
    fn read_bytes_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.read_at(buf, offset)
    }
}

/// An image of `len_bytes` at `start` in a process's memory (`/proc/<pid>/mem`).
pub struct MemoryImage {
    pub mem: File,
    pub start: u64,
    pub len_bytes: u64,
}

impl ByteSource for MemoryImage {
    fn read_bytes_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let left = self.len_bytes.saturating_sub(offset);
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        self.mem.read_at(&mut buf[..want], self.start + offset)
    }
}
