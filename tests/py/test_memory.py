"""Load-time memory release: weights that kernels packed are released (the resident copy of a
model roughly halves), file pages go back to the page cache, and a caller's buffer is never
touched. Reference-kernel sessions need the unpacked weights and say so."""
import ctypes
import hashlib
import json
import os
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnfuse
from conftest import NNF_BIN, model_of

RNG = np.random.default_rng(11)


def conv_model():
    w = numpy_helper.from_array(RNG.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.2, "w")
    b = numpy_helper.from_array(RNG.standard_normal(16).astype(np.float32), "b")
    m = numpy_helper.from_array(RNG.standard_normal((16 * 6 * 6, 10)).astype(np.float32) * 0.1, "m")
    shape = numpy_helper.from_array(np.array([1, -1], np.int64), "shape")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["f"]), helper.make_node("MatMul", ["f", "m"], ["y"])]
    g = helper.make_graph(nodes, "mem", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], [w, b, m, shape])
    return model_of(g).SerializeToString()


X = RNG.standard_normal((1, 8, 8, 8)).astype(np.float32)


def test_caller_buffer_is_never_modified():
    data = conv_model()
    before = hashlib.sha256(data).hexdigest()
    model = nnfuse.Model(data)
    out = nnfuse.Session(model, threads=1).run({"x": X})["y"]
    assert hashlib.sha256(ctypes.string_at(model._at, len(data))).hexdigest() == before
    assert np.isfinite(out).all()


def test_packed_weights_released_results_unchanged(tmp_path):
    path = tmp_path / "m.onnx"
    data = conv_model()
    path.write_bytes(data)
    fast = nnfuse.Session(str(path), threads=1).run({"x": X})["y"]
    ref = nnfuse.Session(str(path), threads=1, reference_kernels=True).run({"x": X})["y"]
    unfused = nnfuse.Session(str(path), threads=1, opt_level=0).run({"x": X})["y"]
    np.testing.assert_allclose(fast, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fast, unfused, rtol=1e-5, atol=1e-5)
    # the file on disk is untouched by the page release
    assert path.read_bytes() == data


def test_reference_session_on_released_model_is_a_clear_error(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(conv_model())
    model = nnfuse.Model(str(path))  # default: packed weights are released
    with pytest.raises(nnfuse.NnfError) as e:
        nnfuse.Session(model, reference_kernels=True)
    assert e.value.status == 1 and "keep_unpacked_weights" in str(e.value)
    kept = nnfuse.Model(str(path), keep_unpacked_weights=True)
    out = nnfuse.Session(kept, reference_kernels=True).run({"x": X})["y"]
    np.testing.assert_allclose(out, nnfuse.Session(model).run({"x": X})["y"], rtol=1e-5, atol=1e-5)


def bank_model():
    """Weights past the page bank's 64 KiB threshold: a BN-folded 3x3 conv with 64 channels (folded
    in place, then transformed for Winograd) and a 4096 x 64 MatMul."""
    c = 64
    w = numpy_helper.from_array(RNG.standard_normal((c, c, 3, 3)).astype(np.float32) * 0.05, "w")
    bn = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in
          (("g", RNG.uniform(0.5, 1.5, c)), ("be", RNG.standard_normal(c) * 0.1),
           ("mu", RNG.standard_normal(c) * 0.1), ("var", RNG.uniform(0.5, 2.0, c)))]
    m = numpy_helper.from_array(RNG.standard_normal((c * 8 * 8, 64)).astype(np.float32) * 0.02, "m")
    shape = numpy_helper.from_array(np.array([1, -1], np.int64), "shape")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]), helper.make_node("Reshape", ["r", "shape"], ["f"]),
             helper.make_node("MatMul", ["f", "m"], ["y"])]
    g = helper.make_graph(nodes, "bank", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [w, *bn, m, shape])
    return model_of(g).SerializeToString()


def test_load_threads_change_nothing_but_time(tmp_path):
    """Loading on one thread, or with the helper that faults pages in ahead (2 threads), gives the
    same packed weights: the same outputs to the bit, and the reference kernels' within rounding."""
    path = tmp_path / "bank.onnx"
    path.write_bytes(bank_model())
    x = RNG.standard_normal((1, 64, 8, 8)).astype(np.float32)
    outs = [nnfuse.Session(nnfuse.Model(str(path), threads=t), threads=1).run({"x": x})["y"] for t in (1, 2, 0)]
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])
    ref = nnfuse.Session(str(path), threads=1, reference_kernels=True).run({"x": x})["y"]
    np.testing.assert_allclose(outs[0], ref, rtol=1e-4, atol=1e-4)
    assert np.abs(outs[0]).max() > 0.1  # the outputs vary: the comparison is not between zeros


