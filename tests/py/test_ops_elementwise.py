"""Element-wise, activation, softmax and reduction operators end to end.

Each case builds a one-node ONNX model with onnx.helper, runs it through the
nnfuse Python binding (nnfuse.run_model) and compares with onnxruntime on the
same model (and, where ONNX semantics differ from ORT's, with numpy)."""
import numpy as np
import onnx
import pytest
from onnx import helper

import nnfuse
from conftest import model_of, profile_nodes

ort = pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(1234)


def make_model(op, feeds, attrs=None, opset=18, consts=None):
    """feeds: list of (name, array) graph inputs, or (None, None) for an omitted
    optional input; consts: {name: array} initialisers appended as inputs."""
    consts = consts or {}
    names, vinfos, inits = [], [], []
    for name, arr in feeds:
        names.append(name or "")
        if name is None:
            continue
        if name in consts:
            inits.append(onnx.numpy_helper.from_array(consts[name], name))
        else:
            vinfos.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape)))
    node = helper.make_node(op, names, ["y"], **(attrs or {}))
    out = helper.make_tensor_value_info("y", onnx.TensorProto.UNDEFINED, None)
    graph = helper.make_graph([node], "t", vinfos, [out], initializer=inits)
    model = model_of(graph, opset)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True).SerializeToString()


def run_both(op, feeds, attrs=None, opset=18, consts=None):
    # Rank-0 values go in as initialisers: nnfuse.Session.run passes inputs
    # through np.ascontiguousarray, which turns a 0-d array into shape (1,).
    consts = dict(consts or {})
    for name, arr in feeds:
        if name is not None and arr.ndim == 0:
            consts[name] = arr
    model = make_model(op, feeds, attrs, opset, consts)
    runtime_feeds = {n: a for n, a in feeds if n is not None and n not in (consts or {})}
    got = nnfuse.run_model(model, runtime_feeds)["y"]
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    want = sess.run(None, runtime_feeds)[0]
    return got, want


def assert_same(got, want, rtol=1e-5, atol=1e-6):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def rand(*shape, lo=-3.0, hi=3.0, dtype=np.float32):
    return np.asarray(RNG.uniform(lo, hi, size=shape), dtype=dtype)


def rand_int(*shape, lo=-20, hi=20, dtype=np.int64, nonzero=False):
    a = np.asarray(RNG.integers(lo, hi, size=shape), dtype=dtype)
    if nonzero:
        a[a == 0] = 3
    return a


# --- binary with broadcasting ------------------------------------------------

SHAPE_PAIRS = [
    ((2, 3, 4), (2, 3, 4)),  # same
    ((2, 3, 4), (4,)),  # row
    ((2, 3, 4), (3, 1)),  # column
    ((2, 1, 4), (3, 1)),  # both sides
    ((), (2, 3)),  # rank 0
    ((0, 3), (3,)),  # empty
]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=lambda s: f"{s[0]}x{s[1]}")
def test_binary_float(op, shapes):
    a, b = rand(*shapes[0]), rand(*shapes[1], lo=0.5, hi=3.0)
    assert_same(*run_both(op, [("a", a), ("b", b)], opset=14))


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_binary_int(op, dtype):
    a, b = rand_int(3, 4, dtype=dtype), rand_int(4, dtype=dtype, nonzero=True)
    assert_same(*run_both(op, [("a", a), ("b", b)], opset=14))


def test_pow():
    a, b = rand(2, 3, lo=0.1, hi=3), rand(3, lo=-2, hi=2)
    assert_same(*run_both("Pow", [("a", a), ("b", b)], opset=15), rtol=1e-5)
    e = np.array([0, 1, 2, 3], np.int64)
    assert_same(*run_both("Pow", [("a", rand(2, 4)), ("b", e)], opset=15), rtol=1e-5)
    ia = rand_int(5, lo=-4, hi=5, dtype=np.int64)
    assert_same(*run_both("Pow", [("a", ia), ("b", np.array(3, np.int64))], opset=15))


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_mod_int(fmod, dtype):
    a = rand_int(4, 5, lo=-30, hi=30, dtype=dtype)
    b = rand_int(5, lo=-7, hi=8, dtype=dtype, nonzero=True)
    got, want = run_both("Mod", [("a", a), ("b", b)], {"fmod": fmod}, opset=13)
    assert_same(got, want)
    np.testing.assert_array_equal(got, np.fmod(a, b) if fmod else np.mod(a, b))


