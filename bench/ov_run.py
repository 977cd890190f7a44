#!/usr/bin/env python3
"""OpenVINO, run as a separate process for bench/compare.py (--peers ...,openvino).

    ov_run.py bench MODEL [--inputs DIR] [--threads N] [--warmup N]
                    [--iterations N] [--seed N] [--json FILE]
        The same input, timing loop and JSON keys as `ort_run.py bench`
        (first_ms = reading and compiling the model + first run, load_ms =
        reading and compiling). OpenVINO's CPU plugin as a latency user sets
        it: PERFORMANCE_HINT LATENCY, one stream, INFERENCE_NUM_THREADS N (0:
        OpenVINO's default), no model cache (so the first inference compiles,
        as ORT's creates its session), and INFERENCE_PRECISION_HINT f32: on a
        CPU with bf16 or AMX units OpenVINO would otherwise run the model in
        bf16, which is not the f32 both other engines compute.

BENCHMARKS.md: "Others worth a row when the first beats ORT: OpenVINO".
Install it with `pip install -r requirements.txt` (the project venv has it).
"""

from __future__ import annotations

import argparse
import sys

import ort_run


def open_model(model, threads: int):
    """A function running one inference of the model (a path, or an ONNX file's bytes) on a feeds
    dict; at one thread OpenVINO runs the request on the calling thread (thread CPU time holds)."""
    import openvino as ov

    config = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "INFERENCE_PRECISION_HINT": "f32"}
    if threads > 0:
        config["INFERENCE_NUM_THREADS"] = threads
    core = ov.Core()
    if isinstance(model, (bytes, bytearray)):
        model = core.read_model(bytes(model), b"")
    return core.compile_model(model, "CPU", config).create_infer_request().infer


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    ort_run.bench_parser(sub, "INFERENCE_NUM_THREADS (0 = OpenVINO's default)")
    args = ap.parse_args(argv)
    if args.iterations < 1:
        ap.error("--iterations must be >= 1")
    try:
        import openvino
    except ImportError:
        print("ov_run: openvino is not installed (pip install -r requirements.txt)", file=sys.stderr)
        return 2
    return ort_run.time_engine(args, "openvino", openvino.__version__, open_model)


if __name__ == "__main__":
    sys.exit(main())
