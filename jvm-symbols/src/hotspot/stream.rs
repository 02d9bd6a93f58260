//! HotSpot's compressed streams, as pure functions on bytes: the variable-length ints of
//! `CompressedReadStream` (scope descriptors, line-number tables) and the line-number
//! table format on top of them.
//!
//! Both encodings are Pack200's UNSIGNED5 with 6 bits per continuation byte: up to five
//! bytes, a byte below 192 ends a number. JDK 20 (from build 20+15) reserved the zero byte
//! ("excluded bytes", X = 1): every byte is stored plus one. Before it, X = 0 (the
//! "classic" `CompressedStream` encoding). See `unsigned5.hpp` and `compressedStream.cpp`.

/// Bytes at or above this value continue a number (for both encodings).
const CONTINUATION: u8 = 192;
const MAX_BYTES: usize = 5;
const BITS_PER_BYTE: u32 = 6;

/// Which variant of the encoding a JVM writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// JDK up to 20+14: bytes as they are.
    Classic,
    /// JDK 20+15 and later: every byte is the value plus one (no zero bytes).
    Unsigned5,
}

impl Encoding {
    fn excluded(self) -> u8 {
        match self {
            Encoding::Classic => 0,
            Encoding::Unsigned5 => 1,
        }
    }
}

/// A reading position in a compressed stream. Every read returns `None` past the end or
/// on a byte the encoding forbids: the bytes come from another process and may be stale.
#[derive(Debug, Clone)]
pub struct CompressedStream<'a> {
    data: &'a [u8],
    pos: usize,
    encoding: Encoding,
}

impl<'a> CompressedStream<'a> {
    pub fn new(data: &'a [u8], pos: usize, encoding: Encoding) -> Self {
        Self { data, pos, encoding }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn read_byte(&mut self) -> Option<u8> {
        let b = *self.data.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// One unsigned number (`read_int` in HotSpot, which returns it as a `jint`).
    pub fn read_uint(&mut self) -> Option<u32> {
        let x = self.encoding.excluded();
        let mut sum: u32 = 0;
        for i in 0..MAX_BYTES {
            let b = self.read_byte()?;
            if b < x {
                return None;
            }
            sum = sum.wrapping_add(u32::from(b - x) << (BITS_PER_BYTE * i as u32));
            if b < CONTINUATION {
                break;
            }
        }
        Some(sum)
    }

    /// A zig-zag signed number (`read_signed_int`).
    pub fn read_signed(&mut self) -> Option<i32> {
        let v = self.read_uint()?;
        Some(((v >> 1) as i32) ^ -((v & 1) as i32))
    }
}

/// One row of a method's line-number table: from `bci` on, the source line is `line`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineEntry {
    pub bci: u32,
    pub line: u32,
}

/// Longest line table decoded (a method has at most 64 KiB of bytecode).
const MAX_LINE_ENTRIES: usize = 65536;

/// Decodes a `CompressedLineNumberReadStream` (stored right after the bytecodes in a
/// `ConstMethod`): a byte `(bci_delta << 3) | line_delta`, or 0xFF followed by two signed
/// numbers, ended by a zero byte. `None` if the stream ends early or is corrupt.
pub fn decode_line_table(bytes: &[u8], encoding: Encoding) -> Option<Vec<LineEntry>> {
    let mut s = CompressedStream::new(bytes, 0, encoding);
    let (mut bci, mut line) = (0u32, 0u32);
    let mut out = Vec::new();
    while out.len() < MAX_LINE_ENTRIES {
        match s.read_byte()? {
            0 => return Some(out),
            0xff => {
                bci = bci.wrapping_add(s.read_signed()? as u32);
                line = line.wrapping_add(s.read_signed()? as u32);
            }
            b => {
                bci += u32::from(b >> 3);
                line += u32::from(b & 7);
            }
        }
        out.push(LineEntry { bci, line });
    }
    None
}

/// The line of `bci`, as `Method::line_number_from_bci` finds it: the exact entry, else the
/// entry with the greatest bci below it.
pub fn line_for_bci(table: &[LineEntry], bci: u32) -> Option<u32> {
    let mut best: Option<LineEntry> = None;
    for e in table {
        if e.bci == bci {
            return Some(e.line);
        }
        if e.bci < bci && best.is_none_or(|b| e.bci >= b.bci) {
            best = Some(*e);
        }
    }
    best.map(|b| b.line)
}

/// The header of a `ScopeDesc` (`ScopeDesc::decode_body`): where its caller's scope is
/// (0 = none: this is the outermost frame), which metadata slot names its `Method*`, and
/// its bytecode index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScopeHeader {
    pub sender_decode_offset: u32,
    /// 1-based index into the nmethod's metadata array (0 is a null method).
    pub method_index: u32,
    /// -1 (`InvocationEntryBci`) for the method entry.
    pub bci: i32,
}

