"""Allocation-failure sweep: make the N-th allocation of load → session → run fail, for every N
until the whole path succeeds. Each attempt must end in success or a clean out-of-memory status;
a crash fails the test run. (Under the ASan build the same sweep also proves nothing leaks.)"""
import ctypes

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnfuse
from conftest import model_of

OOM = 4
OUTPUTS = ("y", "z", "d", "p", "q", "o")


def small_model(batch=1):
    """batch: the input's first dim ("N": a symbolic batch, planned for on the first run)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    shape = numpy_helper.from_array(np.array([1, -1], np.int64), "shape")
    head = numpy_helper.from_array(np.array([1, 2, 2, 64], np.int64), "head")
    heads = numpy_helper.from_array(np.array([-1, 2, 3, 4], np.int64), "heads")
    pw = numpy_helper.from_array(rng.standard_normal((16, 4, 1, 1)).astype(np.float32), "pw")
    dw = numpy_helper.from_array(rng.standard_normal((16, 1, 3, 3)).astype(np.float32), "dw")
    m = numpy_helper.from_array(rng.standard_normal((256, 24)).astype(np.float32), "m")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Add", ["r", "c"], ["a"]),
        helper.make_node("Shape", ["a"], ["s"]),
        helper.make_node("Reshape", ["a", "shape"], ["y"]),
        # a detection head: the Sigmoid moves into the conv (new values made during the pass)
        helper.make_node("Conv", ["x", "w", "b"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["c2", "head"], ["h"]),
        helper.make_node("Transpose", ["h"], ["t"], perm=[0, 1, 3, 2]),
        helper.make_node("Sigmoid", ["t"], ["z"]),
        # an expansion and its depthwise conv: one fused node (passes/fuse_pw_dw.c) with a
        # per-thread row buffer
        helper.make_node("Conv", ["c", "pw"], ["e"]),
        helper.make_node("Conv", ["e", "dw"], ["d"], pads=[1, 1, 1, 1], group=16),
        # two MatMuls that read one weight: one packed block, shared (base/packs.h), which the
        # second planning thread may wait for
        helper.make_node("MatMul", ["y", "m"], ["p"]),
        helper.make_node("Relu", ["y"], ["yr"]),
        helper.make_node("MatMul", ["yr", "m"], ["q"]),
        # attention over p's 24 values as 2 heads of 3 x 4: one Attention node (passes/
        # fuse_attention.c) with its thread's scratch for K, V and the scores
        helper.make_node("Reshape", ["p", "heads"], ["ph"]),
        helper.make_node("Transpose", ["ph"], ["pt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["ph", "pt"], ["ps"]),
        helper.make_node("Softmax", ["ps"], ["pp"], axis=-1),
        helper.make_node("MatMul", ["pp", "ph"], ["o"]),
    ]
    g = helper.make_graph(nodes, "faults", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("d", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("p", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("q", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("o", TensorProto.FLOAT, None)],
                          [w, b, shape, head, heads, pw, dw, m])
    return model_of(g).SerializeToString()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch", [1, "N"])
def test_every_allocation_failure_is_clean(batch, threads):
    """threads=2: the load plans nodes on two threads (plan/plan.c), so failures land in a
    worker's task too, and the session runs on a pool."""
    data = small_model(batch)
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    expected = nnfuse.run_model(data, {"x": x}, threads=threads)
    out, failures = sweep(lambda: nnfuse.run_model(data, {"x": x}, threads=threads))
    for name in OUTPUTS:
        np.testing.assert_array_equal(out[name], expected[name])
    assert failures > 10, "the sweep should have exercised many allocation sites"


def sweep(call):
    """call() under a failure of its N-th allocation for N = 1, 2, ... until it succeeds: every
    failure must be a clean out-of-memory status with a message. Returns call()'s result and the
    number of failures seen."""
    lib = nnfuse._lib
    lib.nnf_alloc_fail_after.argtypes = [ctypes.c_uint64]
    lib.nnf_alloc_fail_after.restype = ctypes.c_uint64
    failures = 0
    for n in range(1, 4000):
        lib.nnf_alloc_fail_after(n)
        try:
            result = call()
        except nnfuse.NnfError as e:
            assert e.status == OOM, f"allocation {n} failed and gave status {e.status}: {e}"
            assert str(e), "an out-of-memory error must say where"
            failures += 1
            continue
        finally:
            lib.nnf_alloc_fail_after(0)
        return result, failures
    raise AssertionError("the path never completed without hitting the injected failure")


@pytest.mark.parametrize("threads", [1, 2])
def test_compile_and_compiled_load_fail_cleanly(tmp_path, threads):
    """nnf_model_compile and the load of its file (packed blocks read in place: the replay's own
    allocations) under every allocation failure; the file then runs as the ONNX model does."""
    src, out = tmp_path / "m.onnx", tmp_path / "m.nnf"
    src.write_bytes(small_model())
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    expected = nnfuse.run_model(str(src), {"x": x}, threads=threads)
    _, failures = sweep(lambda: nnfuse.compile(src, out, threads=threads))
    assert failures > 10 and not list(tmp_path.glob("*.tmp"))
    data = out.read_bytes()
    got, failures = sweep(lambda: nnfuse.run_model(data, {"x": x}, threads=threads))
    assert failures > 10
    for name in OUTPUTS:
        np.testing.assert_array_equal(got[name], expected[name])
