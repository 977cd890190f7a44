"""nn operators against onnxruntime: one-node ONNX models at awkward sizes.

Each case builds a model with onnx.helper (X as a graph input, weights and
shape operands as initialisers, like exported models), runs it through
nnfuse twice (reference kernels only, and the default kernel choice) and
through onnxruntime, and compares every output.
"""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

import nnfuse  # noqa: E402
from conftest import model_of

RTOL, ATOL = 1e-4, 1e-5
_rng = np.random.default_rng(1234)


def rand(*shape):
    return _rng.uniform(-1, 1, size=shape).astype(np.float32)


def build(op, feeds, consts, node_inputs, attrs=None, n_out=1, opset=17, domain_opset=None):
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, node_inputs, outs, **(attrs or {}))
    g_in = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for k, v in feeds.items()]
    g_out = [onnx.ValueInfoProto(name=o) for o in outs]
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    graph = helper.make_graph([node], "t", g_in, g_out, inits)
    return model_of(graph, opset).SerializeToString()


def check(model_bytes, feeds, n_out=1, rtol=RTOL, atol=ATOL):
    sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    for ref in (True, False):
        got = nnfuse.run_model(model_bytes, feeds, reference_kernels=ref, threads=2)
        for i in range(n_out):
            g = got[f"y{i}"]
            assert g.shape == want[i].shape, f"output {i} (ref={ref}): shape {g.shape} vs {want[i].shape}"
            if want[i].dtype.kind == "f":
                np.testing.assert_allclose(g, want[i], rtol=rtol, atol=atol,
                                           err_msg=f"output {i} (reference_kernels={ref})")
            else:
                np.testing.assert_array_equal(g, want[i], err_msg=f"output {i} (reference_kernels={ref})")


# ---- Conv -------------------------------------------------------------------

CONV_CASES = [
    # (x shape, w shape, attrs, bias)
    ((1, 3, 13, 11), (5, 3, 3, 3), dict(pads=[1, 1, 1, 1]), True),
    ((2, 4, 9, 10), (6, 2, 3, 2), dict(group=2, strides=[2, 3], dilations=[1, 2], pads=[0, 2, 1, 0]), True),
    ((1, 7, 15, 17), (7, 1, 5, 5), dict(group=7, strides=[2, 2], pads=[2, 2, 2, 2]), True),
    ((1, 6, 7, 7), (6, 1, 3, 3), dict(group=6, auto_pad="SAME_UPPER", strides=[2, 2]), False),
    ((1, 5, 8, 9), (3, 5, 1, 1), {}, False),
    ((1, 3, 10, 11), (4, 3, 4, 3), dict(auto_pad="SAME_LOWER"), True),
    ((1, 3, 10, 11), (4, 3, 3, 3), dict(auto_pad="VALID", strides=[3, 2]), True),
    ((3, 2, 19), (4, 2, 4), dict(strides=[2], dilations=[3], pads=[2, 1]), True),
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 2), dict(strides=[1, 2, 2], pads=[1, 0, 1, 0, 1, 1]), True),
    # 3-D in the PLANES form (8 channels x 3 x 3 im2col rows a plane)
    ((2, 8, 5, 9, 11), (6, 8, 3, 3, 3), dict(pads=[1, 1, 1, 1, 1, 1]), True),
    ((1, 8, 12, 12), (16, 2, 3, 3), dict(group=4, pads=[1, 1, 1, 1], dilations=[2, 2]), True),
]


@pytest.mark.parametrize("xs,ws,attrs,bias", CONV_CASES)
def test_conv(xs, ws, attrs, bias):
    x, w = rand(*xs), rand(*ws)
    consts = {"W": w}
    ins = ["X", "W"]
    if bias:
        consts["B"] = rand(ws[0])
        ins.append("B")
    check(build("Conv", {"X": x}, consts, ins, attrs), {"X": x})


