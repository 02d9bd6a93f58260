//! Where the byte counters (`--devices`, `joular-ebpf/src/devices.rs`) find a descriptor's
//! file, its mode, and a socket's family and addresses, read from the kernel's BTF as
//! `task_fields.rs` reads the task's: Rust eBPF has no CO-RE field relocations.

use std::path::Path;

use joular_ebpf::{FileOffsets, NetDevOffsets, SocketOffsets};

use super::task_fields::{with_vmlinux, BtfError, StructOffsets, TaskFieldsError};

/// The `CONFIG_SOCKET_*`, `CONFIG_FD_OFFSETS`, `CONFIG_FILE_OFFSETS`, `CONFIG_SUPER_OFFSETS`,
/// `CONFIG_NET_DEV_OFFSETS` and `CONFIG_NETNS` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceFields {
    pub socket: SocketOffsets,
    pub file: FileOffsets,
    /// Zero when a field is missing: no byte then says its interface (each interface's energy
    /// then goes over every interface's bytes).
    pub net_dev: NetDevOffsets,
}

impl DeviceFields {
    /// The running kernel's fields, with the network namespace of the process that asks (the
    /// interfaces `/sys/class/net` lists are that namespace's).
    pub fn from_sys(sys_root: &Path) -> Result<Self, TaskFieldsError> {
        let mut fields = with_vmlinux(sys_root, Self::from_btf)?;
        fields.net_dev.own_netns = own_netns();
        Ok(fields)
    }

    pub fn from_btf(bytes: &[u8]) -> Result<Self, BtfError> {
        let btf = StructOffsets::parse(bytes)?;
        // `struct sock` starts with its `sock_common` (`__sk_common`): its fields' offsets in
        // `sock_common` are theirs in `sock`.
        let common = btf.offset("sock", "__sk_common")?;
        let at = |field| btf.offset("sock_common", field).map(|o| o + common);
        let socket = SocketOffsets {
            sk: btf.offset("socket", "sk")?,
            family: at("skc_family")?,
            daddr: at("skc_daddr")?,
            rcv_saddr: at("skc_rcv_saddr")?,
            // Absent without IPv6: such sockets then count as a device's.
            v6_daddr: at("skc_v6_daddr").unwrap_or(0),
            v6_rcv_saddr: at("skc_v6_rcv_saddr").unwrap_or(0),
        };
        let file = FileOffsets {
            files: btf.offset("task_struct", "files")?,
            fdt: btf.offset("files_struct", "fdt")?,
            fd: btf.offset("fdtable", "fd")?,
            max_fds: btf.offset("fdtable", "max_fds")?,
            f_inode: btf.offset("file", "f_inode")?,
            private_data: btf.offset("file", "private_data")?,
            i_mode: btf.offset("inode", "i_mode")?,
            i_sb: btf.offset("inode", "i_sb")?,
            s_magic: btf.offset("super_block", "s_magic")?,
            s_dev: btf.offset("super_block", "s_dev")?,
        };
        let net_dev = net_dev_offsets(&btf).unwrap_or_default();
        Ok(Self { socket, file, net_dev })
    }
}

/// `sock.sk_dst_cache`, `dst_entry.dev`, `net_device.{ifindex,nd_net}`, and where `struct net`
/// keeps its inode number (`net.ns` + `ns_common.inum`; `possible_net_t` holds the pointer first).
fn net_dev_offsets(btf: &StructOffsets) -> Result<NetDevOffsets, BtfError> {
    let inum = btf.offset("net", "ns")?.checked_add(btf.offset("ns_common", "inum")?);
    Ok(NetDevOffsets {
        sk_dst_cache: btf.offset("sock", "sk_dst_cache")?,
        dst_dev: btf.offset("dst_entry", "dev")?,
        ifindex: btf.offset("net_device", "ifindex")?,
        nd_net: btf.offset("net_device", "nd_net")?,
        net_inum: inum.ok_or(BtfError::NoMember { owner: "net", field: "ns" })?,
        own_netns: 0,
    })
}

/// The inode number of this process's network namespace (0 when it cannot be read: no byte then
/// says its interface).
fn own_netns() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/net").map_or(0, |m| u32::try_from(m.ino()).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The running kernel's BTF (the profiler needs one: `task_fields.rs`).
    #[test]
    fn the_running_kernel_has_every_field() {
        let bytes = std::fs::read("/sys/kernel/btf/vmlinux").expect("the kernel's BTF");
        let fields = DeviceFields::from_btf(&bytes).unwrap();
        assert_eq!(fields.socket.family % 2, 0);
        assert_eq!(fields.socket.rcv_saddr, fields.socket.daddr + 4);
        assert!(fields.file.files != 0 && fields.file.f_inode != 0 && fields.file.private_data != 0);
        assert!(fields.file.i_sb != 0 && fields.file.s_magic != 0 && fields.file.s_dev != 0);
        let f = &fields.file;
        assert_eq!(FileOffsets::from_values(f.fd_value(), f.file_value(), f.super_value()), fields.file);
        let back = SocketOffsets::from_values(fields.socket.value(), fields.socket.v6_value());
        assert_eq!(back, fields.socket);
        let n = fields.net_dev;
        assert!(n.sk_dst_cache != 0 && n.ifindex != 0 && n.nd_net != 0 && n.net_inum != 0, "{n:?}");
        let with_ns = NetDevOffsets { own_netns: 0xf000_0001, ..n };
        assert_eq!(NetDevOffsets::from_values(with_ns.value(), with_ns.netns_value()), with_ns);
        assert_ne!(own_netns(), 0, "this process's network namespace");
    }
}
