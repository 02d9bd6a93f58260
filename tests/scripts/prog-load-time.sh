#!/usr/bin/env bash
# Time the kernel spends loading (verifying) each eBPF program of a profiler build: the
# BPF_PROG_LOAD syscalls of a 1 s profile of a sleeping process, timed by strace, three runs.
# Usage (as root): tests/scripts/prog-load-time.sh <bin>
set -uo pipefail
BIN=$1
out=$(mktemp -d)
sleep 120 & target=$!
for run in 1 2 3; do
  strace -f -e trace=bpf -T -o "$out/trace" "$BIN" --pid $target --duration 1 --output "$out/res" > /dev/null 2>&1
  python3 - "$out/trace" $run <<'PY'
import re, sys
loads = []
for line in open(sys.argv[1]):
    if "BPF_PROG_LOAD" in line:
        t, n = re.search(r"<([\d.]+)>", line), re.search(r'prog_name="(\w+)"', line)
        if t:
            loads.append((float(t.group(1)), n.group(1) if n else "?"))
loads.sort(reverse=True)
print(f"run {sys.argv[2]}: {sum(t for t, _ in loads):.3f} s in all; slowest: "
      + ", ".join(f"{n} {t:.3f} s" for t, n in loads[:3]))
PY
done
kill $target
rm -rf "$out"
