"""The blocked layout (passes/layout_nchwc.c, ops/nchwc.h): small models whose convs, pools,
resizes, concats and element-wise ops the layout pass moves onto NCHWc8 tensors must give ONNX
Runtime's results, the pass must really have blocked them (the profile's kernels say nchwc; the
internal ops of domain nnfuse.nchwc keep their ONNX names, plus 'ReorderInput' and 'ReorderOutput'),
reorders must appear only at region edges, and a model file that names an internal op is refused
with a clear message."""
import os
import subprocess

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnfuse
from conftest import BLOCKED, NNF_BIN, model_of, profile_nodes

RNG = np.random.default_rng(11)
needs_blocked = pytest.mark.skipif(not BLOCKED, reason="NNF_ISA=scalar: no blocked layout")


def w(name, shape, scale=0.3):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def conv(name, x, cin, cout, k=3, stride=1, pad=1, group=1, act=None, dil=1):
    """Conv (+ bias) (+ activation); returns (nodes, inits, output)."""
    inits = [w(f"{name}.w", (cout, cin // group, k, k)), w(f"{name}.b", (cout,))]
    nodes = [helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [f"{name}.y"], pads=[pad] * 4,
                              strides=[stride] * 2, group=group, dilations=[dil] * 2)]
    y = f"{name}.y"
    if act == "relu":
        nodes.append(helper.make_node("Relu", [y], [f"{name}.r"]))
        y = f"{name}.r"
    elif act == "relu6":
        inits += [numpy_helper.from_array(np.float32(0), f"{name}.lo"),
                  numpy_helper.from_array(np.float32(6), f"{name}.hi")]
        nodes.append(helper.make_node("Clip", [y, f"{name}.lo", f"{name}.hi"], [f"{name}.r"]))
        y = f"{name}.r"
    elif act == "silu":
        nodes += [helper.make_node("Sigmoid", [y], [f"{name}.s"]), helper.make_node("Mul", [y, f"{name}.s"],
                                                                                     [f"{name}.r"])]
        y = f"{name}.r"
    return nodes, inits, y


def build(parts, extra_nodes, extra_inits, outputs, shape):
    nodes, inits = [], []
    for n, i, _ in parts:
        nodes += n
        inits += i
    g = helper.make_graph(nodes + extra_nodes, "nchwc", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                       list(shape))],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                          inits + extra_inits)
    return model_of(g).SerializeToString()