/// Decodes the scope header at `offset` of an nmethod's scopes data.
pub fn decode_scope_header(scopes: &[u8], offset: usize, encoding: Encoding) -> Option<ScopeHeader> {
    let mut s = CompressedStream::new(scopes, offset, encoding);
    let sender_decode_offset = s.read_uint()?;
    let method_index = s.read_uint()?;
    // `DebugInfoReadStream::read_bci`: stored as bci - InvocationEntryBci.
    let bci = (s.read_uint()? as i32).wrapping_sub(1);
    Some(ScopeHeader { sender_decode_offset, method_index, bci })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Encodes like HotSpot's writers (`CompressedWriteStream::write_int`, UNSIGNED5).
    pub(crate) fn encode_uint(mut v: u32, encoding: Encoding, out: &mut Vec<u8>) {
        let x = encoding.excluded() as u32;
        let l = 256 - 64 - x;
        for i in 0..MAX_BYTES {
            if v < l || i == MAX_BYTES - 1 {
                out.push((v + x) as u8);
                return;
            }
            v -= l;
            let b = l + (v % 64);
            out.push((b + x) as u8);
            v >>= 6;
        }
    }

    pub(crate) fn encode_signed(v: i32, encoding: Encoding, out: &mut Vec<u8>) {
        encode_uint(((v << 1) ^ (v >> 31)) as u32, encoding, out);
    }

    #[test]
    fn known_byte_vectors_decode_in_both_encodings() {
        // Classic: 5 is one byte; 200 = 192 + (8 | 0 << 6)... written as [200, 0]:
        // 200 + 0 * 64 = 200.
        let mut s = CompressedStream::new(&[5, 200, 0, 191, 255, 255, 255, 255, 3], 0, Encoding::Classic);
        assert_eq!(s.read_uint(), Some(5));
        assert_eq!(s.read_uint(), Some(200));
        assert_eq!(s.read_uint(), Some(191));
        // Five bytes at most: the fifth ends the number whatever its value.
        assert_eq!(s.read_uint(), Some(255 + (255 << 6) + (255 << 12) + (255 << 18) + (3 << 24)));
        assert_eq!(s.read_uint(), None, "past the end");
        // UNSIGNED5 stores value + 1: [6] is 5, [201, 1] is 200, and a zero byte is invalid.
        let mut s = CompressedStream::new(&[6, 201, 1, 0], 0, Encoding::Unsigned5);
        assert_eq!(s.read_uint(), Some(5));
        assert_eq!(s.read_uint(), Some(200));
        assert_eq!(s.read_uint(), None, "excluded byte");
    }

    #[test]
    fn writer_and_reader_agree_over_the_whole_range() {
        for enc in [Encoding::Classic, Encoding::Unsigned5] {
            let values = [0u32, 1, 190, 191, 192, 193, 255, 256, 12_287, 12_288, 1 << 20, 0x7fff_ffff];
            let mut bytes = Vec::new();
            for v in values {
                encode_uint(v, enc, &mut bytes);
            }
            for v in [-1i32, 0, 1, -300, 300, -1_000_000, 1_000_000] {
                encode_signed(v, enc, &mut bytes);
            }
            if enc == Encoding::Unsigned5 {
                assert!(!bytes.contains(&0), "UNSIGNED5 never writes a zero byte");
            }
            let mut s = CompressedStream::new(&bytes, 0, enc);
            for v in values {
                assert_eq!(s.read_uint(), Some(v), "{enc:?} {v}");
            }
            for v in [-1i32, 0, 1, -300, 300, -1_000_000, 1_000_000] {
                assert_eq!(s.read_signed(), Some(v), "{enc:?} {v}");
            }
            assert_eq!(s.position(), bytes.len());
        }
    }

    #[test]
    fn line_tables_decode_short_and_escaped_pairs() {
        for enc in [Encoding::Classic, Encoding::Unsigned5] {
            // (bci 0, line 5) short; (bci 4, line 6) short; (bci 300, line 2) escaped (a
            // negative line delta); end.
            let mut b = vec![5, (4 << 3) | 1, 0xff];
            encode_signed(296, enc, &mut b);
            encode_signed(-4, enc, &mut b);
            b.push(0);
            let t = decode_line_table(&b, enc).unwrap();
            assert_eq!(
                t,
                [LineEntry { bci: 0, line: 5 }, LineEntry { bci: 4, line: 6 }, LineEntry { bci: 300, line: 2 }]
            );
            assert_eq!(line_for_bci(&t, 0), Some(5));
            assert_eq!(line_for_bci(&t, 3), Some(5));
            assert_eq!(line_for_bci(&t, 4), Some(6));
            assert_eq!(line_for_bci(&t, 1000), Some(2));
            assert_eq!(decode_line_table(&b[..b.len() - 1], enc), None, "no terminator");
        }
        assert_eq!(line_for_bci(&[], 3), None);
    }

    #[test]
    fn scope_headers_decode_with_the_entry_bci_bias() {
        for enc in [Encoding::Classic, Encoding::Unsigned5] {
            let mut b = vec![0xAA];
            for v in [17u32, 3, 0] {
                encode_uint(v, enc, &mut b);
            }
            for v in [0u32, 1, 1001] {
                encode_uint(v, enc, &mut b);
            }
            assert_eq!(
                decode_scope_header(&b, 1, enc),
                Some(ScopeHeader { sender_decode_offset: 17, method_index: 3, bci: -1 })
            );
            let second = 1 + 3;
            assert_eq!(
                decode_scope_header(&b, second, enc),
                Some(ScopeHeader { sender_decode_offset: 0, method_index: 1, bci: 1000 })
            );
            assert_eq!(decode_scope_header(&b, b.len() - 1, enc), None);
        }
    }
}
