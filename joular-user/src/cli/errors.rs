//! How a failed run is reported: one line on stderr, each cause once, and exit code 2 for bad
//! input (as clap does for the input it rejects itself), 1 for everything else.

/// Input that parsed but cannot be used; the message names the flag.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

pub fn exit_code(e: &anyhow::Error) -> i32 {
    if e.downcast_ref::<UsageError>().is_some() {
        2
    } else {
        1
    }
}

/// `context: cause: cause`, skipping a cause already in the line: an error that names its path
/// often shows its OS error in its own message and again as its source.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{path}: {source}")]
    struct PathError {
        path: String,
        source: std::io::Error,
    }

    #[test]
    fn the_os_error_is_said_once_and_usage_errors_exit_2() {
        let io = std::io::Error::from_raw_os_error(libc::ENOTDIR);
        let os = io.to_string();
        let e = anyhow::Error::new(PathError { path: "out".into(), source: io }).context("--output out");
        let line = one_line(&e);
        assert_eq!(line, format!("--output out: out: {os}"));
        assert_eq!(exit_code(&e), 1);
        let e = anyhow::Error::new(UsageError("--pid 2: a kernel thread".into()));
        assert_eq!((one_line(&e).as_str(), exit_code(&e)), ("--pid 2: a kernel thread", 2));
    }
}
