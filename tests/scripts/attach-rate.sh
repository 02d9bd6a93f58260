#!/usr/bin/env bash
# How often the attach client fails to get a perf map out of a JVM (issue 10: with no jcmd
# fallback left, the attach client alone must be good enough). For each kind of JVM, starts
# ROUNDS fresh fixture JVMs and profiles each for 2 s, then counts
#   - attach: the JVM wrote its perf map (Compiler.perfmap sent over the attach socket worked),
#   - names:  its samples got JIT-compiled Java method names (perf map or HotSpot introspection).
# Kinds: root, nobody (another user's JVM), container (nobody's JVM as PID 1 of a PID + mount
# namespace with its own /tmp), xrs (-Xrs: no SIGQUIT handler; HotSpot then starts its attach
# listener at start-up, so the profiler connects without a signal).
# Usage (as root, after `cargo xtask test` built things): tests/scripts/attach-rate.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-10}
BIN=$PWD/target/release/joular-ebpf
CLASSES=$(mktemp -d /var/tmp/attach-rate.XXXXXX)
chmod 755 "$CLASSES"
cp target/java/MethodSplit.class "$CLASSES/"
trap 'rm -rf "$CLASSES"' EXIT
JAVA=(java -XX:+PreserveFramePointer -cp "$CLASSES")
AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

one() { # $1 = kind; prints "<attached> <named>" (each 0 or 1)
  local kind=$1 out pid tag map attached=0 named=0
  out=$(mktemp -d)
  tag=$RANDOM$RANDOM
  case $kind in
    root)   "${JAVA[@]}" MethodSplit 30 > "$out/java" & ;;
    nobody) (cd "$CLASSES" && "${AS_NOBODY[@]}" "${JAVA[@]}" MethodSplit 30 > "$out/java") & ;;
    xrs)    "${JAVA[@]}" -Xrs MethodSplit 30 > "$out/java" & ;;
    container)
      unshare --pid --mount --fork --kill-child --propagation private sh -c \
        "mount -t tmpfs -o mode=1777 tmpfs /tmp && cd /tmp && exec ${AS_NOBODY[*]} java -XX:+PreserveFramePointer -Djoular.tag=$tag -cp $CLASSES MethodSplit 30" > "$out/java" & ;;
  esac
  until grep -qs ready "$out/java"; do sleep 0.05; done
  if [ "$kind" = container ]; then
    # The JVM itself, not the unshare/sh around it (their command lines hold the tag too).
    for p in $(pgrep -f "joular.tag=$tag"); do [ "$(cat "/proc/$p/comm")" = java ] && pid=$p; done
  else
    pid=$(awk '/ready/ {print $2}' "$out/java")
  fi
  map=/proc/$pid/root/tmp/perf-$(awk '/^NSpid:/ {print $NF}' "/proc/$pid/status").map
  "$BIN" --pid "$pid" --duration 2 --energy-source model --json "$out/c.jsonl" --output "$out/r" > /dev/null 2> "$out/err" || true
  [ -s "$map" ] && attached=1
  grep -q '"kind":"java_jit"' "$out/c.jsonl" 2>/dev/null && named=1
  [ $attached = 0 ] && grep -v '^\[cycle' "$out/err" | sed "s/^/    $kind: /" >&2
  rm -f "$map"
  kill "$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$out"
  echo "$attached $named"
}

for kind in root nobody container xrs; do
  attached=0 named=0
  for _ in $(seq "$ROUNDS"); do
    read -r a n < <(one "$kind")
    attached=$((attached + a)) named=$((named + n))
  done
  echo "$kind: attach $attached/$ROUNDS (failures $((ROUNDS - attached))), Java names $named/$ROUNDS"
done
