//! The byte counters of `--devices network,disk` (E-Surgeon's network and disk halves): at the
//! return of every system call that moves bytes through a file descriptor (read, write, their
//! positioned and vectored forms, send*/recv* but the `mmsg` ones, and at both ends sendfile,
//! splice and copy_file_range), a profiled thread's bytes
//! (the return value) go to its (thread, user stack, class) entry in `DEVICE_BYTES_*`, the stack
//! taken as the sampler takes it (a JVM's walked by `walk.rs`, in its own walker state; other
//! processes' by `bpf_get_stackid`), so user space names the call path's frames exactly as a
//! CPU sample's.
//!
//! The hook is the `sys_exit` raw tracepoint: fentry/fexit on the socket layer and the VFS
//! would see more (sendfile, splice, io_uring), but this kernel refuses to load them (EPERM
//! before the verifier runs, even for an empty program; `tp_btf` loads), and kprobes are
//! compiled out. One program
//! for every system call is verified once, and a system call that moves no bytes returns after
//! one read of its number.
//!
//! The descriptor's file says what the bytes are: a socket (`S_IFSOCK`) or a regular file
//! (`S_IFREG`) on a filesystem that is not kept in memory (procfs, sysfs, cgroupfs and tmpfs
//! files are regular files too, and move no disk byte); pipes, terminals and devices count
//! nowhere. This runs in the thread's own
//! system call, so the call path is the one that asked for the bytes. A file write only
//! dirties the page cache: writeback writes the bytes later from a kernel thread, which belongs
//! to no profiled process, so a written byte is counted once, at write time, on the call path
//! that wrote it, and nowhere after.
//!
//! Sockets are told apart by their addresses (`sock_common`, at offsets user space read from
//! the kernel's BTF): a peer on a loopback address (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104),
//! or at the socket's own local address, and every AF_UNIX socket, is local traffic, which
//! costs CPU time and no network device; any other socket counts as a device's. (An
//! unconnected UDP socket has no peer address here: its datagrams count as a device's.) A
//! device's bytes carry the interface the socket's cached route leaves by (`route_ifindex`), so
//! each interface's energy goes to the bytes that went through it.

use aya_ebpf::{
    bindings::pt_regs,
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_kernel, generated},
    programs::{tracing::StackIdContext, RawTracePointContext},
};
use joular_ebpf::{
    DeviceKey, FileOffsets, JavaFrame, NetDevOffsets, SocketOffsets, CLASS_FILE_READ, CLASS_FILE_WRITE,
    CLASS_NET_DEVICE_RX, CLASS_NET_DEVICE_TX, CLASS_NET_LOCAL_RX, CLASS_NET_LOCAL_TX, CONFIG_DEVICES,
    CONFIG_FD_OFFSETS, CONFIG_FILE_OFFSETS, CONFIG_NETNS, CONFIG_NET_DEV_OFFSETS, CONFIG_SOCKET_OFFSETS,
    CONFIG_SOCKET_V6_OFFSETS, CONFIG_SUPER_OFFSETS, DEVICES_DISK, DEVICES_NETWORK, DROP_DEVICE_BYTES_MAP_FULL,
};

use crate::account::{active_tag, buffer_of, get_stack_id, process_start_ticks, targeted, BPF_F_USER_STACK};
use crate::maps::{
    count_drop, DeviceEnds, CONFIG, DEVICE_BYTES_0, DEVICE_BYTES_1, DEVICE_ENDS, NO_END, WALKER_DEVICES,
};
use crate::walk;

