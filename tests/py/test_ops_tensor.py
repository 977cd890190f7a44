"""Tensor / shape / data-movement operators: one-op (and shape-chain) ONNX
models run through nnfuse and compared with onnxruntime. Data movement must be
bit-exact, so comparisons use array_equal; only the float arithmetic ops
(CumSum, Range, Cast from float to float16) get a tolerance."""
import itertools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnfuse
from conftest import TIER_SUFFIXES, model_of, profile_nodes

OPSET = 18
RNG = np.random.default_rng(1234)

NP2ONNX = {np.dtype(k): v for k, v in {
    np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16,
    np.int8: TensorProto.INT8, np.int16: TensorProto.INT16, np.int32: TensorProto.INT32,
    np.int64: TensorProto.INT64, np.uint8: TensorProto.UINT8, np.uint16: TensorProto.UINT16,
    np.uint32: TensorProto.UINT32, np.uint64: TensorProto.UINT64, np.bool_: TensorProto.BOOL,
}.items()}
ALL_DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8,
              np.uint16, np.uint32, np.uint64, np.bool_]


def rand(shape, dtype=np.float32):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if dtype.kind == "f":
        return RNG.uniform(-4, 4, shape).astype(dtype)
    lo = 0 if dtype.kind == "u" else -50
    return RNG.integers(lo, 100, shape).astype(dtype)


def make_model(op, inputs, n_outputs=1, attrs=None, consts=None, opset=OPSET, dyn_shapes=None):
    """inputs: list of (name, array); names listed in consts become initializers.
    dyn_shapes: {name: shape list with None/str for symbolic dims} for graph inputs."""
    consts = consts or set()
    dyn_shapes = dyn_shapes or {}
    g_inputs, inits, names = [], [], []
    for name, arr in inputs:
        names.append(name)
        if name == "":
            continue
        if name in consts:
            inits.append(numpy_helper.from_array(np.asarray(arr), name))
        else:
            shape = dyn_shapes.get(name, list(np.shape(arr)))
            g_inputs.append(helper.make_tensor_value_info(name, NP2ONNX[np.asarray(arr).dtype], shape))
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph = helper.make_graph([node], "t", g_inputs,
                              [onnx.ValueInfoProto(name=o) for o in outs],
                              initializer=inits)
    return model_of(graph, opset).SerializeToString()


def run_both(model_bytes, feeds):
    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    got = nnfuse.run_model(model_bytes, feeds, threads=1)
    names = [o.name for o in sess.get_outputs()]
    return [got[n] for n in names], want


def check(op, inputs, n_outputs=1, attrs=None, consts=(), opset=OPSET, tol=None, dyn_shapes=None):
    model = make_model(op, inputs, n_outputs, attrs, set(consts), opset, dyn_shapes)
    feeds = {n: np.asarray(a) for n, a in inputs if n and n not in consts}
    got, want = run_both(model, feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        if tol is None:
            assert np.array_equal(g, w, equal_nan=g.dtype.kind == "f"), f"{g}\nvs\n{w}"
        else:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol)
    return got


# ---- data movement on every dtype ------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_transpose_every_dtype(dtype):
    x = rand((2, 3, 4), dtype)
    check("Transpose", [("x", x)], attrs={"perm": [2, 0, 1]})


@pytest.mark.parametrize("perm", list(itertools.permutations(range(4))))
def test_transpose_all_perms(perm):
    check("Transpose", [("x", rand((2, 3, 1, 5)))], attrs={"perm": list(perm)})


@pytest.mark.parametrize("dtype", [np.float16, np.int64, np.bool_, np.uint8])
def test_concat_split_dtypes(dtype):
    a, b = rand((2, 3, 2), dtype), rand((2, 1, 2), dtype)
    check("Concat", [("a", a), ("b", b)], attrs={"axis": -2})
    check("Split", [("x", rand((2, 7, 2), dtype)), ("s", np.array([3, 0, 4], np.int64))],
          n_outputs=3, attrs={"axis": 1}, consts={"s"})


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float64], ids=lambda d: np.dtype(d).name)
def test_split_plan_in_parallel(dtype, tmp_path):
    """Split copies pieces of rows in parallel over the input's bytes (ranges that cut rows and
    outputs anywhere, an empty output among them), on 2 threads, known and symbolic extents."""
    x = rand((3, 257, 301), dtype)
    for axis, parts in ((1, [100, 0, 157]), (2, [1, 150, 150]), (0, [2, 1]), (-1, [301])):
        ins = [("x", x), ("s", np.array(parts, np.int64))]
        want = np.split(x, np.cumsum(parts)[:-1], axis=axis)
        for dyn in (None, {"x": ["a", "b", "c"]}):
            model = make_model("Split", ins, n_outputs=len(parts), attrs={"axis": axis}, consts={"s"},
                               dyn_shapes=dyn)
            got = nnfuse.Session(nnfuse.Model(model), threads=2).run({"x": x})
            for i, w in enumerate(want):
                assert np.array_equal(got[f"y{i}"], w), (axis, parts, i)
    path = tmp_path / "split.onnx"
    path.write_bytes(make_model("Split", ins, n_outputs=1, attrs={"axis": -1}, consts={"s"}))
    assert next(e["args"]["kernel"] for e in profile_nodes(path, "--iterations", 1)) == "split_memcpy"


