"""Graph passes: every fusion keeps results within tolerance of ONNX Runtime and of the
unfused (-O0) run, and actually removes the nodes it claims to fuse."""
import json
import math
import subprocess

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnfuse
from conftest import NNF_BIN, model_of, profile_nodes

RNG = np.random.default_rng(7)


def const(name, shape, scale=0.3, positive=False):
    a = RNG.standard_normal(shape).astype(np.float32) * scale
    if positive:
        a = np.abs(a) + 0.5
    return numpy_helper.from_array(a, name)


def conv_bn(prefix, x, cin, cout):
    inits = [const(f"{prefix}.w", (cout, cin, 3, 3)), const(f"{prefix}.b", (cout,)),
             const(f"{prefix}.g", (cout,), positive=True), const(f"{prefix}.beta", (cout,)),
             const(f"{prefix}.mean", (cout,)), const(f"{prefix}.var", (cout,), positive=True)]
    nodes = [helper.make_node("Conv", [x, f"{prefix}.w", f"{prefix}.b"], [f"{prefix}.c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", [f"{prefix}.c", f"{prefix}.g", f"{prefix}.beta",
                                                     f"{prefix}.mean", f"{prefix}.var"], [f"{prefix}.bn"],
                              epsilon=1e-3)]
    return nodes, inits, f"{prefix}.bn"


def model(nodes, inits, out, shape=(1, 4, 9, 9)):
    g = helper.make_graph(nodes, "passes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    return model_of(g).SerializeToString()


def case_conv_bn_relu():
    n, i, y = conv_bn("a", "x", 4, 6)
    return n + [helper.make_node("Relu", [y], ["y"])], i, 1


def case_conv_bn_add_relu():
    n1, i1, y1 = conv_bn("a", "x", 4, 4)
    n2, i2, y2 = conv_bn("b", y1, 4, 4)
    return n1 + n2 + [helper.make_node("Add", [y2, "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], i1 + i2, 2


def case_conv_bn_bn_relu():
    """Two BatchNormalizations in a row fold into one conv: the second multiplies the weights'
    pending scale (applied when the conv is planned)."""
    n1, i1, y1 = conv_bn("a", "x", 4, 6)
    g = [const("n.g", (6,), positive=True), const("n.beta", (6,)), const("n.mean", (6,)),
         const("n.var", (6,), positive=True)]
    n2 = [helper.make_node("BatchNormalization", [y1, "n.g", "n.beta", "n.mean", "n.var"], ["n.bn"]),
          helper.make_node("Relu", ["n.bn"], ["y"])]
    return n1 + n2, i1 + g, 1


def case_conv_silu():
    n, i, y = conv_bn("a", "x", 4, 5)
    return n + [helper.make_node("Sigmoid", [y], ["sg"]), helper.make_node("Mul", [y, "sg"], ["y"])], i, 1


def silu(y, out):
    return [helper.make_node("Sigmoid", [y], [f"{out}.sg"]), helper.make_node("Mul", [y, f"{out}.sg"], [out])]


def case_conv_silu_add():
    """YOLOv5's bottleneck: x + SiLU(conv(SiLU(conv(x)))); the Add joins the second conv after its
    activation."""
    n1, i1, y1 = conv_bn("a", "x", 4, 4)
    n2, i2, y2 = conv_bn("b", "h", 4, 4)
    return n1 + silu(y1, "h") + n2 + silu(y2, "s") + [helper.make_node("Add", ["x", "s"], ["y"])], i1 + i2, 2


def case_conv_relu6():
    n, i, y = conv_bn("a", "x", 4, 5)
    lo, hi = numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi")
    return n + [helper.make_node("Clip", [y, "lo", "hi"], ["y"])], i + [lo, hi], 1


def case_conv_hardswish_leaky():
    n, i, y = conv_bn("a", "x", 4, 4)
    n2, i2, y2 = conv_bn("b", "h", 4, 4)
    return (n + [helper.make_node("HardSwish", [y], ["h"])] + n2 +
            [helper.make_node("LeakyRelu", [y2], ["y"], alpha=0.2)], i + i2, 2)


def scalars(**values):
    return [numpy_helper.from_array(np.float32(v), n) for n, v in values.items()]


def case_matmul_bias_gelu():
    """A Linear layer as exported: MatMul + Add(bias), then the erf GELU chain."""
    w, b = const("w", (9, 7)), const("bias", (7,))
    c = scalars(sqrt2=1.4142135381698608, one=1.0, half=0.5)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "bias"], ["h"]),
             helper.make_node("Div", ["h", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["h", "a"], ["g"]),
             helper.make_node("Mul", ["g", "half"], ["y"])]
    return nodes, [w, b] + c, 1


def case_matmul_gelu_tanh_torch():
    """nn.GELU(approximate="tanh") as torch exports it: x * x * x, * 0.044715, + x, * sqrt(2/pi),
    Tanh, + 1, x *, * 0.5 (scalars on the left): the MatMul's epilogue, one node stays."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Mul", ["h", "h"], ["h2"]),
             helper.make_node("Mul", ["h", "h2"], ["h3"]), helper.make_node("Mul", ["kappa", "h3"], ["k"]),
             helper.make_node("Add", ["h", "k"], ["i"]), helper.make_node("Mul", ["beta", "i"], ["bi"]),
             helper.make_node("Tanh", ["bi"], ["t"]), helper.make_node("Add", ["one", "t"], ["a"]),
             helper.make_node("Mul", ["h", "a"], ["g"]), helper.make_node("Mul", ["half", "g"], ["y"])]
    return nodes, [const("w", (9, 7))] + scalars(kappa=0.044715, beta=math.sqrt(2 / math.pi), one=1.0,
                                                 half=0.5), 1


def case_gemm_reshape_gelu_new():
    """GPT-2's Conv1D (Reshape to 2-D, Gemm with its bias, Reshape back) and HF's gelu_new:
    0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * Pow(x, 3)))), x read three times. The GELU
    crosses the Reshape into the Gemm's epilogue: the Reshapes and the Gemm stay."""
    i64 = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    nodes = [helper.make_node("Reshape", ["x", "rows"], ["x2"]), helper.make_node("Gemm", ["x2", "w", "b"], ["m"]),
             helper.make_node("Reshape", ["m", "back"], ["h"]), helper.make_node("Mul", ["h", "half"], ["hh"]),
             helper.make_node("Pow", ["h", "three"], ["p"]), helper.make_node("Mul", ["p", "kappa"], ["k"]),
             helper.make_node("Add", ["h", "k"], ["i"]), helper.make_node("Mul", ["i", "beta"], ["bi"]),
             helper.make_node("Tanh", ["bi"], ["t"]), helper.make_node("Add", ["t", "one"], ["a"]),
             helper.make_node("Mul", ["hh", "a"], ["y"])]
    inits = [const("w", (9, 7)), const("b", (7,)), i64("rows", [-1, 9]), i64("back", [1, 3, 5, 7])]
    return nodes, inits + scalars(half=0.5, three=3.0, kappa=0.044715, beta=math.sqrt(2 / math.pi),
                                  one=1.0), 3