def test_mod_float():
    a, b = rand(3, 4), rand(4, lo=0.5, hi=2) * np.array([1, -1, 1, -1], np.float32)
    assert_same(*run_both("Mod", [("a", a), ("b", b)], {"fmod": 1}, opset=13))


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_compare(op, dtype):
    a = rand_int(2, 3, 4, lo=-3, hi=3).astype(dtype)
    b = rand_int(3, 1, lo=-3, hi=3).astype(dtype)
    assert_same(*run_both(op, [("a", a), ("b", b)], opset=16))


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op):
    a, b = RNG.random((2, 3, 4)) < 0.5, RNG.random((3, 4)) < 0.5
    assert_same(*run_both(op, [("a", a), ("b", b)], opset=7))
    assert_same(*run_both("Not", [("a", a)], opset=1))


def test_where():
    c = RNG.random((2, 1, 4)) < 0.5
    assert_same(*run_both("Where", [("c", c), ("p", rand(3, 1)), ("q", rand(4))], opset=16))
    assert_same(*run_both("Where", [("c", c), ("p", rand_int(4)), ("q", rand_int(3, 4))], opset=16))


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_where_selects_bits(dtype):
    """Every element size, conditions at random (the select is a mask, not a branch), values kept
    bit for bit: -0.0 and NaN among the floats."""
    c = RNG.random((3, 5, 37)) < 0.5
    p, q = (rand(5, 37) * 50).astype(dtype), (rand(3, 1, 37) * 50).astype(dtype)
    if np.dtype(dtype).kind == "f":
        p[0, :4], q[0, 0, :4] = np.nan, -0.0
    got, want = run_both("Where", [("c", c), ("p", p), ("q", q)], opset=16)
    bits = np.dtype(f"u{np.dtype(dtype).itemsize}")
    assert got.shape == want.shape and np.array_equal(got.view(bits), want.view(bits))


@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=lambda d: np.dtype(d).name)
def test_where_mask_plan(dtype, tmp_path):
    """An attention mask (a [1, 1, S, S] condition over [B, H, S, S] scores, a scalar fill) runs on
    the tier's select (where32_<tier>) and gives ORT's values, bit for bit."""
    import os
    from conftest import profile_nodes
    c = RNG.random((1, 1, 9, 9)) < 0.5
    x = (rand(2, 3, 9, 9) * 50).astype(dtype)
    fill = np.asarray(-1e4 if dtype == np.float32 else -7, dtype=dtype)
    feeds = [("c", c), ("x", x), ("v", fill)]
    got, want = run_both("Where", feeds, opset=16)
    assert got.shape == want.shape and np.array_equal(got, want)
    path = tmp_path / "where.onnx"
    path.write_bytes(make_model("Where", feeds, None, 16, {"v": fill}))
    kernel = next(e["args"]["kernel"] for e in profile_nodes(path, "--iterations", 1))
    tier = os.environ.get("NNF_ISA", "").strip().lower()
    assert kernel.startswith("where32_") and (tier not in ("scalar", "avx2") or kernel.endswith(tier)), kernel


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
def test_variadic(op):
    feeds = [("a", rand(2, 1, 4)), ("b", rand(3, 1)), ("c", rand()), ("d", rand(4))]
    assert_same(*run_both(op, feeds, opset=13))
    assert_same(*run_both(op, feeds[:1], opset=13))


def test_prelu():
    x = rand(2, 3, 4, 5)
    assert_same(*run_both("PRelu", [("x", x), ("s", rand(3, 1, 1))], opset=16))
    assert_same(*run_both("PRelu", [("x", x), ("s", rand(5))], opset=16))


# --- unary -------------------------------------------------------------------

