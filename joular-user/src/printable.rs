//! Names a target chose (comm, thread names, exe and cgroup paths, method names) on their way
//! into a document. A process may put any byte in its name (`prctl(PR_SET_NAME)`): an ESC
//! colours a terminal, and XML 1.0 forbids most control characters even as `&#27;`, so one of
//! them makes a flame graph or a report unreadable. They are shown as `\xHH` text instead,
//! which every destination can hold; each destination then escapes its own syntax (XML
//! entities by inferno's and maud's writers, label-value escapes by the exposition).

use std::borrow::Cow;
use std::fmt::Write as _;

/// `s` with every control character (C0, DEL, C1) and the two characters XML 1.0 forbids
/// besides them (U+FFFE, U+FFFF) written as `\xHH` (or `\u{HHHH}`) text. Borrows when there is
/// none, which is nearly always.
pub fn printable(s: &str) -> Cow<'_, str> {
    show(s, hidden)
}

/// `printable` for a whole document, whose own text has tabs and line breaks: those are kept.
pub fn printable_text(s: &str) -> Cow<'_, str> {
    show(s, |c| hidden(c) && !matches!(c, '\t' | '\n' | '\r'))
}

fn show(s: &str, hidden: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&hidden) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !hidden(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:04x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

fn hidden(c: char) -> bool {
    c.is_control() || c == '\u{FFFE}' || c == '\u{FFFF}'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible_text() {
        assert_eq!(printable("\x1b[31m<a&\"'>"), "\\x1b[31m<a&\"'>");
        assert_eq!(printable("a\tb\nc\rd\0e\x7f\u{85}"), "a\\x09b\\x0ac\\x0dd\\x00e\\x7f\\x85");
        assert_eq!(printable("x\u{FFFE}\u{FFFF}"), "x\\u{fffe}\\u{ffff}");
    }

    #[test]
    fn documents_keep_their_line_breaks() {
        assert_eq!(printable_text("<p>\tx\r\n\x1b\u{FFFF}</p>\n"), "<p>\tx\r\n\\x1b\\u{ffff}</p>\n");
    }

    #[test]
    fn plain_names_are_borrowed_unchanged() {
        for name in ["java", "C2 CompilerThre", "com.acme.App.run", "µJ é 日本 \u{FFFD}", ""] {
            assert!(matches!(printable(name), Cow::Borrowed(n) if n == name), "{name}");
        }
    }
}
