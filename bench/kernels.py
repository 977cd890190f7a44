#!/usr/bin/env python3
"""Kernel benchmark: nnfuse's GEMM/conv kernels beside ONNX Runtime and the
machine's measured peak.

Runs BUILD/peak --json and BUILD/bench_kernels --json, then times the same
shapes through onnxruntime as single-op models (MatMul with a constant B;
Conv with constant W and B followed by the layer's activation as the exporter
writes it: Relu, Clip(0, 6), Sigmoid+Mul for SiLU, the Erf chain for GELU),
with the same thread count. Prints one table; --json FILE writes the rows.

With one thread both engines are timed in thread CPU time (the bench tools
document why: shared machines); with more, in wall time. Case by case, the two
engines run alternately (nnfuse, ORT, nnfuse, ORT... --rounds times each, in
separate processes for nnfuse); the table gives the median of the rounds'
medians and the best single run, and "paired": the median over rounds of that
round's ORT median / nnfuse median (the two measured seconds apart, in the same
phase of a shared machine whose speed swings by a third over minutes).

By default nnfuse runs the very file ORT runs, through its whole engine
(bench_kernels --model: import, passes, the layout pass's NCHW <-> NCHWc8
reorders at the model's edges, plans), so both engines pay the same edges.
Single-op models pay reorders in and out of every blocked op, which a whole
model pays only at its edges: bench/layers.py gives the in-model comparison,
which is the one that decides model latency.

--kernels times nnfuse's NCHW kernels called directly (no engine, no reorders:
the kernels a conv runs when the layout pass leaves it in NCHW, and every
kernel on the scalar tier). --nchwc times the conv cases on the NCHWc8 blocked
kernels, as the layout pass picks them inside a model, with their input and
output already blocked (bench_kernels --nchwc): against ORT's single-op
models, which still pay their reorders, this column flatters nnfuse.

--openvino adds OpenVINO's time on the same single-op models (its CPU plugin in f32, as
bench/ov_run.py sets it up), in the same rounds: "OV/nnf" and its paired form.

Usage: .venv/bin/python bench/kernels.py [--build build] [--threads 1] [--rounds 3] [--json out.json] [--filter SUBSTR] [--kernels | --nchwc] [--openvino]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import ov_run  # beside this file; it imports openvino only when a model is opened


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def ort_model(case):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    nodes, inits = [], []
    act = case["act"]
    if case["kind"] == "gemm":
        m, n, k = case["m"], case["n"], case["k"]
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])
        b = rng.uniform(-0.5, 0.5, (k, n)).astype(np.float32)
        inits.append(onnx.numpy_helper.from_array(b, "B"))
        nodes.append(helper.make_node("MatMul", ["x", "B"], ["z"]))
        out_shape = [m, n]
        feed = {"x": rng.uniform(-0.5, 0.5, (m, k)).astype(np.float32)}
    elif case["kind"] == "convtranspose":
        c, h, w, oc, ks, s, p = (case[key] for key in ("c", "h", "w", "oc", "kernel_size", "stride", "pad"))
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, w])
        wt = rng.uniform(-0.5, 0.5, (c, oc, ks, ks)).astype(np.float32)
        inits += [onnx.numpy_helper.from_array(wt, "W"),
                  onnx.numpy_helper.from_array(rng.uniform(-0.5, 0.5, (oc,)).astype(np.float32), "Bc")]
        nodes.append(helper.make_node("ConvTranspose", ["x", "W", "Bc"], ["z"], kernel_shape=[ks, ks],
                                      strides=[s, s], pads=[p, p, p, p]))
        oh, ow = (h - 1) * s + ks - 2 * p, (w - 1) * s + ks - 2 * p
        out_shape = [1, oc, oh, ow]
        feed = {"x": rng.uniform(-0.5, 0.5, (1, c, h, w)).astype(np.float32)}
    else:
        c, h, w, oc, g, ks, s, p = (case[key] for key in ("c", "h", "w", "oc", "group", "kernel_size", "stride", "pad"))
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, w])
        wt = rng.uniform(-0.5, 0.5, (oc, c // g, ks, ks)).astype(np.float32)
        inits += [onnx.numpy_helper.from_array(wt, "W"),
                  onnx.numpy_helper.from_array(rng.uniform(-0.5, 0.5, (oc,)).astype(np.float32), "Bc")]
        nodes.append(helper.make_node("Conv", ["x", "W", "Bc"], ["z"], kernel_shape=[ks, ks], strides=[s, s],
                                      pads=[p, p, p, p], group=g))
        oh, ow = (h + 2 * p - ks) // s + 1, (w + 2 * p - ks) // s + 1
        out_shape = [1, oc, oh, ow]
        feed = {"x": rng.uniform(-0.5, 0.5, (1, c, h, w)).astype(np.float32)}
    inputs = [x]
    if case.get("res"):
        # the residual Add of a ResNet block, before the activation
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, out_shape))
        feed["r"] = rng.uniform(-0.5, 0.5, out_shape).astype(np.float32)
        nodes[-1].output[0] = "c"
        nodes.append(helper.make_node("Add", ["c", "r"], ["z"]))
    # activation as exported (nnf_act_kind values from src/ops/params.h)
    last = "z"
    if act == 1:
        nodes.append(helper.make_node("Relu", ["z"], ["y"]))
        last = "y"
    elif act == 2:
        inits += [onnx.numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  onnx.numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["z", "lo", "hi"], ["y"]))
        last = "y"
    elif act == 5:
        nodes += [helper.make_node("Sigmoid", ["z"], ["s"]), helper.make_node("Mul", ["z", "s"], ["y"])]
        last = "y"
    elif act == 9:
        inits += [onnx.numpy_helper.from_array(np.array(2 ** 0.5, np.float32), "r2"),
                  onnx.numpy_helper.from_array(np.array(1, np.float32), "one"),
                  onnx.numpy_helper.from_array(np.array(0.5, np.float32), "half")]
        nodes += [helper.make_node("Div", ["z", "r2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
                  helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["z", "a"], ["u"]),
                  helper.make_node("Mul", ["u", "half"], ["y"])]
        last = "y"
    y = helper.make_tensor_value_info(last, TensorProto.FLOAT, out_shape)
    graph = helper.make_graph(nodes, case["name"], inputs, [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString(), feed


def ort_runner(blob, threads):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    return lambda feed: sess.run(None, feed)


def ov_runner(blob, threads):
    """OpenVINO's CPU plugin as the scoreboard sets it up (bench/ov_run.py)."""
    return ov_run.open_model(blob, threads)