CONVT_CASES = [
    ((1, 3, 5, 4), (3, 2, 3, 3), dict(strides=[2, 2]), True),
    ((1, 4, 3, 5), (4, 3, 2, 3), dict(group=2, strides=[2, 1], pads=[1, 0, 0, 1], output_padding=[1, 0]), True),
    ((2, 2, 4, 4), (2, 2, 3, 3), dict(dilations=[2, 2], strides=[3, 2]), False),
    ((1, 2, 3, 3), (2, 1, 3, 3), dict(strides=[2, 2], output_shape=[7, 8]), True),
    ((1, 2, 3, 4), (2, 3, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER"), True),
    ((1, 2, 3, 4), (2, 3, 2, 2), dict(strides=[2, 3], auto_pad="SAME_LOWER"), False),
    ((1, 3, 7), (3, 2, 4), dict(strides=[3], pads=[1, 2]), True),
    ((1, 2, 2, 3, 3), (2, 2, 2, 2, 2), dict(strides=[2, 1, 2]), True),
    # 3-D whose depth taps tile the depth (planned): a 3D U-Net's 2x2x2 s2, a grouped 3 x 4x4 s2
    # p1 over a batch
    ((1, 8, 3, 5, 6), (8, 4, 2, 2, 2), dict(strides=[2, 2, 2]), True),
    ((2, 6, 2, 4, 5), (6, 2, 3, 4, 4), dict(strides=[3, 2, 2], pads=[0, 1, 1, 0, 1, 1], group=3), True),
    # the planned GEMM + col2im kernel (constant W, 1-D and 2-D) at awkward sizes: U-Net's 2x2 s2,
    # DCGAN's 4x4 s2 p1, strides past the kernel (rows and columns no tap reaches), strides of 3
    # and 4 (the generic phase interleave), dilation, a 1x1 input, batch with groups
    ((2, 6, 5, 7), (6, 4, 2, 2), dict(strides=[2, 2], group=3), True),
    ((1, 5, 7, 9), (5, 3, 4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1]), True),
    ((1, 3, 6, 5), (3, 2, 3, 3), dict(strides=[3, 4], pads=[2, 1, 0, 2], output_padding=[2, 3]), True),
    ((1, 2, 4, 5), (2, 3, 1, 2), dict(strides=[3, 5]), False),
    ((1, 4, 9, 8), (4, 3, 5, 3), dict(dilations=[2, 3], strides=[2, 2], pads=[3, 2, 1, 4]), True),
    ((1, 2, 1, 1), (2, 3, 3, 3), {}, True),
    ((1, 13, 3, 31), (13, 7, 3, 3), dict(pads=[1, 1, 1, 1]), True),
    ((2, 3, 17), (3, 5, 4), dict(strides=[2], pads=[1, 1]), True),
    # bands of one input row whose output rows also take 1 (4x4 s2) and 2 (3x3 s1) earlier rows:
    # 4096 and 2700 GEMM rows x 130 and 200 columns do not fit one band's 512 Ki floats
    ((1, 3, 11, 130), (3, 256, 4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1]), True),
    ((1, 2, 9, 200), (2, 300, 3, 3), dict(pads=[1, 0, 1, 2]), True),
]


@pytest.mark.parametrize("xs,ws,attrs,bias", CONVT_CASES)
def test_conv_transpose(xs, ws, attrs, bias):
    x, w = rand(*xs), rand(*ws)
    consts = {"W": w}
    ins = ["X", "W"]
    if bias:
        consts["B"] = rand(ws[1] * attrs.get("group", 1))
        ins.append("B")
    check(build("ConvTranspose", {"X": x}, consts, ins, attrs), {"X": x})


# ---- pools ------------------------------------------------------------------

POOL_CASES = [
    ("MaxPool", (1, 3, 11, 13), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("MaxPool", (2, 2, 10, 9), dict(kernel_shape=[2, 3], strides=[2, 2], pads=[1, 0, 1, 2], dilations=[2, 1])),
    ("MaxPool", (1, 2, 17), dict(kernel_shape=[4], strides=[3], auto_pad="SAME_UPPER")),
    ("MaxPool", (1, 1, 5, 6, 7), dict(kernel_shape=[2, 2, 3], strides=[2, 2, 2], ceil_mode=1)),
    ("AveragePool", (1, 3, 11, 13), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("AveragePool", (1, 3, 11, 13), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                         count_include_pad=1, ceil_mode=1)),
    ("AveragePool", (2, 2, 9, 8), dict(kernel_shape=[3, 2], pads=[1, 0, 2, 1])),
    ("AveragePool", (1, 2, 9, 8), dict(kernel_shape=[3, 3], auto_pad="SAME_LOWER", strides=[2, 2])),
    ("AveragePool", (1, 2, 13), dict(kernel_shape=[5], strides=[4], pads=[2, 2], count_include_pad=1)),
    ("AveragePool", (1, 3, 6, 7, 19), dict(kernel_shape=[3, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 1],
                                           count_include_pad=1)),
    ("AveragePool", (2, 4, 8, 16, 16), dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2])),
    ("MaxPool", (2, 4, 8, 16, 16), dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2])),
    ("LpPool", (1, 3, 9, 10), dict(kernel_shape=[3, 2], strides=[2, 2], p=3)),
    ("LpPool", (1, 2, 8, 8), dict(kernel_shape=[2, 2], pads=[1, 1, 1, 1])),
]


