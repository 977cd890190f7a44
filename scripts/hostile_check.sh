#!/usr/bin/env bash
# Hostile-input check: N mutated copies (bytes flipped, truncated, lengths
# altered, spans duplicated) of each small zoo model, and of its compiled .nnf
# file (made by the same build, so its packed blocks are replayed), go through the public
# load → session → run path of an AddressSanitizer + UBSan build. Every copy
# must give a clean error or a correct run; a crash or sanitizer report fails.
# Usage: scripts/hostile_check.sh [N per model, default 250]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-250}
PY=${PY:-.venv/bin/python}
cmake -S . -B build-asan -DNNF_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j "$(nproc)" --target mutate nnfuse_cli >/dev/null
mkdir -p build/zoo/tiny
$PY - <<'PY'
import sys
sys.path.insert(0, "zoo")
import zoocheck
zoocheck.ensure_zoo("build/zoo/tiny", zoocheck.TINY)  # every small zoo model
PY
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
total=0
seed=1
for onnx in build/zoo/tiny/*_tiny.onnx; do
  nnf=build-asan/$(basename "$onnx" .onnx).nnf
  build-asan/nnfuse compile "$onnx" -o "$nnf" >/dev/null
  for m in "$onnx" "$nnf"; do
    echo "== $m: $N mutated copies"
    NNF_MUTATE_STRICT=1 build-asan/mutate "$m" "$N" "$seed"
    total=$((total + N))
    seed=$((seed + 1))
  done
done
echo "$total mutated models: no crash, no sanitizer report"
