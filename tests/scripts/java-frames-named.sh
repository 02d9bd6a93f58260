#!/usr/bin/env bash
# Share of a busy Java thread's samples with every Java frame named (issue 12), for one or two
# profiler binaries side by side (e.g. one built from main and this one). A sample counts as
# named when it has a Java frame and no `Interpreter` or `[unknown JIT code]` frame.
# Usage (as root, after `cargo xtask test`):
#   tests/scripts/java-frames-named.sh <label> <java> <class> <thread> <leaf,methods|""> <bin>... [-- jvm flags]
# e.g. tests/scripts/java-frames-named.sh InlineSplit java InlineSplit inliner \
#        InlineSplit.left,InlineSplit.right /tmp/main-joular-ebpf target/release/joular-ebpf -- -Xint
set -uo pipefail
cd "$(dirname "$0")/../.."
LABEL=$1 JAVA=$2 CLASS=$3 THREAD=$4 LEAFS=$5
shift 5
BINS=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do BINS+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
for bin in "${BINS[@]}"; do
  out=$(mktemp -d)
  "$JAVA" -XX:+PreserveFramePointer "$@" -cp target/java "$CLASS" 60 > "$out/java" &
  jvm=$!
  for _ in $(seq 25); do grep -q ready "$out/java" && break; sleep 0.2; done
  sleep 2
  "$bin" --pid $jvm --duration 8 --json "$out/r.jsonl" --output "$out/res" > /dev/null 2>&1
  kill $jvm; wait $jvm 2>/dev/null
  printf '%s [%s] ' "$LABEL" "$bin"
  python3 - "$out/r.jsonl" "$THREAD" "$LEAFS" <<'PY'
import json, sys
thread, want = sys.argv[2], [w for w in sys.argv[3].split(",") if w]
java_kinds = ("java_jit", "java_inlined", "java_interpreted")
n = named = interp = unknown = leaf_ok = 0
for line in open(sys.argv[1]):
    for t in json.loads(line)["threads"]:
        if t["comm"] != thread:
            continue
        for s in t["stacks"]:
            k, frames = s["samples"], s["frames"]
            n += k
            has_unknown = any(f["name"] == "[unknown JIT code]" for f in frames)
            has_interp = any(f["name"] == "Interpreter" for f in frames)
            java = [f for f in frames if f["kind"] in java_kinds and f["name"] != "[unknown JIT code]"]
            unknown += k * has_unknown
            interp += k * has_interp
            named += k * bool(java and not has_unknown and not has_interp)
            if java and want and java[-1]["name"].split("(")[0].split(" ")[-1] in want:
                leaf_ok += k
n = max(n, 1)
out = f"{n} samples: every Java frame named {named/n*100:.1f}%, with Interpreter {interp/n*100:.1f}%, with [unknown JIT code] {unknown/n*100:.1f}%"
if want:
    out += f", leaf in {'/'.join(want)} {leaf_ok/n*100:.1f}%"
print(out)
PY
  rm -rf "$out"
done
