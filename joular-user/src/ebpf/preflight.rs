//! Checks made before loading anything, so a missing privilege or kernel feature is reported
//! as the problem and its fix rather than as an opaque `EPERM` from `bpf()`.

use std::path::Path;

use super::ProbeError;

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// The effective capability set of this process, from `<proc_root>/self/status`.
pub fn effective_caps(proc_root: &Path) -> Result<u64, ProbeError> {
    let status = std::fs::read_to_string(proc_root.join("self/status"))
        .map_err(|e| ProbeError::Io("reading /proc/self/status".into(), e))?;
    parse_cap_eff(&status).ok_or_else(|| ProbeError::Preflight("no CapEff line in /proc/self/status".into()))
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
    u64::from_str_radix(hex, 16).ok()
}

/// Loading tracing programs needs CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN on older kernels).
pub fn check_privileges(caps: u64) -> Result<(), ProbeError> {
    let has = |c: u32| caps & (1 << c) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    let mut missing = Vec::new();
    if !has(CAP_BPF) {
        missing.push("CAP_BPF");
    }
    if !has(CAP_PERFMON) {
        missing.push("CAP_PERFMON");
    }
    Err(ProbeError::Preflight(format!(
        "missing {}: run as root (`sudo joular-ebpf ...`) or, to profile your own processes, grant: \
         `sudo setcap cap_bpf,cap_perfmon,cap_dac_read_search,cap_syslog,cap_checkpoint_restore+ep $(which joular-ebpf)` \
         (docs/deployment.md says what each is for)",
        missing.join(" and ")
    )))
}

/// Classic tracepoints need tracefs; fresh machines and containers often have it unmounted.
pub fn ensure_tracefs() -> Result<(), ProbeError> {
    let tracing = Path::new("/sys/kernel/tracing");
    if tracing.join("events").exists() || Path::new("/sys/kernel/debug/tracing/events").exists() {
        return Ok(());
    }
    nix::mount::mount(Some("nodev"), tracing, Some("tracefs"), nix::mount::MsFlags::empty(), None::<&str>)
        .map_err(|e| {
            ProbeError::Preflight(format!(
                "tracefs is not mounted and mounting it failed ({e}): run `sudo mount -t tracefs nodev /sys/kernel/tracing`"
            ))
        })
}

/// eBPF maps on kernels before 5.11 are charged to RLIMIT_MEMLOCK; lift it (harmless later).
pub fn raise_memlock() {
    let rlim = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: plain syscall with a valid struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &rlim) } != 0 {
        log::debug!("setrlimit(RLIMIT_MEMLOCK) failed: {}", std::io::Error::last_os_error());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cap_eff() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(parse_cap_eff(status), Some(0x1ff_ffff_ffff));
        assert_eq!(parse_cap_eff("Name: x\n"), None);
    }

    #[test]
    fn privileges_need_bpf_and_perfmon_or_sys_admin() {
        assert!(check_privileges(1 << CAP_SYS_ADMIN).is_ok());
        assert!(check_privileges((1 << CAP_BPF) | (1 << CAP_PERFMON)).is_ok());
        let err = check_privileges(1 << CAP_BPF).unwrap_err().to_string();
        assert!(err.contains("CAP_PERFMON") && !err.contains("CAP_BPF and"), "{err}");
        let err = check_privileges(0).unwrap_err().to_string();
        assert!(err.contains("CAP_BPF and CAP_PERFMON") && err.contains("sudo"), "{err}");
    }
}
