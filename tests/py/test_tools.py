"""The measurement and debugging tools: bench, profile, dumps, compare, graph,
logging, unsupported-operator messages and the ORT scoreboard script.

Every model here is built with onnx.helper and has a handful of nodes, so the
whole file runs in seconds. The command is build/nnfuse, or $NNF_BIN."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from conftest import model_of

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("NNF_BIN", str(ROOT / "build" / "nnfuse"))

NODES = ["conv0", "relu0", "add0", "gap0", "flat0"]  # execution order of tiny_model
OPS = ["Conv", "Relu", "Add", "GlobalAveragePool", "Flatten"]


def nnfuse(*args, env=None, check=None):
    full_env = dict(os.environ)
    full_env.pop("NNF_TEST_INJECT", None)
    full_env.update(env or {})
    proc = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, env=full_env, timeout=120)
    if check is not None:
        assert proc.returncode == check, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """x -> Conv -> Relu -> Add(relu, conv) -> GlobalAveragePool -> Flatten -> y.
    The conv output feeds two nodes, so an error injected in it spreads."""
    if not os.access(BIN, os.X_OK):
        pytest.fail(f"nnfuse command not found at {BIN} (build it, or set NNF_BIN)")
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "W")
    b = numpy_helper.from_array((rng.standard_normal(4) * 0.1).astype(np.float32), "B")
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["conv_out"], name="conv0", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv_out"], ["relu/out"], name="relu0"),
        helper.make_node("Add", ["relu/out", "conv_out"], ["sum"], name="add0"),
        helper.make_node("GlobalAveragePool", ["sum"], ["pooled"], name="gap0"),
        helper.make_node("Flatten", ["pooled"], ["y"], name="flat0"),
    ]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w, b])
    path = tmp_path_factory.mktemp("models") / "tiny.onnx"
    onnx.save(model_of(graph), str(path))
    return path


@pytest.fixture(scope="module")
def fusable_model(tmp_path_factory):
    """x -> Conv -> Relu -> GlobalAveragePool -> y: at -O3 Relu becomes the
    Conv's epilogue, so the optimised run has no node 'relu1' of its own."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array((rng.standard_normal((6, 3, 3, 3)) * 0.3).astype(np.float32), "W")
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu1"),
        helper.make_node("GlobalAveragePool", ["r"], ["y"], name="gap1"),
    ]
    graph = helper.make_graph(nodes, "fusable", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 1, 1])], [w])
    path = tmp_path_factory.mktemp("models") / "fusable.onnx"
    onnx.save(model_of(graph), str(path))
    return path


# ---------------------------------------------------------------- bench

def test_bench_json_schema(tiny_model, tmp_path):
    out = tmp_path / "bench.json"
    proc = nnfuse("bench", tiny_model, "--threads", 1, "--warmup", 2, "--iterations", 7, "--json", out, check=0)
    for field in ("First inference", "Count", "Latency", "min", "mean", "median", "p90", "p99", "max",
                  "Throughput", "Peak RSS", "Arena"):
        assert field in proc.stdout
    r = json.loads(out.read_text())
    for key in ("model", "threads", "first_ms", "latency_ms", "throughput", "peak_rss_mb", "arena_bytes"):
        assert key in r, key
    lat = r["latency_ms"]
    assert set(lat) == {"min", "mean", "median", "p90", "p99", "max"}
    assert 0 < lat["min"] <= lat["median"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    assert lat["min"] <= lat["mean"] <= lat["max"]
    assert r["model"] == str(tiny_model) and r["threads"] == 1 and r["count"] == 7
    assert len(r["samples_ms"]) == 7
    assert r["first_ms"] > 0 and r["throughput"] > 0
    assert 0 < r["load_ms"] < r["first_ms"]
    assert 0.5 < r["peak_rss_mb"] < 4096
    # live intermediates at the peak: at least conv_out + relu/out (4x8x8 floats each)
    assert r["arena_bytes"] >= 2 * 4 * 8 * 8 * 4
    assert r["buffers_held_bytes"] >= r["arena_bytes"]


def test_bench_buffers_that_live_apart_share_pages(tmp_path):
    """A 256 KiB tensor dies early; then three of 64 KiB live together. The session's buffer
    heap (base/fitheap.c) puts them where the big one was, so it holds the peak of live bytes
    (the big one and the first small one: 320 KiB). One block per buffer, reused best fit (the
    allocator before it, and what sanitizer builds still use), held 384 KiB: the second small
    tensor took the big block, the third a new one."""
    starts, ends, axes = (numpy_helper.from_array(np.array([v], np.int64), n)
                          for v, n in ((0, "starts"), (4, "ends"), (1, "axes")))
    nodes = [
        helper.make_node("Concat", ["x", "x", "x", "x"], ["a"], axis=1),   # 256 KiB
        helper.make_node("Slice", ["a", "starts", "ends", "axes"], ["b"]),  # 64 KiB; a dies
        helper.make_node("Sigmoid", ["b"], ["c"]),
        helper.make_node("Tanh", ["b"], ["d"]),                            # b, c, d live
        helper.make_node("Add", ["c", "d"], ["e"]),
        helper.make_node("Mul", ["e", "b"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "heap", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 64, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 64, 64])],
                              [starts, ends, axes])
    path = tmp_path / "heap.onnx"
    onnx.save(model_of(graph), str(path))
    for opt in ("-O0", "-O3"):
        out = tmp_path / "bench.json"
        nnfuse("bench", path, opt, "--threads", 1, "--warmup", 2, "--iterations", 3, "--json", out, check=0)
        r = json.loads(out.read_text())
        assert r["arena_bytes"] == 320 * 1024, opt
        assert r["buffers_held_bytes"] == 320 * 1024, opt


