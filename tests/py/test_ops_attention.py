"""The attention fusion (passes/fuse_attention.c, plan/plan_attention.c): MatMul (Q·Kᵀ, with its
scale, bias and mask) [→ Where against a constant] → Softmax → MatMul (·V) runs as one
nnfuse::Attention node, a block of query rows at a time. Each case checks the node is made (or, for the near misses, that it is not), and
its outputs against ONNX Runtime, the unfused run (-O0), the fused graph on the reference kernels,
and itself on 2 threads (bit for bit: the blocks do not depend on the thread count)."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnfuse
from conftest import model_of, profile_nodes

RNG = np.random.default_rng(11)


def info(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def attention(b, h, s, t, dh, dv, scale=None, mask=None, views=False, tail=None, axis=-1,
              softmax="Softmax", where=None):
    """Graph inputs q, k, v and the nodes of one attention. views: Q, K and V come as [B, S, H, d]
    and their Transposes (K's to [B, H, d, T]) fold into the MatMuls; else q [B,H,S,dh], k
    [B,H,dh,T], v [B,H,T,dv]. scale: a Div of the scores by it. mask: "row" (an Add of [B,1,1,T]
    computed at run time, as BERT's), "full" (a constant [1,H,S,T]), "heads" (a constant [B,1,S,T]
    that broadcasts over the heads), "const_row" (a constant [T]: the scores' MatMul takes it as
    its bias). where: a Where after the mask, "causal" (GPT-2's: a constant lower-triangular
    condition keeps the scores, -3.4e38 elsewhere), "padding" (a condition computed at run time,
    [B, 1, 1, T], puts -1e9 where it holds: the scores are the Where's third input) or "column"
    (the same with a [B, 1, S, 1] condition, which broadcasts along the columns: not fused). tail:
    the probabilities also go to a second output."""
    inits, nodes = [], []
    if views:
        ins = [info("q", (b, s, h, dh)), info("k", (b, t, h, dh)), info("v", (b, t, h, dv))]
        nodes += [helper.make_node("Transpose", ["q"], ["qh"], perm=[0, 2, 1, 3]),
                  helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 3, 1]),
                  helper.make_node("Transpose", ["v"], ["vh"], perm=[0, 2, 1, 3])]
        q, k, v = "qh", "kt", "vh"
    else:
        ins = [info("q", (b, h, s, dh)), info("k", (b, h, dh, t)), info("v", (b, h, t, dv))]
        q, k, v = "q", "k", "v"
    nodes.append(helper.make_node("MatMul", [q, k], ["s"]))
    cur = "s"
    if scale is not None:
        inits.append(numpy_helper.from_array(np.float32(scale), "c"))
        nodes.append(helper.make_node("Div", [cur, "c"], ["sd"]))
        cur = "sd"
    if mask == "row":
        ins.append(info("m", (b, t)))
        nodes += [helper.make_node("Unsqueeze", ["m", "ax"], ["mu"]),
                  helper.make_node("Mul", ["mu", "neg"], ["mm"]),
                  helper.make_node("Add", [cur, "mm"], ["sm"])]
        inits += [numpy_helper.from_array(np.array([1, 2], np.int64), "ax"),
                  numpy_helper.from_array(np.float32(-30.0), "neg")]
        cur = "sm"
    elif mask in ("full", "heads", "const_row"):
        shape = {"full": (1, h, s, t), "heads": (b, 1, s, t), "const_row": (t,)}[mask]
        inits.append(numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), "mc"))
        nodes.append(helper.make_node("Add", [cur, "mc"], ["sm"]))
        cur = "sm"
    if where == "causal":  # GPT-2's: Where(tril, w, -3.4e38), the condition a constant [1, 1, S, T]
        inits += [numpy_helper.from_array(np.tril(np.ones((1, 1, s, t), bool), t - s), "tril"),
                  numpy_helper.from_array(np.float32(-3.4e38), "low")]
        nodes.append(helper.make_node("Where", ["tril", cur, "low"], ["sw"]))
        cur = "sw"
    elif where in ("padding", "column"):  # the scores kept where the condition is false
        ins.append(info("pm", (b, t) if where == "padding" else (b, s)))
        shape = [b, 1, 1, t] if where == "padding" else [b, 1, s, 1]
        inits += [numpy_helper.from_array(np.float32(0.5), "half"),
                  numpy_helper.from_array(np.array(shape, np.int64), "pshape"),
                  numpy_helper.from_array(np.float32(-1e9), "big")]
        nodes += [helper.make_node("Greater", ["pm", "half"], ["pg"]),
                  helper.make_node("Reshape", ["pg", "pshape"], ["pc"]),
                  helper.make_node("Where", ["pc", "big", cur], ["sw"])]
        cur = "sw"
    nodes += [helper.make_node(softmax, [cur], ["p"], axis=axis),
              helper.make_node("MatMul", ["p", v], ["y"])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if tail:
        outs.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, None))
    return model_of(helper.make_graph(nodes, "attention", ins, outs, inits)).SerializeToString()


def feeds(data):
    import onnx
    m = onnx.load_from_string(data)
    out = {}
    for vi in m.graph.input:
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        x = RNG.standard_normal(dims).astype(np.float32)
        out[vi.name] = (x > 0.7).astype(np.float32) if vi.name in ("m", "pm") else x
    return out


CASES = {
    "plain": dict(b=1, h=2, s=5, t=7, dh=3, dv=4),
    "one_query_one_key": dict(b=1, h=1, s=1, t=1, dh=1, dv=1),
    "odd_sizes": dict(b=2, h=3, s=13, t=17, dh=9, dv=11),
    "rows_in_blocks": dict(b=1, h=2, s=100, t=1500, dh=8, dv=5),  # 42-row blocks of 1500 scores
    "scale_row_mask": dict(b=1, h=4, s=16, t=16, dh=8, dv=8, scale=8.0, mask="row"),
    "batch_row_mask": dict(b=3, h=2, s=9, t=9, dh=4, dv=4, scale=4.0, mask="row"),
    "const_row_mask": dict(b=2, h=2, s=50, t=1400, dh=4, dv=6, scale=2.0, mask="const_row"),
    "full_mask": dict(b=1, h=3, s=6, t=29, dh=5, dv=7, mask="full"),
    "heads_mask_blocks": dict(b=2, h=2, s=60, t=1200, dh=4, dv=3, mask="heads"),
    "views": dict(b=1, h=4, s=31, t=31, dh=16, dv=16, views=True, scale=4.0),
    "causal_where": dict(b=1, h=3, s=20, t=20, dh=8, dv=8, scale=8.0, where="causal"),
    "causal_where_blocks": dict(b=2, h=2, s=90, t=1300, dh=4, dv=4, views=True, where="causal"),
    "padding_where_and_mask": dict(b=3, h=2, s=7, t=11, dh=5, dv=3, mask="heads", where="padding"),
    "views_long": dict(b=1, h=3, s=70, t=1100, dh=8, dv=8, views=True),
}
NEAR_MISSES = {
    "probs_also_output": dict(b=1, h=2, s=5, t=7, dh=3, dv=4, tail=True),
    "softmax_not_last_axis": dict(b=1, h=2, s=7, t=7, dh=3, dv=4, axis=2),
    "log_softmax": dict(b=1, h=2, s=5, t=7, dh=3, dv=4, softmax="LogSoftmax"),
    "where_along_columns": dict(b=2, h=2, s=5, t=7, dh=3, dv=4, where="column"),
}


def ops_of(path, threads=1):
    return [e["args"]["op_name"] for e in profile_nodes(path, "--threads", threads, "--iterations", 1)]


def check(data, path, fused):
    x = feeds(data)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(["y"], x)[0]
    got = nnfuse.run_model(data, x, threads=1)["y"]
    got2 = nnfuse.run_model(data, x, threads=2)["y"]
    unfused = nnfuse.run_model(data, x, threads=1, opt_level=0)["y"]
    oracle = nnfuse.run_model(data, x, threads=1, reference_kernels=True)["y"]
    tol = 1e-4 * max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(got, ref, rtol=0, atol=tol)
    np.testing.assert_allclose(unfused, ref, rtol=0, atol=tol)
    np.testing.assert_allclose(oracle, ref, rtol=0, atol=tol)
    assert np.array_equal(got, got2), "2 threads changed the values"
    path.write_bytes(data)
    ops = ops_of(path)
    assert ("Attention" in ops) == fused, ops
    if fused:
        assert "Softmax" not in ops and ops.count("MatMul") == 0, ops


@pytest.mark.parametrize("name", sorted(CASES))
def test_attention_fused(name, tmp_path):
    check(attention(**CASES[name]), tmp_path / f"{name}.onnx", True)


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_attention_near_miss_stays(name, tmp_path):
    check(attention(**NEAR_MISSES[name]), tmp_path / f"{name}.onnx", False)


def test_attention_disabled_by_name(tmp_path, monkeypatch):
    """NNF_DISABLE_PASSES=fuse_attention keeps the three nodes (how the benefit is measured)."""
    data = attention(**CASES["plain"])
    path = tmp_path / "plain.onnx"
    path.write_bytes(data)
    monkeypatch.setenv("NNF_DISABLE_PASSES", "fuse_attention")
    ops = [e["args"]["op_name"] for e in profile_nodes(path, "--iterations", 1, env=None)]
    assert "Attention" not in ops and "Softmax" in ops


@pytest.mark.parametrize("dims", [dict(t=0, dh=3), dict(t=4, dh=0)])
def test_attention_of_no_keys_or_empty_products(dims, tmp_path):
    """No keys (T = 0: Y is all zeros) or empty dot products (dh = 0: every score is the mask's)
    take the three ops' reference kernels (the mask added in the scores' MatMul, rounded once:
    within a few ulps of the unfused run's)."""
    data = attention(b=1, h=2, s=3, dv=2, mask="full" if dims["t"] else None, **dims)
    x = feeds(data)
    want = nnfuse.run_model(data, x, threads=1, opt_level=0)["y"]
    got = nnfuse.run_model(data, x, threads=1)["y"]
    assert got.shape == (1, 2, 3, 2)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * max(1.0, float(np.abs(want).max())))
    assert dims["t"] or np.all(got == 0)
