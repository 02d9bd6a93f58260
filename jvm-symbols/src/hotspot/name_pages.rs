//! C strings read a whole page at a time. The names the introspection tables point at are
//! some 2,000 literals packed into a few dozen pages of libjvm's read-only data; read one
//! string at a time they were as many reads of the target (each a system call, and for a
//! profiler a hand-off to its guarded reading thread), most of the profiler's CPU in the
//! JVM's first second after the sampler's verification. Read by page, they are a few dozen.
//!
//! A page that cannot be read whole (memory recorded only in part, a page unmapped) is not
//! kept, and a string touching it is read as before, a chunk at a time, with the same result
//! and the same errors.

use std::collections::HashMap;

use super::memory::{MemoryReader, ReadError};

const PAGE_BYTES: u64 = 4096;

/// Whole pages of one target kept for reading strings, at most `max_pages` of them.
pub struct NamePages {
    /// Page address → its bytes, or `None` when it could not be read whole.
    pages: HashMap<u64, Option<Box<[u8]>>>,
    max_pages: usize,
}

impl NamePages {
    pub fn new(max_pages: usize) -> Self {
        Self { pages: HashMap::new(), max_pages }
    }

    /// The C string at `addr` without its NUL, which must come within `max_len` bytes.
    /// Errors as [`MemoryReader::read_c_string`] does; a string with no NUL within the limit
    /// is `ReadError { addr, len: max_len }`.
    pub fn read_c_string(
        &mut self,
        reader: &impl MemoryReader,
        addr: u64,
        max_len: usize,
    ) -> Result<Vec<u8>, ReadError> {
        match self.read_in_pages(reader, addr, max_len) {
            Some(found) => found,
            None => reader.read_c_string(addr, max_len),
        }
    }

    /// `None` when a page the string needs is not kept (the caller reads it directly).
    fn read_in_pages(
        &mut self,
        reader: &impl MemoryReader,
        addr: u64,
        max_len: usize,
    ) -> Option<Result<Vec<u8>, ReadError>> {
        let mut out = Vec::new();
        while out.len() < max_len {
            let at = addr.checked_add(out.len() as u64)?;
            let page_addr = at - at % PAGE_BYTES;
            let page = self.page(reader, page_addr)?;
            let from = (at - page_addr) as usize;
            let to = page.len().min(from + (max_len - out.len()));
            let bytes = &page[from..to];
            if let Some(end) = bytes.iter().position(|&b| b == 0) {
                out.extend_from_slice(&bytes[..end]);
                return Some(Ok(out));
            }
            out.extend_from_slice(bytes);
        }
        Some(Err(ReadError { addr, len: max_len }))
    }

    /// The page at `page_addr`, read now if it is not kept yet and there is room.
    fn page(&mut self, reader: &impl MemoryReader, page_addr: u64) -> Option<&[u8]> {
        if !self.pages.contains_key(&page_addr) {
            if self.pages.len() >= self.max_pages {
                return None;
            }
            let mut bytes = vec![0u8; PAGE_BYTES as usize].into_boxed_slice();
            let kept = reader.read(page_addr, &mut bytes).ok().map(|()| bytes);
            self.pages.insert(page_addr, kept);
        }
        self.pages.get(&page_addr)?.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// Memory `[base, base + bytes.len())`, counting its reads.
    struct Memory {
        base: u64,
        bytes: Vec<u8>,
        reads: Cell<usize>,
    }

    impl MemoryReader for Memory {
        fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
            self.reads.set(self.reads.get() + 1);
            let err = ReadError { addr, len: buf.len() };
            let from = addr.checked_sub(self.base).ok_or(err)? as usize;
            let src = self.bytes.get(from..from + buf.len()).ok_or(err)?;
            buf.copy_from_slice(src);
            Ok(())
        }
    }

    fn memory(base: u64, bytes: Vec<u8>) -> Memory {
        Memory { base, bytes, reads: Cell::new(0) }
    }

    #[test]
    fn many_strings_of_one_page_cost_one_read_and_read_as_directly() {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        for i in 0..200 {
            starts.push(0x10000 + bytes.len() as u64);
            bytes.extend_from_slice(format!("_name_{i}").as_bytes());
            bytes.push(0);
        }
        bytes.resize(PAGE_BYTES as usize, 0);
        let mem = memory(0x10000, bytes);
        let mut pages = NamePages::new(4);
        let read: Vec<_> = starts.iter().map(|&a| pages.read_c_string(&mem, a, 64).unwrap()).collect();
        assert_eq!(mem.reads.get(), 1);
        let direct: Vec<_> = starts.iter().map(|&a| mem.read_c_string(a, 64).unwrap()).collect();
        assert_eq!(read, direct);
        assert_eq!(read[7], b"_name_7");
    }

    #[test]
    fn a_string_across_two_pages_is_whole() {
        let mut bytes = vec![b'x'; 2 * PAGE_BYTES as usize];
        let start = PAGE_BYTES as usize - 5;
        bytes[start..start + 10].copy_from_slice(b"crossing\0\0");
        let mem = memory(0, bytes);
        let got = NamePages::new(4).read_c_string(&mem, start as u64, 64).unwrap();
        assert_eq!(got, b"crossing");
    }

    #[test]
    fn memory_that_ends_inside_a_page_is_read_directly_with_the_same_result() {
        // Two pages' worth minus a tail: the second page cannot be read whole.
        let mut bytes = vec![b'a'; PAGE_BYTES as usize + 100];
        let start = PAGE_BYTES as usize + 10;
        bytes[start..start + 4].copy_from_slice(b"end\0");
        let mem = memory(0, bytes);
        let got = NamePages::new(4).read_c_string(&mem, start as u64, 64);
        assert_eq!(got, mem.read_c_string(start as u64, 64));
        assert_eq!(got.unwrap(), b"end");
        // A string running into the unreadable tail fails as a direct read does.
        let tail = PAGE_BYTES + 90;
        assert_eq!(NamePages::new(4).read_c_string(&mem, tail, 64), mem.read_c_string(tail, 64));
        assert!(mem.read_c_string(tail, 64).is_err());
    }

    #[test]
    fn a_string_with_no_nul_within_the_limit_is_the_limit_error() {
        let mem = memory(0, vec![b'n'; PAGE_BYTES as usize]);
        let got = NamePages::new(4).read_c_string(&mem, 16, 256);
        assert_eq!(got, Err(ReadError { addr: 16, len: 256 }));
        assert_eq!(got, mem.read_c_string(16, 256));
        // The longest string the limit allows (255 bytes and its NUL) reads.
        let mut bytes = vec![b'n'; PAGE_BYTES as usize];
        bytes[16 + 255] = 0;
        let mem = memory(0, bytes);
        assert_eq!(NamePages::new(4).read_c_string(&mem, 16, 256).unwrap().len(), 255);
    }

    #[test]
    fn past_its_page_limit_it_reads_directly_and_keeps_nothing_more() {
        let mut bytes = vec![0u8; 3 * PAGE_BYTES as usize];
        for p in 0..3 {
            bytes[p * PAGE_BYTES as usize..][..3].copy_from_slice(b"ab\0");
        }
        let mem = memory(0, bytes);
        let mut pages = NamePages::new(2);
        for p in 0..3u64 {
            assert_eq!(pages.read_c_string(&mem, p * PAGE_BYTES, 16).unwrap(), b"ab");
        }
        assert_eq!(pages.pages.len(), 2);
    }
}
