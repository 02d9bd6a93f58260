//! Reading another process's memory: the one seam between the HotSpot readers and the
//! target. Production reads a live pid with `process_vm_readv`; tests and fixtures read
//! recorded segments. A failed read is an ordinary `Err` (the caller counts it as a miss):
//! the target's memory changes under us, so a read of freed memory is expected, never a bug.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// The largest object read in one piece: an nmethod's debug information (metadata, scopes
/// and PcDescs, bounded at 4 MiB by `scopes`), a class's method array (65,535 `Method*`s).
pub const MAX_OBJECT_BYTES: usize = 4 << 20;

/// A read that could not be served: unmapped, freed or never recorded memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cannot read {len} bytes at {addr:#x}")]
pub struct ReadError {
    pub addr: u64,
    pub len: usize,
}

/// Bytes of a target process, by address.
pub trait MemoryReader {
    /// Fills `buf` with the bytes at `addr`, all of them or an error.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError>;

    /// `len` bytes at `addr` in a new buffer. `len` comes from the target: over
    /// [`MAX_OBJECT_BYTES`] it is refused before anything is allocated.
    fn read_vec(&self, addr: u64, len: usize) -> Result<Vec<u8>, ReadError> {
        if len > MAX_OBJECT_BYTES {
            return Err(ReadError { addr, len });
        }
        let mut buf = vec![0u8; len];
        self.read(addr, &mut buf)?;
        Ok(buf)
    }

    fn read_u8(&self, addr: u64) -> Result<u8, ReadError> {
        let mut b = [0u8; 1];
        self.read(addr, &mut b)?;
        Ok(b[0])
    }

    fn read_u16(&self, addr: u64) -> Result<u16, ReadError> {
        let mut b = [0u8; 2];
        self.read(addr, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    fn read_u32(&self, addr: u64) -> Result<u32, ReadError> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn read_u64(&self, addr: u64) -> Result<u64, ReadError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// An unsigned little-endian integer of 1, 2, 4 or 8 bytes (HotSpot fields are `u1`
    /// to `u8`; their width comes from the type table).
    fn read_uint(&self, addr: u64, size_bytes: usize) -> Result<u64, ReadError> {
        match size_bytes {
            1 => self.read_u8(addr).map(u64::from),
            2 => self.read_u16(addr).map(u64::from),
            4 => self.read_u32(addr).map(u64::from),
            8 => self.read_u64(addr),
            _ => Err(ReadError { addr, len: size_bytes }),
        }
    }

    /// A NUL-terminated C string of at most `max_len` bytes (without the NUL), read in
    /// small chunks so a string that ends near the end of a mapping still reads.
    fn read_c_string(&self, addr: u64, max_len: usize) -> Result<Vec<u8>, ReadError> {
        const CHUNK: usize = 32;
        let mut out = Vec::new();
        while out.len() < max_len {
            let at = addr.checked_add(out.len() as u64).ok_or(ReadError { addr, len: max_len })?;
            // Never cross a 4 KiB page in one read: the next page may be unmapped.
            let to_page_end = (4096 - (at % 4096)) as usize;
            let mut buf = [0u8; CHUNK];
            let n = CHUNK.min(to_page_end).min(max_len + 1 - out.len());
            if self.read(at, &mut buf[..n]).is_err() {
                // Recorded memory may end inside a page: fall back to one byte at a time.
                for (i, b) in buf[..n].iter_mut().enumerate() {
                    *b = self.read_u8(at + i as u64)?;
                    if *b == 0 {
                        break;
                    }
                }
            }
            if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
                out.extend_from_slice(&buf[..end]);
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
        Err(ReadError { addr, len: max_len })
    }
}

impl<T: MemoryReader + ?Sized> MemoryReader for &T {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        (**self).read(addr, buf)
    }
}

/// A live process, read with `process_vm_readv` (needs the same rights as ptrace).
#[derive(Debug, Clone, Copy)]
pub struct ProcessMemory {
    pub pid: u32,
}

impl MemoryReader for ProcessMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        let err = ReadError { addr, len: buf.len() };
        if buf.is_empty() {
            return Ok(());
        }
        let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: buf.len() };
        // SAFETY: `local` covers exactly `buf`, which we own mutably; the remote side is
        // only read by the kernel, which checks it against the target's mappings.
        let n = unsafe { libc::process_vm_readv(self.pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        if n < 0 || n as usize != buf.len() {
            return Err(err);
        }
        Ok(())
    }
}

/// Recorded memory: non-overlapping segments by start address. Serves fixtures and
/// hand-built test memory; a read must fall entirely inside one segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegmentsMemory {
    segments: BTreeMap<u64, Vec<u8>>,
}

const SEGMENTS_MAGIC: &[u8; 8] = b"HSMEM01\n";

impl SegmentsMemory {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes at `addr`, merging with the segments they overlap or touch; later bytes
    /// win where they overlap.
    pub fn insert(&mut self, addr: u64, bytes: &[u8]) {
        let mut start = addr;
        let mut merged = bytes.to_vec();
        let end = addr + bytes.len() as u64;
        let touching: Vec<u64> =
            self.segments.range(..=end).filter(|(&s, v)| s + v.len() as u64 >= addr).map(|(&s, _)| s).collect();
        for s in touching {
            let old = self.segments.remove(&s).expect("key just listed");
            let old_end = s + old.len() as u64;
            let new_start = start.min(s);
            let new_end = (start + merged.len() as u64).max(old_end);
            let mut buf = vec![0u8; (new_end - new_start) as usize];
            buf[(s - new_start) as usize..(old_end - new_start) as usize].copy_from_slice(&old);
            let off = (start - new_start) as usize;
            buf[off..off + merged.len()].copy_from_slice(&merged);
            start = new_start;
            merged = buf;
        }
        self.segments.insert(start, merged);
    }