def time_peer(case, threads, runner):
    """A peer engine on the case's single-op model: (median ms, best ms)."""
    return time_model(*ort_model(case), threads, runner)


def time_model(blob, feed, threads, runner):
    """A peer engine on a model (bytes) fed `feed`: (median ms, best ms), thread CPU time on one
    thread, wall time on more."""
    run = runner(blob, threads)
    clock = time.thread_time if threads == 1 else time.perf_counter
    for _ in range(2):
        run(feed)
    times, start = [], time.perf_counter()
    while len(times) < 10 or (time.perf_counter() - start < 0.3 and len(times) < 1000):
        t0 = clock()
        run(feed)
        times.append(clock() - t0)
    times.sort()
    return statistics.median(times) * 1e3, times[0] * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--filter")
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--openvino", action="store_true", help="OpenVINO's time for each case too (f32)")
    ap.add_argument("--rounds", type=int, default=3)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--kernels", action="store_true", help="nnfuse's NCHW kernels called directly")
    mode.add_argument("--nchwc", action="store_true", help="nnfuse's blocked conv kernels (no reorders timed)")
    args = ap.parse_args()
    engine = not args.kernels and not args.nchwc
    tmp = tempfile.TemporaryDirectory(prefix="nnf_kernels_") if engine else None
    peak = run_json([os.path.join(args.build, "peak"), "--json", "--threads", str(args.threads)])
    cmd = [os.path.join(args.build, "bench_kernels"), "--json", "--threads", str(args.threads)]
    cmd += ["--nchwc"] if args.nchwc else []
    cmd += ["--list"] if engine else []
    if args.filter:
        cmd += ["--filter", args.filter]
    listing = run_json(cmd)
    fl_peak = peak["fma_gflops_1"] if args.threads == 1 else peak["fma_gflops_n"]
    bw_peak = peak["triad_gbs_1"] if args.threads == 1 else peak["triad_gbs_n"]
    how = "whole engine on ORT's file" if engine else "blocked kernels" if args.nchwc else "NCHW kernels"
    print(f"# {peak['cpu']}, {peak['isa']} tier, {args.threads} thread(s): FMA peak {fl_peak:.1f} GFLOP/s, "
          f"triad {bw_peak:.1f} GB/s; nnfuse: {how}; {args.rounds} alternating rounds per case")
    hdr = (f"{'case':26} {'nnf ms':>8} {'best':>8} {'GFLOP/s':>8} {'%peak':>6} {'%bw':>5} "
           f"{'ORT ms':>8} {'best':>8} {'GFLOP/s':>8} {'ORT/nnf':>7} {'paired':>6}")
    hdr += f" {'OV ms':>8} {'OV/nnf':>6} {'paired':>6}" if args.openvino else ""
    print(hdr)
    rows = []
    base = [os.path.join(args.build, "bench_kernels"), "--json", "--threads", str(args.threads)]
    base += ["--nchwc"] if args.nchwc else []
    for first in listing:
        nnf_med, nnf_best, ort_med, ort_best, ov_med = [], [], [], [], []
        r = first
        if engine:
            path = os.path.join(tmp.name, first["name"] + ".onnx")
            with open(path, "wb") as f:
                f.write(ort_model(first)[0])
        for rnd in range(args.rounds):
            if engine:
                r = dict(first, **run_json(base + ["--model", path])[0])
            elif rnd:
                r = run_json(base + ["--filter", "=" + first["name"]])[0]
            nnf_med.append(r["median_ms"])
            nnf_best.append(r["best_ms"])
            if not args.no_ort:
                om, ob = time_peer(r, args.threads, ort_runner)
                ort_med.append(om)
                ort_best.append(ob)
            if args.openvino:
                ov_med.append(time_peer(r, args.threads, ov_runner)[0])
        r = dict(first, kernel=r["kernel"])
        r["median_ms"], r["best_ms"] = statistics.median(nnf_med), min(nnf_best)
        gf = r["flops"] / r["median_ms"] * 1e-6
        r["gflops"] = gf
        r["pct_peak"] = 100 * gf / fl_peak
        r["pct_bw"] = 100 * (r["bytes"] / r["median_ms"] * 1e-6) / bw_peak
        line = f"{r['name']:26} {r['median_ms']:8.3f} {r['best_ms']:8.3f} {gf:8.1f} {r['pct_peak']:6.1f} {r['pct_bw']:5.0f}"
        if not args.no_ort:
            om, ob = statistics.median(ort_med), min(ort_best)
            r["ort_median_ms"], r["ort_best_ms"] = om, ob
            r["speedup_vs_ort"] = om / r["median_ms"]
            # each round's ORT median over its nnfuse median, run seconds apart:
            # the machine's slow and fast phases last minutes, so a round's two
            # engines mostly share one, which the ratio of the overall medians
            # does not ensure
            r["paired_speedup_vs_ort"] = statistics.median(o / n for o, n in zip(ort_med, nnf_med))
            line += (f" {om:8.3f} {ob:8.3f} {r['flops'] / om * 1e-6:8.1f} {om / r['median_ms']:7.2f}"
                     f" {r['paired_speedup_vs_ort']:6.2f}")
        if args.openvino:
            r["ov_median_ms"] = statistics.median(ov_med)
            r["paired_speedup_vs_ov"] = statistics.median(o / n for o, n in zip(ov_med, nnf_med))
            line += (f" {r['ov_median_ms']:8.3f} {r['ov_median_ms'] / r['median_ms']:6.2f}"
                     f" {r['paired_speedup_vs_ov']:6.2f}")
        rows.append(r)
        print(line, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"peak": peak, "threads": args.threads, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
