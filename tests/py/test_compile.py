"""The offline compiler: `nnfuse compile MODEL.onnx -o OUT.nnf` and the .nnf file every loader
accepts (src/runtime/compile.c, src/format/nnf.h).

A compiled file must run exactly as its ONNX model does (bit for bit: the same kernels on the
same packed weights, read from the file instead of packed at load), on every tier the suite runs
on (NNF_ISA); a file made for another build, CPU, tier, set of options or graph must still load
correctly (planned from the ONNX model inside it, with a warning); a damaged one must give a clean
error naming the file."""
import json
import os
import pathlib
import struct
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnfuse
from conftest import model_of

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("NNF_BIN", str(ROOT / "build" / "nnfuse"))
sys.path.insert(0, str(ROOT / "zoo"))
import zoocheck  # noqa: E402

HEADER = 128


def nnfuse_cmd(*args, env=None, check=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, env=full_env,
                          timeout=300)
    if check is not None:
        assert proc.returncode == check, \
            f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def run_outputs(model, out_dir, *args, env=None):
    """`nnfuse run MODEL -o OUT_DIR ARGS...` (seeded inputs): {name: array}, and its stderr."""
    proc = nnfuse_cmd("run", model, "-o", out_dir, "-v", *args, env=env, check=0)
    return {p.stem: np.load(p) for p in pathlib.Path(out_dir).glob("*.npy")}, proc.stderr


def assert_same(a, b):
    assert a.keys() == b.keys() and a
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert np.array_equal(a[k], b[k], equal_nan=True), f"output {k} differs"


@pytest.fixture(scope="module")
def tiny_zoo():
    return zoocheck.ensure_zoo(str(ROOT / "build" / "zoo" / "tiny"), zoocheck.TINY)


@pytest.fixture(scope="module")
def compiled(tiny_zoo, tmp_path_factory):
    """resnet_tiny compiled once: (onnx path, nnf path)."""
    out = tmp_path_factory.mktemp("nnf") / "resnet_tiny.nnf"
    nnfuse_cmd("compile", tiny_zoo["resnet_tiny"], "-o", out, check=0)
    return tiny_zoo["resnet_tiny"], out


def edited(src, dst, edit):
    data = bytearray(pathlib.Path(src).read_bytes())
    edit(data)
    pathlib.Path(dst).write_bytes(bytes(data))
    return dst


def header(data):
    return dict(zip(["meta_off", "meta_bytes", "onnx_off", "onnx_bytes", "table_off", "n_blocks",
                     "names_off", "names_bytes", "graph_hash"], struct.unpack_from("<9Q", data, 16)))


@pytest.mark.parametrize("name", zoocheck.TINY)
@pytest.mark.parametrize("threads", [1, 2])
def test_compiled_model_runs_as_its_onnx(tiny_zoo, tmp_path, name, threads):
    """Every tiny zoo model: the compiled file's blocks are read in place (the log says so, no
    warning) and its outputs equal the ONNX model's bit for bit; --verify agrees."""
    src, nnf = tiny_zoo[name], tmp_path / f"{name}.nnf"
    proc = nnfuse_cmd("compile", src, "-o", nnf, "--verify", "--threads", threads, check=0)
    assert "bit for bit" in proc.stdout
    ref, _ = run_outputs(src, tmp_path / "onnx", "--threads", threads)
    got, log = run_outputs(nnf, tmp_path / "nnf", "--threads", threads)
    assert "packed blocks read in place" in log and "warn" not in log, log
    assert_same(ref, got)


def test_compiled_file_layout(compiled):
    """The header's ranges, the ONNX model byte for byte at a 4 KiB boundary, the blocks 64-byte
    aligned after a header, the meta naming what the file was compiled for."""
    src, nnf = compiled
    data = nnf.read_bytes()
    h = header(data)
    assert data[:8] == b"\x89NNF\r\n\x1a\n" and struct.unpack_from("<I", data, 8)[0] == 1
    assert h["onnx_off"] % 4096 == 0
    assert data[h["onnx_off"]:h["onnx_off"] + h["onnx_bytes"]] == pathlib.Path(src).read_bytes()
    meta = data[h["meta_off"]:h["meta_off"] + h["meta_bytes"]].decode()
    keys = [line.split(" ", 1)[0] for line in meta.splitlines()]
    assert keys == ["nnfuse", "build", "cpu", "isa", "opt", "passes-off"]  # no input shapes fixed
    assert h["n_blocks"] > 0
    entries = [struct.unpack_from("<IIQQ", data, h["table_off"] + 24 * i) for i in range(h["n_blocks"])]
    assert entries == sorted(entries)
    for node, seq, off, size in entries:
        assert off % 64 == 0 and off + size <= len(data) and size > 0
    names = data[h["names_off"]:h["names_off"] + h["names_bytes"]].split(b"\0")[:-1]
    model = onnx.load(str(src))
    inits = {i.name for i in model.graph.initializer}
    assert names and all(n.decode() in inits for n in names)
    # the weights packed away are the convs' and the classifier's, never a BatchNorm's
    assert not any(b"bn" in n or b"running" in n for n in names), names