@pytest.mark.parametrize("op,xs,attrs", POOL_CASES)
def test_pool(op, xs, attrs):
    x = rand(*xs)
    opset = 18 if op != "AveragePool" else 19
    check(build(op, {"X": x}, {}, ["X"], attrs, opset=opset), {"X": x})


@pytest.mark.parametrize("storage_order", [0, 1])
def test_maxpool_indices(storage_order):
    x = rand(2, 3, 7, 9)
    attrs = dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], storage_order=storage_order)
    check(build("MaxPool", {"X": x}, {}, ["X"], attrs, n_out=2, opset=12), {"X": x}, n_out=2)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
@pytest.mark.parametrize("xs", [(2, 3, 5, 7), (1, 4, 9), (1, 2, 3, 4, 5)])
def test_global_pool(op, xs):
    x = rand(*xs)
    check(build(op, {"X": x}, {}, ["X"], {}), {"X": x})


# ---- normalisation ------------------------------------------------------------

@pytest.mark.parametrize("xs", [(2, 5, 7, 3), (3, 4), (1, 3, 9)])
@pytest.mark.parametrize("opset", [9, 15])
def test_batchnorm(xs, opset):
    x = rand(*xs)
    c = xs[1]
    consts = {"s": rand(c), "b": rand(c), "m": rand(c), "v": np.abs(rand(c)) + 0.1}
    check(build("BatchNormalization", {"X": x}, consts, ["X", "s", "b", "m", "v"],
                dict(epsilon=1e-3), opset=opset), {"X": x})


# the planned kernel at awkward plane sizes (1, primes, vector edges), 1-D and 3-D, and a mean far
# from zero (the statistics' pivot)
@pytest.mark.parametrize("xs,offset", [((2, 3, 7, 5), 0), ((1, 5, 1, 1), 0), ((1, 4, 13, 11), 50),
                                       ((3, 2, 17), 0), ((1, 3, 61, 67), 0), ((1, 2, 2, 3, 5), 0)])
def test_instancenorm(xs, offset):
    x = rand(*xs) + np.float32(offset)
    consts = {"s": rand(xs[1]), "b": rand(xs[1])}
    check(build("InstanceNormalization", {"X": x}, consts, ["X", "s", "b"], dict(epsilon=1e-4)), {"X": x})


@pytest.mark.parametrize("axis,shape,pshape", [(-1, (2, 7, 13), (13,)), (1, (3, 4, 5), (4, 5)),
                                                (-2, (2, 3, 6, 5), (1, 5)), (0, (4, 3), (4, 3))])
def test_layernorm(axis, shape, pshape):
    x = rand(*shape)
    consts = {"s": rand(*pshape), "b": rand(*pshape)}
    check(build("LayerNormalization", {"X": x}, consts, ["X", "s", "b"], dict(axis=axis, epsilon=1e-5),
                n_out=3), {"X": x}, n_out=3)


def test_layernorm_no_bias():
    x = rand(5, 17)
    check(build("LayerNormalization", {"X": x}, {"s": rand(17)}, ["X", "s"], {}), {"X": x})


# opset 21: scale and bias per channel; opset 18: per group
@pytest.mark.parametrize("xs,groups,opset", [((2, 6, 4, 5), 3, 21), ((1, 12, 9, 7), 4, 21), ((1, 8, 3, 3), 8, 21),
                                             ((1, 6, 5, 5), 1, 21), ((2, 6, 4, 5), 3, 18), ((1, 10, 11), 5, 18)])