def test_split_num_outputs_uneven():
    check("Split", [("x", rand((3, 7)))], n_outputs=3, attrs={"axis": 1, "num_outputs": 3})


SLICE_CASES = [
    ([0], [2], [0], [1]),
    ([-1], [-1000], [0], [-1]),
    ([100, -2], [-100, 0], [1, 0], [-2, -1]),
    ([1, 0, 2], [1000, 5, -1], [-1, 0, 1], [1, 2, 1]),
    ([5], [2], [2], [1]),  # empty
    ([-3], [2**63 - 1], [1], [3]),
]


@pytest.mark.parametrize("case", SLICE_CASES, ids=[str(i) for i in range(len(SLICE_CASES))])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_slice(case, dtype):
    starts, ends, axes, steps = (np.array(v, np.int64) for v in case)
    x = rand((4, 5, 6), dtype)
    ins = [("x", x), ("s", starts), ("e", ends), ("a", axes), ("st", steps)]
    check("Slice", ins, consts={"s", "e", "a", "st"})
    # the same with runtime (non-constant) index inputs
    check("Slice", ins)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[1, 2, 2, -1], [0, -1, 0, 2], [2, 3, 2, 3], [0, 0, 0, 0]])
def test_pad(mode, pads):
    x = rand((3, 4))
    ins = [("x", x), ("p", np.array(pads, np.int64))]
    if mode == "constant":
        ins.append(("v", np.array(2.5, np.float32)))
    check("Pad", ins, attrs={"mode": mode}, consts={"p", "v"}, opset=19)


def test_pad_axes_int64():
    x = rand((2, 3, 4), np.int64)
    check("Pad", [("x", x), ("p", np.array([1, 0, 2, 3], np.int64)), ("", None),
                  ("a", np.array([-1, 0], np.int64))], consts={"p", "a"})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather(axis):
    x = rand((3, 4, 5), np.int32)
    idx = np.array([[0, -1], [2, 1]], np.int64)
    check("Gather", [("x", x), ("i", idx)], attrs={"axis": axis})
    check("Gather", [("x", x), ("i", np.array(-2, np.int32))], attrs={"axis": axis}, consts={"i"})


def test_gather_out_of_range_is_an_error():
    model = make_model("Gather", [("x", rand((3, 2))), ("i", np.array([3], np.int64))])
    with pytest.raises(nnfuse.NnfError):
        nnfuse.run_model(model, {"x": rand((3, 2)), "i": np.array([3], np.int64)}, threads=1)


def test_reshape_to_extents_that_overflow_is_an_error():
    """A target shape given at run time whose extents multiply past int64 (a fuzzed model's
    [1, 1, 2, 7205759403792793604]): a shape error naming the node, not an internal one."""
    s = np.array([1, 1, 2, 7205759403792793604], np.int64)
    model = make_model("Reshape", [("x", rand((1, 1, 8))), ("s", s)])
    with pytest.raises(nnfuse.NnfError, match="Reshape.*extents overflow"):
        nnfuse.run_model(model, {"x": rand((1, 1, 8)), "s": s}, threads=1)


def test_gather_elements_and_nd():
    x = rand((3, 4))
    idx = RNG.integers(-3, 3, (2, 4)).astype(np.int64)
    check("GatherElements", [("x", x), ("i", idx)], attrs={"axis": 0})
    ind = np.array([[[0, 1]], [[1, 2]]], np.int64)
    check("GatherND", [("x", rand((2, 3, 4))), ("i", ind)], attrs={"batch_dims": 0})
    check("GatherND", [("x", rand((2, 3, 4))), ("i", np.array([[1], [2]], np.int64))],
          attrs={"batch_dims": 1})


def test_scatter_nd():
    x = rand((4, 3))
    check("ScatterND", [("x", x), ("i", np.array([[2], [0]], np.int64)), ("u", rand((2, 3)))])
    check("ScatterND", [("x", x), ("i", np.array([[1, 2], [1, 2]], np.int64)), ("u", rand((2,)))],
          attrs={"reduction": "add"})


def test_expand_tile():
    check("Expand", [("x", rand((3, 1), np.int64)), ("s", np.array([2, 1, 4], np.int64))], consts={"s"})
    check("Expand", [("x", rand((1,), np.bool_)), ("s", np.array([3, 2], np.int64))])
    check("Tile", [("x", rand((2, 3), np.float16)), ("r", np.array([2, 3], np.int64))], consts={"r"})


# Rows of the data-movement engine (kernels/ref/tensor_gather_map.c) as pieces: one element
# repeated (a broadcast: shorter and longer than its 16-byte pattern, with tails), runs, strided
# reads, descending reads, fill borders, and a row of more pieces than it keeps (element by element)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.bool_],
                         ids=lambda d: np.dtype(d).name)
