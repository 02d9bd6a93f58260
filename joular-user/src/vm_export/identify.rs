//! Which processes are virtual machines, and their names, from the executable and the command
//! line. Both are the process's own doing (any user can start a binary called
//! `qemu-system-x86_64` with any `-name`), so a name is only ever a bounded, sanitized directory
//! name and label value: it decides where a VM's figures are written below the export
//! directory, never anything outside it.

/// The hypervisors whose processes are virtual machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmKind {
    /// `qemu-system-<arch>` or `qemu-kvm` (libvirt's KVM guests).
    Qemu,
    Firecracker,
    CloudHypervisor,
}

impl VmKind {
    /// From the executable's file name (`/proc/<pid>/exe`; a binary replaced since it started
    /// reads `... (deleted)`).
    pub fn of_executable(exe: &str) -> Option<Self> {
        let path = exe.strip_suffix(" (deleted)").unwrap_or(exe);
        let name = path.rsplit('/').next().unwrap_or(path);
        if name.starts_with("qemu-system-") || name == "qemu-kvm" {
            Some(Self::Qemu)
        } else if name == "firecracker" {
            Some(Self::Firecracker)
        } else if name == "cloud-hypervisor" {
            Some(Self::CloudHypervisor)
        } else {
            None
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Qemu => "qemu",
            Self::Firecracker => "firecracker",
            Self::CloudHypervisor => "cloud-hypervisor",
        }
    }
}

/// Longest VM name kept, in bytes: libvirt allows long names, a directory name and a label
/// value need not be.
pub const MAX_VM_NAME_BYTES: usize = 64;
/// Command-line arguments looked at: a VM's command line is long, but not this long.
const MAX_ARGS: usize = 4096;

/// The name a VM process gives itself, sanitized, or `<kind>-<pid>` when it gives none.
pub fn vm_name(kind: VmKind, cmdline: &[u8], pid: u32) -> String {
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).take(MAX_ARGS).collect();
    let given = match kind {
        VmKind::Qemu => option_value(&args, &["-name", "--name"]).and_then(qemu_name),
        VmKind::Firecracker => option_value(&args, &["--id"])
            .map(|id| id.to_vec())
            .or_else(|| option_value(&args, &["--api-sock"]).map(socket_stem)),
        VmKind::CloudHypervisor => {
            option_value(&args, &["--api-socket"]).map(|v| socket_stem(v.strip_prefix(b"path=").unwrap_or(v)))
        }
    };
    given.and_then(|name| sanitize(&name)).unwrap_or_else(|| format!("{}-{pid}", kind.as_str()))
}

/// The value of the first of `flags`, as `-flag VALUE` or `-flag=VALUE`.
fn option_value<'a>(args: &[&'a [u8]], flags: &[&str]) -> Option<&'a [u8]> {
    for (i, arg) in args.iter().enumerate().skip(1) {
        for flag in flags {
            if *arg == flag.as_bytes() {
                return args.get(i + 1).copied();
            }
            if let Some(value) = arg.strip_prefix(flag.as_bytes()).and_then(|rest| rest.strip_prefix(b"=")) {
                return Some(value);
            }
        }
    }
    None
}

/// QEMU's `-name [guest=]NAME[,process=...][,debug-threads=on]`: options split at single
/// commas (`,,` is a literal comma), the name is `guest=` or the first, unkeyed, option.
fn qemu_name(value: &[u8]) -> Option<Vec<u8>> {
    let mut parts: Vec<Vec<u8>> = vec![Vec::new()];
    let mut i = 0;
    while i < value.len() {
        match (value[i], value.get(i + 1)) {
            (b',', Some(b',')) => {
                parts.last_mut()?.push(b',');
                i += 2;
            }
            (b',', _) => {
                parts.push(Vec::new());
                i += 1;
            }
            (byte, _) => {
                parts.last_mut()?.push(byte);
                i += 1;
            }
        }
    }
    if let Some(guest) = parts.iter().find_map(|p| p.strip_prefix(b"guest=")) {
        return Some(guest.to_vec());
    }
    parts.into_iter().next().filter(|first| !first.contains(&b'='))
}

/// `/run/fc/web-1.socket` → `web-1`.
fn socket_stem(path: &[u8]) -> Vec<u8> {
    let file = path.rsplit(|b| *b == b'/').next().unwrap_or(path);
    let stem = match file.iter().rposition(|b| *b == b'.') {
        Some(dot) if dot > 0 => &file[..dot],
        _ => file,
    };
    stem.to_vec()
}

