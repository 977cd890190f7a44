"""Input shapes fixed at load (nnf_model_options.input_shapes, the CLI's --input-shape, Python's
input_shapes=): a model exported with symbolic dims gets the same passes and kernels as one with
fixed shapes, every dim named like a fixed one follows, and bad entries or runs with other shapes
are refused with a message naming the input."""
import json
import re
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnfuse
from conftest import NNF_BIN, model_of, profile_nodes

RNG = np.random.default_rng(5)


def dyn_model():
    """Conv + BatchNormalization + Relu, then MatMul with a bias, over a symbolic batch "N"; a
    second input shares "N" and a symbolic "L" that nothing fixes but itself."""
    w = numpy_helper.from_array(RNG.standard_normal((16, 4, 3, 3)).astype(np.float32) * 0.3, "w")
    stats = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in
             (("s", 1 + 0.1 * RNG.standard_normal(16)), ("bb", RNG.standard_normal(16)),
              ("mean", 0.1 * RNG.standard_normal(16)), ("var", 0.5 + RNG.random(16)))]
    fw = numpy_helper.from_array(RNG.standard_normal((16 * 8 * 8, 10)).astype(np.float32) * 0.05, "fw")
    fb = numpy_helper.from_array(RNG.standard_normal(10).astype(np.float32), "fb")
    shape = numpy_helper.from_array(np.array([0, -1], np.int64), "shape")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "mean", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["f"]),
             helper.make_node("MatMul", ["f", "fw"], ["m"]),
             helper.make_node("Add", ["m", "fb"], ["y"]),
             helper.make_node("Relu", ["z"], ["y2"])]
    g = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8, 8]),
                                         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", "L"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10]),
                           helper.make_tensor_value_info("y2", TensorProto.FLOAT, ["N", "L"])],
                          [w, *stats, fw, fb, shape])
    return model_of(g).SerializeToString()


@pytest.fixture(scope="module")
def dyn_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("dyn") / "dyn.onnx"
    path.write_bytes(dyn_model())
    return path


def npy(beside, name, shape):
    """An .npy input file beside a model (the CLI's -i keeps the load's shapes symbolic)."""
    path = beside.with_name(f"{name}.npy")
    np.save(path, RNG.standard_normal(shape).astype(np.float32))
    return path


def feeds(n, length=5):
    return {"x": RNG.standard_normal((n, 4, 8, 8)).astype(np.float32),
            "z": RNG.standard_normal((n, length)).astype(np.float32)}


def test_fixed_shapes_run_planned_kernels(dyn_path):
    """Symbolic, without shape plans: the Conv on its reference kernel; the MatMul on the GEMM
    with B packed and its bias Add in it (a row of the output's known last extent, whatever
    "N" is). Fixed at load, or planned for the run's shapes on the first run (a shape plan, the
    default): planned kernels, the conv with the BatchNormalization and the Relu in it, the
    GEMM with its bias."""
    given = ["-i", f"x={npy(dyn_path, 'x', (3, 4, 8, 8))}", "-i", f"z={npy(dyn_path, 'z', (3, 5))}"]
    node = {e["args"]["op_name"]: e["args"]
            for e in profile_nodes(dyn_path, "--threads", 1, "--shape-plans", 0, *given)}
    assert node["Conv"]["kernel"] == "ref" and "Add" not in node, node
    assert node["MatMul"]["kernel"].endswith("_packed_b"), node
    assert sorted(node["MatMul"]["fused_from"]) == ["Add_5", "MatMul_4"]
    for how in (["--input-shape", "x:3,4,8,8", "--input-shape", "z:3,5"], given, ["--warmup", 0, *given]):
        node = {e["args"]["op_name"]: e["args"] for e in profile_nodes(dyn_path, "--threads", 1, *how)}
        assert node["Conv"]["kernel"].startswith("f32_conv") and "gemm" in node["MatMul"]["kernel"], (how, node)
        assert sorted(node["Conv"]["fused_from"]) == ["BatchNormalization_1", "Conv_0", "Relu_2"], how
        assert sorted(node["MatMul"]["fused_from"]) == ["Add_5", "MatMul_4"], how