@pytest.mark.parametrize("what,edit,env,args", [
    ("build", lambda m: m.replace("build ", "build 0", 1), None, []),
    ("opt", None, None, ["-O1"]),
    ("passes-off", None, {"NNF_DISABLE_PASSES": "fuse_residual"}, []),
])
def test_file_for_another_build_or_options_plans_from_its_model(compiled, tmp_path, what, edit, env,
                                                                  args):
    """A file compiled for another build, optimisation level or set of disabled passes loads as
    its ONNX model loads with this one's (a warning names what differs)."""
    src, nnf = compiled
    if edit:
        def patch(data):
            h = header(data)
            meta = data[h["meta_off"]:h["meta_off"] + h["meta_bytes"]].decode()
            new = edit(meta)[:len(meta)].encode()
            data[h["meta_off"]:h["meta_off"] + len(new)] = new
        nnf = edited(nnf, tmp_path / "other.nnf", patch)
    ref, _ = run_outputs(src, tmp_path / "onnx", *args, env=env)
    got, log = run_outputs(nnf, tmp_path / "nnf", *args, env=env)
    assert f"compiled for another {what}" in log, log
    assert "read in place" not in log
    assert_same(ref, got)


def test_file_for_another_tier_plans_from_its_model(compiled, tmp_path):
    src, nnf = compiled
    tier = os.environ.get("NNF_ISA", "").strip().lower()
    other = "scalar" if tier != "scalar" else "avx2"
    env = {"NNF_ISA": other}
    ref, _ = run_outputs(src, tmp_path / "onnx", env=env)
    got, log = run_outputs(nnf, tmp_path / "nnf", env=env)
    if other == "avx2" and "keeps" in log:  # a machine without AVX2 keeps the scalar tier
        pytest.skip("no second tier here")
    assert "compiled for another" in log and "read in place" not in log, log
    assert_same(ref, got)


def test_file_whose_graph_differs_plans_from_its_model(compiled, tmp_path):
    """The blocks are keyed by node: a file whose graph fingerprint is not the one the load makes
    of its model (edited here) packs its weights again instead of misplacing them."""
    src, nnf = compiled
    other = edited(nnf, tmp_path / "graph.nnf",
                   lambda d: struct.pack_into("<Q", d, 80, header(d)["graph_hash"] ^ 1))
    ref, _ = run_outputs(src, tmp_path / "onnx")
    got, log = run_outputs(other, tmp_path / "nnf")
    assert "graph is not the one" in log, log
    assert_same(ref, got)


def test_file_that_lists_other_weights_still_runs_right(compiled, tmp_path):
    """The names of the weights the blocks hold are not trusted: a BatchNorm's parameters or an
    unknown name listed there change nothing."""
    src, nnf = compiled
    model = onnx.load(str(src))
    bn = next(i.name for i in model.graph.initializer if "running_var" in i.name or "bn" in i.name)

    def patch(d):
        h = header(d)
        sec = bytes(d[h["names_off"]:h["names_off"] + h["names_bytes"]])
        first = sec.split(b"\0")[0]
        new = (bn.encode()[:len(first)]).ljust(len(first) + 1, b"\0")
        d[h["names_off"]:h["names_off"] + len(new)] = new
    other = edited(nnf, tmp_path / "names.nnf", patch)
    ref, _ = run_outputs(src, tmp_path / "onnx")
    got, _ = run_outputs(other, tmp_path / "nnf")
    assert_same(ref, got)


