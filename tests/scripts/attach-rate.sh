#!/usr/bin/env bash
# How often the attach client fails to get a perf map out of a JVM (issue 10: with no jcmd
# fallback left, the attach client alone must be good enough). For each kind of JVM, starts
# ROUNDS fresh fixture JVMs, profiles each for 2 s and counts those whose samples got Java method
# names (which needs a successful Compiler.perfmap over attach).
# Usage (as root, after `cargo xtask test` built things): tests/scripts/attach-rate.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-10}
BIN=$PWD/target/release/joular-ebpf
CLASSES=$(mktemp -d /var/tmp/attach-rate.XXXXXX)
chmod 755 "$CLASSES"
cp target/java/MethodSplit.class "$CLASSES/"
trap 'rm -rf "$CLASSES"' EXIT

one() { # $1 = kind; prints 1 if Java names were resolved
  local kind=$1 out pid
  out=$(mktemp -d)
  case $kind in
    root)   java -XX:+PreserveFramePointer -cp "$CLASSES" MethodSplit 30 > "$out/java" & ;;
    nobody) (cd "$CLASSES" && setpriv --reuid=65534 --regid=65534 --clear-groups java -XX:+PreserveFramePointer -cp "$CLASSES" MethodSplit 30 > "$out/java") & ;;
    xrs)    java -Xrs -XX:+PreserveFramePointer -cp "$CLASSES" MethodSplit 30 > "$out/java" & ;;
  esac
  until grep -qs ready "$out/java"; do sleep 0.05; done
  pid=$(awk '/ready/ {print $2}' "$out/java")
  "$BIN" --pid "$pid" --duration 2 --energy-source model --json "$out/c.jsonl" --output "$out/r" > /dev/null 2> "$out/err" || true
  kill "$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  if grep -q '"kind":"java_jit"' "$out/c.jsonl" 2>/dev/null; then echo 1; else echo 0; sed 's/^/    /' "$out/err" >&2; fi
  rm -rf "$out"
}

for kind in root nobody xrs; do
  ok=0
  for _ in $(seq "$ROUNDS"); do ok=$((ok + $(one "$kind"))); done
  echo "$kind: $ok/$ROUNDS JVMs attached (Java names resolved)"
done
