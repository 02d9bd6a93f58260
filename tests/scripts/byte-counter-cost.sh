#!/usr/bin/env bash
# The byte counters' cost per system call (issue 26): a Python process sends 64-byte messages
# over 127.0.0.1 at up to 100,000 a second for 16 s, profiled with --pid --devices
# cpu,network,disk; prints run_cnt, runs per second and ns per run of joular_sys_exit (and of
# the sampler) from kernel.bpf_stats_enabled over a 5 s window, and the messages actually sent.
# Usage (as root, after `cargo xtask test`): tests/scripts/byte-counter-cost.sh [BIN]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-$ROOT/target/release/joular-ebpf}
OUT=$(mktemp -d /var/tmp/byte-counter-cost.XXXXXX)
sysctl -qw kernel.bpf_stats_enabled=1
python3 - <<'PY' &
import socket, threading, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
port = srv.getsockname()[1]
def sink():
    c, _ = srv.accept()
    while c.recv(1 << 16): pass
threading.Thread(target=sink, daemon=True).start()
s = socket.create_connection(("127.0.0.1", port))
msg = b"x" * 64
end = time.time() + 16; n = 0
while time.time() < end:
    t0 = time.time()
    for _ in range(1000): s.send(msg)
    n += 1000
    d = 0.01 - (time.time() - t0)
    if d > 0: time.sleep(d)
print("sent", n, "messages,", n / 16, "per s")
PY
PY=$!
sleep 1
"$BIN" --pid "$PY" --devices cpu,network,disk --duration 12 --output "$OUT/results" >/dev/null 2>&1 &
PROF=$!
sleep 5
bpftool prog show -j > "$OUT/before.json"
sleep 5
bpftool prog show -j > "$OUT/after.json"
python3 - "$OUT" <<'PY'
import json, sys
d = sys.argv[1]
before = {p["id"]: p for p in json.load(open(f"{d}/before.json"))}
for p in json.load(open(f"{d}/after.json")):
    if p.get("name") in ("joular_sys_exit", "joular_sample") and p["id"] in before:
        runs = p.get("run_cnt", 0) - before[p["id"]].get("run_cnt", 0)
        ns = p.get("run_time_ns", 0) - before[p["id"]].get("run_time_ns", 0)
        if runs:
            print(f"{p['name']}: {runs} runs, {runs / 5:.0f} per s, {ns / runs:.0f} ns/run")
PY
wait "$PROF"; wait "$PY"
rm -rf "$OUT"