UNARY = [
    ("Relu", {}, (-3, 3)), ("LeakyRelu", {"alpha": 0.2}, (-3, 3)), ("Elu", {"alpha": 0.7}, (-3, 3)),
    ("Selu", {}, (-3, 3)), ("Celu", {"alpha": 1.5}, (-3, 3)),
    ("ThresholdedRelu", {"alpha": 0.5}, (-3, 3)), ("Sigmoid", {}, (-20, 20)),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, (-4, 4)), ("HardSwish", {}, (-5, 5)),
    ("Tanh", {}, (-5, 5)), ("Softplus", {}, (-30, 30)), ("Softsign", {}, (-5, 5)),
    ("Mish", {}, (-5, 5)), ("Gelu", {}, (-4, 4)), ("Gelu", {"approximate": "tanh"}, (-4, 4)),
    ("Erf", {}, (-3, 3)), ("Exp", {}, (-5, 5)), ("Log", {}, (0.01, 10)), ("Sqrt", {}, (0, 10)),
    ("Reciprocal", {}, (0.5, 4)), ("Neg", {}, (-3, 3)), ("Abs", {}, (-3, 3)),
    ("Floor", {}, (-3, 3)), ("Ceil", {}, (-3, 3)), ("Round", {}, (-3, 3)), ("Sign", {}, (-3, 3)),
    ("Sin", {}, (-3, 3)), ("Cos", {}, (-3, 3)), ("Tan", {}, (-1.2, 1.2)),
    ("Asin", {}, (-0.99, 0.99)), ("Acos", {}, (-0.99, 0.99)), ("Atan", {}, (-3, 3)),
    ("Sinh", {}, (-3, 3)), ("Cosh", {}, (-3, 3)), ("Asinh", {}, (-3, 3)),
    ("Acosh", {}, (1, 5)), ("Atanh", {}, (-0.95, 0.95)),
]


@pytest.mark.parametrize("op,attrs,rng", UNARY, ids=[f"{u[0]}{'_' + '_'.join(u[1]) if u[1] else ''}" for u in UNARY])
def test_unary(op, attrs, rng):
    x = rand(3, 17, lo=rng[0], hi=rng[1])
    opset = 20 if op == "Gelu" else 18
    assert_same(*run_both(op, [("x", x)], attrs, opset=opset), rtol=2e-5, atol=2e-6)


def test_round_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999], np.float32)
    got, _ = run_both("Round", [("x", x)], opset=11)
    np.testing.assert_array_equal(got, np.round(x))


@pytest.mark.parametrize("op", ["Neg", "Abs", "Sign", "Relu"])
def test_unary_int(op):
    assert_same(*run_both(op, [("x", rand_int(2, 5, dtype=np.int32))], opset=14))


def test_isnan_isinf():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    assert_same(*run_both("IsNaN", [("x", x)], opset=13))
    for attrs in ({}, {"detect_negative": 0}, {"detect_positive": 0}):
        assert_same(*run_both("IsInf", [("x", x)], attrs, opset=10))


# --- Clip --------------------------------------------------------------------

def test_clip():
    x = rand(3, 4)
    assert_same(*run_both("Clip", [("x", x)], {"min": -1.0, "max": 0.5}, opset=6))
    lo, hi = np.array(-0.5, np.float32), np.array(1.0, np.float32)
    assert_same(*run_both("Clip", [("x", x), ("lo", lo), ("hi", hi)], opset=13))
    assert_same(*run_both("Clip", [("x", x), (None, None), ("hi", hi)], opset=13))
    assert_same(*run_both("Clip", [("x", x), ("lo", lo)], opset=13,
                          consts={"lo": lo}))
    xi = rand_int(3, 4)
    assert_same(*run_both("Clip", [("x", xi), ("lo", np.array(-5, np.int64)),
                                   ("hi", np.array(7, np.int64))], opset=13))


# --- softmax family ----------------------------------------------------------

@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_softmax(op, opset, axis):
    x = rand(2, 3, 4, lo=-10, hi=10)
    if op == "Hardmax":
        x = np.round(x)  # ties: the first maximum wins
    attrs = {} if axis is None else {"axis": axis}
    assert_same(*run_both(op, [("x", x)], attrs, opset=opset))


