"""Write the small ONNX models that seed tests/fuzz (mutate's ctest, libFuzzer corpora).

Run from the repository root: .venv/bin/python tests/fuzz/make_seeds.py
The models are tiny on purpose: every mutation then reaches the tensors,
attributes and shapes instead of mostly hitting weight bytes.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")
rng = np.random.default_rng(0)


def t(name, shape, dtype=np.float32):
    return numpy_helper.from_array(rng.uniform(-1, 1, shape).astype(dtype), name)


def cnn():
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["y"], axis=-1),
    ]
    inits = [t("w", (3, 2, 3, 3)), t("b", (3,)), t("fw", (4, 27)), t("fb", (4,))]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="make_seeds")


def shapes():
    # Shape arithmetic and int64 constants: Reshape/Concat/Transpose paths.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["k"], value=helper.make_tensor("k", TensorProto.INT64, [1], [-1])),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Concat", ["n", "k"], ["ns"], axis=0),
        helper.make_node("Reshape", ["x", "ns"], ["r"]),
        helper.make_node("Transpose", ["r"], ["tr"], perm=[1, 0]),
        helper.make_node("Add", ["tr", "bias"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "zero"), t("bias", (12, 1))]
    g = helper.make_graph(nodes, "shapes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [12, 2])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="make_seeds")


def conv_bn():
    # A conv's weights of 4.6 KB (large enough to stay in the file) at an
    # address not aligned for floats, then a BatchNormalization: the fold reads
    # them byte-wise from the file (src/onnx/import.c). The pad before them is
    # chosen so the serialised raw_data lands misaligned.
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["y"]),
    ]
    w = t("w", (16, 8, 3, 3))
    stats = [t("s", (16,)), t("bb", (16,)), t("m", (16,)), numpy_helper.from_array(
        rng.uniform(0.5, 1.5, 16).astype(np.float32), "v")]
    for pad in range(8):
        pre = t("pre", (1,))
        pre.doc_string = "x" * pad
        g = helper.make_graph(nodes, "conv_bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 5, 5])],
                              [pre, w] + stats)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="make_seeds")
        data = m.SerializeToString()
        if data.index(w.raw_data) % 4:
            return m
    raise AssertionError("no pad left the weights misaligned")


def dyn_cnn():
    # A symbolic batch: the model is a template and each run's shapes get a
    # shape plan (src/runtime/shape_plans.c), loaded again from the bytes.
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
    ]
    inits = [t("w", (8, 3, 3, 3)), t("s", (8,)), t("bb", (8,)), t("m", (8,)),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "v"), t("fw", (4, 8)), t("fb", (4,))]
    g = helper.make_graph(nodes, "dyn_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="make_seeds")


def attention():
    # One attention block as transformer exports write it, batch and sequence
    # symbolic: the heads split by a Reshape to Shape -> Gather -> Unsqueeze ->
    # Concat (src/ops/dimvals.c), merged by Shape -> Slice -> Concat with -1,
    # the output projection's bias and residual fused by the dims' names, the
    # LayerNorm chain fused, LayerNorm and Transposes on symbolic plans.
    i64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q0"]),
        helper.make_node("Add", ["q0", "bq"], ["q"]),
        helper.make_node("Shape", ["q"], ["sq"]),
        helper.make_node("Gather", ["sq", "i0"], ["b"], axis=0),
        helper.make_node("Gather", ["sq", "i1"], ["s"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
        helper.make_node("Unsqueeze", ["s", "ax0"], ["s1"]),
        helper.make_node("Concat", ["b1", "s1", "heads"], ["split"], axis=0),
        helper.make_node("Reshape", ["q", "split"], ["qh"]),
        helper.make_node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["qh"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["qt", "kt"], ["sc"]),
        helper.make_node("Div", ["sc", "scale"], ["sd"]),
        helper.make_node("Softmax", ["sd"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "qt"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ct"], perm=[0, 2, 1, 3]),
        helper.make_node("Shape", ["ct"], ["sc2"]),
        helper.make_node("Slice", ["sc2", "z", "two"], ["lead"]),
        helper.make_node("Concat", ["lead", "m1"], ["merge"], axis=0),
        helper.make_node("Reshape", ["ct", "merge"], ["cm"]),
        helper.make_node("MatMul", ["cm", "wo"], ["o0"]),
        helper.make_node("Add", ["o0", "bo"], ["o1"]),
        helper.make_node("Add", ["o1", "x"], ["h"]),
        helper.make_node("ReduceMean", ["h"], ["mu"], axes=[-1]),
        helper.make_node("Sub", ["h", "mu"], ["d"]),
        helper.make_node("Pow", ["d", "two_f"], ["d2"]),
        helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["sd2"]),
        helper.make_node("Div", ["d", "sd2"], ["nrm"]),
        helper.make_node("Mul", ["nrm", "gamma"], ["gm"]),
        helper.make_node("Add", ["gm", "beta"], ["y"]),
    ]
    inits = [t("wq", (8, 8)), t("bq", (8,)), t("wo", (8, 8)), t("bo", (8,)), t("gamma", (8,)), t("beta", (8,)),
             i64("i0", 0), i64("i1", 1), i64("ax0", [0]), i64("heads", [2, 4]), i64("z", [0]), i64("two", [2]),
             i64("m1", [-1]), numpy_helper.from_array(np.array(2.0, np.float32), "scale"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two_f"),
             numpy_helper.from_array(np.array(1e-5, np.float32), "eps")]
    g = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", 8])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="make_seeds")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, make in (("cnn", cnn), ("shapes", shapes), ("conv_bn", conv_bn), ("dyn_cnn", dyn_cnn),
                       ("attention", attention)):
        m = make()
        onnx.checker.check_model(m, full_check=True)
        onnx.save(m, os.path.join(OUT, name + ".onnx"))
        print(name, os.path.getsize(os.path.join(OUT, name + ".onnx")), "bytes")