def test_data_movement_row_pieces(dtype):
    check("Expand", [("x", rand((5, 1, 3, 1), dtype)), ("s", np.array([5, 2, 3, 37], np.int64))],
          consts={"s"})
    check("Expand", [("x", rand((4, 1), dtype)), ("s", np.array([4, 3], np.int64))], consts={"s"})
    check("Expand", [("x", rand((1, 13), dtype)), ("s", np.array([3, 2, 13], np.int64))], consts={"s"})
    check("Tile", [("x", rand((3, 5), dtype)), ("r", np.array([2, 7], np.int64))], consts={"r"})
    check("Tile", [("x", rand((2, 3), dtype)), ("r", np.array([1, 70], np.int64))], consts={"r"})
    check("Tile", [("x", rand((2, 1), dtype)), ("r", np.array([3, 41], np.int64))], consts={"r"})
    x = rand((3, 4, 29), dtype)
    for starts, ends, steps in (([1], [29], [3]), ([-1], [-30], [-1]), ([27], [0], [-4])):
        check("Slice", [("x", x), ("s", np.array(starts, np.int64)), ("e", np.array(ends, np.int64)),
                        ("a", np.array([2], np.int64)), ("t", np.array(steps, np.int64))],
              consts={"s", "e", "a", "t"})
    check("Transpose", [("x", rand((3, 7, 5), dtype))], attrs={"perm": [0, 2, 1]})
    if dtype != np.bool_:
        pads = np.array([0, 2, 19, 0, 1, 21], np.int64)
        check("Pad", [("x", rand((2, 3, 5), dtype)), ("p", pads)], consts={"p"})
        check("Pad", [("x", rand((2, 3, 5), dtype)), ("p", np.array([0, 1, 4, 0, 2, 4], np.int64))],
              attrs={"mode": "reflect"}, consts={"p"})
        check("Pad", [("x", rand((2, 3, 5), dtype)), ("p", np.array([1, 0, 17, 0, 2, 3], np.int64))],
              attrs={"mode": "edge"}, consts={"p"})
    # rows of whole cache lines, 512 bytes: they go out by streaming stores when the output does
    # (NNF_STREAM_BYTES in `make test`), repeated slices then built again rather than copied
    w = 512 // np.dtype(dtype).itemsize
    check("Tile", [("x", rand((3, 2, w // 2), dtype)), ("r", np.array([1, 3, 2], np.int64))], consts={"r"})
    check("Expand", [("x", rand((2, 1, w), dtype)), ("s", np.array([2, 5, w], np.int64))], consts={"s"})
    check("Expand", [("x", rand((4, 1), dtype)), ("s", np.array([3, 4, w], np.int64))], consts={"s"})
    if dtype != np.bool_:
        check("Pad", [("x", rand((2, 3, w - 8), dtype)), ("p", np.array([0, 1, 3, 0, 2, 5], np.int64))],
              consts={"p"})


def test_squeeze_unsqueeze_flatten_reshape():
    x = rand((1, 3, 1, 4))
    check("Squeeze", [("x", x)])
    check("Squeeze", [("x", x), ("a", np.array([-2], np.int64))], consts={"a"})
    check("Unsqueeze", [("x", rand((3, 4))), ("a", np.array([-1, 0], np.int64))], consts={"a"})
    check("Flatten", [("x", x)], attrs={"axis": -1})
    check("Reshape", [("x", x), ("s", np.array([0, -1, 2], np.int64))])
    check("Reshape", [("x", rand((0, 4))), ("s", np.array([0, 4], np.int64))],
          attrs={"allowzero": 1})


def test_constant_of_shape_range_eyelike_trilu():
    check("ConstantOfShape", [("s", np.array([2, 3], np.int64))],
          attrs={"value": numpy_helper.from_array(np.array([7], np.int32))})
    for dt in (np.float32, np.int32, np.int64):
        check("Range", [("a", np.array(10, dt)), ("b", np.array(-3, dt)), ("c", np.array(-3, dt))],
              tol=1e-6, consts={"a", "b", "c"})
    check("Range", [("a", np.array(0.5, np.float32)), ("b", np.array(3.1, np.float32)),
                    ("c", np.array(0.3, np.float32))], tol=1e-5, consts={"a", "b", "c"})
    check("EyeLike", [("x", rand((3, 5)))], attrs={"k": -1, "dtype": TensorProto.INT64})
    check("Trilu", [("x", rand((2, 4, 3))), ("k", np.array(1, np.int64))], attrs={"upper": 0},
          consts={"k"})


@pytest.mark.parametrize("k", [1, 5, 64, 256, 257, 300])
@pytest.mark.parametrize("largest", [1, 0])
def test_topk_selects_like_a_sort(k, largest):
    """k up to 256 keeps the best k as it goes (insertion), larger k sorts the row: both rank
    ties by the lower index first, on rows of few distinct values, along an inner axis too."""
    x = RNG.integers(-20, 20, (3, 300, 2)).astype(np.float32)
    for axis, data in ((1, x), (-1, np.ascontiguousarray(x.transpose(0, 2, 1)))):
        check("TopK", [("x", data), ("k", np.array([k], np.int64))], n_outputs=2,
              attrs={"axis": axis, "largest": largest}, consts={"k"})
    ints = RNG.integers(-5, 5, (4, 300)).astype(np.int64)
    check("TopK", [("x", ints), ("k", np.array([k], np.int64))], n_outputs=2,
          attrs={"largest": largest}, consts={"k"})


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("largest", [1, 0])
def test_topk_nan_ranks_largest(dtype, largest):
    """NaN ranks as the largest value (numpy's order), ties by the lower index, whether the row
    is selected in float (float32) or in long double, kept as it goes (k <= 256) or sorted."""
    x = RNG.integers(-3, 3, (6, 40)).astype(dtype)
    x[RNG.random(x.shape) < 0.2] = np.nan
    x[1, :] = np.nan  # a row of NaNs
    x[2, :5] = np.nan  # NaNs held before any number
    idx = np.arange(x.shape[1])
    for k in (1, 3, 7, 40):
        model = make_model("TopK", [("x", x), ("k", np.array([k], np.int64))], n_outputs=2,
                           attrs={"largest": largest}, consts={"k"})
        got = nnfuse.run_model(model, {"x": x}, threads=1)
        for r in range(x.shape[0]):
            v, nan = np.nan_to_num(x[r], nan=0.0), np.isnan(x[r])
            order = np.lexsort((idx, -v, ~nan) if largest else (idx, v, nan))[:k]
            assert np.array_equal(got["y1"][r], order), (k, r, got["y1"][r], order)
            np.testing.assert_array_equal(got["y0"][r], x[r][order])


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8], ids=lambda d: np.dtype(d).name)
def test_gather_elements_rows_in_parallel(dtype, tmp_path):
    """GatherElements' rows split over 2 threads, on every axis, indices shorter than the data
    off the axis, negative ones, int32 and int64, known and symbolic extents; an index out of
    range is reported as the reference kernel reports it (the first one), not by a thread."""
    x = rand((5, 301, 67), dtype)
    for axis, ishape in ((0, (7, 300, 67)), (1, (5, 400, 60)), (2, (4, 301, 9)), (-1, (5, 299, 1))):
        d = x.shape[axis]
        idx = RNG.integers(-d, d, ishape)
        part = x[tuple(slice(0, n) if a != axis % 3 else slice(None) for a, n in enumerate(ishape))]
        want = np.take_along_axis(part, np.where(idx < 0, idx + d, idx), axis)
        for itype in (np.int64, np.int32):
            for dyn in (None, {"x": ["a", "b", "c"], "i": ["p", "q", "r"]}):
                model = make_model("GatherElements", [("x", x), ("i", idx.astype(itype))],
                                   attrs={"axis": axis}, dyn_shapes=dyn)
                got = nnfuse.Session(nnfuse.Model(model), threads=2).run({"x": x, "i": idx.astype(itype)})
                assert np.array_equal(got["y0"], want), (axis, itype, dyn)
    idx = RNG.integers(0, 67, (5, 301, 20))
    idx[3, 7, 2], idx[4, 0, 1] = 67, -68
    model = make_model("GatherElements", [("x", x), ("i", idx)], attrs={"axis": 2})
    with pytest.raises(nnfuse.NnfError, match="GatherElements.*index 67 is out of range for extent 67"):
        nnfuse.Session(nnfuse.Model(model), threads=2).run({"x": x, "i": idx})
    path = tmp_path / "ge.onnx"
    path.write_bytes(make_model("GatherElements", [("x", x), ("i", idx % 67)], attrs={"axis": 2}))
    assert next(e["args"]["kernel"] for e in profile_nodes(path, "--iterations", 1)) == "gather_elements_rows"


@pytest.mark.parametrize("k", [1, 5, 256, 300])
def test_topk_rows_in_parallel(k, tmp_path):
    """TopK's rows split over 2 threads, along the last axis and an inner one, largest and
    smallest, with ties (ranked by the lower index), known and symbolic extents."""
    x = RNG.integers(-200, 200, (3, 40, 700)).astype(np.float32)
    idx = np.arange(700)
    for axis, data in ((-1, x), (1, np.ascontiguousarray(x.transpose(0, 2, 1)))):
        for largest in (1, 0):
            for dyn in (None, {"x": ["a", "b", "c"]}):
                model = make_model("TopK", [("x", data), ("k", np.array([k], np.int64))], n_outputs=2,
                                   attrs={"axis": axis, "largest": largest}, consts={"k"}, dyn_shapes=dyn)
                got = nnfuse.Session(nnfuse.Model(model), threads=2).run({"x": data})
                rows = np.moveaxis(data, axis, -1).reshape(-1, 700)
                order = np.stack([np.lexsort((idx, -r if largest else r))[:k] for r in rows])
                shape = np.moveaxis(data, axis, -1).shape[:-1] + (k,)
                assert np.array_equal(np.moveaxis(got["y1"], axis, -1), order.reshape(shape)), (axis, largest)
                assert np.array_equal(np.moveaxis(got["y0"], axis, -1),
                                      np.take_along_axis(rows, order, 1).reshape(shape))
    path = tmp_path / "topk.onnx"
    path.write_bytes(make_model("TopK", [("x", x), ("k", np.array([k], np.int64))], n_outputs=2,
                                consts={"k"}))
    assert next(e["args"]["kernel"] for e in profile_nodes(path, "--iterations", 1)) == "top_k_rows"


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_], ids=lambda d: np.dtype(d).name)
def test_trilu_rows(dtype):
    """Each row kept and zeroed as two pieces, diagonals k from below the matrix to past it."""
    x = rand((2, 5, 7), dtype)
    for upper in (0, 1):
        for k in (-9, -5, -1, 0, 2, 6, 7, 12):
            check("Trilu", [("x", x), ("k", np.array(k, np.int64))], attrs={"upper": upper}, consts={"k"})
    # rows of whole cache lines: streamed when the output is (NNF_STREAM_BYTES in `make test`)
    x = rand((2, 9, 512 // np.dtype(dtype).itemsize), dtype)
    for upper in (0, 1):
        for k in (-3, 0, 5, 100):
            check("Trilu", [("x", x), ("k", np.array(k, np.int64))], attrs={"upper": upper}, consts={"k"})


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int8, np.float64, np.uint16],
                         ids=lambda d: np.dtype(d).name)
def test_fills(dtype):
    """OneHot's and ConstantOfShape's fills: memset where the value's bytes are all one (zeros,
    an int8), 16-byte stores of the pattern where the element size divides 16, with odd counts."""
    for off, on in ((0, 1), (3, -2), (-1, 0)) if dtype in (np.float32, np.int64) else ():
        check("OneHot", [("i", np.array([[1, -1, 9], [0, 3, 2]], np.int64)), ("d", np.array(7, np.int64)),
                         ("v", np.array([off, on], dtype))], attrs={"axis": -1}, consts={"d"})
    for v in (0, 3, 1):
        check("ConstantOfShape", [("s", np.array([3, 5, 7], np.int64))],
              attrs={"value": numpy_helper.from_array(np.array([v], dtype))})


def test_onehot_nonzero_topk_cumsum():
    check("OneHot", [("i", np.array([[1, -1], [9, 0]], np.int64)), ("d", np.array(4, np.float32)),
                     ("v", np.array([-1, 5], np.float32))], attrs={"axis": 1}, consts={"d"})
    x = rand((3, 4), np.int32)
    x[x % 3 == 0] = 0
    check("NonZero", [("x", x)])
    check("NonZero", [("x", np.zeros((2, 3), np.float32))])
    y = RNG.permutation(24).reshape(2, 3, 4).astype(np.float32)
    check("TopK", [("x", y), ("k", np.array([2], np.int64))], n_outputs=2, attrs={"axis": 1})
    check("TopK", [("x", y), ("k", np.array([3], np.int64))], n_outputs=2,
          attrs={"axis": -1, "largest": 0})
    check("CumSum", [("x", rand((3, 4))), ("a", np.array(1, np.int32))],
          attrs={"exclusive": 1, "reverse": 1}, tol=1e-5, consts={"a"})
    check("CumSum", [("x", rand((3, 4), np.int64)), ("a", np.array(-2, np.int64))], consts={"a"})


CAST_VALUES = np.array([0, 1, -1, 2.5, -2.5, 100.75, 65504, 1e-3, -0.0], np.float64)


@pytest.mark.parametrize("src", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("dst", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_cast_matrix(src, dst):
    vals = CAST_VALUES
    if np.dtype(src).kind in "ui" or np.dtype(dst).kind in "ui":
        vals = np.array([0, 1, 2, 7, 100, 127], np.float64)  # representable everywhere
    x = vals.astype(src)
    check("Cast", [("x", x)], attrs={"to": NP2ONNX[np.dtype(dst)]})


@pytest.mark.parametrize("like", [False, True], ids=["Cast", "CastLike"])
def test_cast_float16_plan(like, tmp_path):
    """float32 <-> float16 run on the tier's conversions (F16C on the vector tiers), over every
    tail length and with symbolic extents, bit for bit numpy's rounding; NaNs stay NaN."""
    bits = RNG.integers(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([bits.view(np.float32), np.float32([65519.99, 65520, -0.0, 1e-8, 6e-8, np.inf])])
    h = RNG.integers(0, 2**16, 4103, dtype=np.uint32).astype(np.uint16).view(np.float16)
    for data, to, name in ((x, np.float16, "f32_f16"), (h, np.float32, "f16_f32")):
        for n in (data.size, 1, 7, 8, 9, 17):
            d = data[:n]
            if like:
                ins = [("x", d), ("t", np.zeros(1, to))]
                model = make_model("CastLike", ins, consts={"t"}, dyn_shapes={"x": ["n"]})
            else:
                model = make_model("Cast", [("x", d)], attrs={"to": NP2ONNX[np.dtype(to)]},
                                   dyn_shapes={"x": ["n"]})
            got = nnfuse.run_model(model, {"x": d}, threads=2)["y0"]
            with np.errstate(over="ignore", invalid="ignore"):
                want = d.astype(to)
            nan = np.isnan(want)
            assert got.dtype == want.dtype and np.array_equal(np.isnan(got), nan)
            bitsof = np.dtype(f"u{want.itemsize}")
            assert np.array_equal(got[~nan].view(bitsof), want[~nan].view(bitsof)), (name, n)
        path = tmp_path / f"{name}.onnx"
        path.write_bytes(model)
        kernel = next(e["args"]["kernel"] for e in profile_nodes(path, "--iterations", 1))
        assert kernel in [f"cast_{name}_{t}" for t in TIER_SUFFIXES], kernel


def test_identity_dropout_size_shape():
    x = rand((2, 3), np.uint16)
    check("Identity", [("x", x)])
    check("Dropout", [("x", rand((2, 3)))], n_outputs=2)
    check("Size", [("x", x)])
    check("Shape", [("x", rand((2, 3, 4, 5)))], attrs={"start": 1, "end": -1})


def test_shape_chain_dynamic_batch():
    """The Shape -> Gather -> Unsqueeze -> Concat -> Reshape chain of exported
    models, with a symbolic batch dimension, run at two batch sizes."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
        helper.make_node("Concat", ["b1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["flat"]),
        helper.make_node("Transpose", ["flat"], ["y"], perm=[1, 0]),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "ax0"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    graph = helper.make_graph(nodes, "chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [12, "N"])],
                              initializer=inits)
    model = model_of(graph, 18)
    onnx.checker.check_model(model)
    mb = model.SerializeToString()
    sess = nnfuse.Session(mb, threads=1)
    for n in (1, 5):
        x = rand((n, 3, 4))
        got = sess.run({"x": x})["y"]
        assert np.array_equal(got, x.reshape(n, -1).T)


def test_empty_tensors():
    e = rand((2, 0, 3))
    check("Transpose", [("x", e)], attrs={"perm": [2, 0, 1]})
    check("Concat", [("a", e), ("b", rand((2, 2, 3)))], attrs={"axis": 1})
    check("Slice", [("x", e), ("s", np.array([1], np.int64)), ("e", np.array([3], np.int64)),
                    ("a", np.array([-1], np.int64))], consts={"s", "e", "a"})
    check("Pad", [("x", e), ("p", np.array([0, 1, 0, 0, 1, 0], np.int64))], consts={"p"})
    check("Squeeze", [("x", rand((1, 3, 1))), ("a", np.array([], np.int64))], consts={"a"})
    check("NonZero", [("x", np.zeros((0, 4), np.int64))])


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
    ("ij", [(3, 4)]),
    ("ba", [(3, 4)]),
    ("ii", [(3, 3)]),
    ("ii->i", [(3, 3)]),
    ("ij->", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (2, 5, 4, 2)]),
    ("bhqd, bhkd -> bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("i,i,i->", [(4,), (4,), (4,)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_einsum(eq, shapes, dtype):
    ins = [(f"x{i}", rand(s, dtype)) for i, s in enumerate(shapes)]
    check("Einsum", ins, attrs={"equation": eq}, tol=1e-5 if dtype == np.float32 else None)


# (equation, shapes, how the GEMM reads it, whether a constant second operand is packed at load): awkward extents (primes, 1, tile edges); "view" where
# every tensor is read in place, "copy" where one goes through a canonical copy, "ref" where the
# reference kernel keeps the node
EINSUM_GEMM_CASES = [
    ("bhqd,bhkd->bhqk", [(2, 3, 17, 8), (2, 3, 13, 8)], "view", False),  # B read transposed
    ("bqhd,bkhd->bhqk", [(2, 17, 3, 8), (2, 13, 3, 8)], "view", False),  # batch axes between the rows
    ("bhqk,bhkd->bhqd", [(2, 3, 17, 13), (2, 3, 13, 8)], "view", False),
    ("bhqk,bkhd->bqhd", [(2, 3, 17, 13), (2, 13, 3, 8)], "view", False),  # output rows h*d apart
    ("bsd,hd->bsh", [(2, 7, 31), (29, 31)], "view", True),
    ("hd,bsd->bsh", [(29, 31), (2, 7, 31)], "view", False),  # swapped: C^T = B^T A^T
    ("ij,jk->ki", [(5, 7), (7, 3)], "view", False),
    ("abc,cd->abd", [(2, 3, 64), (64, 97)], "view", True),
    ("ijk,jkl->il", [(5, 6, 7), (6, 7, 3)], "view", True),  # two contracted labels merged
    ("ikj,jkl->il", [(5, 7, 6), (6, 7, 3)], "copy", True),  # they nest the other way in B
    ("bij,bjk->ikb", [(3, 5, 7), (3, 7, 4)], "copy", False),  # a batch label innermost in the output
    ("bij,bjk->bki", [(3, 5, 7), (3, 7, 4)], "view", False),
    ("bij,jk->ibk", [(3, 5, 7), (7, 4)], "copy", True),  # the output's rows nest the other way in A
    ("i,i->", [(37,), (37,)], "view", True),
    ("i,j->ij", [(5,), (7,)], "view", True),
    ("ij,ij->i", [(9, 11), (9, 11)], "view", False),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 6)], "view", False),  # batch axes that broadcast
    ("bij,jk->bik", [(1, 1, 1), (1, 1)], "view", True),
    ("ij,jk->ik", [(3, 0), (0, 4)], "view", False),  # sums over nothing
    ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)], "ref", False),
    ("ij,jk->i", [(3, 4), (4, 5)], "ref", False),  # k summed in one operand only
]


@pytest.mark.parametrize("const_b", [False, True], ids=["input", "const"])
@pytest.mark.parametrize("eq,shapes,how,packs", EINSUM_GEMM_CASES, ids=[c[0] for c in EINSUM_GEMM_CASES])
def test_einsum_runs_as_gemm(eq, shapes, how, packs, const_b, tmp_path):
    """Two-operand float32 Einsums run as one batched GEMM over strided views of their operands
    (a constant second operand packed at load), at 1 and 2 threads and with symbolic extents
    (the layout worked out per run), against numpy in float64."""
    if const_b and len(shapes) != 2:
        pytest.skip("one constant operand of two")
    ins = [(f"x{i}", RNG.uniform(-1, 1, s).astype(np.float32)) for i, s in enumerate(shapes)]
    want = np.einsum(eq.replace(" ", ""), *[a.astype(np.float64) for _, a in ins])
    consts = {"x1"} if const_b else set()
    dyn = {n: [f"d{n}{k}" for k in range(a.ndim)] for n, a in ins if n not in consts}
    for dyn_shapes in (None, dyn):
        model = make_model("Einsum", ins, attrs={"equation": eq}, consts=consts, dyn_shapes=dyn_shapes)
        feeds = {n: a for n, a in ins if n not in consts}
        for threads in (1, 2):
            got = nnfuse.Session(nnfuse.Model(model), threads=threads).run(feeds)["y0"]
            assert got.shape == want.shape
            tol = 1e-6 * max(1.0, float(np.abs(want).max(initial=0))) * max(1, shapes[0][-1])
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=tol, err_msg=f"{threads} threads")
    path = tmp_path / "einsum.onnx"
    path.write_bytes(make_model("Einsum", ins, attrs={"equation": eq}, consts=consts))
    kernel = next(e["args"]["kernel"] for e in profile_nodes(path, "--iterations", 1))
    assert kernel.startswith("einsum_") == (how != "ref"), kernel
    assert kernel.startswith("einsum_copy_") == (how == "copy"), kernel
    assert kernel.endswith("_packed_b") == (const_b and packs), kernel


def head_model(read_after=False, outer=True, opset=OPSET):
    """A YOLOv5 detection head's tail: y = Sigmoid(x) sliced along its last axis into xy, wh and
    conf; xy and wh rescaled; Concat([xy', wh', conf]) on the last axis (conf at the place it had
    in y: pass fold_slice_concat makes the Concat an nnfuse::SliceAssign of y), then, with outer,
    Reshape and a Concat of two such levels. read_after: y is read again after the Concat (by an
    Add), so the SliceAssign cannot take y's buffer."""
    nodes, inits = [], []

    def level(tag, shape):
        def const(name, value):
            inits.append(numpy_helper.from_array(np.array(value, np.int64), f"{tag}{name}"))
            return f"{tag}{name}"
        x = f"{tag}x"
        nodes.append(helper.make_node("Sigmoid", [x], [f"{tag}y"]))
        for name, lo, hi in (("xy", 0, 2), ("wh", 2, 4), ("conf", 4, shape[-1])):
            nodes.append(helper.make_node("Slice", [f"{tag}y", const(name + "_s", [lo]), const(name + "_e", [hi]),
                                                    const(name + "_a", [-1])], [f"{tag}{name}"]))
        inits.append(numpy_helper.from_array(np.float32(2.0), f"{tag}two"))
        nodes.append(helper.make_node("Mul", [f"{tag}xy", f"{tag}two"], [f"{tag}xy2"]))
        nodes.append(helper.make_node("Mul", [f"{tag}wh", f"{tag}wh"], [f"{tag}wh2"]))
        nodes.append(helper.make_node("Concat", [f"{tag}xy2", f"{tag}wh2", f"{tag}conf"], [f"{tag}z"], axis=-1))
        last = f"{tag}z"
        if read_after:
            nodes.append(helper.make_node("Add", [f"{tag}z", f"{tag}y"], [f"{tag}zy"]))
            last = f"{tag}zy"
        if outer:
            nodes.append(helper.make_node("Reshape", [last, const("shape", [1, -1, shape[-1]])], [f"{tag}r"]))
            last = f"{tag}r"
        return helper.make_tensor_value_info(x, TensorProto.FLOAT, list(shape)), last

    i0, o0 = level("a", (1, 3, 8, 8, 11))
    i1, o1 = level("b", (1, 3, 4, 4, 11))
    outs = [o0, o1]
    if outer:
        nodes.append(helper.make_node("Concat", [o0, o1], ["out"], axis=1))
        outs = ["out"]
    g = helper.make_graph(nodes, "head", [i0, i1], [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                                    for o in outs], inits)
    return model_of(g, opset).SerializeToString()


@pytest.mark.parametrize("read_after, outer", [(False, True), (True, True), (False, False)])
def test_concat_of_a_slice_in_place_is_slice_assign(read_after, outer, tmp_path):
    data = head_model(read_after, outer)
    feeds = {"ax": rand((1, 3, 8, 8, 11)), "bx": rand((1, 3, 4, 4, 11))}
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    ref = dict(zip(names, sess.run(None, feeds)))
    for level, threads, reference in ((0, 1, False), (2, 1, False), (3, 2, False), (3, 2, True)):
        model = nnfuse.Model(data, opt_level=level, keep_unpacked_weights=reference)
        session = nnfuse.Session(model, threads=threads, reference_kernels=reference)
        for _ in range(2):  # the second run reuses the first run's buffers
            got = session.run(feeds)
            for n in names:
                np.testing.assert_allclose(got[n], ref[n], rtol=1e-6, atol=1e-6,
                                           err_msg=f"-O{level}, {threads} thread(s), reference {reference}: {n}")
    path = tmp_path / "head.onnx"
    path.write_bytes(data)
    from conftest import profile_nodes
    ops = [(e["args"]["op_name"], e["args"]["kernel"]) for e in profile_nodes(path, "--iterations", 1)]
    assert sum(o == "SliceAssign" for o, _ in ops) == 2, ops
    assert sum(o == "Slice" for o, _ in ops) == 4, ops  # xy and wh stay, conf is never copied
    if outer:
        assert ("Concat", "in_place") in ops, ops
    if not outer:
        return  # z is a graph output: its own buffer, a copy of y (the caller reads it after the run)
    # conf never exists apart, and where y dies at the node the output takes its buffer: fewer
    # live bytes at the peak than with the Slice and the Concat
    import json
    import os
    import subprocess
    from conftest import NNF_BIN

    def arena(env):
        out = subprocess.run([NNF_BIN, "bench", str(path), "--iterations", "2", "--json", "-"], check=True,
                             capture_output=True, text=True, env={**os.environ, **env}).stdout
        return json.loads(out)["arena_bytes"]
    assert arena({}) < arena({"NNF_DISABLE_PASSES": "fold_slice_concat"})


def test_slice_assign_refused_in_model_files(tmp_path):
    node = helper.make_node("SliceAssign", ["x", "x"], ["y"], domain="nnfuse")
    g = helper.make_graph([node], "hostile", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "hostile.onnx"
    path.write_bytes(model_of(g, OPSET, ("nnfuse", 1)).SerializeToString())
    import subprocess
    from conftest import NNF_BIN
    r = subprocess.run([NNF_BIN, "info", str(path)], capture_output=True, text=True)
    assert r.returncode != 0 and "internal operator" in r.stderr and "nnfuse::SliceAssign" in r.stderr, r.stderr


@pytest.mark.parametrize("opset, order", [(9, "in_place"), (18, "moved"), (18, "negative_axis")])
def test_fold_slice_concat_only_where_the_slice_sat(opset, order, tmp_path):
    """Slice given as opset-9 attributes folds too; a Slice moved to another place in the Concat
    (conf first) does not fold; a negative axis and ends past the extent resolve like ONNX's."""
    x = rand((2, 5, 9))
    if opset < 10:
        sl = [helper.make_node("Slice", ["x"], ["head"], starts=[0], ends=[3], axes=[2]),
              helper.make_node("Slice", ["x"], ["tail"], starts=[3], ends=[9], axes=[2])]
        consts = []
    else:
        ends = 100 if order == "negative_axis" else 9
        axis = -1 if order == "negative_axis" else 2
        consts = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                  (("s0", [0]), ("e0", [3]), ("s1", [3]), ("e1", [ends]), ("ax", [axis]))]
        sl = [helper.make_node("Slice", ["x", "s0", "e0", "ax"], ["head"]),
              helper.make_node("Slice", ["x", "s1", "e1", "ax"], ["tail"])]
    ins = ["tail", "neg"] if order == "moved" else ["neg", "tail"]
    nodes = sl + [helper.make_node("Neg", ["head"], ["neg"]),
                  helper.make_node("Concat", ins, ["y"], axis=2)]
    g = helper.make_graph(nodes, "fold", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 9])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], consts)
    data = model_of(g, opset).SerializeToString()
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for threads in (1, 2):
        np.testing.assert_array_equal(nnfuse.run_model(data, {"x": x}, threads=threads)["y"], ref)
    path = tmp_path / "fold.onnx"
    path.write_bytes(data)
    from conftest import profile_nodes
    ops = [e["args"]["op_name"] for e in profile_nodes(path, "--iterations", 1)]
    folded = order != "moved"
    assert ops.count("SliceAssign") == int(folded) and ops.count("Slice") == (1 if folded else 2), ops