def case_matmul_gelu_near_miss():
    """The tanh GELU with 0.5 where 0.044715 belongs computes another function: it stays nodes
    (the MatMul, and the chain's eight)."""
    nodes, inits, _ = case_matmul_gelu_tanh_torch()
    inits = [t if t.name != "kappa" else numpy_helper.from_array(np.float32(0.5), "kappa") for t in inits]
    return nodes, inits, len(nodes)


def case_matmul_layernorm_chain():
    """LayerNorm as opset<17 exporters write it: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add."""
    w = const("w", (9, 7))
    inits = [w, const("gamma", (7,), positive=True), const("beta", (7,)),
             numpy_helper.from_array(np.float32(2.0), "two"), numpy_helper.from_array(np.float32(1e-5), "eps")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("ReduceMean", ["h"], ["m"], axes=[-1]), helper.make_node("Sub", ["h", "m"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["p"]), helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
             helper.make_node("Add", ["v", "eps"], ["a"]), helper.make_node("Sqrt", ["a"], ["s"]),
             helper.make_node("Div", ["d", "s"], ["n"]), helper.make_node("Mul", ["n", "gamma"], ["g"]),
             helper.make_node("Add", ["g", "beta"], ["y"])]
    return nodes, inits, 2


def head_moves(y, out):
    """A YOLOv5 detection head's moves: [1, 3*5, 9, 9] -> [1, 3, 5, 9, 9] -> [1, 3, 9, 9, 5]."""
    shape = numpy_helper.from_array(np.array([1, 3, 5, 9, 9], np.int64), f"{out}.shape")
    return [helper.make_node("Reshape", [y, shape.name], [f"{out}.r"]),
            helper.make_node("Transpose", [f"{out}.r"], [out], perm=[0, 1, 3, 4, 2])], [shape]


def case_conv_moves_sigmoid():
    """The Sigmoid after a head's Reshape and Transpose becomes the conv's epilogue: 3 nodes stay."""
    n, i, y = conv_bn("a", "x", 4, 15)
    moves, shape = head_moves(y, "t")
    return n + moves + [helper.make_node("Sigmoid", ["t"], ["y"])], i + shape, 3


def case_matmul_bias_skip():
    """A Linear layer and the skip connection after it (BERT's dense + residual before LayerNorm):
    both Adds fold into the MatMul, the bias first."""
    w, b = const("w", (9, 9)), const("bias", (9,))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "bias"], ["h"]),
             helper.make_node("Add", ["x", "h"], ["y"])]
    return nodes, [w, b], 1


