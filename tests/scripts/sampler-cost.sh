#!/usr/bin/env bash
# The sampler's cost per sample from kernel.bpf_stats_enabled (run_time_ns / run_cnt of the
# profiler's own joular_sample, found through its file descriptors, so other profilers running
# at the same time do not count). Prints ns per run, the cost of runs on no target (profiling a
# sleeping process), and an estimate per target sample:
#   (run_time - non-target runs * idle ns/run) / target samples.
# Usage (as root, after `cargo xtask test`): tests/scripts/sampler-cost.sh <bin> <class> [jvm flags]
# The JVM runs with -XX:+PreserveFramePointer (frame-pointer unwinder); NO_FRAME_POINTERS=1
# starts it without (HotSpot unwinder).
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=$1 CLASS=$2
shift 2
SECS=10
sysctl -q kernel.bpf_stats_enabled=1

stats() { # $1 = profiler pid: "run_time_ns run_cnt" of its sampler
  local ids
  ids=$(grep -h "^prog_id:" /proc/$1/fdinfo/* 2>/dev/null | awk '{print $2}' | sort -u | tr '\n' ' ')
  [ -z "$ids" ] && return
  bpftool -j prog show | python3 -c "
import json, sys
ids = set(map(int, '$ids'.split()))
for p in json.load(sys.stdin):
    if p.get('name') == 'joular_sample' and p['id'] in ids:
        print(p.get('run_time_ns', 0), p.get('run_cnt', 0)); break"
}

window() { # $1 = target pid, $2 = json file: "run_time_ns run_cnt" over SECS seconds
  "$BIN" --pid $1 --duration $((SECS + 1)) --json "$2" --output "$(dirname "$2")/res" > /dev/null 2>&1 &
  local prof=$! a b
  for _ in $(seq 400); do a=$(stats $prof); [ -n "$a" ] && break; sleep 0.05; done
  sleep $SECS
  b=$(stats $prof)
  wait $prof
  python3 -c "a=list(map(int,'$a'.split())); b=list(map(int,'$b'.split())); print(b[0]-a[0], b[1]-a[1])"
}

out=$(mktemp -d)
sleep 600 & idle=$!
read -r idle_ns idle_runs < <(window $idle "$out/idle.jsonl")
kill $idle
FP_FLAG=-XX:+PreserveFramePointer
[ "${NO_FRAME_POINTERS:-0}" = 1 ] && FP_FLAG=-XX:-PreserveFramePointer
java $FP_FLAG "$@" -cp target/java "$CLASS" 600 > "$out/java" &
jvm=$!
for _ in $(seq 25); do grep -Eq "ready|measuring" "$out/java" && break; sleep 0.2; done
sleep 2
read -r run_ns runs < <(window $jvm "$out/r.jsonl")
kill $jvm
python3 - "$out/r.jsonl" $SECS $idle_ns $idle_runs $run_ns $runs "$CLASS $*" <<'PY'
import json, sys
path, secs, idle_ns, idle_runs, run_ns, runs, label = sys.argv[1], *map(int, sys.argv[2:7]), sys.argv[7]
samples = sum(t["samples"] for line in open(path) for t in json.loads(line)["threads"])
samples = samples * secs / (secs + 1)  # the profile ran one second longer than the window
idle = idle_ns / max(idle_runs, 1)
per_target = (run_ns - (runs - samples) * idle) / max(samples, 1)
print(f"{label}: {runs} runs, {run_ns/max(runs,1):.0f} ns/run; idle {idle:.0f} ns/run; "
      f"{samples:.0f} target samples; ~{per_target:.0f} ns per target sample")
PY
rm -rf "$out"
