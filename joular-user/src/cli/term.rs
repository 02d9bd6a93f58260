//! Terminal output that never ends the run. Rust ignores SIGPIPE, so writing to a closed stdout
//! or stderr (`joular-ebpf ... | head`) fails with EPIPE, and `println!`/`eprintln!` would panic
//! on it before the results are written. These write what they can: the first failed write
//! ends that stream's printing, quietly, for the rest of the run.

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
    if w.write_fmt(args).and_then(|()| w.flush()).is_err() {
        closed.store(true, Ordering::Relaxed);
    }
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
    fn a_broken_pipe_ends_printing_without_a_panic() {
        let closed = AtomicBool::new(false);
        let mut w = Broken(0);
        write(&mut w, &closed, format_args!("summary {}\n", 1));
        assert!(closed.load(Ordering::Relaxed));
        write(&mut w, &closed, format_args!("more\n"));
        assert_eq!(w.0, 1, "no write after the first failure");
    }
}
