//! `--devices`: which byte counters run, and loading and attaching them: one raw tracepoint
//! program at every system call's return (`joular-ebpf/src/devices.rs` says why not fentry),
//! loaded only when asked for, so a CPU-only run costs nothing. If the kernel refuses it, or the
//! fields it reads are unknown, the run says so once (with the hook and the reason) and goes on
//! with the CPU only.

use std::path::Path;

use aya::{programs::RawTracePoint, Ebpf};
use joular_ebpf::{
    CONFIG_DEVICES, CONFIG_FD_OFFSETS, CONFIG_FILE_OFFSETS, CONFIG_NETNS, CONFIG_NET_DEV_OFFSETS,
    CONFIG_SOCKET_OFFSETS, CONFIG_SOCKET_V6_OFFSETS, CONFIG_SUPER_OFFSETS, DEVICES_DISK, DEVICES_NETWORK,
};

use super::device_fields::DeviceFields;

/// The devices a run measures beside the CPU (the CPU always is).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Devices {
    pub network: bool,
    pub disk: bool,
}

/// The program and the raw tracepoint it attaches to.
const PROGRAM: &str = "joular_sys_exit";
pub const HOOK: &str = "raw_syscalls:sys_exit";

impl Devices {
    pub fn any(self) -> bool {
        self.network || self.disk
    }

    /// `--devices`'s value: a comma list of `cpu`, `network`, `disk` (`cpu` is always on).
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut devices = Devices::default();
        for word in list.split(',').map(str::trim) {
            match word {
                "cpu" => {}
                "network" => devices.network = true,
                "disk" => devices.disk = true,
                other => return Err(format!("unknown device `{other}`: accepted values are cpu, network, disk")),
            }
        }
        Ok(devices)
    }

    fn config_value(self) -> u64 {
        (if self.network { DEVICES_NETWORK } else { 0 }) | (if self.disk { DEVICES_DISK } else { 0 })
    }

    /// Stores the field offsets and the devices the program reads, and attaches it. Returns
    /// whether bytes are counted; a failure was said on stderr.
    pub(super) fn attach(self, ebpf: &mut Ebpf, config: &mut aya::maps::Array<aya::maps::MapData, u64>) -> bool {
        let fields = match DeviceFields::from_sys(Path::new("/sys")) {
            Ok(fields) => fields,
            Err(e) => {
                log::warn!(
                    "--devices: no byte is counted: the kernel's file and socket fields are unknown ({e}); CPU only"
                );
                return false;
            }
        };
        let stored = [
            (CONFIG_SOCKET_OFFSETS, fields.socket.value()),
            (CONFIG_SOCKET_V6_OFFSETS, fields.socket.v6_value()),
            (CONFIG_FD_OFFSETS, fields.file.fd_value()),
            (CONFIG_FILE_OFFSETS, fields.file.file_value()),
            (CONFIG_SUPER_OFFSETS, fields.file.super_value()),
            (CONFIG_NET_DEV_OFFSETS, fields.net_dev.value()),
            (CONFIG_NETNS, fields.net_dev.netns_value()),
            (CONFIG_DEVICES, self.config_value()),
        ]
        .into_iter()
        .try_for_each(|(index, value)| config.set(index, value, 0));
        if let Err(e) = stored {
            log::warn!("--devices: no byte is counted: storing the field offsets failed ({e}); CPU only");
            return false;
        }
        match attach_program(ebpf) {
            Ok(()) => true,
            Err(reason) => {
                log::warn!("--devices: no byte is counted: {HOOK} refused: {reason}; CPU only");
                false
            }
        }
    }
}

fn attach_program(ebpf: &mut Ebpf) -> Result<(), String> {
    let prog: &mut RawTracePoint = ebpf
        .program_mut(PROGRAM)
        .ok_or_else(|| format!("program {PROGRAM} is missing from the object"))?
        .try_into()
        .map_err(|e| format!("{e}"))?;
    prog.load().map_err(|e| format!("loading {PROGRAM}: {e}"))?;
    prog.attach("sys_exit").map_err(|e| format!("attaching {PROGRAM}: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_parses_and_a_bad_word_names_the_accepted_values() {
        assert_eq!(Devices::parse("cpu"), Ok(Devices::default()));
        assert_eq!(Devices::parse("cpu,network"), Ok(Devices { network: true, disk: false }));
        assert_eq!(Devices::parse("disk, network"), Ok(Devices { network: true, disk: true }));
        let e = Devices::parse("cpu,gpu").unwrap_err();
        assert!(e.contains("`gpu`") && e.contains("cpu, network, disk"), "{e}");
        assert!(Devices::parse("").is_err());
    }

    #[test]
    fn the_program_is_told_which_devices_count() {
        assert_eq!(Devices::default().config_value(), 0);
        assert_eq!(Devices { network: true, disk: false }.config_value(), DEVICES_NETWORK);
        assert_eq!(Devices { network: true, disk: true }.config_value(), DEVICES_NETWORK | DEVICES_DISK);
    }
}
