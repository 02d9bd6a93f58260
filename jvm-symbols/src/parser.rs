//! One perf-map line: `<start> <size> <name>`, both numbers hex, with (HotSpot's
//! `Compiler.perfmap`) or without (perf-map-agent, the perf JIT interface) a `0x` prefix.
//! The name is the rest of the line and may hold spaces, `;` and any UTF-8.

/// A parsed line; `name` borrows from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedLine<'a> {
    pub start: u64,
    pub size: u64,
    pub name: &'a [u8],
}

/// Parses one line (without its `\n`). `None` means the line is bad: missing fields,
/// numbers that are not hex or overflow, a zero size (it can hold no address), a size of
/// 4 GiB or more (no JIT blob is that large; the index keeps sizes in 32 bits), an empty
/// name, or a range that wraps past the end of the address space.
pub fn parse_line(line: &[u8]) -> Option<ParsedLine<'_>> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (start, rest) = split_field(line)?;
    let (size, name) = split_field(rest)?;
    let start = parse_hex(start)?;
    let size = parse_hex(size)?;
    if size == 0 || size > u64::from(u32::MAX) || name.is_empty() {
        return None;
    }
    start.checked_add(size)?;
    Some(ParsedLine { start, size, name })
}

/// Splits at the first single space; the remainder is returned untouched.
fn split_field(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let at = s.iter().position(|&b| b == b' ')?;
    Some((&s[..at], &s[at + 1..]))
}

fn parse_hex(field: &[u8]) -> Option<u64> {
    let digits = field.strip_prefix(b"0x").or_else(|| field.strip_prefix(b"0X")).unwrap_or(field);
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    let mut value = 0u64;
    for &b in digits {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        value = (value << 4) | u64::from(digit);
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hotspot_form() {
        let l = parse_line(b"0x00007f1b10ec7620 0x0000000000000278 long Spin.work(int)").unwrap();
        assert_eq!(l.start, 0x7f1b10ec7620);
        assert_eq!(l.size, 0x278);
        assert_eq!(l.name, b"long Spin.work(int)");
    }

    #[test]
    fn perf_map_agent_form() {
        let l = parse_line(b"7f1b10ec7620 1a0 Lcom/acme/Foo;::bar").unwrap();
        assert_eq!((l.start, l.size), (0x7f1b10ec7620, 0x1a0));
        assert_eq!(l.name, b"Lcom/acme/Foo;::bar");
    }

    #[test]
    fn name_keeps_spaces_semicolons_and_non_ascii() {
        let line = "0x10 0x20 void café.Größe.run(java.lang.String; int)  x\r".as_bytes();
        let l = parse_line(line).unwrap();
        assert_eq!(std::str::from_utf8(l.name).unwrap(), "void café.Größe.run(java.lang.String; int)  x");
    }

    #[test]
    fn bad_lines() {
        for bad in [
            &b""[..],
            b"0x10",
            b"0x10 0x20",
            b"0x10 0x20 ",
            b"zz 10 name",
            b"10 0x name",
            b"10 0 zero-size",
            b"0x 10 name",
            b"12345678901234567 10 too-many-digits",
            b"ffffffffffffffff 2 wraps",
            b" 10 20 leading-space",
            b"0x7f1b10ec78a0 0x100000000 four-gib",
        ] {
            assert_eq!(parse_line(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_line(b"0x10 0xffffffff largest").map(|p| p.size), Some(0xffff_ffff));
    }
}