def test_outputs_equal_onnxruntime_at_every_level(dyn_path):
    ort = pytest.importorskip("onnxruntime")
    f = feeds(3)
    want = ort.InferenceSession(str(dyn_path), providers=["CPUExecutionProvider"]).run(None, f)
    for level in (0, 3):
        for shapes, plans in ((None, None), (None, 0), ({"x": (3, 4, 8, 8), "z": (3, 5)}, None)):
            got = nnfuse.Session(str(dyn_path), threads=1, opt_level=level, input_shapes=shapes,
                                 shape_plans=plans).run(f)
            np.testing.assert_allclose(got["y"], want[0], rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(got["y2"], want[1], rtol=0, atol=0)


def test_named_dims_follow(dyn_path):
    """Fixing x's "N" fixes z's and the outputs' "N" too; "L" stays symbolic."""
    m = nnfuse.Model(str(dyn_path), input_shapes={"x": [2, 4, 8, 8]})
    shapes = {v["name"]: v["shape"] for v in m.inputs + m.outputs}
    assert shapes == {"x": [2, 4, 8, 8], "z": [2, "L"], "y": [2, 10], "y2": [2, "L"]}
    out = nnfuse.Session(m, threads=1).run(feeds(2, 7))
    assert out["y"].shape == (2, 10) and out["y2"].shape == (2, 7)


@pytest.mark.parametrize("shapes, words", [
    ({"q": (1, 4, 8, 8)}, ["no input 'q'"]),
    ({"x": (1, 4, 8)}, ["'x'", "rank 4, not 3"]),
    ({"x": (1, 3, 8, 8)}, ["'x'", "dim 1 is 4 in the model, not 3"]),
    ({"x": (-1, 4, 8, 8)}, ["'x'", "dim 0 is -1"]),
    ({"x": (2, 4, 8, 8), "z": (3, 5)}, ["dim 'N' is 2 for input 'x' and 3 for input 'z'"]),
])
def test_bad_shapes_are_refused(dyn_path, shapes, words):
    with pytest.raises(nnfuse.NnfError) as e:
        nnfuse.Model(str(dyn_path), input_shapes=shapes)
    for w in words:
        assert w in str(e.value), str(e.value)
    assert "dyn.onnx" in str(e.value)


def test_runs_with_other_shapes_are_refused(dyn_path):
    s = nnfuse.Session(str(dyn_path), threads=1, input_shapes={"x": (2, 4, 8, 8)})
    with pytest.raises(nnfuse.NnfError, match=r"input 'x' must have shape 2x4x8x8, got 3 in dim 0"):
        s.run(feeds(3))


def test_cli_warns_about_symbolic_dims_and_takes_input_shape(dyn_path):
    run = [NNF_BIN, "bench", str(dyn_path), "--threads", "1", "--iterations", "1", "--warmup", "0"]
    p = subprocess.run(run, capture_output=True, text=True, check=True)
    assert re.search(r"2 nodes \(first 'Conv_0', Conv; \d+ % of the FLOPs\) wait for shapes", p.stderr), p.stderr
    assert "--input-shape" in p.stderr, p.stderr
    p = subprocess.run(run + ["--shape-plans", "0"], capture_output=True, text=True, check=True)
    assert "planned without shapes" in p.stderr and "--input-shape" in p.stderr, p.stderr
    p = subprocess.run(run + ["--input-shape", "x:2,4,8,8", "--input-shape", "z:2,3"], capture_output=True,
                       text=True, check=True)
    assert "shapes" not in p.stderr, p.stderr
    p = subprocess.run(run + ["--shape-plans", "-1"], capture_output=True, text=True)
    assert p.returncode == 1, p.stderr
    # info loads the model twice (as exported, and optimised): one warning; the node count says
    # that the passes run per set of shapes
    p = subprocess.run([NNF_BIN, "info", str(dyn_path)], capture_output=True, text=True, check=True)
    assert p.stderr.count("wait for shapes") == 1, p.stderr
    assert "folded and fused per set of input shapes" in p.stdout, p.stdout
    # with unknown extents taken as 1 its FLOPs are a floor of those with the shapes fixed to 1
    # (the Reshape's -1 stays unknown: 1 there, 1024 fixed); --input-shape counts them all
    info = [NNF_BIN, "info", str(dyn_path), "--json"]
    sym = json.loads(subprocess.run(info, capture_output=True, text=True, check=True).stdout)
    fixed = json.loads(subprocess.run(info + ["--input-shape", "x:1,4,8,8", "--input-shape", "z:1,1"],
                                      capture_output=True, text=True, check=True).stdout)
    assert sym["gflops"] == 0 and sym["nodes_without_cost"] > 0, sym
    assert fixed["nodes_without_cost"] == 0 and fixed["inputs"][0]["shape"] == [1, 4, 8, 8], fixed
    assert 0 < sym["gflops_unknown_extents_1"] <= fixed["gflops"] == fixed["gflops_unknown_extents_1"]
    assert fixed["nodes_after_optimisation"] < fixed["nodes"], fixed
    p = subprocess.run(run + ["--input-shape", "x:2,4,x"], capture_output=True, text=True)
    assert p.returncode != 0 and "--input-shape x:2,4,x: bad dims" in p.stderr


# ---- kernels planned on symbolic shapes (NNF_OP_SYM): every run-time shape as ONNX Runtime --------

def sym_model(nodes, inputs, outputs, inits=(), opset=17):
    """inputs: (name, shape[, TensorProto dtype])."""
    g = helper.make_graph(nodes, "sym", [helper.make_tensor_value_info(i[0], i[2] if len(i) > 2 else TensorProto.FLOAT, i[1])
                                         for i in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs], list(inits))
    return model_of(g, opset).SerializeToString()


def const(name, shape, scale=1.0):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def arrays(**shapes):
    return {n: RNG.standard_normal(s).astype(np.float32) for n, s in shapes.items()}


SYM_CASES = {
    # MatMul with a constant B (packed; A's leading axes flattened) and a batched non-constant B
    # that broadcasts; Gemm with a symbolic M and a column bias
    "matmul": (sym_model([helper.make_node("MatMul", ["a", "w"], ["y"]), helper.make_node("MatMul", ["q", "k"], ["s"]),
                          helper.make_node("Gemm", ["g", "gw", "gc"], ["gy"], transB=1, alpha=0.5, beta=2.0)],
                         [("a", ["B", "T", 13]), ("q", ["B", 3, "T", 7]), ("k", [1, 3, 7, "U"]), ("g", ["M", 13])],
                         ["y", "s", "gy"], [const("w", (13, 31)), const("gw", (17, 13)), const("gc", (17,))]),
               lambda b, t, u: arrays(a=(b, t, 13), q=(b, 3, t, 7), k=(1, 3, 7, u), g=(t, 13))),
    # A reshaped to a rank unknown at load (the target's length is symbolic) before a MatMul with
    # a constant B: ranks 2, 3 and 4 at run time
    "unknown_rank": (sym_model([helper.make_node("Reshape", ["a", "sh"], ["r"], allowzero=1), helper.make_node("MatMul", ["r", "w"], ["y"])],
                               [("a", ["B", "T", 13]), ("sh", ["R"], TensorProto.INT64)], ["y"], [const("w", (13, 80))]),
                     lambda b, t, u: {**arrays(a=(b, t, 13)),
                                      "sh": np.array([[b * t], [t, b], [1, b, t]][u % 3] + [13], np.int64)}),
    # softmax over the last axis (opset 13) and coerced to 2-D at axis 1 (opset 11); at opset 13 an
    # axis before trailing axes of extent > 1 takes the reference kernel at run time
    "softmax13": (sym_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1),
                             helper.make_node("LogSoftmax", ["x"], ["z"], axis=2)],
                            [("x", ["B", 3, "T", "U"])], ["y", "z"], opset=13),
                  lambda b, t, u: arrays(x=(b, 3, t, u))),
    "softmax11": (sym_model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [("x", ["B", 3, "T", "U"])], ["y"], opset=11),
                  lambda b, t, u: arrays(x=(b, 3, t, u))),
    # binary ops whose broadcast pattern is classified per run (same shape, scalar, a row, a
    # column and an outer pattern the fast kernels may leave to the reference), Pow by a constant
    # scalar, unary ops
    "eltwise": (sym_model([helper.make_node("Add", ["x", "x2"], ["s0"]), helper.make_node("Mul", ["x", "c"], ["s1"]),
                           helper.make_node("Sub", ["x", "row"], ["s2"]), helper.make_node("Div", ["x", "col"], ["s3"]),
                           helper.make_node("Max", ["x", "outer"], ["s4"]), helper.make_node("Pow", ["x", "two"], ["s5"]),
                           helper.make_node("Erf", ["x"], ["s6"]), helper.make_node("Sigmoid", ["x"], ["s7"])],
                          [("x", ["B", "T", "U"]), ("x2", ["B", "T", "U"]), ("col", ["B", "T", 1]), ("outer", ["B", 1, "U"])],
                          ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"],
                          [const("c", ()), numpy_helper.from_array(np.array(2.0, np.float32), "two"), const("row", (1, 1, 1))]),
                lambda b, t, u: {**arrays(x=(b, t, u), x2=(b, t, u), outer=(b, 1, u)),
                                 "col": (RNG.random((b, t, 1)) + 0.5).astype(np.float32)}),
    # LayerNormalization over a known last extent (rows from the run) and Transposes whose kernel
    # the run's extents pick: a batched 2-D transpose, whole rows, the heads split of attention
    "norm_transpose": (sym_model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
                                  helper.make_node("Transpose", ["x"], ["t0"], perm=[0, 2, 1]),
                                  helper.make_node("Transpose", ["x"], ["t1"], perm=[1, 0, 2]),
                                  helper.make_node("Transpose", ["h"], ["t2"], perm=[0, 2, 1, 3])],
                                 [("x", ["B", "T", 13]), ("h", ["B", "T", 3, "U"])], ["n", "t0", "t1", "t2"],
                                 [const("g", (13,)), const("b", (13,))]),
                       lambda b, t, u: arrays(x=(b, t, 13), h=(b, t, 3, u))),
}


