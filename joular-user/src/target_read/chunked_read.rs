//! A target's file as `Read + Seek` for a parser that reads what it needs lazily (`object`'s
//! `ReadCache`), in reads of at most [`CHUNK_BYTES`] each. Under a [`super::stall_guard`]
//! source, each chunk is one read with its own deadline: a parser asking for libjvm.so's
//! 3 MB string table in one piece, on a cold or busy disk, then waits chunk by chunk instead of
//! past one deadline for the whole table, while a read the target holds still fails in one.

use std::io::{self, Read, Seek, SeekFrom};
use std::time::{Duration, Instant};

use super::ByteSource;

/// One read's most bytes of a target's file (here and in `symbols::elf_copy`): what the
/// file-read deadline is sized for.
pub const CHUNK_BYTES: usize = 1 << 20;
/// Reads smaller than this are served from a window of this many bytes read at once: the
/// ELF parser asks for each of libjvm's ~500 dynamic symbol names on its own, and a guarded
/// hop per name cost ~9 ms of CPU at a JVM's attach.
const WINDOW_BYTES: usize = 64 << 10;

pub struct ChunkedRead<S> {
    source: S,
    len_bytes: u64,
    pos: u64,
    /// After this, reads fail: chunks a target serves just within their deadlines each cannot
    /// hold the reader for longer in all.
    until: Option<(Instant, Duration)>,
    /// The first read that failed: a parser above may turn every error into one of its own.
    failed: Option<io::Error>,
    /// The bytes last read for small reads, and the file offset they start at.
    window: Vec<u8>,
    window_at: u64,
}

impl<S: ByteSource> ChunkedRead<S> {
    /// `len_bytes`: the file's size when opened (a target may truncate it since: reads past
    /// its end then come back short, as from any file).
    pub fn new(source: S, len_bytes: u64) -> Self {
        Self { source, len_bytes, pos: 0, until: None, failed: None, window: Vec::new(), window_at: 0 }
    }

    /// Reads fail once `budget` has passed from now.
    pub fn within(mut self, budget: Duration) -> Self {
        self.until = Some((Instant::now() + budget, budget));
        self
    }

    /// The first read that failed, if one did.
    pub fn take_failure(&mut self) -> Option<io::Error> {
        self.failed.take()
    }
}

impl<S: ByteSource> Read for ChunkedRead<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.len() < WINDOW_BYTES {
            let in_window = self.pos.checked_sub(self.window_at).filter(|&at| at < self.window.len() as u64);
            let at = match in_window {
                Some(at) => at as usize,
                None => {
                    let mut window = std::mem::take(&mut self.window);
                    window.resize(WINDOW_BYTES, 0);
                    let n = self.read_at(&mut window, self.pos)?;
                    window.truncate(n);
                    (self.window, self.window_at) = (window, self.pos);
                    0
                }
            };
            let n = buf.len().min(self.window.len() - at);
            buf[..n].copy_from_slice(&self.window[at..at + n]);
            self.pos += n as u64;
            return Ok(n);
        }
        let want = buf.len().min(CHUNK_BYTES);
        let n = self.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<S: ByteSource> ChunkedRead<S> {
    /// One read of the source, within the budget; the first failure is kept.
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let read = match self.until {
            Some((until, budget)) if Instant::now() >= until => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("reads took over {} ms in all", budget.as_millis()),
            )),
            _ => self.source.read_bytes_at(buf, offset),
        };
        read.inspect_err(|e| {
            self.failed.get_or_insert_with(|| io::Error::new(e.kind(), e.to_string()));
        })
    }
}