def test_softmax_large():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]], np.float32)
    assert_same(*run_both("Softmax", [("x", x)], opset=13))
    assert_same(*run_both("LogSoftmax", [("x", x)], opset=13))


# --- reductions --------------------------------------------------------------

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
AXES = [None, [0], [1], [-1], [0, 2], [2, 0, 1]]


def axes_input_opset(op):
    return 13 if op == "ReduceSum" else 18


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce(op, axes, keepdims):
    x = rand(2, 3, 4, lo=0.1, hi=2.0)
    # the attribute form (opset 11) ...
    attrs = {"keepdims": keepdims}
    if axes is not None:
        attrs["axes"] = axes
    assert_same(*run_both(op, [("x", x)], attrs, opset=11), rtol=1e-5)
    # ... and the input form, with the axes as a constant and as a runtime input
    feeds = [("x", x)]
    if axes is not None:
        feeds.append(("axes", np.array(axes, np.int64)))
    opset = axes_input_opset(op)
    assert_same(*run_both(op, feeds, {"keepdims": keepdims}, opset=opset), rtol=1e-5)
    if axes is not None:
        assert_same(*run_both(op, feeds, {"keepdims": keepdims}, opset=opset,
                              consts={"axes": feeds[1][1]}), rtol=1e-5)


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_noop_and_empty(op):
    x = rand(2, 3, lo=0.1, hi=2.0)
    opset = axes_input_opset(op)
    feeds = [("x", x), ("axes", np.array([], np.int64))]
    got, want = run_both(op, feeds, {"noop_with_empty_axes": 1}, opset=opset,
                         consts={"axes": feeds[1][1]})
    assert_same(got, want)
    got, want = run_both(op, feeds, {"noop_with_empty_axes": 0}, opset=opset,
                         consts={"axes": feeds[1][1]})
    assert_same(got, want)


@pytest.mark.parametrize("op,expect", [("ReduceSum", 0.0), ("ReduceProd", 1.0),
                                       ("ReduceMax", -np.inf), ("ReduceMin", np.inf),
                                       ("ReduceLogSumExp", -np.inf), ("ReduceSumSquare", 0.0)])
def test_reduce_empty_set(op, expect):
    # numpy semantics per the ONNX spec (ORT differs on some of these)
    x = np.zeros((2, 0, 4), np.float32)
    feeds = [("x", x), ("axes", np.array([1], np.int64))]
    model = make_model(op, feeds, {"keepdims": 1}, opset=18, consts={"axes": feeds[1][1]})
    got = nnfuse.run_model(model, {"x": x})["y"]
    assert got.shape == (2, 1, 4)
    np.testing.assert_array_equal(got, np.full((2, 1, 4), expect, np.float32))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceProd"])
def test_reduce_int(op):
    x = rand_int(3, 4, lo=-5, hi=5)
    assert_same(*run_both(op, [("x", x)], {"axes": [1], "keepdims": 0}, opset=11))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_argminmax(op, axis, keepdims, last):
    x = np.round(rand(3, 4, 5))  # plenty of ties
    attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": last}
    assert_same(*run_both(op, [("x", x)], attrs, opset=13))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_argminmax_plan(op, last, tmp_path):
    """float32 runs on the tier's kernel: rows (the last axis) and positions side by side (an
    inner axis: a segmentation map's channels), at lengths past the vectors and their tails, on
    1 and 2 threads and with symbolic extents, against ORT on rows with many ties."""
    from conftest import TIER_SUFFIXES, profile_nodes
    for shape, axis in (((37, 1000), 1), ((2, 21, 13, 11), 1), ((3, 70, 9), 1), ((5, 9), 0)):
        x = np.round(rand(*shape) * 3)
        attrs = {"axis": axis, "keepdims": 1, "select_last_index": last}
        model = make_model(op, [("x", x)], attrs, opset=13)
        want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        for threads in (1, 2):
            got = nnfuse.Session(nnfuse.Model(model), threads=threads).run({"x": x})["y"]
            np.testing.assert_array_equal(got, want, err_msg=f"{shape} axis {axis}")
        m = onnx.load_from_string(model)  # the same with symbolic extents
        for i, d in enumerate(m.graph.input[0].type.tensor_type.shape.dim):
            d.dim_param = f"d{i}"
        np.testing.assert_array_equal(nnfuse.run_model(m.SerializeToString(), {"x": x})["y"], want)
    path = tmp_path / "arg.onnx"
    path.write_bytes(model)
    kernel = next(e["args"]["kernel"] for e in profile_nodes(path, "--iterations", 1))
    assert kernel in [f"f32_{op.lower()}_{t}" for t in TIER_SUFFIXES], kernel


