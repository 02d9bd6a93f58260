#!/usr/bin/env bash
# What the verifier spent on each of the profiler's eBPF programs: bpf_prog_info's
# verified_insns (Linux 5.16+) and the translated size, read through the profiler's own
# program fds (pidfd_getfd), so other eBPF users at the same time do not count. The load time
# of the profiler follows verified_insns (the sampler's Java walk is most of it).
# Usage (as root): tests/scripts/verified-insns.sh <bin>
set -uo pipefail
BIN=$1
out=$(mktemp -d)
sleep 60 & target=$!
"$BIN" --pid $target --duration 30 --output "$out/res" > /dev/null 2>&1 &
prof=$!
# Loading is over once the sampler (BPF_PROG_TYPE_PERF_EVENT = 7, loaded last) has an fd.
for _ in $(seq 300); do
  grep -qsx "prog_type:.7" /proc/$prof/fdinfo/* && break
  sleep 0.1
done
python3 - $prof <<'PY'
import ctypes, os, re, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
class Attr(ctypes.Structure):
    _fields_ = [("bpf_fd", ctypes.c_uint32), ("info_len", ctypes.c_uint32), ("info", ctypes.c_uint64)]
SYS_BPF, SYS_PIDFD_OPEN, SYS_PIDFD_GETFD, BPF_OBJ_GET_INFO_BY_FD = 321, 434, 438, 15
pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
for fd in sorted(os.listdir(f"/proc/{pid}/fdinfo"), key=int):
    text = open(f"/proc/{pid}/fdinfo/{fd}").read()
    if not re.search(r"^prog_id:", text, re.M) or "link_type" in text:
        continue
    mine = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(fd), 0)
    buf = (ctypes.c_uint8 * 512)()
    attr = Attr(mine, 512, ctypes.addressof(buf))
    libc.syscall(SYS_BPF, BPF_OBJ_GET_INFO_BY_FD, ctypes.byref(attr), ctypes.sizeof(attr))
    info = bytes(buf)
    # struct bpf_prog_info: xlated_prog_len at 20, name[16] at 64, verified_insns at 216.
    name = info[64:80].split(bytes(1))[0].decode()
    print("%-18s xlated %6d B  verified_insns %d" % (name, struct.unpack_from("I", info, 20)[0], struct.unpack_from("I", info, 216)[0]))
PY
kill $prof $target 2>/dev/null
wait $prof 2>/dev/null
rm -rf "$out"