def case_matmul_moves_tanh():
    """MatMul -> Transpose -> Tanh: the activation crosses the move into the GEMM's epilogue."""
    w = const("w", (9, 7))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Transpose", ["m"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("Tanh", ["t"], ["y"])]
    return nodes, [w], 2


def case_matmul_attention_scale_mask():
    """Attention scores as BERT exports them: Q·Kᵀ, Div by √d (8: a power of two), Add of a mask row
    computed at run time ([1, 1, 1, S]), Softmax, then ·V. The Div becomes the MatMul's alpha, the
    mask its bias row and the Transpose a transposed read of B; then the scores' MatMul, the Softmax
    and the second MatMul become one Attention (tests/py/test_attention.py): it, ReduceMean and the
    mask's MatMul stay."""
    inits = [numpy_helper.from_array(np.float32(8.0), "sqrt_d"), const("wm", (9, 5))]
    nodes = [helper.make_node("Transpose", ["x"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["x", "kt"], ["s"]), helper.make_node("Div", ["s", "sqrt_d"], ["d"]),
             helper.make_node("ReduceMean", ["x"], ["r"], axes=[1, 2], keepdims=1),
             helper.make_node("MatMul", ["r", "wm"], ["mask"]), helper.make_node("Add", ["d", "mask"], ["a"]),
             helper.make_node("Softmax", ["a"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "x"], ["y"])]
    return nodes, inits, 3


def case_matmul_heads_transposed():
    """BERT's heads: Q, K and V projected, split by Transpose(0, 2, 1, 3) ([1, 3, 5, 8] -> [1, 5, 3, 8]),
    K transposed once more to [1, 5, 8, 3]; scores Q·Kᵀ, then ·V. Every Transpose folds into the
    MatMul that reads it (K's two composed, read transposed): the five MatMuls stay."""
    ws = [const(n, (9, 8)) for n in ("wq", "wk", "wv")]
    heads = [0, 2, 1, 3]
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]), helper.make_node("Transpose", ["q"], ["qh"], perm=heads),
             helper.make_node("MatMul", ["x", "wk"], ["k"]), helper.make_node("Transpose", ["k"], ["kh"], perm=heads),
             helper.make_node("Transpose", ["kh"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["x", "wv"], ["v"]), helper.make_node("Transpose", ["v"], ["vh"], perm=heads),
             helper.make_node("MatMul", ["qh", "kt"], ["s"]), helper.make_node("MatMul", ["s", "vh"], ["y"])]
    return nodes, ws, 5