def downsample_block(path):
    """ResNet's first block of a stage: x feeds conv1 -> conv2 (stride 2) -> conv3 and a stride-2
    downsample; Add + Relu. x 32 KiB, conv1's output 16, conv2's 4, conv3's and the downsample's 16."""
    rng = np.random.default_rng(3)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    inits = [w("w0", 32, 8, 3, 3), w("w1", 16, 32, 1, 1), w("w2", 16, 16, 3, 3), w("w3", 64, 16, 1, 1),
             w("wd", 64, 32, 1, 1)]
    nodes = [helper.make_node("Conv", ["x0", "w0"], ["x"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["x"], ["xr"]),
             helper.make_node("Conv", ["xr", "w1"], ["c1"]),
             helper.make_node("Relu", ["c1"], ["c1r"]),
             helper.make_node("Conv", ["c1r", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["c2r"]),
             helper.make_node("Conv", ["c2r", "w3"], ["c3"]),
             helper.make_node("Conv", ["xr", "wd"], ["d"], strides=[2, 2]),
             helper.make_node("Add", ["c3", "d"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x0", TensorProto.FLOAT, [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 8, 8])], inits)
    onnx.save(model_of(graph), str(path))


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_node_order_lowers_the_peak(tmp_path, opt):
    """Run in the file's order (ready nodes first in, first out), the downsample conv runs right
    after conv1: x, conv1's and its outputs live together (64 KiB). The runtime's depth-first order
    (runtime/schedule.c) runs conv1, conv2, then the downsample: 52 KiB (x, conv2's output, the
    downsample's). The outputs are the same bits either way."""
    path = tmp_path / "block.onnx"
    downsample_block(path)
    arena, outs = {}, {}
    for off in ("", "schedule"):
        out = tmp_path / "bench.json"
        nnfuse("bench", path, opt, "--threads", 1, "--warmup", 1, "--iterations", 2, "--json", out,
               env={"NNF_DISABLE_PASSES": off}, check=0)
        arena[off] = json.loads(out.read_text())["arena_bytes"]
        nnfuse("run", path, opt, "--threads", 1, "--seed", 5, "-o", tmp_path / off, env={"NNF_DISABLE_PASSES": off},
               check=0)
        outs[off] = np.load(tmp_path / off / "y.npy")
    assert arena == {"": 52 * 1024, "schedule": 64 * 1024}
    assert outs[""].tobytes() == outs["schedule"].tobytes()


def test_bench_duration_and_usage(tiny_model):
    proc = nnfuse("bench", tiny_model, "--duration", "0.2", "--warmup", 0, "--json", "-", check=0)
    r = json.loads(proc.stdout)
    assert r["count"] >= 1
    nnfuse("bench", tiny_model, "--duration", "1", "--iterations", 3, check=1)
    nnfuse("bench", check=1)


# ---------------------------------------------------------------- profile

def test_profile_trace_one_event_per_node(tiny_model, tmp_path):
    trace = tmp_path / "trace.json"
    proc = nnfuse("profile", tiny_model, "-o", trace, "--iterations", 3, "--threads", 1, check=0)
    events = json.loads(trace.read_text())
    nodes = [e for e in events if e["cat"] == "Node"]
    assert len(nodes) == 3 * len(NODES)
    assert [e["name"] for e in nodes] == NODES * 3
    for e in nodes:
        assert e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0
        assert {"pid", "tid", "args"} <= set(e)
        assert {"op_name", "node_index", "output_type_shape", "kernel", "flops"} <= set(e["args"])
    by_name = {e["name"]: e for e in nodes}
    assert by_name["conv0"]["args"]["op_name"] == "Conv"
    assert by_name["conv0"]["args"]["output_type_shape"] == [{"float": [1, 4, 8, 8]}]
    assert by_name["flat0"]["args"]["output_type_shape"] == [{"float": [1, 4]}]
    # 2 * MACs of a 3x3x3 -> 4 conv on 8x8 (bias adds may or may not be counted)
    assert by_name["conv0"]["args"]["flops"] >= 2 * 4 * 8 * 8 * 27
    # nodes run back to back within their iteration's span
    runs = [e for e in events if e["cat"] == "Session"]
    assert len(runs) == 3
    for it, run in enumerate(runs):
        for e in nodes[it * len(NODES):(it + 1) * len(NODES)]:
            assert run["ts"] - 1 <= e["ts"] <= run["ts"] + run["dur"] + 1
    assert "Per operator type" in proc.stdout and "Per node" in proc.stdout
    for op in OPS:
        assert op in proc.stdout
    assert "GFLOP/s" in proc.stdout


def test_profile_thread_busy(tiny_model, tmp_path):
    # the threads' working time per node: one thread works the whole node;
    # two work at most twice its duration, and the table says how busy
    for threads in (1, 2):
        trace = tmp_path / f"trace{threads}.json"
        proc = nnfuse("profile", tiny_model, "-o", trace, "--iterations", 3, "--threads", threads, check=0)
        nodes = [e for e in json.loads(trace.read_text()) if e["cat"] == "Node"]
        for e in nodes:
            busy = e["args"]["thread_busy_us"]
            if threads == 1:
                assert busy == pytest.approx(e["dur"], abs=0.002)
            else:
                assert 0 <= busy <= 2 * e["dur"] + 0.002
        assert ("busy %" in proc.stdout) == (threads > 1)
        assert ("Threads: 2, busy" in proc.stdout) == (threads > 1)


def test_profile_peak_and_top(tiny_model, tmp_path):
    peak = tmp_path / "peak.json"
    peak.write_text(json.dumps({"gflops_per_core": 50.0, "bandwidth_gbs": 20.0}))
    proc = nnfuse("profile", tiny_model, "--peak", peak, "--top", 2, "--threads", 1, check=0)
    assert "% peak" in proc.stdout
    assert "3 more" in proc.stdout  # 5 nodes, 2 shown


# ---------------------------------------------------------------- dumps

def test_dump_every_node_output_equals_run_outputs(tiny_model, tmp_path):
    dump, out = tmp_path / "dump", tmp_path / "out"
    nnfuse("run", tiny_model, "--dump-dir", dump, "-o", out, check=0)
    assert sorted(p.name for p in dump.iterdir()) == sorted(
        ["conv_out.npy", "relu_out.npy", "sum.npy", "pooled.npy", "y.npy"])  # '/' became '_'
    assert np.array_equal(np.load(dump / "y.npy"), np.load(out / "y.npy"))
    conv = np.load(dump / "conv_out.npy")
    assert np.array_equal(np.load(dump / "relu_out.npy"), np.maximum(conv, 0))
    assert np.allclose(np.load(dump / "sum.npy"), np.maximum(conv, 0) + conv)


def test_dump_env_and_filter(tiny_model, tmp_path):
    env_dir = tmp_path / "env"
    nnfuse("run", tiny_model, "-o", tmp_path / "o1", env={"NNF_DUMP_DIR": str(env_dir)}, check=0)
    assert len(list(env_dir.iterdir())) == len(NODES)
    by_name = tmp_path / "by_name"
    nnfuse("run", tiny_model, "-o", tmp_path / "o2", "--dump-dir", by_name, "--dump-filter", "relu0", check=0)
    assert [p.name for p in by_name.iterdir()] == ["relu_out.npy"]
    by_op = tmp_path / "by_op"
    nnfuse("run", tiny_model, "-o", tmp_path / "o3", env={"NNF_DUMP_DIR": str(by_op), "NNF_DUMP_FILTER": "Conv,Add"},
           check=0)
    assert sorted(p.name for p in by_op.iterdir()) == ["conv_out.npy", "sum.npy"]


# ---------------------------------------------------------------- compare

def test_compare_passes_without_injection(tiny_model):
    proc = nnfuse("compare", tiny_model, check=0)
    assert "5 tensors compared, 0 beyond tolerance" in proc.stdout


@pytest.mark.parametrize("node,tensor", [("relu0", "relu/out"), ("conv0", "conv_out"), ("gap0", "pooled")])
def test_compare_names_injected_node(tiny_model, node, tensor):
    proc = nnfuse("compare", tiny_model, env={"NNF_TEST_INJECT": f"{node}:0.01"}, check=4)
    assert f"first tensor beyond tolerance is '{tensor}' from node '{node}'" in proc.stderr
    first_fail = next(line for line in proc.stdout.splitlines() if line.rstrip().endswith("FAIL"))
    assert node in first_fail


def test_compare_fused_graph(fusable_model, tmp_path):
    nnfuse("compare", fusable_model, check=0)
    # the injected Relu lives inside the fused Conv: the report names the
    # fused node by the original nodes it replaced, Relu among them
    proc = nnfuse("compare", fusable_model, env={"NNF_TEST_INJECT": "relu1:0.01"}, check=4)
    assert "first tensor beyond tolerance is 'r' from node '" in proc.stderr
    named = proc.stderr.split("from node '")[1].split("'")[0]
    assert "relu1" in named.split("+")
    trace = tmp_path / "trace.json"
    nnfuse("profile", fusable_model, "-o", trace, check=0)
    nodes = [e for e in json.loads(trace.read_text()) if e["cat"] == "Node"]
    fused = [e for e in nodes if "fused_from" in e["args"]]
    if fused:  # present once the fusion pass fuses Conv+Relu
        assert any("relu1" in e["args"]["fused_from"] for e in fused)
        assert len(nodes) < 3


def test_compare_small_error_within_tolerance(tiny_model):
    # 1e-7 on values of order 0.1..1 is far below MERE 2^-13
    nnfuse("compare", tiny_model, env={"NNF_TEST_INJECT": "add0:1e-7"}, check=0)


def test_compare_unknown_inject_node(tiny_model):
    proc = nnfuse("compare", tiny_model, env={"NNF_TEST_INJECT": "nope:1"}, check=1)
    assert "nope" in proc.stderr


def test_compare_against_npy_folder(tiny_model, tmp_path):
    ref = tmp_path / "ref"
    nnfuse("run", tiny_model, "--dump-dir", ref, "-o", tmp_path / "o", "--seed", 3, check=0)
    nnfuse("compare", tiny_model, "--reference", ref, "--seed", 3, check=0)
    # the folder holds no inputs, so another seed gives other inputs: every tensor differs
    nnfuse("compare", tiny_model, "--reference", ref, "--seed", 4, check=4)
    # inputs found in the folder are used when -i does not give them
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    ref2 = tmp_path / "ref2"
    nnfuse("run", tiny_model, "-i", f"x={tmp_path / 'x.npy'}", "--dump-dir", ref2, "-o", tmp_path / "o2", check=0)
    np.save(ref2 / "x.npy", x)
    nnfuse("compare", tiny_model, "--reference", ref2, check=0)
    # a corrupted reference tensor is found and named
    s = np.load(ref2 / "sum.npy")
    s[0, 1, 2, 3] += 0.5
    np.save(ref2 / "sum.npy", s)
    proc = nnfuse("compare", tiny_model, "--reference", ref2, check=4)
    assert "'sum' from node 'add0' (Add)" in proc.stderr


def test_compare_against_onnxruntime(tiny_model):
    pytest.importorskip("onnxruntime")
    env = {"NNF_PYTHON": sys.executable}
    proc = nnfuse("compare", tiny_model, "--reference", "onnxruntime", env=env, check=0)
    assert "5 tensors compared, 0 beyond tolerance, 0 without a reference" in proc.stdout
    env["NNF_TEST_INJECT"] = "add0:0.05"
    proc = nnfuse("compare", tiny_model, "--reference", "onnxruntime", env=env, check=4)
    assert "from node 'add0' (Add)" in proc.stderr


def test_compare_bad_reference(tiny_model):
    nnfuse("compare", tiny_model, "--reference", "/nonexistent/dir", check=1)


def test_ort_runner_uses_the_nnfuse_input_generator(tmp_path):
    """bench/compare.py relies on both engines seeing the same input."""
    graph = helper.make_graph([helper.make_node("Identity", ["a"], ["b"], name="id0")], "g",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 5, 7])],
                              [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 5, 7])])
    model = tmp_path / "id.onnx"
    onnx.save(model_of(graph), str(model))
    nnfuse("run", model, "-o", tmp_path, "--seed", 11, check=0)
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import ort_run
    finally:
        sys.path.pop(0)
    feeds = ort_run.make_inputs(str(model), None, 11)
    assert np.array_equal(feeds["a"], np.load(tmp_path / "b.npy"))