@pytest.mark.parametrize("case", sorted(SYM_CASES))
def test_symbolic_plans_match_onnxruntime_at_every_run_shape(case):
    """One session per thread count, runs at several shapes (1, primes, a tile edge, empty): the
    kernels planned on symbolic shapes give ONNX Runtime's outputs."""
    ort = pytest.importorskip("onnxruntime")
    data, make = SYM_CASES[case]
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    sessions = {t: nnfuse.Session(data, threads=t, shape_plans=0) for t in (1, 2)}
    for b, t, u in ((1, 1, 1), (2, 7, 13), (3, 17, 16), (1, 31, 5), (2, 0, 3)):
        f = make(b, t, u)
        want = ref.run(None, f)
        for threads, s in sessions.items():
            got = s.run(f)
            for name, w in zip(list(got), want):
                np.testing.assert_allclose(got[name], w, rtol=2e-5, atol=2e-5,
                                           err_msg=f"{case} {name} at {b},{t},{u} x{threads}")


# ---- shape plans: a model with symbolic dims plans each new set of input shapes on its first run -----

def test_shape_plans_match_onnxruntime_up_to_their_cap(dyn_path, capfd):
    """Two sessions (1 and 2 threads) share a model that keeps 2 shape plans: runs at shapes
    seen before, new ones, and ones beyond the cap (on the symbolic plan, one warning) all give
    ONNX Runtime's outputs."""
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(str(dyn_path), providers=["CPUExecutionProvider"])
    m = nnfuse.Model(str(dyn_path), shape_plans=2)
    sessions = [nnfuse.Session(m, threads=t) for t in (1, 2)]
    for n, length in ((1, 1), (3, 5), (1, 1), (2, 7), (5, 2), (3, 5), (2, 7)):
        f = feeds(n, length)
        want = ref.run(None, f)
        for s in sessions:
            got = s.run(f)
            np.testing.assert_allclose(got["y"], want[0], rtol=1e-4, atol=1e-4, err_msg=f"{n}x{length}")
            np.testing.assert_array_equal(got["y2"], want[1])
    err = capfd.readouterr().err
    assert err.count("a new set of input shapes after 2 planned ones") == 1, err