const BPF_NOEXIST: u64 = 1;
const AF_UNIX: u16 = 1;
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;
const S_IFMT: u16 = 0o170_000;
const S_IFREG: u16 = 0o100_000;
const S_IFSOCK: u16 = 0o140_000;
// Filesystem magics (include/uapi/linux/magic.h) of filesystems with no disk below them.
const PROC_SUPER_MAGIC: u32 = 0x9fa0;
const SYSFS_MAGIC: u32 = 0x6265_6572;
const CGROUP_SUPER_MAGIC: u32 = 0x0027_e0eb;
const CGROUP2_SUPER_MAGIC: u32 = 0x6367_7270;
const TMPFS_MAGIC: u32 = 0x0102_1994;
const RAMFS_MAGIC: u32 = 0x8584_58f6;
const DEBUGFS_MAGIC: u32 = 0x6462_6720;
const TRACEFS_MAGIC: u32 = 0x7472_6163;
const SECURITYFS_MAGIC: u32 = 0x7363_6673;
const BPF_FS_MAGIC: u32 = 0xcafe_4a11;
const DEVPTS_SUPER_MAGIC: u32 = 0x1cd1;
const HUGETLBFS_MAGIC: u32 = 0x9584_58f6;
const CONFIGFS_MAGIC: u32 = 0x6265_6570;
const PSTOREFS_MAGIC: u32 = 0x6165_676c;
const EFIVARFS_MAGIC: u32 = 0xde5e_81e4;
const MQUEUE_MAGIC: u32 = 0x1980_2202;
const NSFS_MAGIC: u32 = 0x6e73_6673;

/// x86_64 system call numbers of the calls that move bytes through their first argument, a
/// file descriptor, and return how many: whether each reads (or receives) or writes (sends).
#[inline(always)]
fn direction(nr: u64) -> Option<bool> {
    match nr {
        // read, pread64, readv, recvfrom, recvmsg, preadv, preadv2
        0 | 17 | 19 | 45 | 47 | 295 | 327 => Some(false),
        // write, pwrite64, writev, sendto, sendmsg, pwritev, pwritev2
        1 | 18 | 20 | 44 | 46 | 296 | 328 => Some(true),
        _ => None,
    }
}

/// x86_64 system calls that move bytes from one descriptor to another inside the kernel and
/// return how many: the saved registers of the source and the destination. `sendfile(out_fd,
/// in_fd, ...)` (a web server's static files: a JVM's `FileChannel.transferTo`), `splice(fd_in,
/// off_in, fd_out, ...)` and `copy_file_range(fd_in, off_in, fd_out, ...)`. Each end counts
/// as a read or a write call on it would (a pipe end counts nowhere).
#[inline(always)]
fn transfer(nr: u64) -> Option<(usize, usize)> {
    match nr {
        40 => Some((core::mem::offset_of!(pt_regs, rsi), core::mem::offset_of!(pt_regs, rdi))),
        275 | 326 => Some((core::mem::offset_of!(pt_regs, rdi), core::mem::offset_of!(pt_regs, rdx))),
        _ => None,
    }
}

/// At every system call's return: `sys_exit(struct pt_regs *regs, long ret)`.
#[inline(always)]
pub fn on_sys_exit(ctx: &RawTracePointContext) -> Result<u32, u32> {
    let ret: i64 = ctx.arg(1);
    if ret <= 0 {
        return Ok(0);
    }
    let regs: u64 = ctx.arg(0);
    let nr: u64 = read(regs + core::mem::offset_of!(pt_regs, orig_rax) as u64).ok_or(0u32)?;
    // (source descriptor, destination descriptor): one of them for a read or a write call.
    let (from, to) = match (direction(nr), transfer(nr)) {
        (Some(false), _) => (Some(core::mem::offset_of!(pt_regs, rdi)), None),
        (Some(true), _) => (None, Some(core::mem::offset_of!(pt_regs, rdi))),
        (None, Some((from, to))) => (Some(from), Some(to)),
        (None, None) => return Ok(0),
    };
    let pid_tgid = bpf_get_current_pid_tgid();
    if !targeted((pid_tgid >> 32) as u32) {
        return Ok(0);
    }
    let fd_at = |reg: Option<usize>| reg.and_then(|reg| read::<u64>(regs + reg as u64));
    let read_end = fd_at(from).and_then(|fd| classify(fd, false));
    let write_end = fd_at(to).and_then(|fd| classify(fd, true));
    if read_end.is_none() && write_end.is_none() {
        return Ok(0);
    }
    // The ends wait in memory, not in registers, while the stack is walked: each class the
    // verifier follows is a constant, and with both ends' constants alive across the walk it
    // walked the walker once per pair of them and refused the program (E2BIG).
    let ends = DEVICE_ENDS.get_ptr_mut(0).ok_or(0u32)?;
    let end = |e: Option<(u32, u32)>| e.unwrap_or((NO_END, 0));
    let ((read_class, read_dev), (write_class, write_dev)) = (end(read_end), end(write_end));
    // SAFETY: this CPU's entry; no other sys_exit program runs on this CPU meanwhile.
    unsafe {
        core::ptr::write_volatile(ends, DeviceEnds { class: [read_class, write_class], dev: [read_dev, write_dev] })
    };
    // One stack for both ends: it is the same call.
    let stack = user_stack(ctx, pid_tgid);
    // SAFETY: as above.
    let ends = unsafe { core::ptr::read_volatile(ends) };
    for i in 0..2 {
        if ends.class[i] != NO_END {
            charge(&stack, pid_tgid, ends.class[i], ends.dev[i], ret as u64);
        }
    }
    Ok(0)
}