# ---------------------------------------------------------------- graph

def test_graph_dot_and_svg(tiny_model, tmp_path):
    proc = nnfuse("graph", tiny_model, check=0)
    assert proc.stdout.startswith("digraph")
    for node in NODES:
        assert node in proc.stdout
    dot = tmp_path / "g.dot"
    nnfuse("graph", tiny_model, "-o", dot, check=0)
    assert dot.read_text() == proc.stdout
    svg = tmp_path / "g.svg"
    if subprocess.run(["which", "dot"], capture_output=True).returncode == 0:
        nnfuse("graph", tiny_model, "-o", svg, check=0)
        assert "<svg" in svg.read_text()
    unsupported = nnfuse("graph", tiny_model, "-o", tmp_path / "g.onnx", check=1)
    assert "not supported" in unsupported.stderr


# ---------------------------------------------------------------- logging

def test_log_levels(tiny_model, tmp_path):
    trace = nnfuse("run", tiny_model, "-o", tmp_path, env={"NNF_LOG_LEVEL": "trace"}, check=0)
    lines = [line for line in trace.stderr.splitlines() if line.startswith("nnfuse trace:")]
    for node, op in zip(NODES, OPS):
        assert sum(f"'{node}' ({op})" in line for line in lines) == 1, (node, lines)
    quiet = nnfuse("run", tiny_model, "-o", tmp_path, env={"NNF_LOG_LEVEL": "error"}, check=0)
    assert quiet.stderr == ""
    info = nnfuse("run", tiny_model, "-o", tmp_path, env={"NNF_LOG_LEVEL": "info"}, check=0)
    assert "nnfuse trace:" not in info.stderr and "nnfuse info:" in info.stderr


