//! Terminal output that never ends the run. Rust ignores SIGPIPE, so writing to a closed stdout
//! or stderr (`joular-ebpf ... | head`) fails with EPIPE, and `println!`/`eprintln!` would panic
//! on it before the results are written. These write what they can: the first failed write
//! ends that stream's printing, quietly, for the rest of the run.
//!
//! Much of what is printed comes from the profiled processes (thread and process names, Java
//! method names, paths inside a container), so control characters other than newline and tab are
//! shown escaped: a target cannot send escape sequences to the operator's terminal.

use std::borrow::Cow;
use std::fmt::Arguments;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
static STDERR_CLOSED: AtomicBool = AtomicBool::new(false);

pub fn stdout(args: Arguments) {
    write(&mut std::io::stdout().lock(), &STDOUT_CLOSED, args);
}

pub fn stderr(args: Arguments) {
    write(&mut std::io::stderr().lock(), &STDERR_CLOSED, args);
}

fn write(w: &mut dyn Write, closed: &AtomicBool, args: Arguments) {
    if closed.load(Ordering::Relaxed) {
        return;
    }
    let text = std::fmt::format(args);
    if w.write_all(terminal_safe(&text).as_bytes()).and_then(|()| w.flush()).is_err() {
        closed.store(true, Ordering::Relaxed);
    }
}

/// `text` with every control character but newline and tab (C0, DEL and C1, so ESC and CSI) and
/// every bidirectional override written as `\u{..}`.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `print!` that stops quietly when stdout is gone.
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::term::stdout(format_args!($($arg)*)) };
}

/// `println!` that stops quietly when stdout is gone.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::cli::term::stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprintln!` that stops quietly when stderr is gone.
macro_rules! errln {
    ($($arg:tt)*) => { $crate::cli::term::stderr(format_args!("{}\n", format_args!($($arg)*))) };
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Broken(usize);

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            self.0 += 1;
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn escape_sequences_from_targets_never_reach_the_terminal() {
        let mut out = Vec::new();
        let closed = AtomicBool::new(false);
        let comm = "\x1b]0;pwned\x07\u{9b}2J\r";
        write(&mut out, &closed, format_args!("thread {comm}\tx\n{}\n", "evil\u{202e}gnp.exe"));
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "thread \\u{1b}]0;pwned\\u{7}\\u{9b}2J\\u{d}\tx\nevil\\u{202e}gnp.exe\n");
        assert!(matches!(terminal_safe("plain\ttext\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_broken_pipe_ends_printing_without_a_panic() {
        let closed = AtomicBool::new(false);
        let mut w = Broken(0);
        write(&mut w, &closed, format_args!("summary {}\n", 1));
        assert!(closed.load(Ordering::Relaxed));
        write(&mut w, &closed, format_args!("more\n"));
        assert_eq!(w.0, 1, "no write after the first failure");
    }
}