def case_matmul_transpose_stays():
    """Transposes a MatMul cannot read in place stay nodes: one moving the input's contiguous axis
    into a batch axis ([1, 3, 5, 9] -> [1, 9, 3, 5]), and one two MatMuls read."""
    nodes = [helper.make_node("Transpose", ["x"], ["xb"], perm=[0, 3, 1, 2]),
             helper.make_node("MatMul", ["xb", "w"], ["m"]),  # [1, 9, 3, 4]
             helper.make_node("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2]),  # [1, 3, 9, 5]
             helper.make_node("MatMul", ["x", "t"], ["g"]),  # [1, 3, 5, 5]
             helper.make_node("MatMul", ["t", "g"], ["tg"]),  # [1, 3, 9, 5]
             helper.make_node("ReduceMean", ["m"], ["mr"], axes=[2, 3], keepdims=1),  # [1, 9, 1, 1]
             helper.make_node("Transpose", ["mr"], ["mt"], perm=[0, 2, 1, 3]),  # [1, 1, 9, 1]
             helper.make_node("Add", ["tg", "mt"], ["y"])]
    return nodes, [const("w", (5, 4))], 8


def case_matmul_unit_axis_transposes():
    """nn.MultiheadAttention's batch-first swap around its projections: Transposes that move only
    the axis of extent 1 ([1, 3, 5, 9] -> [3, 5, 1, 9] and back) keep every element in place, so
    they stay as views, not folds, and the MatMul reads a contiguous A (test_unit_axis_transpose_
    is_a_view): the four nodes stay."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Transpose", ["r"], ["rt"], perm=[1, 2, 0, 3]),
             helper.make_node("MatMul", ["rt", "w"], ["m"]),  # [3, 5, 1, 7]
             helper.make_node("Transpose", ["m"], ["y"], perm=[2, 0, 1, 3])]  # [1, 3, 5, 7]
    return nodes, [const("w", (9, 7))], 4


def case_matmul_bcast_residual_packed_b():
    """A Linear layer plus a tensor computed at run time that broadcasts over its rows ([1, 3, 1, 7]
    against [1, 3, 5, 7]): the residual epilogue reads it per batch with rows 0 floats apart, so the
    batches that a 2-D weight would flatten into one GEMM run one by one."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("ReduceMean", ["x"], ["r"], axes=[2], keepdims=1),
             helper.make_node("MatMul", ["r", "w2"], ["rw"]), helper.make_node("Add", ["m", "rw"], ["y"])]
    return nodes, [const("w", (9, 7)), const("w2", (9, 7))], 3


def case_matmul_scalar_mul_left():
    """Mul(c, MatMul) with the scalar on the left: the MatMul's alpha."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Mul", ["c", "m"], ["y"])]
    return nodes, [const("w", (9, 7)), numpy_helper.from_array(np.float32(0.3), "c")], 1


def case_matmul_div_not_power_of_two():
    """Div by 3: x · (1/3) may differ from x / 3 in the last bit, so the Div stays a node."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Div", ["m", "c"], ["y"])]
    return nodes, [const("w", (9, 7)), numpy_helper.from_array(np.float32(3.0), "c")], 2


