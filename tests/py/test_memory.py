"""Load-time memory release: weights that kernels packed are released (the resident copy of a
model roughly halves), file pages go back to the page cache, and a caller's buffer is never
touched. Reference-kernel sessions need the unpacked weights and say so."""
import hashlib

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnfuse
from conftest import model_of

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
    assert hashlib.sha256(bytes(model._buffer.raw[:len(data)])).hexdigest() == before
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
