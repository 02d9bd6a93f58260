//! Text that a target wrote (attach replies, file contents) made safe to put in a log line or
//! on the operator's terminal: control characters escaped, length bounded.

/// At most `max_chars` characters of `text`, with every control character (escape sequences,
/// carriage returns, newlines that would forge log lines) written as `\u{..}`.
pub fn printable(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars));
    for (kept, (at, c)) in text.char_indices().enumerate() {
        if kept == max_chars {
            out.push_str(&format!("… ({} more bytes)", text.len() - at));
            return out;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// [`printable`] for bytes that may not be UTF-8.
pub fn printable_bytes(bytes: &[u8], max_chars: usize) -> String {
    printable(&String::from_utf8_lossy(bytes), max_chars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_terminal_sequences_and_newlines() {
        assert_eq!(printable("ok\x1b[2J\r\nnext", 100), "ok\\u{1b}[2J\\r\\nnext");
    }

    #[test]
    fn bounds_the_length() {
        let long = "x".repeat(1 << 20);
        let shown = printable(&long, 10);
        assert_eq!(shown, format!("xxxxxxxxxx… ({} more bytes)", (1 << 20) - 10));
        assert_eq!(printable("short", 10), "short");
        assert_eq!(printable_bytes(b"\xff\x07a", 10), "\u{fffd}\\u{7}a");
    }
}