def test_groupnorm(xs, groups, opset):
    x = rand(*xs)
    pairs = xs[1] if opset >= 21 else groups
    consts = {"s": rand(pairs), "b": rand(pairs)}
    check(build("GroupNormalization", {"X": x}, consts, ["X", "s", "b"], dict(num_groups=groups, epsilon=1e-5),
                opset=opset), {"X": x})


@pytest.mark.parametrize("p,axis", [(1, 1), (2, -1), (2, 0)])
def test_lpnorm(p, axis):
    x = rand(3, 4, 5)
    check(build("LpNormalization", {"X": x}, {}, ["X"], dict(p=p, axis=axis)), {"X": x})


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("shape,axis", [((9, 1000), -1), ((2, 37, 70), 1)])
def test_lpnorm_lines(p, shape, axis):
    """The plan's rows and inner-axis positions, with a zero line, a NaN line (all NaN, as ORT
    gives) and a line with an infinity. (Lines whose float squares underflow or overflow are
    test_norm_pool_fast's: ORT's float sums lose them.)"""
    x = rand(*shape)
    lines = np.moveaxis(x, axis, -1).reshape(-1, shape[axis])  # a copy: write back below
    lines[0] = 0
    lines[1, 5] = np.nan
    lines[2, 3] = np.inf
    moved = np.moveaxis(x, axis, -1).shape
    x = np.ascontiguousarray(np.moveaxis(lines.reshape(moved), -1, axis))
    check(build("LpNormalization", {"X": x}, {}, ["X"], dict(p=p, axis=axis)), {"X": x})


# ---- Gemm / MatMul ----------------------------------------------------------------

@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("cshape", [None, (), (1,), (11,), (7, 1), (7, 11)])
def test_gemm(ta, tb, cshape):
    m, k, n = 7, 13, 11
    a = rand(*((k, m) if ta else (m, k)))
    b = rand(*((n, k) if tb else (k, n)))
    consts = {"B": b}
    ins = ["A", "B"]
    if cshape is not None:
        consts["C"] = rand(*cshape) if cshape else np.array(0.75, dtype=np.float32)
        ins.append("C")
    attrs = dict(transA=ta, transB=tb, alpha=0.5, beta=1.5)
    check(build("Gemm", {"A": a}, consts, ins, attrs, opset=13), {"A": a})


MATMUL_CASES = [
    ((7, 13), (13, 11)),
    ((3, 5, 9), (9, 4)),
    ((2, 1, 5, 6), (3, 6, 7)),
    ((6,), (6, 5)),
    ((4, 6), (6,)),
    ((2, 3, 6), (6,)),
    ((6,), (2, 6, 3)),
    ((1, 33, 65), (2, 1, 65, 17)),
]


@pytest.mark.parametrize("ash,bsh", MATMUL_CASES)
def test_matmul(ash, bsh):
    a, b = rand(*ash), rand(*bsh)
    check(build("MatMul", {"A": a, "B": b}, {}, ["A", "B"], {}, opset=13), {"A": a, "B": b})


# ---- Resize / Upsample / DepthToSpace ----------------------------------------------

