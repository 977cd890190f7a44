"""Input shapes fixed at load (nnf_model_options.input_shapes, the CLI's --input-shape, Python's
input_shapes=): a model exported with symbolic dims gets the same passes and kernels as one with
fixed shapes, every dim named like a fixed one follows, and bad entries or runs with other shapes
are refused with a message naming the input."""
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


def feeds(n, length=5):
    return {"x": RNG.standard_normal((n, 4, 8, 8)).astype(np.float32),
            "z": RNG.standard_normal((n, length)).astype(np.float32)}


def test_fixed_shapes_run_planned_kernels(dyn_path):
    """Symbolic: Conv and MatMul on reference kernels. Fixed at load: planned kernels, the conv
    with the BatchNormalization and the Relu in it, the GEMM with its bias."""
    kernels = {e["args"]["op_name"]: e["args"]["kernel"] for e in profile_nodes(dyn_path, "--threads", 1)}
    assert kernels["Conv"] == "ref" and kernels["MatMul"] == "ref"
    events = profile_nodes(dyn_path, "--threads", 1, "--input-shape", "x:3,4,8,8", "--input-shape", "z:3,5")
    node = {e["args"]["op_name"]: e["args"] for e in events}
    assert node["Conv"]["kernel"].startswith("f32_conv") and "gemm" in node["MatMul"]["kernel"], node
    assert sorted(node["Conv"]["fused_from"]) == ["BatchNormalization_1", "Conv_0", "Relu_2"]
    assert sorted(node["MatMul"]["fused_from"]) == ["Add_5", "MatMul_4"]


def test_outputs_equal_onnxruntime_at_every_level(dyn_path):
    ort = pytest.importorskip("onnxruntime")
    f = feeds(3)
    want = ort.InferenceSession(str(dyn_path), providers=["CPUExecutionProvider"]).run(None, f)
    for level in (0, 3):
        for shapes in (None, {"x": (3, 4, 8, 8), "z": (3, 5)}):
            got = nnfuse.Session(str(dyn_path), threads=1, opt_level=level, input_shapes=shapes).run(f)
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
    assert "planned without shapes" in p.stderr and "--input-shape" in p.stderr
    p = subprocess.run(run + ["--input-shape", "x:2,4,8,8", "--input-shape", "z:2,3"], capture_output=True,
                       text=True, check=True)
    assert "planned without shapes" not in p.stderr
    p = subprocess.run(run + ["--input-shape", "x:2,4,x"], capture_output=True, text=True)
    assert p.returncode != 0 and "--input-shape x:2,4,x: bad dims" in p.stderr