def convt_bn(prefix, x, cin, cout, group=1, **attrs):
    """A decoder's up-sampling: ConvTranspose (weights C x OC/group x k x k) → BatchNormalization."""
    inits = [const(f"{prefix}.w", (cin, cout // group, 4, 4)), const(f"{prefix}.b", (cout,)),
             const(f"{prefix}.g", (cout,), positive=True), const(f"{prefix}.beta", (cout,)),
             const(f"{prefix}.mean", (cout,)), const(f"{prefix}.var", (cout,), positive=True)]
    nodes = [helper.make_node("ConvTranspose", [x, f"{prefix}.w", f"{prefix}.b"], [f"{prefix}.c"], group=group,
                              **attrs),
             helper.make_node("BatchNormalization", [f"{prefix}.c", f"{prefix}.g", f"{prefix}.beta",
                                                     f"{prefix}.mean", f"{prefix}.var"], [f"{prefix}.bn"],
                              epsilon=1e-3)]
    return nodes, inits, f"{prefix}.bn"


def case_convtranspose_bn_relu():
    """A GAN generator's block: the BN folds into the transposed conv's weights (per output channel,
    W's second axis) and bias, and the Relu becomes its epilogue."""
    n, i, y = convt_bn("t", "x", 4, 6, strides=[2, 2], pads=[1, 1, 1, 1])
    return n + [helper.make_node("Relu", [y], ["y"])], i, 1


def case_convtranspose_group_bn_silu():
    """Grouped, strides 2 x 3 with output padding: the fold maps (c, j) of W to channel
    c // (C / group) * (OC / group) + j; SiLU's Sigmoid·Mul becomes the epilogue."""
    n, i, y = convt_bn("t", "x", 4, 6, group=2, strides=[2, 3], pads=[2, 1, 0, 1], output_padding=[1, 2])
    return n + [helper.make_node("Sigmoid", [y], ["sg"]), helper.make_node("Mul", [y, "sg"], ["y"])], i, 1


CASES = {f.__name__[5:]: f for f in (case_conv_bn_relu, case_convtranspose_bn_relu,
                                      case_convtranspose_group_bn_silu, case_conv_bn_bn_relu, case_conv_bn_add_relu, case_conv_silu, case_conv_silu_add,
                                      case_conv_relu6, case_conv_hardswish_leaky, case_matmul_bias_gelu,
                                      case_matmul_layernorm_chain, case_conv_moves_sigmoid, case_matmul_moves_tanh,
                                      case_matmul_bias_skip, case_matmul_attention_scale_mask,
                                      case_matmul_scalar_mul_left, case_matmul_div_not_power_of_two,
                                      case_matmul_bcast_residual_packed_b, case_matmul_heads_transposed,
                                      case_matmul_transpose_stays, case_matmul_unit_axis_transposes,
                                      case_matmul_gelu_tanh_torch, case_gemm_reshape_gelu_new,
                                      case_matmul_gelu_near_miss)}


def live_nodes(path, level):
    """Live nodes after the passes of -O<level>. Fusion counts are taken at -O2: -O3 adds the
    layout pass, whose reorder nodes tests/py/test_ops_nchwc.py counts."""
    out = subprocess.run([NNF_BIN, "info", str(path), "--json", f"-O{level}"], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)["nodes_after_optimisation"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_fusion_matches_unfused_and_ort(name, tmp_path):
    nodes, inits, n_convs = CASES[name]()
    shape = (1, 3, 5, 9) if "matmul" in name or "gemm" in name else (1, 4, 9, 9)
    data = model(nodes, inits, "y", shape)
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(data)
    x = RNG.standard_normal(shape).astype(np.float32)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    fused = nnfuse.run_model(data, {"x": x}, threads=1)["y"]
    unfused = nnfuse.run_model(data, {"x": x}, threads=1, opt_level=0)["y"]
    # the fused graph on the reference kernels: every fused node's oracle honours what it absorbed
    oracle = nnfuse.run_model(data, {"x": x}, threads=1, reference_kernels=True)["y"]
    tol = 1e-4 * max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(fused, ref, rtol=0, atol=tol)
    np.testing.assert_allclose(unfused, ref, rtol=0, atol=tol)
    np.testing.assert_allclose(oracle, ref, rtol=0, atol=tol)
    assert live_nodes(path, 2) == n_convs, "every BN/bias/activation/residual should fold into its producer"
    assert live_nodes(path, 0) == len(nodes)


def test_unit_axis_transpose_is_a_view(tmp_path):
    """The case above as it runs: the inner Transpose hands its input's buffer on ("view"), so the
    MatMul reads one 15-row matrix, not a folded, permuted A of 15 one-row products (ViT-B/16's
    in-projection: 197 of them, each reading all 7 MB of its weights). The graph output's
    Transpose copies: the caller reads that buffer after the run."""
    nodes, inits, _ = case_matmul_unit_axis_transposes()
    path = tmp_path / "unit_axis.onnx"
    path.write_bytes(model(nodes, inits, "y", (1, 3, 5, 9)))
    ran = [(e["args"]["op_name"], e["args"]["kernel"])
           for e in profile_nodes(path, "--iterations", 1, "--top", 0)]
    assert [op for op, _ in ran] == ["Relu", "Transpose", "MatMul", "Transpose"], ran
    assert ran[1][1] == "view" and ran[2][1].startswith("f32_gemm"), ran
    assert ran[3][1].startswith("transpose_copy"), ran


@pytest.mark.parametrize("level", [0, 2])
def test_large_constant_transpose_is_packed_not_copied(tmp_path, level):
    """A weight read through a Transpose as a MatMul's B (GPT-2's LM head tied to the token
    embedding, [V, E] -> [E, V]) stays a node at load, too large to fold, so fold_transpose makes it
    the MatMul's transposed read and the plan packs B straight from the constant: no Transpose
    runs, and no transposed copy is made. At -O0, with no pass to take it, the load folds it into
    a transposed copy as any constant Transpose."""
    w = const("w", (8192, 9))  # past the load's small-constant fold (65536 elements)
    nodes = [helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
             helper.make_node("MatMul", ["x", "wt"], ["y"])]
    data = model(nodes, [w], "y", (1, 5, 9))
    path = tmp_path / "tied_head.onnx"
    path.write_bytes(data)
    x = RNG.standard_normal((1, 5, 9)).astype(np.float32)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = nnfuse.run_model(data, {"x": x}, threads=1, opt_level=level)["y"]
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * max(1.0, float(np.abs(ref).max())))
    ran = [e["args"] for e in profile_nodes(path, f"-O{level}", "--iterations", 1, "--top", 0)]
    assert [a["op_name"] for a in ran] == ["MatMul"], ran
    assert ran[0]["kernel"].endswith("_packed_b"), ran
    # -O2: the weight itself, [8192, 9]; -O0: the load's transposed copy
    assert ran[0]["input_type_shape"][1] == {"float": [8192, 9] if level else [9, 8192]}, ran


def test_fusion_skips_shared_conv_output(tmp_path):
    """A conv output read by two consumers must not absorb either of them."""
    n, i, y = conv_bn("a", "x", 4, 4)
    nodes = n + [helper.make_node("Relu", [y], ["r"]), helper.make_node("Add", [y, "r"], ["y"])]
    data = model(nodes, i, "y")
    path = tmp_path / "shared.onnx"
    path.write_bytes(data)
    x = RNG.standard_normal((1, 4, 9, 9)).astype(np.float32)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(nnfuse.run_model(data, {"x": x})["y"], ref, rtol=0, atol=1e-4)
    assert live_nodes(path, 2) == 3  # BN folds; Relu and Add stay


@pytest.mark.parametrize("shape_plans", [None, 0])
def test_batchnorm_fold_shared_weights_and_symbolic_batch(shape_plans):
    """Two convs read one weight tensor, each with its BatchNormalization: both fold, neither
    scales the other's weights (a shared weight is folded into a copy at once; one read by one
    conv keeps a scale that its plan applies). With a symbolic batch and no shape plans the
    convs run on reference kernels, which must see the folded weights too."""
    inits = [const("w", (5, 4, 3, 3))]
    nodes = []
    for p in ("a", "b"):
        inits += [const(f"{p}.g", (5,), positive=True), const(f"{p}.beta", (5,)), const(f"{p}.mean", (5,)),
                  const(f"{p}.var", (5,), positive=True)]
        nodes += [helper.make_node("Conv", ["x", "w"], [f"{p}.c"], pads=[1, 1, 1, 1]),
                  helper.make_node("BatchNormalization", [f"{p}.c", f"{p}.g", f"{p}.beta", f"{p}.mean", f"{p}.var"],
                                   [f"{p}.bn"])]
    nodes.append(helper.make_node("Sub", ["a.bn", "b.bn"], ["y"]))
    for batch in (1, "N"):
        data = model(nodes, inits, "y", (batch, 4, 9, 9))
        x = RNG.standard_normal((2, 4, 9, 9) if batch == "N" else (1, 4, 9, 9)).astype(np.float32)
        ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        for kw in ({}, {"reference_kernels": True}):
            got = nnfuse.run_model(data, {"x": x}, threads=1, shape_plans=shape_plans, **kw)["y"]
            np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4, err_msg=f"batch {batch} {kw}")


def test_disable_pass_by_name(tmp_path, monkeypatch):
    nodes, inits, _ = case_conv_bn_relu()
    path = tmp_path / "m.onnx"
    path.write_bytes(model(nodes, inits, "y"))
    monkeypatch.setenv("NNF_DISABLE_PASSES", "fuse_activation")
    assert live_nodes(path, 2) == 2


def test_activation_through_moves_keeps_names_honest(tmp_path):
    """After Sigmoid moves into the conv, the conv and Reshape outputs hold activated data under new
    names: layer-by-layer compare against the unfused run must find no mismatch (a reused name would
    compare sigmoid(conv) with conv)."""
    nodes, inits, _ = case_conv_moves_sigmoid()
    path = tmp_path / "head.onnx"
    path.write_bytes(model(nodes, inits, "y"))
    r = subprocess.run([NNF_BIN, "compare", str(path), "--reference", "unfused"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 beyond tolerance" in r.stdout


def test_activation_through_moves_skips_shared_value(tmp_path):
    """A moved value with a second reader keeps its Sigmoid: the reader needs the raw values."""
    n, i, y = conv_bn("a", "x", 4, 15)
    moves, shape = head_moves(y, "t")
    nodes = n + moves + [helper.make_node("Sigmoid", ["t"], ["s"]), helper.make_node("Add", ["t", "s"], ["y"])]
    data = model(nodes, i + shape, "y")
    path = tmp_path / "shared_head.onnx"
    path.write_bytes(data)
    x = RNG.standard_normal((1, 4, 9, 9)).astype(np.float32)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(nnfuse.run_model(data, {"x": x})["y"], ref, rtol=0, atol=1e-4)
    assert live_nodes(path, 2) == 5  # BN folds; Reshape, Transpose, Sigmoid and Add stay


def test_constant_data_movement_folds_unless_it_grows(tmp_path):
    """Nodes whose inputs are all constants run at load time when their outputs are small
    (shape arithmetic), or, larger, when the operator only moves data (no cost in the op table)
    and its outputs are no larger than its inputs: BERT's position embeddings gathered at
    constant positions. A Tile of a constant would grow the model: it stays a node, and so
    do an Einsum (it computes) and a Reshape (a view: folded, a copy of the weights)."""
    table = const("table", (512, 256))  # 131072 floats, above the small-output bound
    pos = numpy_helper.from_array(np.arange(300, dtype=np.int64)[::-1].copy(), "pos")
    reps = numpy_helper.from_array(np.array([2, 1], dtype=np.int64), "reps")
    flat = numpy_helper.from_array(np.array([-1, 1], dtype=np.int64), "flat")
    nodes = [helper.make_node("Gather", ["table", "pos"], ["emb"], axis=0),  # [300, 256]: folds
             helper.make_node("Add", ["x", "emb"], ["a"]),
             helper.make_node("Transpose", ["table"], ["tt"], perm=[1, 0]),  # [256, 512]: folds
             helper.make_node("MatMul", ["a", "tt"], ["m"]),
             helper.make_node("Einsum", ["table", "table"], ["gram"], equation="ij,kj->ik"),  # computes
             helper.make_node("ReduceMean", ["gram"], ["g1"], axes=[0], keepdims=1),
             helper.make_node("Reshape", ["table", "flat"], ["tflat"]),  # a view: stays
             helper.make_node("ReduceMean", ["tflat"], ["tm"], axes=[0], keepdims=1),  # [1, 1]
             helper.make_node("Tile", ["emb", "reps"], ["big"]),  # [600, 256]: grows, stays
             helper.make_node("ReduceMean", ["big"], ["s"], axes=[0], keepdims=1),
             helper.make_node("MatMul", ["s", "tt"], ["s2"]),
             helper.make_node("Add", ["m", "g1"], ["mg"]),
             helper.make_node("Add", ["mg", "s2"], ["ms"]), helper.make_node("Add", ["ms", "tm"], ["y"])]
    g = helper.make_graph(nodes, "fold", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [300, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [table, pos, reps, flat])
    data = model_of(g).SerializeToString()
    x = RNG.standard_normal((300, 256)).astype(np.float32)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0]
    got = nnfuse.run_model(data, {"x": x}, threads=1)["y"]
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
    path = tmp_path / "fold.onnx"
    path.write_bytes(data)
    ran = {e["args"]["op_name"] for e in profile_nodes(path, "--iterations", 1, "--top", 0)}
    assert "Gather" not in ran and "Transpose" not in ran, ran
    assert {"Einsum", "Tile", "Reshape"} <= ran, ran