def padding(pad):
    """The first initialiser of a model: its doc_string, written before the others, moves their
    raw_data by pad bytes."""
    pre = numpy_helper.from_array(np.zeros(1, np.float32), "pre")
    pre.doc_string = "x" * pad
    return pre


def table_model(pad):
    """A 1000 x 64 embedding read by Gather only (its raw_data left in the file when misaligned) and a
    second table read by Gather and MatMul (left there too: the MatMul's plan packs it); pad shifts
    the offsets."""
    pre = padding(pad)
    emb = numpy_helper.from_array(RNG.standard_normal((1000, 64)).astype(np.float32), "emb")
    w2 = numpy_helper.from_array(RNG.standard_normal((64, 64)).astype(np.float32), "w2")
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"]), helper.make_node("Gather", ["w2", "ids2"], ["r"]),
             helper.make_node("MatMul", ["e", "w2"], ["m"]), helper.make_node("Add", ["m", "r"], ["y"])]
    g = helper.make_graph(nodes, "tables", [helper.make_tensor_value_info("ids", TensorProto.INT64, [5]),
                                            helper.make_tensor_value_info("ids2", TensorProto.INT64, [5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 64])], [pre, emb, w2])
    return model_of(g).SerializeToString(), numpy_helper.to_array(emb), numpy_helper.to_array(w2)


@pytest.mark.parametrize("pad", [0, 1, 2, 3])
def test_gather_tables_read_in_place(tmp_path, pad):
    """Gather reads a misaligned table where the file has it; every result as numpy's."""
    data, emb, w2 = table_model(pad)
    path = tmp_path / "t.onnx"
    path.write_bytes(data)
    ids = np.array([0, 999, 17, 500, 17], np.int64)
    ids2 = np.array([63, 0, 5, 5, 1], np.int64)
    want = emb[ids] @ w2 + w2[ids2]
    for source in (data, str(path)):
        for level in (0, 3):
            out = nnfuse.Session(nnfuse.Model(source, opt_level=level), threads=1).run(
                {"ids": ids, "ids2": ids2})["y"]
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    assert path.read_bytes() == data


def gemm_weights_model(pad):
    """GEMM weights (4 KiB and more: smaller ones are copied as they are read) whose raw_data lands
    misaligned for some pad: wa (37 x 45, B of a MatMul: N not a multiple of any panel width) and we
    (B of a Gemm) packed straight from the file, wb (B of a Gemm with transB, stored N x K: packed
    through a copy the packer makes and frees), wc read by two MatMuls and an Add (aligned after the
    plans, for the Add), wd by two MatMuls only (packed once for both, never copied)."""
    pre = padding(pad)
    w = {"wa": (37, 45), "wb": (45, 37), "wc": (37, 29), "wd": (37, 33), "we": (37, 31)}
    inits = [pre] + [numpy_helper.from_array(RNG.standard_normal(s).astype(np.float32), n) for n, s in w.items()]
    nodes = [helper.make_node("MatMul", ["x", "wa"], ["ya"]),
             helper.make_node("Gemm", ["x", "wb"], ["yb"], transB=1),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("MatMul", ["x", "wc"], ["yc"]),
             helper.make_node("MatMul", ["r", "wc"], ["yc2"]),
             helper.make_node("Add", ["z", "wc"], ["yz"]),
             helper.make_node("MatMul", ["x", "wd"], ["yd"]),
             helper.make_node("MatMul", ["r", "wd"], ["yd2"]),
             helper.make_node("Gemm", ["x", "we"], ["ye"])]
    g = helper.make_graph(nodes, "gemmw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 37]),
                                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [37, 29])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                           for n in ("ya", "yb", "yc", "yc2", "yz", "yd", "yd2", "ye")], inits)
    return model_of(g).SerializeToString(), {t.name: numpy_helper.to_array(t) for t in inits[1:]}