/// A directory name and label value from a target's bytes: ASCII letters, digits, `.`, `_`
/// and `-` kept, anything else `_`; at most [`MAX_VM_NAME_BYTES`]; never `.`/`..`, nor
/// hidden (a leading `.` becomes `_`: our temporary files are hidden). `None` if nothing is
/// left.
pub fn sanitize(raw: &[u8]) -> Option<String> {
    let mut name: String = raw
        .iter()
        .take(MAX_VM_NAME_BYTES)
        .map(|&b| if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') { b as char } else { '_' })
        .collect();
    if name.starts_with('.') {
        name.replace_range(..1, "_");
    }
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmdline(args: &[&str]) -> Vec<u8> {
        args.iter().flat_map(|a| a.bytes().chain([0])).collect()
    }

    #[test]
    fn executables_tell_the_hypervisor() {
        assert_eq!(VmKind::of_executable("/usr/bin/qemu-system-x86_64"), Some(VmKind::Qemu));
        assert_eq!(VmKind::of_executable("/usr/libexec/qemu-kvm"), Some(VmKind::Qemu));
        assert_eq!(VmKind::of_executable("/tmp/x/qemu-system-aarch64 (deleted)"), Some(VmKind::Qemu));
        assert_eq!(VmKind::of_executable("/usr/bin/firecracker"), Some(VmKind::Firecracker));
        assert_eq!(VmKind::of_executable("/usr/local/bin/cloud-hypervisor"), Some(VmKind::CloudHypervisor));
        for other in ["/usr/bin/qemu-img", "/usr/bin/java", "", "/opt/qemu-system-x86_64/bin/java"] {
            assert_eq!(VmKind::of_executable(other), None, "{other}");
        }
    }

    #[test]
    fn qemu_names_from_libvirt_and_by_hand() {
        let libvirt = cmdline(&["qemu-system-x86_64", "-name", "guest=web-1,debug-threads=on", "-S"]);
        assert_eq!(vm_name(VmKind::Qemu, &libvirt, 7), "web-1");
        let plain = cmdline(&["qemu-system-x86_64", "-machine", "none", "-name", "testvm"]);
        assert_eq!(vm_name(VmKind::Qemu, &plain, 7), "testvm");
        let with_process = cmdline(&["qemu-kvm", "--name", "db,process=qemu-db"]);
        assert_eq!(vm_name(VmKind::Qemu, &with_process, 7), "db");
        let escaped = cmdline(&["qemu-kvm", "-name", "a,,b,debug-threads=on"]);
        assert_eq!(vm_name(VmKind::Qemu, &escaped, 7), "a_b");
        let keyed_only = cmdline(&["qemu-kvm", "-name", "process=x"]);
        assert_eq!(vm_name(VmKind::Qemu, &keyed_only, 7), "qemu-7");
        assert_eq!(vm_name(VmKind::Qemu, &cmdline(&["qemu-kvm", "-m", "1G"]), 42), "qemu-42");
        assert_eq!(vm_name(VmKind::Qemu, &cmdline(&["qemu-kvm", "-name"]), 42), "qemu-42");
        // The executable's own name is not an option.
        assert_eq!(vm_name(VmKind::Qemu, &cmdline(&["-name", "x"]), 3), "qemu-3");
    }

    #[test]
    fn firecracker_and_cloud_hypervisor_names() {
        let fc = cmdline(&["firecracker", "--api-sock", "/run/fc/api-9.socket", "--id", "vm9"]);
        assert_eq!(vm_name(VmKind::Firecracker, &fc, 1), "vm9");
        let fc = cmdline(&["firecracker", "--api-sock", "/run/fc/api-9.socket"]);
        assert_eq!(vm_name(VmKind::Firecracker, &fc, 1), "api-9");
        let ch = cmdline(&["cloud-hypervisor", "--api-socket", "path=/run/ch/build.sock", "--cpus", "boot=2"]);
        assert_eq!(vm_name(VmKind::CloudHypervisor, &ch, 1), "build");
        let ch = cmdline(&["cloud-hypervisor", "--api-socket=/run/ch/b2.sock"]);
        assert_eq!(vm_name(VmKind::CloudHypervisor, &ch, 1), "b2");
        assert_eq!(vm_name(VmKind::CloudHypervisor, &cmdline(&["cloud-hypervisor"]), 5), "cloud-hypervisor-5");
    }

    /// The name is the target's: no path, no parent, no hidden name, bounded.
    #[test]
    fn hostile_names_are_made_plain_directory_names() {
        for (raw, want) in [
            ("../../etc", "_._.._etc"),
            ("..", "_."),
            (".", "_"),
            ("/etc/passwd", "_etc_passwd"),
            (".joular-1-0.dir", "_joular-1-0.dir"),
            ("a b\nc\"d{}", "a_b_c_d__"),
            ("é", "__"),
        ] {
            assert_eq!(sanitize(raw.as_bytes()).as_deref(), Some(want), "{raw:?}");
        }
        assert_eq!(sanitize(b""), None);
        let long = "x".repeat(10_000);
        assert_eq!(sanitize(long.as_bytes()).unwrap().len(), MAX_VM_NAME_BYTES);
        let qemu = cmdline(&["qemu-kvm", "-name", "guest=../../root/.ssh"]);
        assert_eq!(vm_name(VmKind::Qemu, &qemu, 1), "_._.._root_.ssh");
        let empty = cmdline(&["qemu-kvm", "-name", "guest="]);
        assert_eq!(vm_name(VmKind::Qemu, &empty, 1), "qemu-1");
    }
}