# ---------------------------------------------------------------- unsupported operators

def test_unsupported_ops_all_named(tmp_path):
    nodes = [
        helper.make_node("FrobnicateA", ["x"], ["a"], name="fa"),
        helper.make_node("Relu", ["a"], ["b"], name="ok"),
        helper.make_node("FrobnicateB", ["b"], ["c"], name="fb"),
        helper.make_node("Quux", ["c"], ["y"], name="fc", domain="com.example"),
    ]
    graph = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = model_of(graph, 17, ("com.example", 1))
    path = tmp_path / "bad.onnx"
    onnx.save(model, str(path))
    run = nnfuse("run", path, "-o", tmp_path, check=3)
    check = nnfuse("ops", "--check", path, check=3)
    for text in (run.stderr, check.stdout):
        for op, node in (("FrobnicateA", "fa"), ("FrobnicateB", "fb"), ("Quux", "fc")):
            assert op in text and f"'{node}'" in text, (op, text)
        assert "com.example" in text
        assert "nnfuse ops" in text
    assert "Relu" not in run.stderr


# ---------------------------------------------------------------- scoreboard

def test_scoreboard_script(tiny_model, tmp_path):
    pytest.importorskip("onnxruntime")
    out = tmp_path / "PERF.md"
    out.write_text("# Performance\n\nintro\n\n<!-- scoreboard:begin -->\nold\n<!-- scoreboard:end -->\n\nfooter\n")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare.py"), "--models", str(tiny_model), "--threads", "1",
         "--iterations", "3", "--warmup", "1", "--rounds", "2", "--out", str(out), "--nnfuse", BIN],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert text.startswith("# Performance\n\nintro") and text.rstrip().endswith("footer") and "old" not in text
    assert "| tiny | 1 |" in text
    data = json.loads(out.with_suffix(".json").read_text())
    row = data["rows"][0]
    assert row["nnfuse"]["processes"] == 2 and row["onnxruntime"]["processes"] == 2
    assert row["nnfuse"]["timed_runs"] == 6
    for key in ("latency_ratio", "rss_ratio", "first_ratio", "fused_speedup"):
        assert row[key] > 0
    assert row["nnfuse_O0"]["processes"] == 2 and row["arena_O0_mb"] > 0 and row["arena_saving"] < 1
    # the limit table: the model's FLOPs at the FMA peak measured in the same run
    assert data["meta"]["fma_peak_gflops"]["1"] == row["peak_gflops"] > 0
    assert row["gflops"] > 0 and row["floor_ms"] == pytest.approx(1e3 * row["gflops"] / row["peak_gflops"])
    for eng in ("nnfuse", "onnxruntime"):
        assert row[eng]["pct_peak"] == pytest.approx(100 * row["floor_ms"] / row[eng]["median_ms"])
    assert row["target_over_floor"] == pytest.approx(0.8 * row["onnxruntime"]["median_ms"] / row["floor_ms"])
    assert "| target ms (0.8 x ORT) | target / floor |" in text and f"| tiny | 1 | {row['gflops']:.3f} |" in text
    # the compiled model's first inference, in the same rounds, one timed run a process
    c = row["compiled"]
    assert c["processes"] == 2 and c["timed_runs"] == 2 and c["first_ms"] > 0
    assert row["compiled_first_ratio"] == pytest.approx(c["first_ms"] / row["onnxruntime"]["first_ms"])
    assert "| first ratio (.nnf / ORT) |" in text and f"**{row['compiled_first_ratio']:.2f}**" in text
    pytest.importorskip("matplotlib")
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_scoreboard_second_peer(tiny_model, tmp_path):
    """--peers onnxruntime,openvino: OpenVINO in the same alternating rounds, on the same input
    (bench/ov_run.py shares ort_run.py's generator and timing loop), in a table of its own."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("openvino")
    out = tmp_path / "PERF.md"
    cmd = [sys.executable, str(ROOT / "bench" / "compare.py"), "--models", str(tiny_model), "--threads", "1",
           "--iterations", "3", "--warmup", "1", "--rounds", "2", "--no-o0", "--out", str(out), "--nnfuse", BIN]
    proc = subprocess.run(cmd + ["--peers", "openvino,onnxruntime"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["meta"]["peers"] == ["onnxruntime", "openvino"]
    row = data["rows"][0]
    for eng in ("nnfuse", "onnxruntime", "openvino"):
        assert row[eng]["processes"] == 2 and row[eng]["timed_runs"] == 6, eng
    assert row["openvino_raw"][0]["engine"] == "openvino" and row["openvino_raw"][0]["count"] == 3
    ratios = row["openvino_ratios"]
    assert ratios["latency"] == pytest.approx(row["nnfuse"]["median_ms"] / row["openvino"]["median_ms"])
    assert ratios["rss"] > 0 and ratios["first"] > 0 and row["latency_ratio"] > 0
    text = out.read_text()
    assert "nnfuse against OpenVINO" in text and "| OpenVINO median ms |" in text
    assert f"| tiny | 1 | {row['nnfuse']['median_ms']:.2f} | {row['openvino']['median_ms']:.2f} |" in text
    bad = subprocess.run(cmd + ["--peers", "tvm"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--peers takes" in bad.stderr


def test_scoreboard_peer_that_fails(tiny_model, tmp_path):
    """A second peer that cannot run (here: its runner exits 2, as ov_run.py does without
    openvino) is tried once, its rows say why, and the ORT table and exit status are unaffected."""
    pytest.importorskip("onnxruntime")
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in *ov_run.py*) echo "no openvino here" >&2; exit 2;; esac\n'
                       f'exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    out = tmp_path / "PERF.md"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare.py"), "--models", str(tiny_model), "--threads", "1",
         "--iterations", "2", "--warmup", "0", "--rounds", "3", "--no-o0", "--out", str(out), "--nnfuse", BIN,
         "--peers", "onnxruntime,openvino", "--python", str(wrapper)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(out.with_suffix(".json").read_text())["rows"][0]
    assert row["onnxruntime"]["processes"] == 3 and row["latency_ratio"] > 0
    assert "openvino" not in row and row["errors"] == ["openvino: exit 2: no openvino here"]
    assert "| tiny | 1 |" in out.read_text() and "not measured: openvino: exit 2: no openvino here |" in out.read_text()


def test_openvino_runner_input_and_output(tmp_path):
    """bench/ov_run.py: the input `nnfuse run` generates, and OpenVINO's output for it is the
    model's (Relu of it), so its times are of the model run on that input."""
    pytest.importorskip("openvino")
    graph = helper.make_graph([helper.make_node("Relu", ["a"], ["b"], name="r0")], "g",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 5, 7])],
                              [helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 5, 7])])
    model = tmp_path / "relu.onnx"
    onnx.save(model_of(graph), str(model))
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import ort_run
        import ov_run
    finally:
        sys.path.pop(0)
    feeds = ort_run.make_inputs(str(model), None, 3)
    result = ov_run.open_model(str(model), 1)(feeds)
    assert np.array_equal(np.asarray(next(iter(result.values()))), np.maximum(feeds["a"], 0))
    js = tmp_path / "ov.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "ov_run.py"), "bench", str(model), "--threads", "1",
                           "--warmup", "0", "--iterations", "2", "--json", str(js)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(js.read_text())
    assert res["engine"] == "openvino" and res["count"] == 2 and len(res["samples_ms"]) == 2
    assert res["first_ms"] >= res["load_ms"] > 0 and res["peak_rss_mb"] > 0