@pytest.mark.parametrize("pad", [0, 1, 2, 3])
def test_gemm_weights_packed_from_the_file(tmp_path, pad):
    """A GEMM's B left misaligned in the file is packed from there, with no aligned copy first,
    and copied after the plans only for a reader that no plan packed; from a caller's buffer
    (which the load cannot hand back) it is copied at import as before. Every output as numpy's
    at every level and on the reference kernels."""
    data, w = gemm_weights_model(pad)
    path = tmp_path / "g.onnx"
    path.write_bytes(data)
    x = RNG.standard_normal((5, 37)).astype(np.float32)
    z = RNG.standard_normal((37, 29)).astype(np.float32)
    r = np.maximum(x, 0)
    want = {"ya": x @ w["wa"], "yb": x @ w["wb"].T, "yc": x @ w["wc"], "yc2": r @ w["wc"], "yz": z + w["wc"],
            "yd": x @ w["wd"], "yd2": r @ w["wd"], "ye": x @ w["we"]}
    for source in (data, str(path)):
        for kw in ({"opt_level": 0}, {"opt_level": 3}, {"reference_kernels": True}):
            out = nnfuse.Session(source, threads=1, **kw).run({"x": x, "z": z})
            for name, y in want.items():
                np.testing.assert_allclose(out[name], y, rtol=1e-4, atol=1e-4, err_msg=f"{name} {kw} pad {pad}")
    assert path.read_bytes() == data
    misaligned = {n for n, a in w.items() if data.find(a.tobytes()) % 4}
    trace = subprocess.run([NNF_BIN, "run", str(path), "-o", str(tmp_path)], capture_output=True, text=True,
                           env=dict(os.environ, NNF_LOG_LEVEL="trace"), timeout=120)
    assert trace.returncode == 0, trace.stderr
    copied = {n for n in w if f"initializer '{n}' copied aligned" in trace.stderr}
    assert copied == misaligned & {"wc"}, (misaligned, trace.stderr)
    offsets = {(m := gemm_weights_model(p))[0].find(m[1]["wa"].tobytes()) % 4 for p in range(4)}
    assert offsets == {0, 1, 2, 3}  # the pads move the weights through every offset
    # a reference-kernel session on a model whose plans all packed a tied B (one block they share):
    # refused, as for a single reader's released weight, wherever the weight lay in the file
    pre = padding(pad)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MatMul", ["x", "wd"], ["y"]),
                           helper.make_node("MatMul", ["r", "wd"], ["y2"])], "tied",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 37])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "y2")],
                          [pre, numpy_helper.from_array(w["wd"], "wd")])
    tied = model_of(g).SerializeToString()
    path.write_bytes(tied)
    model = nnfuse.Model(str(path))
    np.testing.assert_allclose(nnfuse.Session(model, threads=1).run({"x": x})["y2"], r @ w["wd"], rtol=1e-4, atol=1e-4)
    with pytest.raises(nnfuse.NnfError, match="'wd' lives only packed"):
        nnfuse.Session(model, threads=1, reference_kernels=True)


def shared_layers_model(layers):
    """`layers` blocks y = x + Relu(x @ w1) @ w2 that all read the same w1 (768 x 3072) and w2
    (3072 x 768), as ALBERT's layers or an unrolled loop's copies do; x is 8 x 768."""
    w = {"w1": RNG.standard_normal((768, 3072)).astype(np.float32) * 0.02,
         "w2": RNG.standard_normal((3072, 768)).astype(np.float32) * 0.02}
    nodes, x = [], "x"
    for i in range(layers):
        nodes += [helper.make_node("MatMul", [x, "w1"], [f"h{i}"]), helper.make_node("Relu", [f"h{i}"], [f"r{i}"]),
                  helper.make_node("MatMul", [f"r{i}", "w2"], [f"m{i}"]), helper.make_node("Add", [f"m{i}", x], [f"y{i}"])]
        x = f"y{i}"
    g = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 768])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [8, 768])],
                          [numpy_helper.from_array(a, n) for n, a in w.items()])
    return model_of(g).SerializeToString(), w, x


def test_shared_weights_packed_once(tmp_path):
    """Layers that read the same weights hold them packed once: the process, the compiled file and
    its report grow by no weight block from one layer to six, the unpacked weights are released
    once every reader has packed them, and the outputs are numpy's from the .onnx (every level,
    one and two threads) and from the .nnf."""
    x = RNG.standard_normal((8, 768)).astype(np.float32)
    held = {}
    for layers in (1, 6):
        data, w, out = shared_layers_model(layers)
        want = x
        for _ in range(layers):
            want = want + np.maximum(want @ w["w1"], 0) @ w["w2"]
        path, nnf, report = tmp_path / f"s{layers}.onnx", tmp_path / f"s{layers}.nnf", tmp_path / f"r{layers}.json"
        path.write_bytes(data)
        trace = subprocess.run([NNF_BIN, "compile", str(path), "-o", str(nnf), "--report", str(report)],
                               capture_output=True, text=True, env=dict(os.environ, NNF_LOG_LEVEL="trace"), timeout=300)
        assert trace.returncode == 0, trace.stderr
        if layers > 1:
            for name in w:
                assert f"released the unpacked copy of '{name}' (every reader packed it)" in trace.stderr
        for source, levels in ((path, (0, 1, 3)), (nnf, (3,))):
            for threads in (1, 2):
                for level in levels:
                    y = nnfuse.Session(str(source), threads=threads, opt_level=level).run({"x": x})[out]
                    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4, err_msg=f"{source} {threads} -O{level}")
        bench = subprocess.run([NNF_BIN, "bench", str(path), "--threads", "1", "--warmup", "0", "--iterations", "1",
                                "--json", "-"], capture_output=True, text=True, timeout=300)
        assert bench.returncode == 0, bench.stderr
        r = json.loads(report.read_text())
        held[layers] = (r["weights_bytes"], r["file_bytes"] - len(data), json.loads(bench.stdout)["peak_rss_mb"])
    block = 768 * 3072 * 4
    assert held[1][0] >= 2 * block and held[6][0] == held[1][0], held  # the compiled model's weights
    assert held[6][1] - held[1][1] < 4096, held  # the compiled file: its table grows, not its blocks
    assert held[6][2] - held[1][2] < block / 2 / 2**20, held  # the process: not one more block


