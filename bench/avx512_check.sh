#!/usr/bin/env bash
# The AVX-512 tier on a machine that has it: the tests on the real instructions
# (the CI machines have AVX2 only, where `make test-avx512` runs the tier on
# SIMDe's emulation), then its speed beside the AVX2 tier and ONNX Runtime.
#
#   bench/avx512_check.sh [BIN] [RESULTS]
#
# BIN holds a Release build (libnnfuse.so, nnfuse, peak, bench_kernels, the
# test_* programs and mutate; default build/); RESULTS is where the logs and
# tables go (default out/avx512). THREADS (default 8) is the thread count of
# the last scoreboard. PYTHON (default python3) must have onnx,
# onnxruntime, numpy and pytest. Steps, each under its own time limit so that
# one stuck step costs only itself:
#   1. the CPU and the tier the library picks;
#   2. every C test (each forces every tier the CPU has: scalar, avx2, avx512);
#   3. the Python suite, file by file in parallel, the library on its default
#      tier (avx512 here): operators and zoo models against ONNX Runtime;
#   4. measured peak per tier, the kernel bench (NCHWc path) with NNF_ISA=avx512
#      and =avx2, ORT's single-op models beside each;
#   5. the scoreboard (bench/compare.py) at 1 thread with each tier forced, and
#      at THREADS threads on the AVX-512 tier.
# A summary of every step's status ends the output.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$(cd "${1:-$ROOT/build}" && pwd)
RES=${2:-$ROOT/out/avx512}
PY=${PYTHON:-python3}
THREADS=${THREADS:-8} # the multi-thread scoreboard's
mkdir -p "$RES"
cd "$ROOT" || exit 1
declare -a SUMMARY

step() { # name limit-seconds command...
    local name=$1 limit=$2 t0=$SECONDS rc
    shift 2
    echo "=== $name"
    timeout "$limit" bash -c "$*" > "$RES/$name.log" 2>&1
    rc=$?
    tail -n 25 "$RES/$name.log"
    SUMMARY+=("$(printf '%-14s rc=%-3s %4ss' "$name" "$rc" $((SECONDS - t0)))")
}

cpu() {
    lscpu | grep -E 'Model name|^CPU[(]s[)]|Thread|Core|Socket|cache|MHz'
    grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep avx512 | tr '\n' ' '
    echo
    "$BIN/peak" --json # its "isa" is the tier the library picks
}

c_tests() {
    local fail=0 t
    for t in "$BIN"/test_*; do
        (cd "$RES" && timeout 120 "$t" > "ctest_$(basename "$t").log" 2>&1)
        local rc=$?
        echo "$(basename "$t") rc=$rc"
        [ $rc -eq 0 ] || { fail=1; tail -n 20 "$RES/ctest_$(basename "$t").log"; }
    done
    for s in cnn shapes; do
        "$BIN/mutate" "tests/fuzz/seeds/$s.onnx" 400 1 > /dev/null 2>&1
        echo "mutate_$s rc=$?"
    done
    return $fail
}

py_tests() {
    export NNF_LIB=$BIN/libnnfuse.so NNF_BIN=$BIN/nnfuse NNF_PYTHON=$PY
    export NNF_ORT_SCRIPT=$ROOT/bench/ort_run.py
    ls tests/py/test_*.py | xargs -P 8 -I{} sh -c "$PY -m pytest -q -p no:cacheprovider {} \
        > $RES/pyt_\$(basename {} .py).log 2>&1; echo \"{} rc=\$?\""
    grep -h -E '^(FAILED|ERROR)|passed|failed' "$RES"/pyt_*.log
    ! grep -q -E '^(FAILED|ERROR)' "$RES"/pyt_*.log
}

zoo() {
    $PY zoo/make_zoo.py --out zoo/models --only resnet50,mobilenetv2,yolov5s,bert-base
}

kernels() { # tier
    NNF_ISA=$1 $PY bench/kernels.py --build "$BIN" --nchwc --rounds 2 --threads 1
}

scoreboard() { # tier threads
    NNF_ISA=$1 $PY bench/compare.py --nnfuse "$BIN/nnfuse" --python "$PY" --threads "$2" \
        --rounds 2 --iterations 10 --no-o0 --out "$RES/scoreboard_$1_t$2.md"
}

export ROOT BIN RES PY THREADS
export -f cpu c_tests py_tests zoo kernels scoreboard
step cpu 30 cpu
zoo > "$RES/zoo.log" 2>&1 &
ZOO=$!
step c_tests 240 c_tests
step py_tests 300 py_tests
step kernels_avx512 240 kernels avx512
step kernels_avx2 240 kernels avx2
wait $ZOO
step scoreboard_avx512 300 scoreboard avx512 1
step scoreboard_avx2 300 scoreboard avx2 1
step scoreboard_mt 300 scoreboard avx512 "$THREADS"
echo "=== summary"
printf '%s\n' "${SUMMARY[@]}"