# --- in place ------------------------------------------------------------------

def chain_model(op, attrs, shapes, opset, swap=False):
    """t_i = Neg(x_i) (buffers of the session's own), u = op(t...) [operands swapped], y = Neg(u):
    each t dies at op, so a planned element-wise kernel writes u over an operand as large as u
    (never y: a graph output gets a buffer of its own)."""
    xs = [helper.make_tensor_value_info(f"x{i}", onnx.TensorProto.FLOAT, list(s)) for i, s in enumerate(shapes)]
    nodes = [helper.make_node("Neg", [f"x{i}"], [f"t{i}"]) for i in range(len(shapes))]
    ts = [f"t{i}" for i in range(len(shapes))]
    nodes.append(helper.make_node(op, ts[::-1] if swap else ts, ["u"], name="op", **(attrs or {})))
    nodes.append(helper.make_node("Neg", ["u"], ["y"]))
    out = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    model = model_of(helper.make_graph(nodes, "chain", xs, [out]), opset)
    return model.SerializeToString()


def overwritten(model, tmp_path):
    """(kernel, the input it overwrote or None) of the node named 'op' in one profiled run."""
    path = tmp_path / "m.onnx"
    path.write_bytes(model)
    return [(e["args"]["kernel"], e["args"].get("over_input")) for e in profile_nodes(path, "--iterations", 1)
            if e["name"] == "op"]


IN_PLACE = [(op, attrs, rng) for op, attrs, rng in UNARY if op != "Log"] + [("Clip", {}, (-3, 3))]


@pytest.mark.parametrize("op,attrs,rng", IN_PLACE, ids=[f"{u[0]}{'_' + '_'.join(u[1]) if u[1] else ''}" for u in IN_PLACE])
def test_unary_over_its_input(op, attrs, rng, tmp_path):
    """Every unary op whose input dies there (a planned kernel then writes over it, as the profile
    says; reference kernels never do), on 1 and 2 threads (120k values: several ranges), matches
    ONNX Runtime."""
    x = rand(3, 40000, lo=-rng[1], hi=-rng[0])  # negated in the model
    model = chain_model(op, attrs, [x.shape], 20 if op == "Gelu" else 18)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x0": x})[0]
    for threads in (1, 2):
        assert_same(nnfuse.run_model(model, {"x0": x}, threads=threads)["y"], want, rtol=2e-5, atol=2e-6)
    [(kernel, over)] = overwritten(model, tmp_path)
    assert over == (None if kernel == "ref" else "t0"), (kernel, over)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu"])
@pytest.mark.parametrize("shapes", [((3, 40000), (3, 40000)), ((3, 40000), (40000,)), ((3, 40000), (3, 1))],
                         ids=["same", "row", "column"])
@pytest.mark.parametrize("swap", [False, True])
def test_binary_over_its_input(op, shapes, swap, tmp_path):
    """A binary op writes over whichever operand is as large as the output and dies there; the
    profile names it; results match ONNX Runtime on 1 and 2 threads."""
    if op == "PRelu" and swap and shapes[0] != shapes[1]:
        pytest.skip("PRelu's slope broadcasts to X only")
    feeds = {"x0": rand(*shapes[0]), "x1": rand(*shapes[1], lo=0.5, hi=3.0)}
    model = chain_model(op, None, shapes, 18, swap)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    for threads in (1, 2):
        assert_same(nnfuse.run_model(model, feeds, threads=threads)["y"], want)
    # the first slot as large as the output: t0 unless swapped with both full size
    over = [o for _, o in overwritten(model, tmp_path)]
    assert over == ["t1" if swap and shapes[0] == shapes[1] else "t0"], over