RESIZE_CASES = [
    # (x shape, scales or None, sizes or None, attrs)
    ((1, 2, 5, 7), [1, 1, 2.0, 3.0], None, dict(mode="nearest")),
    ((1, 2, 5, 7), [1, 1, 0.6, 0.5], None, dict(mode="nearest", nearest_mode="ceil")),
    ((1, 2, 5, 7), None, [1, 2, 9, 4], dict(mode="nearest", nearest_mode="floor",
                                             coordinate_transformation_mode="align_corners")),
    ((1, 2, 5, 7), None, [1, 2, 8, 13], dict(mode="nearest", nearest_mode="round_prefer_ceil",
                                              coordinate_transformation_mode="asymmetric")),
    ((1, 2, 5, 7), [1, 1, 1.7, 2.3], None, dict(mode="linear")),
    ((1, 2, 5, 7), None, [1, 2, 3, 11], dict(mode="linear", coordinate_transformation_mode="align_corners")),
    ((1, 2, 5, 7), None, [1, 2, 1, 11], dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel")),
    ((1, 2, 5, 7), [1, 1, 0.5, 0.75], None, dict(mode="linear", coordinate_transformation_mode="asymmetric")),
    ((2, 3, 4), [1, 1.5, 2], None, dict(mode="linear")),
    ((1, 1, 6, 8), [1, 1, 1.5, 2.5], None, dict(mode="cubic")),
    ((1, 1, 6, 8), None, [1, 1, 4, 5], dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1)),
    ((1, 1, 6, 8), [1, 1, 2, 2], None, dict(mode="cubic", coordinate_transformation_mode="asymmetric")),
    ((1, 2, 5, 7), [1, 1, 2, 2], None, dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric")),
    # trilinear (planned: the depth's taps in the linear rows)
    ((1, 3, 4, 6, 5), [1, 1, 2, 2, 2], None, dict(mode="linear")),
    ((2, 2, 5, 7, 9), None, [2, 2, 3, 11, 4], dict(mode="linear", coordinate_transformation_mode="align_corners")),
]


@pytest.mark.parametrize("xs,scales,sizes,attrs", RESIZE_CASES)
def test_resize(xs, scales, sizes, attrs):
    x = rand(*xs)
    consts = {}
    ins = ["X", ""]
    if scales is not None:
        consts["scales"] = np.array(scales, dtype=np.float32)
        ins.append("scales")
    else:
        consts["sizes"] = np.array(sizes, dtype=np.int64)
        ins += ["", "sizes"]
    check(build("Resize", {"X": x}, consts, ins, attrs, opset=19), {"X": x})


def test_resize_tf_crop_and_resize():
    x = rand(1, 2, 6, 7)
    consts = {"roi": np.array([0, 0, 0.2, -0.1, 1, 1, 0.9, 1.2], dtype=np.float32),
              "sizes": np.array([1, 2, 5, 9], dtype=np.int64)}
    attrs = dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0)
    check(build("Resize", {"X": x}, consts, ["X", "roi", "", "sizes"], attrs, opset=13), {"X": x})


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_kernel_names_its_tier(mode, tmp_path):
    """The plan's name says the tier its rows run on (the linear blend is AVX2 on both vector
    tiers; it said "scalar" there)."""
    import os
    from conftest import profile_nodes
    consts = {"scales": np.array([1, 1, 2, 2], dtype=np.float32)}
    path = tmp_path / "resize.onnx"
    path.write_bytes(build("Resize", {"X": rand(1, 2, 6, 7)}, consts, ["X", "", "scales"],
                           dict(mode=mode), opset=19))
    kernel = next(e["args"]["kernel"] for e in profile_nodes(path, "--iterations", 1))
    tier = "scalar" if os.environ.get("NNF_ISA", "").strip().lower() == "scalar" else "avx2"
    assert kernel.startswith(f"f32_resize_{mode}") and kernel.endswith(tier), kernel


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_resize_axes_keep_aspect(policy):
    x = rand(1, 2, 6, 9)
    consts = {"sizes": np.array([5, 4], dtype=np.int64)}
    attrs = dict(mode="nearest", axes=[3, 2], keep_aspect_ratio_policy=policy)
    check(build("Resize", {"X": x}, consts, ["X", "", "", "sizes"], attrs, opset=18), {"X": x})


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.5, 0.7]])
def test_resize_opset10(mode, scales):
    x = rand(1, 2, 6, 7)
    consts = {"scales": np.array(scales, dtype=np.float32)}
    check(build("Resize", {"X": x}, consts, ["X", "scales"], dict(mode=mode), opset=10), {"X": x})


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample9(mode):
    x = rand(1, 2, 3, 4)
    consts = {"scales": np.array([1, 1, 2, 3], dtype=np.float32)}
    check(build("Upsample", {"X": x}, consts, ["X", "scales"], dict(mode=mode), opset=9), {"X": x})


@pytest.mark.parametrize("op,xs,bs,mode", [("DepthToSpace", (2, 12, 3, 5), 2, "DCR"),
                                           ("DepthToSpace", (1, 18, 2, 3), 3, "CRD"),
                                           ("SpaceToDepth", (2, 3, 6, 9), 3, None)])
def test_depth_space(op, xs, bs, mode):
    x = rand(*xs)
    attrs = dict(blocksize=bs)
    if mode:
        attrs["mode"] = mode
    check(build(op, {"X": x}, {}, ["X"], attrs, opset=13), {"X": x})