/// The class of `fd`'s bytes: a socket's (network) or a regular file's (disk), when that
/// device is counted; with a file's filesystem device (0 for a socket).
#[inline(always)]
fn classify(fd: u64, write: bool) -> Option<(u32, u32)> {
    let devices = CONFIG.get(CONFIG_DEVICES).copied().unwrap_or(0);
    let o = FileOffsets::from_values(
        CONFIG.get(CONFIG_FD_OFFSETS).copied().unwrap_or(0),
        CONFIG.get(CONFIG_FILE_OFFSETS).copied().unwrap_or(0),
        CONFIG.get(CONFIG_SUPER_OFFSETS).copied().unwrap_or(0),
    );
    if o.files == 0 || o.f_inode == 0 {
        return None;
    }
    let file = fd_file(&o, fd)?;
    let inode = read::<u64>(file + u64::from(o.f_inode)).filter(|&i| i != 0)?;
    let mode = read::<u16>(inode + u64::from(o.i_mode))?;
    match mode & S_IFMT {
        S_IFREG if devices & DEVICES_DISK != 0 => {
            let dev = on_disk(&o, inode)?;
            Some((if write { CLASS_FILE_WRITE } else { CLASS_FILE_READ }, dev))
        }
        S_IFSOCK if devices & DEVICES_NETWORK != 0 => {
            // A socket file's private data is its `struct socket`.
            let sk = socket_sk(read::<u64>(file + u64::from(o.private_data)).unwrap_or(0));
            Some(match (socket_is_local(sk), write) {
                (false, true) => (CLASS_NET_DEVICE_TX, route_ifindex(sk)),
                (false, false) => (CLASS_NET_DEVICE_RX, route_ifindex(sk)),
                (true, true) => (CLASS_NET_LOCAL_TX, 0),
                (true, false) => (CLASS_NET_LOCAL_RX, 0),
            })
        }
        _ => None,
    }
}