def test_shape_plans_take_inputs_that_disagree_on_a_named_dim(dyn_path):
    """x's "N" 3 and z's 2: onnxruntime runs it, so does the shape plan (which then leaves "N"
    symbolic past the inputs); at load, the same shapes are refused (test_bad_shapes_are_refused)."""
    ort = pytest.importorskip("onnxruntime")
    f = {"x": feeds(3)["x"], "z": feeds(2, 5)["z"]}
    want = ort.InferenceSession(str(dyn_path), providers=["CPUExecutionProvider"]).run(None, f)
    got = nnfuse.Session(str(dyn_path), threads=1).run(f)
    np.testing.assert_allclose(got["y"], want[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got["y2"], want[1])


def test_sessions_on_threads_share_shape_plans(dyn_path):
    """Sessions on four threads run one model at overlapping sets of shapes at once."""
    import threading
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(str(dyn_path), providers=["CPUExecutionProvider"])
    cases = [feeds(n, length) for n, length in ((1, 3), (2, 3), (4, 1), (2, 3), (1, 3), (3, 2))]
    wants = [ref.run(None, f) for f in cases]
    m = nnfuse.Model(str(dyn_path))
    errors = []

    def work(first):
        try:
            s = nnfuse.Session(m, threads=1)
            for i in range(len(cases)):
                k = (first + i) % len(cases)
                got = s.run(cases[k])
                np.testing.assert_allclose(got["y"], wants[k][0], rtol=1e-4, atol=1e-4)
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_models_whose_waiting_nodes_carry_no_flops_plan_no_shapes(tmp_path):
    """A model whose nodes waiting for shapes carry no FLOPs (a Concat before a MatMul planned
    on symbolic shapes) keeps its symbolic plan for every shape: a shape plan would cost a load
    and a second copy of the weights for nothing."""
    path = tmp_path / "t.onnx"
    path.write_bytes(sym_model([helper.make_node("Concat", ["a", "a"], ["t"], axis=0),
                                helper.make_node("MatMul", ["t", "w"], ["y"])],
                               [("a", ["B", "T", 13])], ["y"], [const("w", (13, 31))]))
    a = npy(path, "a", (2, 5, 13))
    p = subprocess.run([NNF_BIN, "run", str(path), "-v", "-i", f"a={a}"], capture_output=True, text=True, check=True,
                       cwd=tmp_path)  # `run` writes its outputs into the working directory
    assert "1 node (first 'Concat_0', Concat; 0 % of the FLOPs) planned without shapes" in p.stderr, p.stderr
    assert "planned for the run's input shapes" not in p.stderr, p.stderr
    kernels = {e["args"]["op_name"]: e["args"]["kernel"] for e in profile_nodes(path, "-i", f"a={a}")}
    assert kernels["Concat"] == "ref" and kernels["MatMul"].endswith("_packed_b"), kernels


def test_compare_and_profile_follow_shape_plans(dyn_path):
    """`nnfuse compare` checks a shape plan's nodes against the reference kernels, and finds an
    error injected in a node that the shape plan fused into the Conv."""
    run = [NNF_BIN, "compare", str(dyn_path), "--threads", "1"]
    p = subprocess.run(run, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run(run, capture_output=True, text=True, env={**__import__("os").environ,
                                                                   "NNF_TEST_INJECT": "Relu_2:0.01"})
    assert p.returncode == 4, p.stdout + p.stderr
    assert "first tensor beyond tolerance is 'r' from node 'Conv_0+" in p.stderr, p.stderr


def test_reference_kernel_sessions_need_a_model_that_keeps_its_weights(dyn_path):
    """A model whose runs all go to shape plans keeps no aligned weights of its own: a
    reference-kernel session on it is refused, saying how to load it; loaded with
    keep_unpacked_weights it runs and gives the shape plan's outputs."""
    with pytest.raises(nnfuse.NnfError, match="plans for its input shapes at run time: load it with "
                                              "keep_unpacked_weights"):
        nnfuse.Session(nnfuse.Model(str(dyn_path)), threads=1, reference_kernels=True)
    f = feeds(2)
    want = nnfuse.Session(str(dyn_path), threads=1).run(f)
    got = nnfuse.Session(str(dyn_path), threads=1, reference_kernels=True).run(f)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-4, atol=1e-4)


def test_shapes_that_depend_on_data_plan_no_shapes(tmp_path):
    """Fixed input shapes, but a Conv's input shape comes from an input's data (a Reshape to a
    fed shape): no shape plans (the inputs' shapes never change), the Conv on its reference
    kernel, ONNX Runtime's outputs, and no warning about symbolic dims."""
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "d.onnx"
    path.write_bytes(sym_model([helper.make_node("Reshape", ["x", "s"], ["r"]),
                                helper.make_node("Conv", ["r", "w"], ["y"], pads=[1, 1, 1, 1])],
                               [("x", [1, 48]), ("s", [4], TensorProto.INT64)], ["y"], [const("w", (8, 3, 3, 3))]))
    f = {"x": RNG.standard_normal((1, 48)).astype(np.float32), "s": np.array([1, 3, 4, 4], np.int64)}
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, f)
    np.testing.assert_allclose(nnfuse.Session(str(path), threads=1).run(f)["y"], want[0], rtol=1e-5, atol=1e-5)
    np.save(tmp_path / "x.npy", f["x"])
    np.save(tmp_path / "s.npy", f["s"])
    p = subprocess.run([NNF_BIN, "run", str(path), "-i", f"x={tmp_path / 'x.npy'}", "-i", f"s={tmp_path / 's.npy'}"],
                       capture_output=True, text=True, check=True, cwd=tmp_path)
    assert "symbolic" not in p.stderr and "shapes" not in p.stderr, p.stderr