def damaged_cases(data):
    h = header(data)
    t = h["table_off"]

    def at(off, fmt, value):
        def f(d):
            struct.pack_into(fmt, d, off, value)
        return f
    return {
        "truncated to its header": lambda d: d.__delitem__(slice(HEADER, None)),
        "truncated in its blocks": lambda d: d.__delitem__(slice(len(d) - 100, None)),
        "shorter than a header": lambda d: d.__delitem__(slice(40, None)),
        "version": at(8, "<I", 99),
        "meta past the end": at(24, "<Q", 1 << 40),
        "model past the end": at(40, "<Q", len(data)),
        "table past the end": at(56, "<Q", (1 << 61)),
        "names unterminated": at(72, "<Q", 1),
        "block offset unaligned": at(t + 8, "<Q", struct.unpack_from("<Q", data, t + 8)[0] + 4),
        "block past the end": at(t + 16, "<Q", len(data)),
        "block header not borrowed": lambda d: d.__setitem__(
            slice(struct.unpack_from("<Q", data, t + 8)[0] - 64, struct.unpack_from("<Q", data, t + 8)[0] - 56),
            b"\1" * 8),
        "blocks out of order": at(t, "<I", 1 << 30),
        "block of another size": at(t + 16, "<Q", struct.unpack_from("<Q", data, t + 16)[0] - 64),
    }


def test_damaged_files_give_a_clean_error(compiled, tmp_path):
    src, nnf = compiled
    data = nnf.read_bytes()
    for what, edit in damaged_cases(data).items():
        bad = edited(nnf, tmp_path / "bad.nnf", edit)
        proc = nnfuse_cmd("run", bad, "-o", tmp_path / "out")
        assert proc.returncode == 2, f"{what}: exit {proc.returncode}\n{proc.stderr}"
        assert str(bad) in proc.stderr and "compile" not in proc.stderr.split(":")[0], proc.stderr
        assert proc.stderr.count("\n") >= 1