/// `inode`'s filesystem device (0 when unknown), or `None` when that filesystem keeps its
/// files in memory, generated by the kernel or in RAM (procfs, sysfs, cgroupfs, tmpfs...):
/// their regular files move no disk byte. A JVM reads /proc and cgroup files every few
/// seconds; counted, they took half a disk's energy from the thread that wrote. An unknown type
/// (any disk or network filesystem) counts.
#[inline(always)]
fn on_disk(o: &FileOffsets, inode: u64) -> Option<u32> {
    if o.i_sb == 0 {
        return Some(0);
    }
    let Some(sb) = read::<u64>(inode + u64::from(o.i_sb)).filter(|&sb| sb != 0) else {
        return Some(0);
    };
    // `s_magic` is an unsigned long; every magic below fits its low 32 bits.
    let in_memory = matches!(
        read::<u64>(sb + u64::from(o.s_magic)).unwrap_or(0) as u32,
        PROC_SUPER_MAGIC
            | SYSFS_MAGIC
            | CGROUP_SUPER_MAGIC
            | CGROUP2_SUPER_MAGIC
            | TMPFS_MAGIC
            | RAMFS_MAGIC
            | DEBUGFS_MAGIC
            | TRACEFS_MAGIC
            | SECURITYFS_MAGIC
            | BPF_FS_MAGIC
            | DEVPTS_SUPER_MAGIC
            | HUGETLBFS_MAGIC
            | CONFIGFS_MAGIC
            | PSTOREFS_MAGIC
            | EFIVARFS_MAGIC
            | MQUEUE_MAGIC
            | NSFS_MAGIC
    );
    match in_memory {
        true => None,
        false => Some(if o.s_dev == 0 { 0 } else { read::<u32>(sb + u64::from(o.s_dev)).unwrap_or(0) }),
    }
}

/// The current task's `struct file *` of `fd` (`current->files->fdt->fd[fd]`), read as the
/// kernel's own lookup does, bounded by the table's size.
#[inline(always)]
fn fd_file(o: &FileOffsets, fd: u64) -> Option<u64> {
    // SAFETY: returns the current task's address; nothing is dereferenced here.
    let task = unsafe { generated::bpf_get_current_task() };
    let files = read::<u64>(task + u64::from(o.files)).filter(|&f| f != 0)?;
    let fdt = read::<u64>(files + u64::from(o.fdt)).filter(|&f| f != 0)?;
    let max_fds = read::<u32>(fdt + u64::from(o.max_fds))?;
    if fd >= u64::from(max_fds) {
        return None;
    }
    let table = read::<u64>(fdt + u64::from(o.fd)).filter(|&t| t != 0)?;
    read::<u64>(table + fd * 8).filter(|&f| f != 0)
}

#[inline(always)]
fn read<T>(at: u64) -> Option<T> {
    // SAFETY: `bpf_probe_read_kernel` checks the address; a failed read is `None`.
    unsafe { bpf_probe_read_kernel(at as *const T) }.ok()
}

fn socket_offsets() -> Option<SocketOffsets> {
    let packed = CONFIG.get(CONFIG_SOCKET_OFFSETS).copied().unwrap_or(0);
    (packed != 0)
        .then(|| SocketOffsets::from_values(packed, CONFIG.get(CONFIG_SOCKET_V6_OFFSETS).copied().unwrap_or(0)))
}

/// The `struct sock *` of `struct socket *sock` (0 when unknown).
#[inline(always)]
fn socket_sk(sock: u64) -> u64 {
    match socket_offsets() {
        Some(o) if sock != 0 => read::<u64>(sock + u64::from(o.sk)).unwrap_or(0),
        _ => 0,
    }
}

/// The index of the interface `sk`'s cached route goes through (`sk->sk_dst_cache->dev`), when
/// that interface is in the profiler's network namespace; 0 otherwise (no route cached yet, an
/// unconnected socket, another namespace's interface, offsets unknown). A connected socket's
/// received bytes come in, as a rule, through the interface its route leaves by.
#[inline(always)]
fn route_ifindex(sk: u64) -> u32 {
    let o = NetDevOffsets::from_values(
        CONFIG.get(CONFIG_NET_DEV_OFFSETS).copied().unwrap_or(0),
        CONFIG.get(CONFIG_NETNS).copied().unwrap_or(0),
    );
    if sk == 0 || o.sk_dst_cache == 0 || o.net_inum == 0 || o.own_netns == 0 {
        return 0;
    }
    let Some(dst) = read::<u64>(sk + u64::from(o.sk_dst_cache)).filter(|&d| d != 0) else { return 0 };
    let Some(dev) = read::<u64>(dst + u64::from(o.dst_dev)).filter(|&d| d != 0) else { return 0 };
    let Some(net) = read::<u64>(dev + u64::from(o.nd_net)).filter(|&n| n != 0) else { return 0 };
    if read::<u32>(net + u64::from(o.net_inum)) != Some(o.own_netns) {
        return 0;
    }
    read::<i32>(dev + u64::from(o.ifindex)).filter(|&i| i > 0).map_or(0, |i| i as u32)
}