def test_a_residual_fused_by_dim_names_checks_the_run(tmp_path):
    """MatMul + Add of a second input, both "B x S x 16": fused by the dims' names (the residual
    epilogue). Inputs that keep to the names match onnxruntime; so does a run whose residual has
    one row for every row (it broadcasts, as the Add would); a run whose inputs disagree on "S"
    otherwise is refused with a message naming the node, never read out of bounds."""
    ort = pytest.importorskip("onnxruntime")
    data = sym_model([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "r"], ["y"])],
                     [("x", ["B", "S", 16]), ("r", ["B", "S", 16])], ["y"], [const("w", (16, 16))])
    s = nnfuse.Session(data, threads=1)
    for b, t in ((1, 1), (2, 7), (3, 13)):
        f = arrays(x=(b, t, 16), r=(b, t, 16))
        want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, f)[0]
        np.testing.assert_allclose(s.run(f)["y"], want, rtol=2e-5, atol=2e-5)
    f = arrays(x=(2, 3, 16), r=(2, 1, 16))
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, f)[0]
    np.testing.assert_allclose(s.run(f)["y"], want, rtol=2e-5, atol=2e-5)
    with pytest.raises(nnfuse.NnfError, match=r"MatMul_0.*fused residual does not broadcast to the output"):
        s.run(arrays(x=(1, 3, 16), r=(1, 2, 16)))


