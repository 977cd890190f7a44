#!/usr/bin/env python3
"""Per-layer side by side: each nnfuse node of a model beside the ONNX Runtime
node(s) that compute the same thing, in the same run, so a model-level gap can
be traced to layers.

Runs `nnfuse profile` and an onnxruntime session with profiling on the same
model and thread count, alternately (A B A B, --rounds times), and matches
nodes by name: a fused nnfuse node lists the original nodes it replaced
(`fused_from`); an ORT node is named after an original node, or after the
output of the last node it fused ("<node>_output_0[_nchwc]"), or after an
original node plus a fusion tag ("<node>/QuickGeluFusion/"). ORT's layout
reorders (ReorderInput/ReorderOutput) match no nnfuse node: they are listed
as ORT-only rows, because they are part of what ORT pays for its layout.

Per-node times are medians over all profiled runs. Rows are sorted by what
nnfuse loses (nnf - ORT, ms), largest first.

Usage: .venv/bin/python bench/layers.py MODEL [--build build] [--threads 1]
       [--iterations 20] [--rounds 2] [--top 30] [--filter SUBSTR]
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile


def nnf_profile(build, model, threads, iterations, out):
    subprocess.run([os.path.join(build, "nnfuse"), "profile", model, "--threads", str(threads),
                    "--iterations", str(iterations), "--warmup", "3", "--top", "0", "-o", out],
                   check=True, capture_output=True)
    trace = json.load(open(out))
    events = trace if isinstance(trace, list) else trace["traceEvents"]
    return [e for e in events if e.get("cat") == "Node"]


def ort_profile(model, threads, iterations, prefix):
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_profiling = True
    so.profile_file_prefix = prefix
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if "float" in i.type:
            feed[i.name] = rng.uniform(-1, 1, shape).astype(np.float32)
        else:
            feed[i.name] = np.ones(shape, np.int64)
    for _ in range(iterations + 3):
        sess.run(None, feed)
    path = sess.end_profiling()
    events = json.load(open(path))
    os.unlink(path)
    # drop the warm-up runs: each run's node events follow its model_run event
    runs = [e for e in events if e.get("cat") == "Session" and e["name"] == "model_run"]
    start = runs[3]["ts"] if len(runs) > 3 else 0
    return [e for e in events
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and e["ts"] >= start]


def ort_origin(name):
    """The original node an ORT node is named after."""
    base = name[: -len("_kernel_time")]
    for suffix in ("_nchwc", "_output_0"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--filter", default=None)
    args = ap.parse_args()

    nnf_times = collections.defaultdict(list)  # node -> per-run ms
    nnf_info = {}
    owner = {}  # original node name -> nnfuse node
    ort_times = collections.defaultdict(list)
    ort_ops = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for e in nnf_profile(args.build, args.model, args.threads, args.iterations,
                                 os.path.join(tmp, "trace.json")):
                a = e["args"]
                nnf_times[e["name"]].append(e["dur"] / 1e3)
                nnf_info[e["name"]] = (a.get("op_name", ""), a.get("kernel", ""),
                                       a.get("output_type_shape", [{}])[0])
                for orig in a.get("fused_from", [e["name"]]):
                    owner[orig] = e["name"]
                owner[e["name"]] = e["name"]
            for e in ort_profile(args.model, args.threads, args.iterations, os.path.join(tmp, f"ort{r}")):
                ort_times[e["name"]].append(e["dur"] / 1e3)
                ort_ops[e["name"]] = e["args"].get("op_name", "")

    # per-run sums of the ORT nodes matched to each nnfuse node
    per_node_ort = collections.defaultdict(float)
    ort_only = {}
    for name, times in ort_times.items():
        med = statistics.median(times)
        base = ort_origin(name)
        # ORT's own fusions name a node after an original one plus a tag:
        # ".../act/Mul/QuickGeluFusion/" is the SiLU of ".../act/Mul"
        parent = base.rstrip("/").rsplit("/", 1)[0]
        target = owner.get(base) or owner.get(name[: -len("_kernel_time")]) or owner.get(parent)
        if target:
            per_node_ort[target] += med
        else:
            ort_only[name[: -len("_kernel_time")]] = (ort_ops[name], med)

    rows = []
    for name, times in nnf_times.items():
        if args.filter and args.filter not in name:
            continue
        op, kernel, shape = nnf_info[name]
        n = statistics.median(times)
        o = per_node_ort.get(name)
        rows.append((name, op, kernel, json.dumps(list(shape.values())[0]) if shape else "", n, o))
    for name, (op, med) in ort_only.items():
        if not args.filter or args.filter in name:
            rows.append((name, op, "(ORT only)", "", 0.0, med))
    rows.sort(key=lambda r: -(r[4] - (r[5] or 0.0)))
    total_n = sum(statistics.median(t) for t in nnf_times.values())
    total_o = sum(statistics.median(t) for t in ort_times.values())
    print(f"# {args.model}, {args.threads} thread(s), {args.rounds} rounds x {args.iterations} runs, "
          f"node medians: nnfuse {total_n:.3f} ms, ORT {total_o:.3f} ms (sum of nodes)")
    print(f"{'node':52s} {'op':14s} {'kernel':30s} {'output':22s} {'nnf ms':>8s} {'ORT ms':>8s} {'ORT/nnf':>7s}")
    for name, op, kernel, shape, n, o in rows[: args.top if args.top else None]:
        ratio = f"{o / n:7.2f}" if o and n else "      -"
        ostr = f"{o:8.3f}" if o is not None else "       -"
        print(f"{name[-52:]:52s} {op[:14]:14s} {kernel[:30]:30s} {shape[:22]:22s} {n:8.3f} {ostr} {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