/// Whether `struct sock *sk` carries local traffic (see the module's comment).
#[inline(always)]
fn socket_is_local(sk: u64) -> bool {
    let Some(o) = socket_offsets() else { return false };
    if sk == 0 {
        return false;
    }
    match read::<u16>(sk + u64::from(o.family)) {
        Some(AF_UNIX) => true,
        Some(AF_INET) => {
            let peer = read::<u32>(sk + u64::from(o.daddr)).unwrap_or(0);
            let own = read::<u32>(sk + u64::from(o.rcv_saddr)).unwrap_or(0);
            // Network byte order read little-endian: the first octet is the low byte.
            peer & 0xff == 127 || (peer != 0 && peer == own)
        }
        Some(AF_INET6) if o.v6_daddr != 0 => {
            let peer = read::<[u64; 2]>(sk + u64::from(o.v6_daddr)).unwrap_or([0; 2]);
            let own = read::<[u64; 2]>(sk + u64::from(o.v6_rcv_saddr)).unwrap_or([0; 2]);
            let v6_loopback = peer[0] == 0 && peer[1] == 1 << 56;
            // ::ffff:127.x.y.z: bytes 10 and 11 are 0xff, byte 12 is 127.
            let mapped_loopback = peer[0] == 0 && peer[1] as u32 == 0xffff_0000 && (peer[1] >> 32) & 0xff == 127;
            v6_loopback || mapped_loopback || (peer != [0; 2] && peer == own)
        }
        _ => false,
    }
}

/// The thread's current user stack, as the sampler takes it, and the buffer tag it is stored
/// under.
struct UserStack {
    tag: u32,
    user_stack_id: i32,
    java_stack_hash: u64,
    java_leaf: JavaFrame,
}

#[inline(always)]
fn user_stack<C: StackIdContext>(ctx: &C, pid_tgid: u64) -> UserStack {
    let tgid = (pid_tgid >> 32) as u32;
    let tag = active_tag();
    // In a system call the task's saved registers are its user registers: the walk starts
    // where it called the kernel.
    let (user_stack_id, java_stack_hash, java_leaf) = if walk::load_jvm(WALKER_DEVICES, tgid) {
        match walk::walk_and_store(WALKER_DEVICES, tgid, &walk::saved_user_regs(), tag) {
            (0, _) => (-3, 0, JavaFrame::default()),
            (hash, leaf) => (-1, hash, leaf),
        }
    } else {
        (get_stack_id(ctx, tag, BPF_F_USER_STACK), 0, JavaFrame::default())
    };
    UserStack { tag, user_stack_id, java_stack_hash, java_leaf }
}

/// Adds `bytes` of `class` to the thread's entry for `stack`.
#[inline(always)]
fn charge(stack: &UserStack, pid_tgid: u64, class: u32, dev: u32, bytes: u64) {
    let key = DeviceKey {
        tgid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        start_ticks: process_start_ticks(),
        class,
        user_stack_id: stack.user_stack_id,
        dev,
        java_stack_hash: stack.java_stack_hash,
        java_leaf: stack.java_leaf,
    };
    let map = if buffer_of(stack.tag) == 0 { &DEVICE_BYTES_0 } else { &DEVICE_BYTES_1 };
    if let Some(sum) = map.get_ptr_mut(key) {
        // SAFETY: the key holds the thread, which runs on one CPU at a time, and this program
        // ends before it returns from its system call: one writer.
        unsafe { *sum += bytes };
    } else if map.insert(key, bytes, BPF_NOEXIST).is_err() {
        count_drop(DROP_DEVICE_BYTES_MAP_FULL);
    }
}
