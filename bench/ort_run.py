#!/usr/bin/env python3
"""ONNX Runtime, run as a separate process for nnfuse's tools.

    ort_run.py dump MODEL --inputs DIR --out DIR
        Every value the graph computes becomes a graph output; one run on the
        inputs in --inputs (DIR/<safe name>.npy per graph input) writes every
        tensor to --out as <safe name>.npy. `nnfuse compare --reference
        onnxruntime` runs this and compares tensor by tensor.

    ort_run.py bench MODEL [--inputs DIR] [--threads N] [--warmup N]
                     [--iterations N] [--seed N] [--json FILE]
        The ORT side of bench/compare.py: same input (from --inputs, or the
        generator `nnfuse run` uses: floats uniform in [-1, 1), integers 0),
        intra_op_num_threads = N, ORT_ENABLE_ALL, warm-up, N timed runs; prints
        JSON with the keys of `nnfuse bench --json` (first_ms = session
        creation + first run, load_ms = session creation, peak RSS of this
        process: VmHWM, else getrusage).

Safe names follow CLI.md: characters outside [A-Za-z0-9._-] become '_'.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
import time

import numpy as np


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


_NP = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
       9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


def _uniform(n, state):
    """The generator of tools/nnfuse/common.c (splitmix64), so both engines
    see the same input: n floats uniform in [-1, 1) from splitmix64, vectorised: state advances
    by the golden gamma per draw, so draw k uses state0 + (k+1)·gamma."""
    mask = np.uint64((1 << 64) - 1)
    with np.errstate(over="ignore"):
        k = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(state) + k * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    vals = (z >> np.uint64(11)).astype(np.float64) * (2.0 ** -53) * 2.0 - 1.0
    new_state = (state + n * 0x9E3779B97F4A7C15) & int(mask)
    return vals, new_state


def make_inputs(model_path: str, inputs_dir: str | None, seed: int, shapes: dict | None = None):
    import onnx

    model = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    state = seed
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if inputs_dir:
            path = os.path.join(inputs_dir, safe_name(vi.name) + ".npy")
            if os.path.exists(path):
                feeds[vi.name] = np.load(path)
                continue
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        if shapes and vi.name in shapes:
            dims = shapes[vi.name]
        dtype = _NP.get(tt.elem_type, np.float32)
        n = int(np.prod(dims, dtype=np.int64)) if dims else 1
        if dtype in (np.float32, np.float64):
            vals, state = _uniform(n, state)
            feeds[vi.name] = vals.astype(dtype).reshape(dims)
        else:
            feeds[vi.name] = np.zeros(dims, dtype)
    return feeds


def expose_all(model_path: str):
    """The model with every node output added as a graph output (types from
    shape inference where known; ORT accepts untyped extra outputs)."""
    import onnx
    from onnx import shape_inference

    model = onnx.load(model_path)
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:  # a model ORT runs but onnx cannot infer still gets dumped
        inferred = model
    typed = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    present = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if not name or name in present:
                continue
            present.add(name)
            vi = onnx.ValueInfoProto()
            if name in typed:
                vi.CopyFrom(typed[name])
            else:
                vi.name = name
            model.graph.output.append(vi)
    return model


def session(model_bytes_or_path, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model_bytes_or_path, so, providers=["CPUExecutionProvider"])


def cmd_dump(args) -> int:
    model = expose_all(args.model)
    feeds = make_inputs(args.model, args.inputs, args.seed)
    sess = session(model.SerializeToString(), args.threads)
    names = [o.name for o in sess.get_outputs()]
    values = sess.run(names, feeds)
    os.makedirs(args.out, exist_ok=True)
    for name, value in zip(names, values):
        np.save(os.path.join(args.out, safe_name(name) + ".npy"), np.asarray(value))
    for name, value in feeds.items():
        path = os.path.join(args.out, safe_name(name) + ".npy")
        if not os.path.exists(path):
            np.save(path, value)
    print(f"ort_run: wrote {len(names)} tensors to {args.out}", file=sys.stderr)
    return 0


def peak_rss_mb() -> float:
    """VmHWM of this process image; getrusage's ru_maxrss survives execve and
    would report the peak of whatever process started us."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _percentile(sorted_vals, q):
    return float(np.percentile(np.asarray(sorted_vals), q * 100.0)) if sorted_vals else 0.0


def time_engine(args, engine: str, version: str, open_model) -> int:
    """The timing loop every peer's runner shares (ov_run.py too):
    open_model(model, threads) returns a function that runs one inference on
    the feeds; first_ms covers opening and the first run, load_ms opening."""
    shapes = {}
    for spec in args.input_shape or []:
        name, _, dims = spec.rpartition(":")
        shapes[name] = [int(d) for d in dims.split(",")]
    feeds = make_inputs(args.model, args.inputs, args.seed, shapes)
    t0 = time.perf_counter()
    run = open_model(args.model, args.threads)
    load_ms = (time.perf_counter() - t0) * 1e3
    run(feeds)
    first_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(args.warmup):
        run(feeds)
    lat = []
    loop0 = time.perf_counter()
    for _ in range(args.iterations):
        t = time.perf_counter()
        run(feeds)
        lat.append((time.perf_counter() - t) * 1e3)
    total = time.perf_counter() - loop0
    lat_sorted = sorted(lat)
    result = {
        "model": args.model,
        "engine": engine,
        "version": version,
        "threads": args.threads if args.threads > 0 else os.cpu_count(),
        "warmup": args.warmup,
        "count": len(lat),
        "first_ms": first_ms,
        "load_ms": load_ms,
        "latency_ms": {
            "min": lat_sorted[0], "mean": float(np.mean(lat)), "median": _percentile(lat_sorted, 0.5),
            "p90": _percentile(lat_sorted, 0.9), "p99": _percentile(lat_sorted, 0.99), "max": lat_sorted[-1],
        },
        "throughput": len(lat) / total if total > 0 else 0.0,
        "peak_rss_mb": peak_rss_mb(),
        "samples_ms": lat,
    }
    text = json.dumps(result)
    if args.json and args.json != "-":
        with open(args.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


def bench_parser(sub, threads_help: str):
    """The `bench` subcommand and its arguments, the same for every peer's runner."""
    b = sub.add_parser("bench", help="time the model like `nnfuse bench --json`")
    b.add_argument("model")
    b.add_argument("--inputs")
    b.add_argument("--threads", type=int, default=1, help=threads_help)
    b.add_argument("--warmup", type=int, default=5)
    b.add_argument("--iterations", type=int, default=20)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--input-shape", action="append", help="NAME:d0,d1,...")
    b.add_argument("--json")
    return b


def cmd_bench(args) -> int:
    def open_model(model, threads):
        sess = session(model, threads)
        return lambda feeds: sess.run(None, feeds)

    return time_engine(args, "onnxruntime", __import__("onnxruntime").__version__, open_model)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="write every intermediate tensor as .npy")
    d.add_argument("model")
    d.add_argument("--inputs", help="folder of <input>.npy (missing ones are generated)")
    d.add_argument("--out", required=True)
    d.add_argument("--threads", type=int, default=1)
    d.add_argument("--seed", type=int, default=0)
    bench_parser(sub, "intra_op_num_threads (0 = ORT's default: all cores)")
    args = ap.parse_args(argv)
    if args.cmd == "bench" and args.iterations < 1:
        ap.error("--iterations must be >= 1")
    return cmd_dump(args) if args.cmd == "dump" else cmd_bench(args)


if __name__ == "__main__":
    sys.exit(main())
