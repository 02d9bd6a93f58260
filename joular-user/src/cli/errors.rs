//! How a failed run is reported: one line on stderr, each cause once, and exit code 2 for bad
//! input (as clap does for the input it rejects itself), 1 for everything else.

use joular_user::energy::EnergyError;
use joular_user::fleet::FleetError;

/// Input that parsed but cannot be used; the message names the flag.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

pub fn exit_code(e: &anyhow::Error) -> i32 {
    let bad_energy_flag = e.chain().filter_map(|c| c.downcast_ref::<EnergyError>()).any(is_bad_energy_flag);
    // `serve` binds before anything loads: an address taken, not of this host, or not ours.
    let bad_listen = e.chain().any(|c| matches!(c.downcast_ref::<FleetError>(), Some(FleetError::Bind { .. })));
    if e.downcast_ref::<UsageError>().is_some() || bad_energy_flag || bad_listen {
        2
    } else {
        1
    }
}

/// Energy errors that only the energy flags cause (opening the sources comes before anything
/// is loaded): the source `--energy-source` asked for is not here, or a value the model cannot
/// use. A machine without any measured source falls back to the model, which is not an error.
fn is_bad_energy_flag(e: &EnergyError) -> bool {
    matches!(
        e,
        EnergyError::Unavailable { .. }
            | EnergyError::VmSourceUnavailable { .. }
            | EnergyError::InvalidTdp { .. }
            | EnergyError::InvalidIdlePower { .. }
            | EnergyError::MissingRoot { .. }
    )
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

    #[test]
    fn an_energy_source_asked_for_and_absent_is_bad_input() {
        let absent = EnergyError::MsrMissing { path: "/dev/cpu/0/msr".into() };
        let e = anyhow::Error::new(EnergyError::Unavailable {
            kind: joular_user::energy::SourceKind::Msr,
            reason: Box::new(absent),
        });
        assert_eq!(exit_code(&e), 2);
        assert!(
            one_line(&e).starts_with("--energy-source msr is not available: /dev/cpu/0/msr is missing"),
            "{}",
            one_line(&e)
        );
        let e = anyhow::Error::new(EnergyError::MsrMissing { path: "/dev/cpu/0/msr".into() });
        assert_eq!(exit_code(&e), 1, "a failure of the machine, not of the flags");
        let no_tree = EnergyError::NoHostTree { path: "/mnt/vm".into(), why: "no intel-rapl:0".into() };
        let e = anyhow::Error::new(EnergyError::VmSourceUnavailable {
            flag: "--powercap-root /mnt/vm".into(),
            reason: Box::new(no_tree),
        });
        assert_eq!(exit_code(&e), 2);
        assert!(one_line(&e).starts_with("--powercap-root /mnt/vm: no VM energy tree"), "{}", one_line(&e));
    }

    #[test]
    fn an_address_serve_cannot_listen_on_is_bad_input() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let source = std::net::TcpListener::bind(addr).unwrap_err();
        let e = anyhow::Error::new(FleetError::Bind { addr, source });
        assert_eq!(exit_code(&e), 2);
        assert!(one_line(&e).starts_with(&format!("--listen {addr}: cannot listen there: ")), "{}", one_line(&e));
    }
}