def conv_weights_model(pad):
    """Three convs whose weights' raw_data lands misaligned for some pad (a doc_string before them
    shifts it): w1 before a BatchNormalization (folded straight from the file), w2 with no
    BatchNormalization (aligned after the fold), w3 also read by a ReduceSum (aligned at import), w4
    on a constant input (the conv runs while shapes are inferred)."""
    pre = padding(pad)
    inits = [pre]
    for name in ("w1", "w2", "w3", "w4"):
        inits.append(numpy_helper.from_array(RNG.standard_normal((16, 8, 3, 3)).astype(np.float32) * 0.2, name))
    w2 = inits[2]
    w2.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w2)[:8].repeat(2, axis=1), "w2"))  # 8 x 16 x 3 x 3
    for name, v in (("s", 1 + 0.1 * RNG.standard_normal(16)), ("bb", RNG.standard_normal(16)),
                    ("mean", RNG.standard_normal(16)), ("var", 0.5 + RNG.random(16)),
                    ("xc", RNG.standard_normal((1, 8, 4, 4)))):
        inits.append(numpy_helper.from_array(v.astype(np.float32), name))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c1", "s", "bb", "mean", "var"], ["n1"]),
             helper.make_node("Relu", ["n1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["y1"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w3"], ["y2"]),
             helper.make_node("ReduceSum", ["w3"], ["y3"], keepdims=0),
             helper.make_node("Conv", ["xc", "w4"], ["y4"])]
    g = helper.make_graph(nodes, "convw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y1", "y2", "y3", "y4")],
                          inits)
    return model_of(g).SerializeToString()


@pytest.mark.parametrize("pad", [0, 1, 2, 3])
def test_conv_weights_folded_from_the_file(tmp_path, pad):
    """Conv weights left misaligned in the file by the importer: folded, aligned after the fold, or
    aligned at import, every output as ONNX Runtime's at every level and on the reference kernels."""
    ort = pytest.importorskip("onnxruntime")
    data = conv_weights_model(pad)
    path = tmp_path / "c.onnx"
    path.write_bytes(data)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": X})
    for source in (data, str(path)):
        for kw in ({"opt_level": 0}, {"opt_level": 1}, {"opt_level": 3}, {"reference_kernels": True}):
            out = nnfuse.Session(source, threads=1, **kw).run({"x": X})
            for name, w in zip(("y1", "y2", "y3", "y4"), want):
                np.testing.assert_allclose(out[name], w, rtol=1e-4, atol=1e-4, err_msg=f"{name} {kw} pad {pad}")
    assert path.read_bytes() == data


@pytest.mark.parametrize("pad", [0, 1, 3])
def test_folded_weights_read_from_the_file_then_closed(tmp_path, pad):
    """A folded BatchNormalization's weights loaded from a path are read from the file (pread),
    from a buffer through memory: the same bits either way, at one and two threads; and the loaded
    model holds no file descriptor (the load closes its files once it has planned)."""
    data = conv_weights_model(pad)
    path = tmp_path / "c.onnx"
    path.write_bytes(data)
    fds = len(os.listdir("/proc/self/fd"))
    for threads in (1, 2):
        model = nnfuse.Model(str(path), threads=threads)
        assert len(os.listdir("/proc/self/fd")) == fds
        from_file = nnfuse.Session(model, threads=threads).run({"x": X})
        from_buffer = nnfuse.Session(data, threads=threads).run({"x": X})
        for name in ("y1", "y2", "y3", "y4"):
            np.testing.assert_array_equal(from_file[name], from_buffer[name], err_msg=f"{name} {threads}")
        del model
    assert len(os.listdir("/proc/self/fd")) == fds
