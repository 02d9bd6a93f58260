#!/usr/bin/env python3
"""A/B of the sampler's and sched_switch's ns/run (bpf_stats): fresh Throughput JVM (2 threads, no FP unless FP=1), profiler
attached 0.3 s after start, bpf_stats from t=2.3 s to t=2.3+W s (W=6 by default, like the bench window).
usage: tests/scripts/sampler-ab.py <rounds> <binA> <binB> ... (as root, after `cargo xtask test` built target/java)
Environment: FP=1 runs the JVM with -XX:+PreserveFramePointer; W sets the window (s); MODE=--all profiles the host."""
import json, os, statistics, subprocess, sys, time
rounds = int(sys.argv[1]); bins = sys.argv[2:]
W = float(os.environ.get("W", "6")); MODE = os.environ.get("MODE", "--pid")
subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"])
flag = "-XX:+PreserveFramePointer" if os.environ.get("FP") == "1" else "-XX:-PreserveFramePointer"
def stats(pid, names=("joular_sample", "joular_switch")):
    ids = set()
    for f in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            for l in open(f"/proc/{pid}/fdinfo/{f}"):
                if l.startswith("prog_id:"): ids.add(int(l.split()[1]))
        except OSError: pass
    out = {}
    for p in json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout):
        if p["id"] in ids and p.get("name", "").startswith(names): out[p["name"][:13]] = (p.get("run_time_ns", 0), p.get("run_cnt", 0))
    return out
res = {b: ([], []) for b in bins}
for r in range(rounds):
    order = bins if r % 2 == 0 else bins[::-1]
    for b in order:
        jvm = subprocess.Popen(["java", flag, "-cp", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/java"), "Throughput", str(int(W + 3)), "2", "2"], stdout=subprocess.DEVNULL)
        t0 = time.time(); time.sleep(0.3)
        args = [b, MODE] + ([str(jvm.pid)] if MODE == "--pid" else []) + ["--output", "/tmp/ab-out", "--duration", str(int(W + 3))]
        prof = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(max(0, 2.3 - (time.time() - t0))); a = stats(prof.pid)
        time.sleep(W); z = stats(prof.pid)
        jvm.wait(); prof.send_signal(2); prof.wait()
        for i, k in enumerate(("joular_sample", "joular_switch")):
            if k in a and k in z:
                res[b][i].append((z[k][0] - a[k][0]) / max(1, z[k][1] - a[k][1]))
        print(f"round {r} {b}: " + " ".join(f"{v[-1]:.0f}" for v in res[b] if v), flush=True)
for b in bins:
    s, w = res[b]
    print(f"{b}: sampler median {statistics.median(s):.0f} {sorted(round(x) for x in s)}; switch median {statistics.median(w) if w else 0:.0f}")