def case_stem_chain():
    """3-channel input read directly, awkward channel counts, depthwise, pools, global pool, Gemm."""
    a = conv("a", "x", 3, 13, act="relu")
    b = conv("b", a[2], 13, 16, stride=2, act="relu6")
    d = conv("d", b[2], 16, 16, group=16, act="relu6")
    e = conv("e", d[2], 16, 9, k=1, pad=0)
    nodes = [helper.make_node("MaxPool", [e[2]], ["mp"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("AveragePool", ["mp"], ["ap"], kernel_shape=[2, 2], strides=[1, 1], pads=[0, 0, 1, 1],
                              count_include_pad=0),
             helper.make_node("GlobalAveragePool", ["ap"], ["gap"]),
             helper.make_node("Flatten", ["gap"], ["flat"]),
             helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["y"], transB=1)]
    inits = [w("fc.w", (5, 9)), w("fc.b", (5,))]
    return build([a, b, d, e], nodes, inits, ["y"], (1, 3, 17, 19)), \
        {"nchwc.Conv", "nchwc.MaxPool", "nchwc.AveragePool", "nchwc.GlobalAveragePool"}, 0


def case_residual_add():
    """A residual Add fused into the second conv, and a standalone Add + LeakyRelu, all blocked."""
    a = conv("a", "x", 8, 24, k=1, pad=0, act="relu")
    b = conv("b", a[2], 24, 24, act=None)
    c = conv("c", b[2], 24, 24, k=1, pad=0)
    nodes = [helper.make_node("Add", [b[2], a[2]], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Mul", ["r", c[2]], ["m"]), helper.make_node("LeakyRelu", ["m"], ["y"], alpha=0.1)]
    return build([a, b, c], nodes, [], ["y"], (2, 8, 11, 7)), {"nchwc.Conv", "nchwc.ReorderInput", "nchwc.ReorderOutput"}, 2


def case_concat_resize():
    """YOLO's neck: SiLU convs, an SPPF-style MaxPool, nearest 2x Resize and a channel Concat; the
    last conv, a graph output, writes NCHW itself (one reorder: the input's)."""
    a = conv("a", "x", 16, 16, k=1, pad=0, act="silu")
    b = conv("b", a[2], 16, 8, stride=2, act="silu")
    nodes = [helper.make_node("MaxPool", [b[2]], ["p5"], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]),
             helper.make_node("Resize", ["p5", "", "scales"], ["up"], mode="nearest"),
             helper.make_node("Concat", ["up", a[2]], ["cat"], axis=1)]
    c = conv("c", "cat", 24, 5, k=1, pad=0, act="silu")
    inits = [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    return build([a, b, c], nodes, inits, [c[2]], (1, 16, 12, 10)), \
        {"nchwc.Conv", "nchwc.MaxPool", "nchwc.Resize"}, 1


def case_mixed_readers():
    """A blocked value read by a conv, by a Transpose (NCHW reader) and as a graph output: one
    ReorderFromNchwc serves both plain readers; GlobalMaxPool and Sub stay blocked."""
    a = conv("a", "x", 8, 12, act="relu")
    b = conv("b", a[2], 12, 12, act="relu")
    nodes = [helper.make_node("Transpose", [a[2]], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("Sub", [b[2], a[2]], ["d"]),
             helper.make_node("GlobalMaxPool", ["d"], ["g"])]
    return build([a, b], nodes, [], ["t", a[2], "g"], (1, 8, 6, 5)), \
        {"nchwc.Conv", "nchwc.GlobalMaxPool", "nchwc.ReorderOutput"}, 2


def case_winograd():
    """ResNet's 3x3 64-channel convs at 22x22 (36 output tiles): the blocked Winograd, one with a
    fused residual; 70 output channels leave padding lanes in the last block."""
    a = conv("a", "x", 64, 64, act="relu")
    b = conv("b", a[2], 64, 64)
    c = conv("c", "r", 64, 70, act="silu")
    nodes = [helper.make_node("Add", [b[2], a[2]], ["s"]), helper.make_node("Relu", ["s"], ["r"])]
    return build([a, b, c], nodes, [], [c[2]], (1, 64, 22, 22)), {"nchwc.Conv"}, 2


def case_winograd_s2():
    """YOLOv5's downsampling 3x3 at stride 2 on 128 channels, 21x19 out (30 output tiles): the
    blocked Winograd's stride-2 form on the AVX-512 tier (the direct tiles below it); 132 output
    channels leave padding lanes in the last block, the odd last input row and column lie in
    the padding. A 1x1 after it writes the plain output."""
    a = conv("a", "x", 16, 128, k=1, pad=0, act="silu")
    b = conv("b", a[2], 128, 132, stride=2, act="silu")
    c = conv("c", b[2], 132, 16, k=1, pad=0)
    return build([a, b, c], [], [], [c[2]], (1, 16, 42, 38)), {"nchwc.Conv"}, 1


def case_winograd_f2():
    """A 12x12 3x3 (9 tiles of 4x4, 36 of 2x2) on 64 channels: the blocked Winograd's F(2x2,3x3)
    form on both SIMD tiers and every CPU (ResNet-50's 14x14, 16 tiles of 4x4, takes F(4x4,3x3)
    where ymm FMAs run as halves); 70 output channels leave padding lanes. A 1x1 after it writes
    the plain output."""
    a = conv("a", "x", 16, 64, k=1, pad=0, act="silu")
    b = conv("b", a[2], 64, 70, act="relu")
    c = conv("c", b[2], 70, 16, k=1, pad=0)
    return build([a, b, c], [], [], [c[2]], (1, 16, 12, 12)), {"nchwc.Conv"}, 1


def case_winograd_f2_heavy():
    """The U-Net's bottom: on a blocked input, a 3x3 of 512 -> 256 channels at 16x16 (16 tiles of
    4x4), whose F(4x4,3x3) weights would take 18.9 MB, runs F(2x2,3x3) on every CPU (7.5 MB),
    blocked although only a ConvTranspose (NCHW) reads it: the NCHW Winograd has F(4x4,3x3) alone.
    Two reorders, in and out."""
    p = conv("p", "x", 32, 512, k=1, pad=0, act="relu")
    a = conv("a", p[2], 512, 256, act="relu")
    nodes = [helper.make_node("ConvTranspose", [a[2], "t.w", "t.b"], ["y"], strides=[2, 2], kernel_shape=[2, 2])]
    inits = [w("t.w", (256, 8, 2, 2), scale=0.05), w("t.b", (8,))]
    return build([p, a], nodes, inits, ["y"], (1, 32, 16, 16)), {"nchwc.Conv", "nchwc.ReorderOutput"}, 2


def case_bottleneck_silu():
    """YOLOv5's bottleneck twice, x + SiLU(conv(SiLU(conv(x)))): the Add joins the 3x3 after its
    SiLU, on the blocked Winograd (64 and 70 channels at 22x22) and on the direct tiles (16
    channels); 70 channels leave padding lanes."""
    a = conv("a", "x", 64, 64, k=1, pad=0, act="silu")
    b = conv("b", a[2], 64, 64, act="silu")
    c = conv("c", "s", 64, 16, k=1, pad=0, act="silu")
    d = conv("d", c[2], 16, 16, act="silu")
    e = conv("e", "t", 16, 70, k=1, pad=0, act="silu")
    f = conv("f", e[2], 70, 70, act="silu")
    nodes = [helper.make_node("Add", [a[2], b[2]], ["s"]), helper.make_node("Add", [c[2], d[2]], ["t"]),
             helper.make_node("Add", [e[2], f[2]], ["y"])]
    return build([a, b, c, d, e, f], nodes, [], ["y"], (1, 64, 22, 22)), {"nchwc.Conv"}, 2


def case_grouped():
    """RegNet's block: grouped 3x3 convs whose groups are whole 8-channel blocks (widths 16 and 8,
    stride 2 and 1, 3 and 5 blocks per group) between 1x1s, a residual Add: all blocked."""
    a = conv("a", "x", 24, 48, k=1, pad=0, act="relu")
    b = conv("b", a[2], 48, 48, stride=2, group=3, act="relu")
    c = conv("c", b[2], 48, 80, group=2, act="relu")
    d = conv("d", c[2], 80, 80, k=1, pad=0)
    e = conv("e", a[2], 48, 80, k=1, pad=0, stride=2)
    nodes = [helper.make_node("Add", [d[2], e[2]], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    return build([a, b, c, d, e], nodes, [], ["y"], (1, 24, 13, 17)), {"nchwc.Conv"}, 2


def case_grouped_narrow():
    """ResNeXt-50 32x4d's first stage: grouped 3x3 convs of 4 and 2 channels a group (groups that
    share a block, nchwc_gconv.c) between 1x1s, the second with a residual Add fused: all blocked,
    none through the NCHW grouped GEMM."""
    a = conv("a", "x", 24, 40, k=1, pad=0, act="relu")
    b = conv("b", a[2], 40, 40, group=10, act="relu")
    c = conv("c", b[2], 40, 40, group=20)
    nodes = [helper.make_node("Add", [c[2], a[2]], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    return build([a, b, c], nodes, [], ["y"], (1, 24, 19, 23)), {"nchwc.Conv"}, 2


def case_plain_out():
    """Convs at the edge of a region write plain tensors themselves (out_plain): NCHW for a 1x1
    to 255 channels and a Sigmoid read by a Reshape and for a stride-2 3x3 that is a graph output;
    channel-last, the Transpose after them fused (passes/fuse_conv_transpose.c), for a 1x1 on the
    blocked input whose only reader is a Transpose to NHWC and for YOLO-style detection heads (a 1x1
    to 3 x 85 channels and a 3x3 to 3 x 6, whose groups straddle 8-channel blocks, each Reshape to
    [1, 3, C / 3, H, W] and Transpose (0, 1, 3, 4, 2), one with a Sigmoid between): no reorder but
    the input's, no Transpose. A 1x1 to 40 channels on a plain value (a Neg's) stays on the NCHW
    GEMM."""
    a = conv("a", "x", 16, 32, act="silu")
    h = conv("h", a[2], 32, 255, k=1, pad=0)
    s = conv("s", a[2], 32, 20, stride=2, act="relu")
    f = conv("f", "x", 16, 24, k=1, pad=0)
    g = conv("g", "neg", 16, 40, k=1, pad=0)
    d = conv("d", a[2], 32, 255, k=1, pad=0)
    q = conv("q", a[2], 32, 18)
    nodes = [helper.make_node("Neg", ["x"], ["neg"]),
             helper.make_node("Sigmoid", [h[2]], ["hs"]),
             helper.make_node("Reshape", ["hs", "shape"], ["hr"]),
             helper.make_node("Transpose", [f[2]], ["ft"], perm=[0, 2, 3, 1]),
             helper.make_node("Reshape", [d[2], "dshape"], ["dr"]),
             helper.make_node("Transpose", ["dr"], ["dt"], perm=[0, 1, 3, 4, 2]),
             helper.make_node("Sigmoid", ["dt"], ["ds"]),
             helper.make_node("Reshape", [q[2], "qshape"], ["qr"]),
             helper.make_node("Transpose", ["qr"], ["qt"], perm=[0, 1, 3, 4, 2])]
    inits = [numpy_helper.from_array(np.array([1, 3, 85, -1], np.int64), "shape"),
             numpy_helper.from_array(np.array([1, 3, 85, 13, 11], np.int64), "dshape"),
             numpy_helper.from_array(np.array([1, 3, 6, 13, 11], np.int64), "qshape")]
    return build([a, h, s, f, g, d, q], nodes, inits, ["hr", s[2], "ft", g[2], "ds", "qt"], (1, 16, 13, 11)), \
        {"nchwc.Conv", "nchwc.ReorderInput"}, 1


def case_squeeze_excite():
    """EfficientNet's / MobileNetV3's squeeze-and-excitation on a batch of 2 and 20 channels
    (padding lanes): GlobalAveragePool writes blocked for the reduce conv, the expand conv's
    Sigmoid gives a [2, 20, 1, 1] scale, and Mul, Sub and Add with per-channel operands (the scale
    first, a constant [1, 20, 1, 1] shared by the batch first and second) run blocked, no reorder
    around them; the pool's value is also a graph output (one ReorderOutput). Reorders: the input,
    the two constants, the pool's output."""
    a = conv("a", "x", 16, 20, act="silu")
    r = conv("r", "g", 20, 6, k=1, pad=0, act="relu")
    e = conv("e", r[2], 6, 20, k=1, pad=0)
    nodes = [helper.make_node("GlobalAveragePool", [a[2]], ["g"]),
             helper.make_node("Sigmoid", [e[2]], ["s"]),
             helper.make_node("Mul", ["s", a[2]], ["m"]),
             helper.make_node("Sub", ["c1", "m"], ["d"]),
             helper.make_node("Add", ["d", "c2"], ["t"])]
    f = conv("f", "t", 20, 5, k=1, pad=0)
    inits = [w("c1", (1, 20, 1, 1)), w("c2", (1, 20, 1, 1))]
    return build([a, r, e, f], nodes, inits, [f[2], "g"], (2, 16, 9, 7)), \
        {"nchwc.Conv", "nchwc.GlobalAveragePool", "nchwc.Mul", "nchwc.Sub", "nchwc.Add"}, 4


def case_residual_stream_plain():
    """ConvNeXt's stage start: a blocked 2x2 stride-2 conv whose output starts the residual stream,
    read by a 7x7 depthwise conv whose reader is plain and by the block's residual Add, whose other
    input comes from plain ops (Neg standing in for the MLP between permutes). The conv's output is
    reordered out once, the depthwise conv runs the blocked kernel between NCHW tensors on that
    plain form (as does the next block's), so the Adds run plain: blocked, each would reorder the
    branch in and its result out. One reorder."""
    d = conv("d", "x", 16, 24, k=2, stride=2, pad=0)
    a = conv("a", d[2], 24, 24, k=7, pad=3, group=24)
    b = conv("b", "y1", 24, 24, k=7, pad=3, group=24)
    nodes = [helper.make_node("Neg", [a[2]], ["n1"]), helper.make_node("Add", ["n1", d[2]], ["y1"]),
             helper.make_node("Neg", [b[2]], ["n2"]), helper.make_node("Add", ["n2", "y1"], ["y"])]
    return build([d, a, b], nodes, [], ["y"], (1, 16, 28, 28)), {"nchwc.Conv"}, 1


CASES = {f.__name__[5:]: f for f in (case_stem_chain, case_residual_add, case_concat_resize, case_mixed_readers,
                                      case_winograd, case_winograd_s2, case_winograd_f2, case_winograd_f2_heavy,
                                      case_bottleneck_silu, case_squeeze_excite, case_residual_stream_plain,
                                      case_grouped, case_grouped_narrow, case_plain_out)}


def profiled_ops(path, env=None):
    """(op, kernel) of every node event of one profiled run at -O3; blocked ops (kernel names say
    nchwc) as 'nchwc.<op>'."""
    ops = [(e["args"]["op_name"], e["args"]["kernel"]) for e in profile_nodes(path, "--threads", 2, env=env)]
    return [("nchwc." + o if "nchwc" in k or o.startswith("Reorder") else o, k) for o, k in ops]


def ort_outputs(data, x):
    """ONNX Runtime's outputs of model bytes `data` on input x: (output names, {name: array})."""
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return names, dict(zip(names, sess.run(None, {"x": x})))


def assert_close(got, ref, msg):
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4 * max(1.0, float(np.abs(ref).max())), err_msg=msg)


def matches_ort(data, shape, tmp_path, what):
    """Model bytes `data` (input x of `shape`): checks nnfuse's outputs against ONNX Runtime's on 1
    and 2 threads and returns the profiled (op, kernel) list."""
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    x = RNG.standard_normal(shape).astype(np.float32)
    names, ref = ort_outputs(data, x)
    for threads in (1, 2):
        got = nnfuse.run_model(data, {"x": x}, threads=threads)
        for n in names:
            assert_close(got[n], ref[n], f"{what}: {n}, {threads} thread(s)")
    return profiled_ops(path)


def lone_conv(node, shape, tmp_path, what):
    """The model of conv `node` alone (its output the graph's), through matches_ort."""
    return matches_ort(build([node], [], [], [node[2]], shape), shape, tmp_path, what)


@pytest.mark.parametrize("name", sorted(CASES))
def test_blocked_models_match_ort(name, tmp_path):
    data, expect_ops, n_reorders = CASES[name]()
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(data)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    x = RNG.standard_normal(tuple(sess.get_inputs()[0].shape)).astype(np.float32)
    names = [o.name for o in sess.get_outputs()]
    ref = dict(zip(names, sess.run(None, {"x": x})))
    # planned kernels at 1 and 2 threads, then the blocked ops' reference kernels on the same graph
    for threads, reference in ((1, False), (2, False), (2, True)):
        got = nnfuse.run_model(data, {"x": x}, threads=threads, reference_kernels=reference)
        for n in names:
            tol = 1e-4 * max(1.0, float(np.abs(ref[n]).max()))
            np.testing.assert_allclose(got[n], ref[n], rtol=0, atol=tol, err_msg=f"{name}: output {n}")
    if not BLOCKED:
        return
    ops = profiled_ops(path)
    op_names = {o for o, _ in ops}
    assert expect_ops <= op_names, f"not blocked: {expect_ops - op_names} (ran {sorted(op_names)})"
    reorders = sum(o in ("nchwc.ReorderInput", "nchwc.ReorderOutput") for o, _ in ops)
    if name == "grouped_narrow":
        assert sum(k.startswith("f32_gconv") for _, k in ops) == 2, ops
    if name == "residual_stream_plain":
        assert sum(k.endswith("+nchw_out") for _, k in ops) == 2, ops
    if name == "plain_out":
        assert sum(k.endswith("+nchw_out") for _, k in ops) == 2, ops
        assert sum(k.endswith("+nhwc_out") for _, k in ops) == 3, ops
        assert not any(o == "Transpose" for o, _ in ops), ops
        assert any(o == "Conv" and "gemm1x1" in k for o, k in ops), ops
    assert reorders == n_reorders, f"{reorders} reorders, expected {n_reorders} (only at region edges): {ops}"
    # every blocked node ran a planned kernel, not the reference
    assert all(k != "ref" for o, k in ops if o.startswith("nchwc.")), ops


def tier_in_force(tmp_path):
    """The vector tier the engine runs here ("avx2" or "avx512"): the suffix of a Relu's kernel."""
    path = tmp_path / "relu.onnx"
    path.write_bytes(build([], [helper.make_node("Relu", ["x"], ["y"])], [], ["y"], (1, 8, 4, 4)))
    return profile_nodes(path)[0]["args"]["kernel"].rsplit("_", 1)[1]


@needs_blocked
@pytest.mark.parametrize("shape, stride, small", [((1, 24, 9, 37), 1, False), ((1, 20, 11, 37), 2, False),
                                                  ((1, 24, 5, 100), 1, False), ((1, 16, 5, 112), 1, False),
                                                  ((1, 20, 11, 19), 2, True), ((1, 24, 14, 14), 1, True),
                                                  ((1, 24, 14, 14), 2, True)])
def test_isolated_depthwise(shape, stride, small, tmp_path):
    """A depthwise conv between the plain input and a graph output runs the blocked kernel, which
    reorders each pair of blocks' rows in and out itself (one node, no reorders around it), where
    that beats the NCHW row kernel: output rows of at most 16 pixels (the blocked kernel's
    whole-row tiles: 19 wide at stride 2 gives 10) on both tiers, and on AVX-512 rows under six
    full 16-lane vectors (37, 19 and 100 wide here; not 112). Elsewhere it stays NCHW: blocking
    it would add two reorders. Either way ONNX Runtime's results."""
    c = shape[1]
    a = conv("a", "x", c, c, stride=stride, group=c, act="relu6")
    ops = lone_conv(a, shape, tmp_path, f"depthwise {shape} stride {stride}")
    ow = (shape[3] - 1) // stride + 1
    blocked = small or (tier_in_force(tmp_path) == "avx512" and (ow < 96 or ow % 16 != 0))
    assert len(ops) == 1, ops
    conv_kernels = [k for o, k in ops if o.endswith("Conv")]
    assert len(conv_kernels) == 1 and "dwconv" in conv_kernels[0], ops
    assert ("nchwc" in conv_kernels[0]) == blocked, ops
    assert conv_kernels[0].endswith("+nchw_out") == blocked, ops


@needs_blocked
@pytest.mark.parametrize("k", [3, 7])
def test_depthwise_before_nhwc_transpose(k, tmp_path):
    """ConvNeXt's block start: a depthwise conv (3x3, and the 7x7 of ConvNeXt) on a plain 14x14 map
    whose only reader is a Transpose to NHWC runs the blocked kernel between NCHW tensors and keeps
    the Transpose: that kernel writes NCHW planes only, and fused with the Transpose (the dense
    conv's channel-last output) the node fell to the reference kernel. ONNX Runtime's results."""
    a = conv("a", "n", 24, 24, k=k, pad=k // 2, group=24)
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Transpose", [a[2]], ["y"], perm=[0, 2, 3, 1])]
    ops = matches_ort(build([a], nodes, [], ["y"], (1, 24, 14, 14)), (1, 24, 14, 14), tmp_path, f"{k}x{k}")
    assert not any(kern == "ref" for _, kern in ops), ops
    assert any(o == "nchwc.Conv" and kern.endswith("+nchw_out") for o, kern in ops), ops
    assert any(o == "Transpose" for o, _ in ops), ops


@needs_blocked
@pytest.mark.parametrize("cin, stride, group, reorders", [(24, 2, 1, 0), (32, 2, 1, 0), (40, 2, 1, 1),
                                                          (24, 1, 1, 1), (32, 2, 4, 1)])
def test_plain_input_read_directly(cin, stride, group, reorders, tmp_path):
    """A dense conv on the plain input reads it without a reorder when it has at most 32 channels and a
    stride of 2 (a reorder would move 4x its output's pixels once more); with more channels, at
    stride 1 or grouped it reads a reordered copy. The output, a graph output, is written NCHW by
    the conv itself. ONNX Runtime's results either way."""
    shape = (1, cin, 23, 19)
    a = conv("a", "x", cin, 32, stride=stride, group=group, act="silu")
    ops = lone_conv(a, shape, tmp_path, f"{cin} channels stride {stride} group {group}")
    assert [o for o, _ in ops if o.endswith("Conv")] == ["nchwc.Conv"], ops
    assert sum(o.startswith("nchwc.Reorder") for o, _ in ops) == reorders, ops


@needs_blocked
def test_winograd_convs_run_blocked(tmp_path):
    path = tmp_path / "winograd.onnx"
    path.write_bytes(case_winograd()[0])
    kernels = [k for o, k in profiled_ops(path) if o == "nchwc.Conv"]
    assert len(kernels) == 3 and all("nchwc_winograd" in k for k in kernels), kernels


@needs_blocked
@pytest.mark.parametrize("case, n_convs, form", [
    # the stride-2 3x3 as the blocked Winograd's stride-2 form on both SIMD tiers
    (case_winograd_s2, 3, "winograd_s2"),
    # the 12x12 3x3 as F(2x2,3x3) on both SIMD tiers
    (case_winograd_f2, 3, "winograd2x2"),
    # F(2x2,3x3) where F(4x4,3x3)'s weights would exceed 16 MiB, on every CPU
    (case_winograd_f2_heavy, 2, "winograd2x2")])
def test_winograd_forms(case, n_convs, form, tmp_path):
    """The second conv of each case runs the named blocked Winograd form (outputs:
    test_blocked_models_match_ort)."""
    path = tmp_path / f"{case.__name__}.onnx"
    path.write_bytes(case()[0])
    kernels = [k for o, k in profiled_ops(path) if o == "nchwc.Conv"]
    assert len(kernels) == n_convs, kernels
    assert form in kernels[1], kernels


@needs_blocked
def test_bottleneck_adds_fuse(tmp_path):
    """The three Adds after a conv's SiLU run in those convs' epilogues, on both algorithms."""
    path = tmp_path / "bottleneck.onnx"
    path.write_bytes(case_bottleneck_silu()[0])
    ops = profiled_ops(path)
    assert not [o for o, _ in ops if o.endswith("Add")], ops
    kernels = [k for o, k in ops if o == "nchwc.Conv"]
    assert len(kernels) == 6 and sum("nchwc_winograd" in k for k in kernels) == 2, kernels


@needs_blocked
def test_grouped_convs(tmp_path):
    """Groups of whole blocks run the blocked kernel; so do ResNeXt's 4-channel groups, on the
    grouped kernel of narrow groups (nchwc_gconv.c): the chain stays blocked, its only reorder the
    input's (it ran on the NCHW grouped GEMM with a reorder on each side). ONNX Runtime's results."""
    path = tmp_path / "grouped.onnx"
    path.write_bytes(case_grouped()[0])
    kernels = [k for o, k in profiled_ops(path) if o == "nchwc.Conv"]
    assert len(kernels) == 5 and all("nchwc" in k and "dwconv" not in k for k in kernels), kernels
    a = conv("a", "x", 16, 32, k=1, pad=0, act="relu")
    b = conv("b", a[2], 32, 32, group=8, act="relu")
    c = conv("c", b[2], 32, 16, k=1, pad=0)
    data = build([a, b, c], [], [], [c[2]], (1, 16, 9, 9))
    path.write_bytes(data)
    ops = profiled_ops(path)
    assert [o for o, _ in ops].count("Conv") == 0, ops
    assert sum(k.startswith("f32_gconv4_nchwc_3x3") for _, k in ops) == 1, ops
    assert sum(o.startswith("nchwc.Reorder") for o, _ in ops) == 1, ops
    x = RNG.standard_normal((1, 16, 9, 9)).astype(np.float32)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = nnfuse.run_model(data, {"x": x})[c[2]]
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4 * max(1.0, float(np.abs(ref).max())))


def test_grouped_narrow_residual_after_activation(tmp_path):
    """A grouped conv of 4-channel groups whose residual Add comes after its ReLU (fused as a
    residual after the activation, which the blocked kernel's passes cannot add) stays NCHW rather
    than falling to the reference kernel; ONNX Runtime's results on 1 and 2 threads."""
    a = conv("a", "x", 24, 40, k=1, pad=0, act="relu")
    b = conv("b", a[2], 40, 40, group=10, act="relu")
    data = build([a, b], [helper.make_node("Add", [b[2], a[2]], ["y"])], [], ["y"], (1, 24, 19, 23))
    ops = matches_ort(data, (1, 24, 19, 23), tmp_path, "residual after the ReLU")
    assert not any(kern == "ref" for _, kern in ops), ops


def test_pass_can_be_disabled(tmp_path):
    data, _, _ = case_residual_add()
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    env = dict(os.environ, NNF_DISABLE_PASSES="layout_nchwc")
    ops = {o for o, _ in profiled_ops(path, env)}
    assert not any(o.startswith("nchwc.") for o in ops), ops


def case_inverted_residual(share_expansion=False):
    """MobileNetV2's blocks at odd sizes: 1x1 expansion + ReLU6 -> depthwise 3x3 (stride 2, then 1)
    + ReLU6 -> 1x1 projection, the second block with its skip Add. share_expansion: the second
    expansion is read by a pool too, so it must stay a tensor of its own."""
    a = conv("a", "x", 5, 12, k=1, pad=0)
    e1 = conv("e1", a[2], 12, 44, k=1, pad=0, act="relu6")
    d1 = conv("d1", e1[2], 44, 44, stride=2, group=44, act="relu6")
    p1 = conv("p1", d1[2], 44, 16, k=1, pad=0)
    e2 = conv("e2", p1[2], 16, 72, k=1, pad=0, act="relu6")
    d2 = conv("d2", e2[2], 72, 72, group=72, act="relu6")
    p2 = conv("p2", d2[2], 72, 16, k=1, pad=0)
    nodes, outputs = [helper.make_node("Add", [p2[2], p1[2]], ["y"])], ["y"]
    if share_expansion:
        nodes.append(helper.make_node("GlobalAveragePool", [e2[2]], ["g"]))
        outputs.append("g")
    return build([a, e1, d1, p1, e2, d2, p2], nodes, [], outputs, (1, 5, 23, 29))


@pytest.mark.parametrize("share", [False, True])
def test_expansion_fuses_into_depthwise(share, tmp_path, monkeypatch):
    """A 1x1 conv whose output only a depthwise conv reads runs with it as one ConvPwDw node
    (passes/fuse_pw_dw.c): ONNX Runtime's results, and the same bits as the two convs apart
    (NNF_DISABLE_PASSES=fuse_pw_dw) on 1 and 2 threads; an expansion read by another node too
    stays a Conv of its own."""
    data = case_inverted_residual(share)
    path = tmp_path / "mbv2_blocks.onnx"
    path.write_bytes(data)
    ops = [o for o, _ in profiled_ops(path)]
    assert ops.count("nchwc.ConvPwDw") == ((1 if share else 2) if BLOCKED else 0), ops
    x = RNG.standard_normal((1, 5, 23, 29)).astype(np.float32)
    names, ref = ort_outputs(data, x)
    for threads in (1, 2):
        fused = nnfuse.run_model(data, {"x": x}, threads=threads)
        monkeypatch.setenv("NNF_DISABLE_PASSES", "fuse_pw_dw")
        apart = nnfuse.run_model(data, {"x": x}, threads=threads)
        monkeypatch.delenv("NNF_DISABLE_PASSES")
        for n in names:
            assert_close(fused[n], ref[n], f"output {n}, {threads} threads")
            assert np.array_equal(fused[n], apart[n]), f"output {n}, {threads} threads: fused != apart"
    # the fused node's reference kernel (the two reference convs)
    got = nnfuse.run_model(data, {"x": x}, threads=2, reference_kernels=True)
    for n in names:
        assert_close(got[n], ref[n], f"output {n}, reference kernels")
    monkeypatch.setenv("NNF_DISABLE_PASSES", "fuse_pw_dw")
    assert "nchwc.ConvPwDw" not in {o for o, _ in profiled_ops(path)}


def test_expansion_fuses_with_default_attributes(tmp_path):
    """A 1x1 Conv written without kernel_shape, strides or pads (all defaulted) fuses too."""
    a = conv("a", "x", 8, 12, k=1, pad=0)
    nodes = [helper.make_node("Conv", [a[2], "e.w"], ["e"]),
             helper.make_node("Conv", ["e", "d.w"], ["y"], group=40, pads=[1, 1, 1, 1])]
    data = build([a], nodes, [w("e.w", (40, 12, 1, 1)), w("d.w", (40, 1, 3, 3))], ["y"], (1, 8, 9, 11))
    path = tmp_path / "defaults.onnx"
    path.write_bytes(data)
    assert [o for o, _ in profiled_ops(path)].count("nchwc.ConvPwDw") == (1 if BLOCKED else 0)
    x = RNG.standard_normal((1, 8, 9, 11)).astype(np.float32)
    names, ref = ort_outputs(data, x)
    assert_close(nnfuse.run_model(data, {"x": x})["y"], ref["y"], "output y")


@pytest.mark.parametrize("op", ["Conv", "ConvPwDw", "ReorderInput", "ReorderOutput", "MaxPool", "AveragePool",
                                "GlobalAveragePool", "GlobalMaxPool", "Resize"])
def test_internal_ops_refused_in_model_files(op, tmp_path):
    node = helper.make_node(op, {"Conv": ["x", "x"], "ConvPwDw": ["x"] * 5}.get(op, ["x"]), ["y"],
                            domain="nnfuse.nchwc")
    g = helper.make_graph([node], "hostile", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = model_of(g, 17, ("nnfuse.nchwc", 1))
    path = tmp_path / "hostile.onnx"
    path.write_bytes(m.SerializeToString())
    r = subprocess.run([NNF_BIN, "info", str(path)], capture_output=True, text=True)
    assert r.returncode != 0
    assert "internal operator" in r.stderr and f"nnfuse.nchwc::{op}" in r.stderr and "hostile.onnx" in r.stderr, \
        r.stderr


def case_bottlenecks(keep_h):
    """A stem conv h and two ResNet bottlenecks whose last 1x1 fuses the residual Add (+ Relu).
    keep_h: 'output' makes h a graph output too, 'reader' adds h to the result later; either way
    h is still read after the first bottleneck's last conv, whose output must not overwrite it."""
    h = conv("h", "x", 16, 32, k=1, pad=0, act="relu")
    parts, nodes, y = [h], [], h[2]
    for i in (1, 2):
        a = conv(f"a{i}", y, 32, 8, k=1, pad=0, act="relu")
        b = conv(f"b{i}", a[2], 8, 8, act="relu")
        c = conv(f"c{i}", b[2], 8, 32, k=1, pad=0)
        nodes += [helper.make_node("Add", [c[2], y], [f"s{i}"]), helper.make_node("Relu", [f"s{i}"], [f"r{i}"])]
        parts += [a, b, c]
        y = f"r{i}"
    outputs = [y]
    if keep_h == "output":
        outputs.append(h[2])
    elif keep_h == "reader":
        nodes.append(helper.make_node("Add", [y, h[2]], ["z"]))
        outputs = ["z"]
    return build(parts, nodes, [], outputs, (1, 16, 12, 12))


@pytest.mark.parametrize("keep_h,over", [(None, 2), ("output", None), ("reader", 1)])
def test_bottleneck_writes_over_its_residual(keep_h, over, tmp_path):
    """A conv with a fused residual that dies there writes its output over the residual's buffer
    (the profile names the input it overwrote), never over one that is read later; results match
    ONNX Runtime either way, also when the residual is a graph output (its blocked copy may be
    overwritten once the reorder to the caller's layout has read it)."""
    data = case_bottlenecks(keep_h)
    path = tmp_path / "bottlenecks.onnx"
    path.write_bytes(data)
    events = profile_nodes(path, "--threads", 1, "--iterations", 1)
    overwritten = sorted(e["args"]["over_input"].removesuffix(".nchwc8") for e in events
                         if "over_input" in e["args"] and e["args"]["op_name"] == "Conv")
    if over is not None and BLOCKED:
        assert len(overwritten) == over and ("h.r" in overwritten) == (keep_h is None), overwritten
    x = RNG.standard_normal((1, 16, 12, 12)).astype(np.float32)
    names, ref = ort_outputs(data, x)
    for threads in (1, 2):
        got = nnfuse.run_model(data, {"x": x}, threads=threads)
        for n in names:
            assert_close(got[n], ref[n], f"output {n}, {threads} threads")


@needs_blocked
@pytest.mark.parametrize("c, size, dil, winograd", [(64, 28, 2, True), (64, 28, 4, True), (64, 24, 3, True),
                                                    (64, 27, 2, True), (64, 28, 6, False),
                                                    (32, 28, 12, False), (32, 28, 24, False),
                                                    (16, 20, 36, False)])
def test_dilated_convs(c, size, dil, winograd, tmp_path):
    """DeepLabV3's dilated 3x3s ("same" padding) on a blocked input: where the mosaic of its
    dilation^2 phases (each an undilated 3x3, a zero gutter between two) has at most half as many
    F(4x4,3x3) products as the conv has taps inside the input, the Winograd's dilated form (the
    kernel's name ends "_dil<d>"; 27 is not a multiple of 2: phases of two sizes); elsewhere the
    direct kernel, whose rows run the columns that keep the same taps inside the input as interior
    tiles over those taps (6 on 28x28 just misses the rule; ASPP's 12, 24 and 36 reach past much
    of the map). ONNX Runtime's results either way, on 1 and 2 threads."""
    a = conv("a", "x", c, c, k=1, pad=0, act="relu")
    b = conv("b", a[2], c, c, k=3, pad=dil, dil=dil, act="relu")
    ops = matches_ort(build([a, b], [], [], [b[2]], (1, c, size, size)), (1, c, size, size), tmp_path,
                      f"dilation {dil} at {size}x{size}")
    kernels = [k for o, k in ops if o == "nchwc.Conv"]
    assert len(kernels) == 2, ops
    assert kernels[1].split("+")[0].endswith(f"_dil{dil}") == winograd, ops
    assert ("winograd" in kernels[1]) == winograd, ops