def test_reshape_targets_computed_from_shapes_keep_the_dims_names(tmp_path):
    """x.view(x.size()[:-1] + (2, 8)) and back with x.size()[:2] + (-1,), as exporters write them
    (Shape -> Slice -> Concat, Shape -> Gather -> Unsqueeze -> Concat): load knows the results as
    "B x S x 2 x 8" and "B x S x 16", and the runs match onnxruntime's."""
    ort = pytest.importorskip("onnxruntime")
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], ["sh"]),
             helper.make_node("Slice", ["sh", "zero", "minus1"], ["lead"]),
             helper.make_node("Concat", ["lead", "heads"], ["t1"], axis=0),
             helper.make_node("Reshape", ["x", "t1"], ["split"]),
             helper.make_node("Shape", ["split"], ["sh2"]),
             helper.make_node("Gather", ["sh2", "one"], ["s"], axis=0),
             helper.make_node("Unsqueeze", ["s", "axes0"], ["s1"]),
             helper.make_node("Gather", ["sh2", "zero_s"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b", "axes0"], ["b1"]),
             helper.make_node("Concat", ["b1", "s1", "minus1"], ["t2"], axis=0),
             helper.make_node("Reshape", ["split", "t2"], ["merged"]),
             helper.make_node("Relu", ["merged"], ["y"])]
    inits = [i64("zero", [0]), i64("minus1", [-1]), i64("heads", [2, 8]), i64("one", 1), i64("zero_s", 0),
             i64("axes0", [0])]
    path = tmp_path / "views.onnx"
    path.write_bytes(sym_model(nodes, [("x", ["B", "S", 16])], ["y"], inits))
    dot = subprocess.run([NNF_BIN, "graph", str(path)], capture_output=True, text=True, check=True).stdout
    assert 'label="BxSx2x8"' in dot and 'label="BxSx16"' in dot, dot
    s = nnfuse.Session(str(path), threads=1)
    for b, t in ((1, 1), (2, 5)):
        f = arrays(x=(b, t, 16))
        want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, f)[0]
        np.testing.assert_array_equal(s.run(f)["y"], want)