def test_compile_report(tmp_path):
    """--report: the node counts before and after the passes, each fused node with the nodes it
    replaced, the arena of a run and the file's size."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "W")
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["y"], name="gap")]
    g = helper.make_graph(nodes, "fuse", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 1, 1])], [w])
    src = tmp_path / "m.onnx"
    onnx.save(model_of(g), str(src))
    out, rep = tmp_path / "m.nnf", tmp_path / "r.json"
    nnfuse_cmd("compile", src, "-o", out, "--report", rep, check=0)
    r = json.loads(rep.read_text())
    assert r["nodes_before"] == 3 and r["nodes_after"] < 3
    assert any(set(f["nodes"]) >= {"conv", "relu"} for f in r["fusions"]), r["fusions"]
    assert r["file_bytes"] == out.stat().st_size and r["arena_bytes"] > 0
    assert r["opt_level"] == 3
    # the conv's packed weights (8 output channels padded to its tile) and the output's and
    # the conv's tensors; the GlobalAveragePool's output at least
    assert r["weights_bytes"] >= 8 * 27 * 4 and r["sum_tensor_bytes"] >= 8 * 4


def test_compile_usage_and_errors(compiled, tmp_path):
    src, _ = compiled
    assert nnfuse_cmd("compile", src).returncode == 1  # no -o
    proc = nnfuse_cmd("compile", src, "-o", tmp_path / "x.nnf", "--precision", "int8")
    assert proc.returncode == 3 and "fp32" in proc.stderr
    proc = nnfuse_cmd("compile", tmp_path / "missing.onnx", "-o", tmp_path / "x.nnf")
    assert proc.returncode == 2 and "missing.onnx" in proc.stderr
    proc = nnfuse_cmd("compile", src, "-o", tmp_path / "no" / "dir" / "x.nnf")
    assert proc.returncode == 2 and "x.nnf" in proc.stderr
    assert not list(tmp_path.glob("*.tmp"))


def test_compiled_input_shapes(tmp_path):
    """A model with a symbolic batch compiled with --input-shape: loading the file without shapes
    fixes the compiled ones (kernels planned at load, blocks read in place); other shapes plan
    from the model inside it."""
    src = zoocheck.ensure_zoo(str(ROOT / "build" / "zoo" / "tiny_dynamic"), ["resnet_tiny"],
                              flags=("--dynamic-batch",))["resnet_tiny"]
    nnf = tmp_path / "dyn.nnf"
    nnfuse_cmd("compile", src, "-o", nnf, "--input-shape", "input:2,3,64,64", "--verify", check=0)
    info = json.loads(nnfuse_cmd("info", nnf, "--json", check=0).stdout)
    assert info["inputs"][0]["shape"] == [2, 3, 64, 64]
    got, log = run_outputs(nnf, tmp_path / "nnf")
    assert "read in place" in log and "warn" not in log, log
    ref, _ = run_outputs(src, tmp_path / "onnx", "--input-shape", "input:2,3,64,64")
    assert_same(ref, got)
    got, log = run_outputs(nnf, tmp_path / "other", "--input-shape", "input:1,3,64,64")
    ref, _ = run_outputs(src, tmp_path / "onnx1", "--input-shape", "input:1,3,64,64")
    assert "compiled for another shape" in log, log
    assert_same(ref, got)


def test_python_compile_and_load(compiled, tmp_path):
    """nnfuse.compile, then the file through Model(path) and Model(bytes) (any buffer alignment:
    the package copies it to a 64-byte boundary)."""
    src, _ = compiled
    out = tmp_path / "py.nnf"
    nnfuse.compile(src, out)
    name, shape = nnfuse.Model(src).inputs[0]["name"], nnfuse.Model(src).inputs[0]["shape"]
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    ref = nnfuse.run_model(str(src), {name: x})
    for model in (str(out), out.read_bytes()):
        got = nnfuse.run_model(model, {name: x})
        assert_same(ref, got)
    with pytest.raises(nnfuse.NnfError):
        nnfuse.compile(tmp_path / "missing.onnx", tmp_path / "m.nnf")


def test_tools_take_a_compiled_file(compiled, tmp_path):
    """info, profile, graph and compare (against the unfused reference and against ONNX Runtime,
    which reads the ONNX model inside the file) on a .nnf as on its .onnx."""
    src, nnf = compiled
    info = json.loads(nnfuse_cmd("info", nnf, "--json", check=0).stdout)
    plain = json.loads(nnfuse_cmd("info", src, "--json", check=0).stdout)
    assert info["inputs"] == plain["inputs"] and plain["compiled"] is None
    assert info["compiled"] == {"packed_weights_read_in_place": True, "compiled_for_another": None}
    info = json.loads(nnfuse_cmd("info", nnf, "--json", "-O1", check=0).stdout)
    assert info["compiled"] == {"packed_weights_read_in_place": False, "compiled_for_another": "opt"}
    assert "compiled:   for this build" in nnfuse_cmd("info", nnf, check=0).stdout
    nnfuse_cmd("profile", nnf, "--iterations", 2, "-o", tmp_path / "t.json", check=0)
    assert "digraph" in nnfuse_cmd("graph", nnf, check=0).stdout
    assert "within tolerance" in nnfuse_cmd("compare", nnf, check=0).stdout
    pytest.importorskip("onnxruntime")
    proc = nnfuse_cmd("compare", nnf, "--reference", "onnxruntime", check=0)
    assert "within tolerance" in proc.stdout and "0 without a reference" in proc.stdout


def test_model_with_external_data(tmp_path):
    """A model whose weights are in an external data file: the .nnf refers to that file by the
    same relative path (from its own directory), and its blocks replace the weights."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), "W")
    g = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1])], "ext",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 16, 16])], [w])
    src = tmp_path / "m.onnx"
    onnx.save(model_of(g), str(src), save_as_external_data=True, location="m.data", size_threshold=0)
    nnf = tmp_path / "m.nnf"
    nnfuse_cmd("compile", src, "-o", nnf, "--verify", check=0)
    got, log = run_outputs(nnf, tmp_path / "nnf")
    assert "read in place" in log
    ref, _ = run_outputs(src, tmp_path / "onnx")
    assert_same(ref, got)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (moved / "m.nnf").write_bytes(nnf.read_bytes())
    proc = nnfuse_cmd("run", moved / "m.nnf", "-o", tmp_path / "o")
    assert proc.returncode == 2 and "m.data" in proc.stderr


@pytest.mark.parametrize("name", ["resnet_tiny", "mobilenetv2_tiny"])
def test_reference_kernels_on_a_compiled_file(tiny_zoo, tmp_path, name):
    """A reference-kernel session keeps the unpacked weights: the blocks are still replayed, the
    BatchNorm scales still applied to what the reference kernels read (and the weights the file
    lists as packed aligned for them)."""
    src, nnf = tiny_zoo[name], tmp_path / f"{name}.nnf"
    nnfuse_cmd("compile", src, "-o", nnf, check=0)
    ref, _ = run_outputs(src, tmp_path / "onnx", "--reference")
    got, log = run_outputs(nnf, tmp_path / "nnf", "--reference")
    assert "read in place" in log
    assert_same(ref, got)