impl<S: ByteSource> Seek for ChunkedRead<S> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let pos = match to {
            SeekFrom::Start(at) => Some(at),
            SeekFrom::End(by) => self.len_bytes.checked_add_signed(by),
            SeekFrom::Current(by) => self.pos.checked_add_signed(by),
        };
        self.pos = pos.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before the file's start"))?;
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A file of `len` bytes (byte i = i mod 251) that records the size of every read asked of it.
    struct Recorded {
        len: usize,
        reads: RefCell<Vec<usize>>,
        fail_from: Option<u64>,
    }

    impl ByteSource for Recorded {
        fn read_bytes_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            self.reads.borrow_mut().push(buf.len());
            if self.fail_from.is_some_and(|at| offset >= at) {
                return Err(io::Error::other("mapped file read took over 1000 ms"));
            }
            let start = (offset as usize).min(self.len);
            let n = buf.len().min(self.len - start);
            for (i, b) in buf[..n].iter_mut().enumerate() {
                *b = ((start + i) % 251) as u8;
            }
            Ok(n)
        }
    }

    #[test]
    fn a_large_read_is_made_of_chunks_and_returns_the_files_bytes() {
        let len = 3 * CHUNK_BYTES + 12_345;
        let source = Recorded { len, reads: RefCell::default(), fail_from: None };
        let mut file = ChunkedRead::new(source, len as u64);
        assert_eq!(file.seek(SeekFrom::End(0)).unwrap(), len as u64);
        file.seek(SeekFrom::Start(10)).unwrap();
        let mut all = vec![0u8; len - 10];
        file.read_exact(&mut all).unwrap();
        assert!(all.iter().enumerate().all(|(i, &b)| b == ((i + 10) % 251) as u8));
        let reads = file.source.reads.borrow();
        assert!(reads.len() >= 4 && reads.iter().all(|&n| n <= CHUNK_BYTES), "{reads:?}");
        // Past the end: short, as a truncated file reads.
        drop(reads);
        let mut more = [0u8; 8];
        assert_eq!(file.read(&mut more).unwrap(), 0);
        assert!(file.seek(SeekFrom::Current(-(len as i64) - 1)).is_err());
    }

    /// Small reads (an ELF parser's names, one by one) are served from one window read.
    #[test]
    fn small_reads_nearby_are_one_read_of_the_source() {
        let len = 3 * WINDOW_BYTES;
        let source = Recorded { len, reads: RefCell::default(), fail_from: None };
        let mut file = ChunkedRead::new(source, len as u64);
        file.seek(SeekFrom::Start(100)).unwrap();
        let mut first = [0u8; 8];
        file.read_exact(&mut first).unwrap();
        for at in (100..WINDOW_BYTES as u64 - 100).step_by(997) {
            file.seek(SeekFrom::Start(at)).unwrap();
            let mut name = [0u8; 24];
            file.read_exact(&mut name).unwrap();
            assert!(name.iter().enumerate().all(|(i, &b)| b == ((at as usize + i) % 251) as u8), "at {at}");
        }
        assert_eq!(file.source.reads.borrow().len(), 1);
        // Across the window's end: the rest comes from a new window.
        let start = 100 + WINDOW_BYTES - 10;
        file.seek(SeekFrom::Start(start as u64)).unwrap();
        let mut across = [0u8; 20];
        file.read_exact(&mut across).unwrap();
        assert!(across.iter().enumerate().all(|(i, &b)| b == ((start + i) % 251) as u8));
        assert_eq!(file.source.reads.borrow().len(), 2);
    }

    #[test]
    fn the_first_failure_is_kept_for_the_caller_under_a_parser_that_hides_it() {
        let len = 2 * CHUNK_BYTES;
        let source = Recorded { len, reads: RefCell::default(), fail_from: Some(CHUNK_BYTES as u64) };
        let mut file = ChunkedRead::new(source, len as u64);
        let mut all = vec![0u8; len];
        assert!(file.read_exact(&mut all).is_err());
        let failed = file.take_failure().expect("kept");
        assert!(failed.to_string().contains("took over 1000 ms"), "{failed}");
        assert!(file.take_failure().is_none());
    }

    #[test]
    fn reads_past_the_budget_fail_and_say_so() {
        let len = 2 * WINDOW_BYTES;
        let source = Recorded { len, reads: RefCell::default(), fail_from: None };
        let mut file = ChunkedRead::new(source, len as u64).within(Duration::from_millis(30));
        let mut page = [0u8; 16];
        file.read_exact(&mut page).unwrap();
        std::thread::sleep(Duration::from_millis(40));
        // What was read stays readable; nothing more is read.
        file.read_exact(&mut page).unwrap();
        file.seek(SeekFrom::Start(WINDOW_BYTES as u64 + 1)).unwrap();
        assert!(file.read_exact(&mut page).is_err());
        assert_eq!(file.source.reads.borrow().len(), 1, "nothing read past the budget");
        let failed = file.take_failure().expect("kept");
        assert!(failed.to_string().contains("took over 30 ms in all"), "{failed}");
    }
}