def test_kernel_table_with_peers(tmp_path):
    """bench/kernels.py: a listed shape through nnfuse's engine, ORT and (--openvino) OpenVINO on
    the same single-op file, with the speed-ups each row reports."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("openvino")
    build = pathlib.Path(BIN).parent
    if not (build / "bench_kernels").exists() or not (build / "peak").exists():
        pytest.skip("bench_kernels / peak not built beside the nnfuse binary")
    js = tmp_path / "k.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "kernels.py"), "--build", str(build), "--threads", "1",
                           "--rounds", "2", "--filter", "=gemm_256", "--openvino", "--json", str(js)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(js.read_text())["rows"]
    assert row["name"] == "gemm_256" and row["kernel"].startswith("f32_gemm") and row["median_ms"] > 0
    assert row["speedup_vs_ort"] == pytest.approx(row["ort_median_ms"] / row["median_ms"])
    assert row["ov_median_ms"] > 0 and row["paired_speedup_vs_ov"] > 0
    assert "OV/nnf" in proc.stdout and "gemm_256" in proc.stdout
    # what the peers time is the case's model: both runners give its output
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import kernels
    finally:
        sys.path.pop(0)
    blob, feed = kernels.ort_model(row)
    ort_out = kernels.ort_runner(blob, 1)(feed)[0]
    ov_out = np.asarray(next(iter(kernels.ov_runner(blob, 1)(feed).values())))
    assert ort_out.shape == (256, 256) and np.allclose(ov_out, ort_out, rtol=1e-4, atol=1e-4)


def test_scoreboard_symbolic(tiny_model, tmp_path):
    """--symbolic: the model with a symbolic batch "N", both engines on the same input files at
    --dims N=2 (nnfuse keeping "N" symbolic at load: a shape plan on its first run)."""
    pytest.importorskip("onnxruntime")
    out = tmp_path / "PERF.md"
    cmd = [sys.executable, str(ROOT / "bench" / "compare.py"), "--models", str(tiny_model), "--threads", "1",
           "--iterations", "2", "--warmup", "1", "--rounds", "1", "--no-o0", "--out", str(out), "--nnfuse", BIN,
           "--symbolic"]
    proc = subprocess.run(cmd + ["--dims", "N=2"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(out.with_suffix(".json").read_text())["rows"][0]
    assert row["model"] == "tiny-symbolic" and row["latency_ratio"] > 0, row
    assert "floor_ms" not in row  # the file's FLOPs are not those of the dims it ran at
    assert row["nnfuse"]["processes"] == 1 and row["onnxruntime"]["processes"] == 1
    bad = subprocess.run(cmd + ["--dims", "N"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--dims takes NAME=INT" in bad.stderr
