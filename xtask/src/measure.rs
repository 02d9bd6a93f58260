//! What the benchmarks read about a process: CPU time, RSS, its end; and the statistics they print.

use anyhow::bail;

/// CPU time of every live thread of `pid` so far, in seconds (schedstat: ns, not 10 ms ticks).
pub fn task_cpu_seconds(pid: u32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0.0 };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum::<u64>() as f64
        / 1e9
}

pub fn vm_rss_kib(pid: u32) -> Option<f64> {
    status_kib(pid, "VmRSS:")
}

/// The anonymous part of RSS (heap, stacks): what the profiler itself holds. The rest of VmRSS
/// is file pages of the binaries it maps to read symbols (page cache, shared and reclaimable),
/// which comes and goes with the processes on the host.
pub fn rss_anon_kib(pid: u32) -> Option<f64> {
    status_kib(pid, "RssAnon:")
}

fn status_kib(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix(field))?.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Whether our child `pid` has ended (a zombie counts), without reaping it.
pub fn has_exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised comm, which may itself hold spaces or parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_none_or(|s| s == "Z" || s == "X"),
        Err(_) => true,
    }
}

pub struct Rusage {
    /// user + sys over the child's whole life, its threads included.
    pub cpu_s: f64,
    pub max_rss_kib: f64,
}

/// Waits for our child `pid` and returns its resource usage (wait4).
pub fn wait_rusage(pid: u32) -> anyhow::Result<Rusage> {
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid out-parameter.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child; pointers are valid.
    let r = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut ru) };
    if r < 0 {
        bail!("wait4: {}", std::io::Error::last_os_error());
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Rusage { cpu_s: tv(ru.ru_utime) + tv(ru.ru_stime), max_rss_kib: ru.ru_maxrss as f64 })
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn spread(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts_and_spread() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(spread(&[0.99, 1.01, 0.98]), (0.98, 1.01));
    }

    #[test]
    fn this_process_is_alive_and_uses_cpu_and_memory() {
        let me = std::process::id();
        assert!(!has_exited(me));
        let spin = std::time::Instant::now();
        while spin.elapsed().as_millis() < 20 {
            std::hint::spin_loop();
        }
        assert!(task_cpu_seconds(me) > 0.0);
        assert!(vm_rss_kib(me).unwrap() > 0.0);
        assert!(has_exited(u32::MAX - 1));
    }
}
