"""Concat in place (src/runtime/concat_in_place.c): a Concat whose inputs stack end to end and die
at it runs nothing, its inputs having been produced into their slices of its output; every other
Concat copies. Each case is checked against ONNX Runtime, on repeated runs (the second reuses
cached buffers), at -O0, -O2 (NCHW) and -O3 (NCHWc8 blocks), and the profile says which kernel the
Concat ran."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnfuse
from conftest import BLOCKED, model_of, profile_nodes

RNG = np.random.default_rng(23)


def conv(name, x, cin, cout, inits):
    inits += [numpy_helper.from_array(RNG.standard_normal((cout, cin, 3, 3)).astype(np.float32) * 0.2,
                                      f"{name}.w"),
              numpy_helper.from_array(RNG.standard_normal(cout).astype(np.float32) * 0.1, f"{name}.b")]
    return helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [name], pads=[1, 1, 1, 1])


def graph(cin, batch, body, outputs):
    inits = []
    nodes = body(inits)
    g = helper.make_graph(nodes, "concat", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                          [batch, cin, 10, 10])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    return model_of(g).SerializeToString()


def two_convs_concat(c, extra=(), axis=1, inputs=("a", "b")):
    def body(inits):
        return ([conv("a", "x", 8, c, inits), conv("b", "x", 8, c, inits),
                 helper.make_node("Concat", list(inputs), ["cat"], axis=axis)] +
                [n(inits) if callable(n) else n for n in extra])
    return body


ALL, NONE = (0, 2, 3), ()


# name: (model, output names, the -O levels at which the Concat "cat" runs in place)
def cases():
    tail = lambda cin, cout=8: lambda inits: conv("y", "cat", cin, cout, inits)  # noqa: E731
    return {
        # two 16-channel convs: whole NCHWc8 blocks at -O3, NCHW below
        "stacked": (graph(8, 1, two_convs_concat(16, [tail(32)]), ["y"]), ["y"], ALL),
        "negative_axis": (graph(8, 1, two_convs_concat(16, [tail(32)], axis=-3), ["y"]), ["y"], ALL),
        # 4 + 4 channels: not blocks, so NCHW at every level; still stacked
        "partial_blocks": (graph(8, 1, two_convs_concat(4, [tail(8)]), ["y"]), ["y"], ALL),
        # an input read again after the Concat (by a node that needs the Concat's result): it keeps
        # its own buffer
        "input_read_later": (graph(8, 1, two_convs_concat(16, [tail(32, 16),
                                                               helper.make_node("Add", ["a", "y"], ["ra"])]),
                                   ["ra"]), ["ra"], NONE),
        # an input that is a graph output; at -O3 the Concat reads its blocked twin, which a
        # reorder turns into the output before the Concat, so the twin is a slice
        # (in place at -O3 through the blocked layout's reorder of "a", which the scalar tier has not)
        "input_is_output": (graph(8, 1, two_convs_concat(16, [tail(32)]), ["y", "a"]), ["y", "a"],
                            (3,) if BLOCKED else NONE),
        # the same input twice
        "same_input_twice": (graph(8, 1, two_convs_concat(16, [tail(48)], inputs=("a", "a", "b")), ["y"]),
                             ["y"], NONE),
        # a batch of 2: the slices interleave
        "batch_2": (graph(8, 2, two_convs_concat(16, [tail(32)]), ["y"]), ["y"], NONE),
        # along H: channels come first, the slices interleave
        "axis_2": (graph(8, 1, two_convs_concat(16, [tail(16)], axis=2), ["y"]), ["y"], NONE),
    }


def nested():
    def body(inits):
        return [conv("a", "x", 8, 8, inits), conv("b", "x", 8, 8, inits), conv("c", "x", 8, 8, inits),
                helper.make_node("Concat", ["a", "b"], ["inner"], axis=1),
                helper.make_node("Concat", ["inner", "c"], ["cat"], axis=1), conv("y", "cat", 24, 8, inits)]
    return graph(8, 1, body, ["y"])


def concat_kernels(path, level):
    return {e["name"]: e["args"]["kernel"]
            for e in profile_nodes(path, f"-O{level}", "--iterations", 1, "--top", 0)
            if e.get("args", {}).get("op_name") == "Concat"}


@pytest.mark.parametrize("name", sorted(cases()))
@pytest.mark.parametrize("level", [0, 2, 3])
def test_concat_matches_ort_and_runs_in_place_when_it_can(name, level, tmp_path):
    data, outputs, in_place = cases()[name]
    batch = 2 if name == "batch_2" else 1
    x = RNG.standard_normal((batch, 8, 10, 10)).astype(np.float32)
    ref = dict(zip(outputs, ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(outputs,
                                                                                            {"x": x})))
    session = nnfuse.Session(nnfuse.Model(data, opt_level=level), threads=2)
    for _ in range(2):  # the second run reuses the first run's buffers
        got = session.run({"x": x})
        for o in outputs:
            np.testing.assert_allclose(got[o], ref[o], rtol=1e-4, atol=1e-4, err_msg=f"{name} -O{level} {o}")
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(data)
    kernels = concat_kernels(path, level)
    assert len(kernels) == 1, kernels
    assert (list(kernels.values())[0] == "in_place") == (level in in_place), kernels


def test_nested_concat_copies_the_outer_one(tmp_path):
    data = nested()
    x = RNG.standard_normal((1, 8, 10, 10)).astype(np.float32)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0]
    np.testing.assert_allclose(nnfuse.run_model(data, {"x": x}, threads=1)["y"], ref, rtol=1e-4, atol=1e-4)
    path = tmp_path / "nested.onnx"
    path.write_bytes(data)
    kernels = sorted(concat_kernels(path, 3).values())
    assert kernels == ["concat_memcpy", "in_place"], kernels


def through_views():
    """YOLOv5s's last Concat: each input a Reshape of a head's own Concat (along the last axis: a
    copy) or of an element-wise op's output, which are then produced into the slices, the Reshapes
    running nothing; one source is read once more before its Reshape."""
    def body(inits):
        inits += [numpy_helper.from_array(np.array([1, 200, 6], np.int64), "s1"),
                  numpy_helper.from_array(np.array([1, 100, 6], np.int64), "s2")]
        return [conv("a", "x", 8, 6, inits), conv("b", "x", 8, 6, inits), conv("c", "x", 8, 6, inits),
                helper.make_node("Concat", ["a", "b"], ["inner"], axis=3, name="inner"),
                helper.make_node("Relu", ["c"], ["rc"]),
                helper.make_node("Sigmoid", ["rc"], ["sc"]),
                helper.make_node("Reshape", ["inner", "s1"], ["v1"], name="v1"),
                helper.make_node("Reshape", ["rc", "s2"], ["v2"], name="v2"),
                helper.make_node("Concat", ["v1", "v2"], ["cat"], axis=1, name="cat")]
    return graph(8, 1, body, ["cat", "sc"])


@pytest.mark.parametrize("level", [0, 2, 3])
def test_concat_of_views_stacks_their_sources(level, tmp_path):
    data = through_views()
    x = RNG.standard_normal((1, 8, 10, 10)).astype(np.float32)
    ref = dict(zip(["cat", "sc"], ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(
        ["cat", "sc"], {"x": x})))
    session = nnfuse.Session(nnfuse.Model(data, opt_level=level), threads=2)
    for _ in range(2):
        got = session.run({"x": x})
        for o in ("cat", "sc"):
            np.testing.assert_allclose(got[o], ref[o], rtol=1e-4, atol=1e-4, err_msg=f"-O{level} {o}")
    path = tmp_path / "views.onnx"
    path.write_bytes(data)
    events = profile_nodes(path, f"-O{level}", "--iterations", 1, "--top", 0)
    kernels = {e["name"]: e["args"]["kernel"] for e in events}
    assert kernels["cat"] == "in_place" and kernels["inner"] == "concat_memcpy", kernels
    assert kernels["v1"] == "view" and kernels["v2"] == "view", kernels


def test_reference_kernels_keep_the_copy():
    data, _, _ = cases()["stacked"]
    x = RNG.standard_normal((1, 8, 10, 10)).astype(np.float32)
    fast = nnfuse.run_model(data, {"x": x}, threads=1)["y"]
    model = nnfuse.Model(data, keep_unpacked_weights=True)
    ref = nnfuse.Session(model, threads=1, reference_kernels=True).run({"x": x})["y"]
    np.testing.assert_allclose(fast, ref, rtol=1e-4, atol=1e-4)
