//! The soft limit on open descriptors, raised to the hard limit at start. The profiler holds a
//! bounded number (BPF maps, the metrics endpoint's connections, a file while it writes), but
//! the soft limit is often 1,024 (systemd's default, kept low for programs that still use
//! `select(2)`, which the profiler does not), and a busy host or a flood of connections
//! should find room. A command `record` starts is forked before this, so it keeps the limit it
//! would have had.

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; a failure only costs headroom, so it is
/// logged and the run goes on.
pub fn raise_open_files_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes only the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        log::warn!("open files limit: getrlimit: {}", std::io::Error::last_os_error());
        return;
    }
    if limit.rlim_cur >= limit.rlim_max {
        return;
    }
    let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
    // SAFETY: setrlimit reads only the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        log::warn!(
            "open files limit: cannot raise {} to {}: {}",
            limit.rlim_cur,
            limit.rlim_max,
            std::io::Error::last_os_error()
        );
        return;
    }
    log::debug!("open files limit raised from {} to {}", limit.rlim_cur, limit.rlim_max);
}