    /// Total recorded bytes.
    pub fn len_bytes(&self) -> usize {
        self.segments.values().map(Vec::len).sum()
    }

    /// The fixture file format: a magic line, then `(addr u64 LE, len u64 LE, bytes)`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = SEGMENTS_MAGIC.to_vec();
        for (addr, bytes) in &self.segments {
            out.extend_from_slice(&addr.to_le_bytes());
            out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        out
    }

    /// Parses [`SegmentsMemory::to_bytes`]; `None` on a truncated or foreign file.
    pub fn from_bytes(data: &[u8]) -> Option<Self> {
        let mut rest = data.strip_prefix(SEGMENTS_MAGIC.as_slice())?;
        let mut mem = Self::new();
        while !rest.is_empty() {
            let addr = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
            let len = usize::try_from(u64::from_le_bytes(rest.get(8..16)?.try_into().ok()?)).ok()?;
            let bytes = rest.get(16..16usize.checked_add(len)?)?;
            mem.insert(addr, bytes);
            rest = &rest[16 + len..];
        }
        Some(mem)
    }
}

impl MemoryReader for SegmentsMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        let err = ReadError { addr, len: buf.len() };
        let (&start, bytes) = self.segments.range(..=addr).next_back().ok_or(err)?;
        let off = (addr - start) as usize;
        let src = bytes.get(off..off.checked_add(buf.len()).ok_or(err)?).ok_or(err)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// Wraps a reader and keeps a copy of every successful read: how fixtures are recorded
/// (run the library against a live JVM, save what it read).
#[derive(Debug)]
pub struct RecordingReader<R> {
    inner: R,
    recorded: Mutex<SegmentsMemory>,
}

impl<R: MemoryReader> RecordingReader<R> {
    pub fn new(inner: R) -> Self {
        Self { inner, recorded: Mutex::new(SegmentsMemory::new()) }
    }

    /// The wrapped reader (reads through it are not recorded).
    pub fn inner(&self) -> &R {
        &self.inner
    }

    /// Everything read so far.
    pub fn recorded(&self) -> SegmentsMemory {
        self.recorded.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl<R: MemoryReader> MemoryReader for RecordingReader<R> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        self.inner.read(addr, buf)?;
        self.recorded.lock().unwrap_or_else(|e| e.into_inner()).insert(addr, buf);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_serve_reads_inside_one_segment_only() {
        let mut mem = SegmentsMemory::new();
        mem.insert(0x1000, &[1, 2, 3, 4]);
        mem.insert(0x2000, &[9; 8]);
        assert_eq!(mem.read_u16(0x1002), Ok(0x0403));
        assert_eq!(mem.read_u64(0x2000), Ok(0x0909090909090909));
        assert!(mem.read_u32(0x1002).is_err(), "runs past the segment end");
        assert!(mem.read_u8(0xfff).is_err());
        assert!(mem.read_u8(0x1800).is_err());
    }

    #[test]
    fn overlapping_and_touching_inserts_merge() {
        let mut mem = SegmentsMemory::new();
        mem.insert(0x10, &[1, 1, 1, 1]);
        mem.insert(0x14, &[2, 2]);
        mem.insert(0x0e, &[3, 3, 3]);
        let mut buf = [0u8; 8];
        mem.read(0x0e, &mut buf).unwrap();
        assert_eq!(buf, [3, 3, 3, 1, 1, 1, 2, 2]);
        assert_eq!(mem.len_bytes(), 8);
    }

    #[test]
    fn serialized_segments_round_trip_and_truncation_is_rejected() {
        let mut mem = SegmentsMemory::new();
        mem.insert(0x7f00_0000_1000, b"hello\0");
        mem.insert(0x10, &[5; 3]);
        let bytes = mem.to_bytes();
        assert_eq!(SegmentsMemory::from_bytes(&bytes), Some(mem.clone()));
        assert_eq!(SegmentsMemory::from_bytes(&bytes[..bytes.len() - 1]), None);
        assert_eq!(SegmentsMemory::from_bytes(b"garbage"), None);
    }

    #[test]
    fn c_strings_stop_at_nul_and_at_the_limit() {
        let mut mem = SegmentsMemory::new();
        mem.insert(0x100, b"Method\0xyz");
        // A string right before a page end (here also the end of recorded memory) reads:
        // the reader never asks for bytes past the page it is in.
        mem.insert(0x2000 - 5, b"abc\0\0");
        assert_eq!(mem.read_c_string(0x100, 64).unwrap(), b"Method");
        assert!(mem.read_c_string(0x100, 3).is_err(), "longer than the limit");
        assert_eq!(mem.read_c_string(0x2000 - 5, 64).unwrap(), b"abc");
    }

    #[test]
    fn process_memory_reads_our_own_memory_and_fails_on_unmapped() {
        let value: u64 = 0x1122_3344_5566_7788;
        let me = ProcessMemory { pid: std::process::id() };
        assert_eq!(me.read_u64(&value as *const u64 as u64), Ok(value));
        assert!(me.read_u64(8).is_err(), "page zero is never mapped");
    }

    #[test]
    fn recording_reader_keeps_what_was_read() {
        let mut mem = SegmentsMemory::new();
        mem.insert(0x1000, &[7; 64]);
        let rec = RecordingReader::new(&mem);
        rec.read_u32(0x1008).unwrap();
        assert!(rec.read_u32(0x5000).is_err());
        let got = rec.recorded();
        assert_eq!(got.len_bytes(), 4);
        assert_eq!(got.read_u32(0x1008), Ok(0x07070707));
    }
}
