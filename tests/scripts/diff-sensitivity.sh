#!/usr/bin/env bash
# The smallest regression `joular-ebpf diff` flags (issue 27): DiffWork's BASE build with its
# `hash` method (22% of the process) made LEVEL% as costly (110, 125, 150), 5 runs of each,
# recorded with the model energy source; then BASE against each level with 1, 3 and 5 runs a
# side (5, 5 and 1 trials: the runs are taken in turn), counting the trials where hash is
# flagged, and printing any other method flagged (there should be none).
# Usage (as root, after `cargo xtask test`): tests/scripts/diff-sensitivity.sh [FREQ_HZ]
set -uo pipefail
FREQ=${1:-100}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/target/release/joular-ebpf
CP=$ROOT/target/java/diff-base
M=$(mktemp -d /var/tmp/diff-sensitivity.XXXXXX)
rec() { # side run-index hash-percent
  "$BIN" record --energy-source model --interval 0.25 --frequency "$FREQ" --output "$M/$1/run-$2" -- \
    java -XX:+PreserveFramePointer -XX:CompileCommand=quiet -XX:CompileCommand=dontinline,DiffWork::* \
    -cp "$CP" DiffWork 3000 "$3" >/dev/null 2>&1 || echo "record $1 $2 failed"
}
for i in 0 1 2 3 4; do
  rec base "$i" 100
  for lvl in 110 125 150; do rec "p$lvl" "$i" "$lvl"; done
done
sets() { # label side first count: copies runs first..first+count-1 (mod 5) into a set
  local d=$M/sets/$1-$3-$4
  rm -rf "$d"; mkdir -p "$d"
  for ((j = $3; j < $3 + $4; j++)); do cp -r "$M/$2/run-$((j % 5))" "$d/run-$j"; done
  echo "$d"
}
for lvl in 110 125 150; do
  for n in 1 3 5; do
    hits=0 trials=0
    for first in 0 1 2 3 4; do
      [ "$n" -eq 5 ] && [ "$first" -gt 0 ] && break
      b=$(sets b base "$first" "$n"); nw=$(sets "n$lvl" "p$lvl" "$first" "$n")
      out=$("$BIN" diff "$b/run-*" "$nw/run-*" --no-files 2>&1)
      trials=$((trials + 1))
      echo "$out" | grep -qE "MORE +DiffWork.hash" && hits=$((hits + 1))
      echo "$out" | grep -E "(MORE|less) +DiffWork\.(parse|render)" | sed "s/^/  other method flagged: /"
    done
    echo "hash +$((lvl - 100))%, $n run(s) a side, $FREQ Hz: flagged in $hits of $trials"
  done
done
rm -rf "$M"
