#!/usr/bin/env python3
"""Operators outside the GEMM and conv cases of bench/kernels.py, side by side with ONNX Runtime:
one single-op model per case (Einsum, Expand, Tile, Where, Pad, GatherND, the normalizations,
DepthToSpace, Resize, 1-D and 3-D convs and pools, Pow, OneHot...), the same file for both engines. nnfuse runs it through its whole engine
(bench_kernels --model: import, passes, plans), ORT in this process (kernels.time_model); the two
alternate case by case, --rounds times, and "paired" is the median over rounds of that round's
ORT median / nnfuse median. Timing as in bench/kernels.py: thread CPU time on one thread, wall
time on more.

Usage: .venv/bin/python bench/ops.py [--build build] [--threads 1] [--rounds 3] [--filter SUBSTR] [--json FILE]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import kernels  # beside this file: the ORT runner and its timing

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def case(name, op, inputs, out_shape, inits=(), order=None, n_out=1, out_type=F, **attrs):
    """A single-op model: inputs are (name, shape) float32 graph inputs, inits initializers; the
    node reads them in `order` (names), by default the inputs then the initializers; its first
    output is out_shape of out_type (the others typed by inference)."""
    names = order or [n for n, _ in inputs] + [t.name for t in inits]
    outs = ["y"] + [f"y{i}" for i in range(1, n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", out_type, out_shape)] +
                              [onnx.ValueInfoProto(name=o) for o in outs[1:]],
                              list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    feed = {n: RNG.uniform(-1, 1, s).astype(np.float32) for n, s in inputs}
    return name, model.SerializeToString(), feed


def weight(*shape):
    return const("w", RNG.uniform(-0.1, 0.1, shape).astype(np.float32))


def cases():
    i64 = lambda v: np.array(v, np.int64)  # noqa: E731
    return [
        case("einsum_bhqd_bhkd", "Einsum", [("a", [1, 12, 128, 64]), ("b", [1, 12, 128, 64])],
             [1, 12, 128, 128], equation="bhqd,bhkd->bhqk"),
        case("einsum_bhqk_bhkd", "Einsum", [("a", [1, 12, 128, 128]), ("b", [1, 12, 128, 64])],
             [1, 12, 128, 64], equation="bhqk,bhkd->bhqd"),
        case("einsum_bqhd_bkhd", "Einsum", [("a", [1, 128, 12, 64]), ("b", [1, 128, 12, 64])],
             [1, 12, 128, 128], equation="bqhd,bkhd->bhqk"),
        case("einsum_bsd_hd", "Einsum", [("a", [1, 128, 768])], [1, 128, 3072],
             [const("w", RNG.uniform(-1, 1, (3072, 768)).astype(np.float32))], equation="bsd,hd->bsh"),
        case("einsum_bij_bjk_ikb", "Einsum", [("a", [16, 128, 128]), ("b", [16, 128, 128])],
             [128, 128, 16], equation="bij,bjk->ikb"),
        case("expand_last_axis", "Expand", [("x", [8, 1, 128, 1])], [8, 12, 128, 128],
             [const("s", i64([8, 12, 128, 128]))]),
        case("expand_rows", "Expand", [("x", [1, 12, 1, 128])], [8, 12, 128, 128],
             [const("s", i64([8, 12, 128, 128]))]),
        case("tile_2x2", "Tile", [("x", [64, 128, 128])], [64, 256, 256], [const("r", i64([1, 2, 2]))]),
        case("tile_batch", "Tile", [("x", [1, 128, 768])], [16, 128, 768], [const("r", i64([16, 1, 1]))]),
        case("where_mask", "Where", [("x", [8, 12, 128, 128])], [8, 12, 128, 128],
             [const("c", RNG.random((1, 1, 128, 128)) < 0.5), const("v", np.float32(-1e4))],
             order=["c", "x", "v"]),
        case("pad_reflect", "Pad", [("x", [1, 64, 128, 128])], [1, 64, 134, 134],
             [const("p", i64([0, 0, 3, 3, 0, 0, 3, 3]))], mode="reflect"),
        case("pad_constant", "Pad", [("x", [1, 64, 128, 128])], [1, 64, 130, 130],
             [const("p", i64([0, 0, 1, 1, 0, 0, 1, 1]))]),
        case("gathernd_rows", "GatherND", [("x", [64, 256, 256])], [64, 2, 256],
             [const("i", np.stack([np.arange(64), np.arange(64) * 3 % 256]).T.reshape(64, 1, 2)
                    .repeat(2, 1).astype(np.int64))]),
        case("instancenorm_128", "InstanceNormalization", [("x", [1, 128, 128, 128])], [1, 128, 128, 128],
             [const("g", np.ones(128, np.float32)), const("b", np.zeros(128, np.float32))]),
        case("depthtospace_64", "DepthToSpace", [("x", [1, 64, 256, 256])], [1, 16, 512, 512], blocksize=2),
        case("split_qkv", "Split", [("x", [1, 512, 2304])], [1, 512, 768], [const("sp", i64([768, 768, 768]))],
             n_out=3, axis=2),
        case("cast_f16", "Cast", [("x", [64, 128, 128])], [64, 128, 128], out_type=TensorProto.FLOAT16, to=TensorProto.FLOAT16),
        case("cumsum_rows", "CumSum", [("x", [64, 128, 128])], [64, 128, 128], [const("ax", i64(2))]),
        case("trilu_causal", "Trilu", [("x", [12, 512, 512])], [12, 512, 512], upper=0),
        case("argmax_rows", "ArgMax", [("x", [512, 1000])], [512, 1], out_type=TensorProto.INT64, axis=1),
        case("argmax_channels", "ArgMax", [("x", [1, 21, 256, 256])], [1, 1, 256, 256],
             out_type=TensorProto.INT64, axis=1),
        case("softmax_channels", "Softmax", [("x", [1, 21, 256, 256])], [1, 21, 256, 256], axis=1),
        case("reducemean_hw", "ReduceMean", [("x", [1, 256, 64, 64])], [1, 256, 1, 1], axes=[2, 3]),
        case("reducesum_channels", "ReduceSum", [("x", [1, 64, 128, 128])], [1, 1, 128, 128],
             [const("axes", i64([1]))]),
        case("gather_rows", "Gather", [("x", [4096, 768])], [128, 768],
             [const("ids", RNG.integers(0, 4096, 128).astype(np.int64))], axis=0),
        case("gather_elements", "GatherElements", [("x", [64, 512, 64])], [64, 512, 8],
             [const("ge", RNG.integers(0, 64, (64, 512, 8)).astype(np.int64))], axis=2),
        case("scatternd_cache", "ScatterND", [("x", [1, 12, 1024, 64]), ("u", [1, 12, 16, 64])],
             [1, 12, 1024, 64],
             [const("si", np.stack(np.meshgrid(np.arange(1), np.arange(12), np.arange(500, 516),
                                               indexing="ij"), -1).astype(np.int64))],
             order=["x", "si", "u"]),
        case("topk_rows", "TopK", [("x", [512, 1000])], [512, 5], [const("k", i64([5]))], n_out=2),
        case("resize_bilinear_2x", "Resize", [("x", [1, 64, 64, 64])], [1, 64, 128, 128],
             [const("roi", np.zeros(0, np.float32)), const("sc", np.array([1, 1, 2, 2], np.float32))],
             mode="linear"),
        case("conv1d_dw_k31", "Conv", [("x", [1, 512, 1024])], [1, 512, 1024], [weight(512, 1, 31)],
             pads=[15, 15], group=512),
        case("conv1d_s5_k10", "Conv", [("x", [1, 1, 16000])], [1, 512, 3199], [weight(512, 1, 10)], strides=[5]),
        case("conv3d_3x3x3", "Conv", [("x", [1, 32, 8, 32, 32])], [1, 32, 8, 32, 32], [weight(32, 32, 3, 3, 3)],
             pads=[1, 1, 1, 1, 1, 1]),
        case("maxpool1d", "MaxPool", [("x", [1, 64, 8192])], [1, 64, 4096], kernel_shape=[3], strides=[2],
             pads=[1, 1]),
        case("avgpool1d", "AveragePool", [("x", [1, 64, 8192])], [1, 64, 4096], kernel_shape=[3], strides=[2],
             pads=[1, 1]),
        case("pow3", "Pow", [("x", [64, 128, 128])], [64, 128, 128], [const("e", np.float32(3.0))]),
        case("softmax_512", "Softmax", [("x", [1, 12, 512, 512])], [1, 12, 512, 512], axis=-1),
        case("onehot", "OneHot", [], [4096, 1000], [const("i", RNG.integers(0, 1000, 4096).astype(np.int64)),
                                                     const("d", i64(1000)), const("v", np.array([0, 1], np.float32))]),
        case("lpnorm", "LpNormalization", [("x", [4096, 768])], [4096, 768], axis=-1, p=2),
        case("hardmax", "Hardmax", [("x", [512, 1000])], [512, 1000]),
        case("sum3", "Sum", [("a", [64, 128, 128]), ("b", [64, 128, 128]), ("c", [64, 128, 128])], [64, 128, 128]),
        case("reducesumsquare", "ReduceSumSquare", [("x", [4096, 768])], [4096, 1], axes=[1]),
        case("maxpool3d", "MaxPool", [("x", [1, 32, 16, 64, 64])], [1, 32, 8, 32, 32], kernel_shape=[2, 2, 2],
             strides=[2, 2, 2]),
        case("convtranspose3d", "ConvTranspose", [("x", [1, 64, 8, 16, 16])], [1, 32, 16, 32, 32],
             [weight(64, 32, 2, 2, 2)], strides=[2, 2, 2]),
        case("resize_trilinear_2x", "Resize", [("x", [1, 32, 8, 32, 32])], [1, 32, 16, 64, 64],
             [const("roi", np.array([], np.float32)), const("scales", np.array([1, 1, 2, 2, 2], np.float32))],
             order=["x", "roi", "scales"], mode="linear"),
        case("avgpool3d", "AveragePool", [("x", [1, 32, 16, 64, 64])], [1, 32, 8, 32, 32], kernel_shape=[2, 2, 2],
             strides=[2, 2, 2]),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--filter")
    ap.add_argument("--json")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="nnf_ops_")
    base = [os.path.join(args.build, "bench_kernels"), "--json", "--threads", str(args.threads)]
    print(f"# {args.threads} thread(s); {args.rounds} alternating rounds per case")
    print(f"{'case':22} {'kernel':40} {'nnf ms':>8} {'ORT ms':>8} {'ORT/nnf':>7} {'paired':>6}")
    rows = []
    for name, blob, feed in cases():
        if args.filter and args.filter not in name:
            continue
        path = os.path.join(tmp.name, name + ".onnx")
        with open(path, "wb") as f:
            f.write(blob)
        nnf, ort = [], []
        for _ in range(args.rounds):
            r = kernels.run_json(base + ["--model", path])[0]
            nnf.append(r["median_ms"])
            ort.append(kernels.time_model(blob, feed, args.threads, kernels.ort_runner)[0])
        row = {"name": name, "kernel": r["kernel"], "threads": args.threads,
               "median_ms": statistics.median(nnf), "ort_median_ms": statistics.median(ort),
               "paired_speedup_vs_ort": statistics.median(o / n for o, n in zip(ort, nnf))}
        rows.append(row)
        print(f"{name:22} {row['kernel'][:40]:40} {row['median_ms']:8.3f} {row['ort_median_ms']:8.3f} "
              f"{row['ort_median_ms'] / row['median_ms']:7.2f} {row['paired_speedup_vs_ort']:6.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
