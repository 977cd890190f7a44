"""Zoo models through `nnfuse run` against onnxruntime (CPU, ORT_ENABLE_ALL).

Every *_tiny model must match per output within 1e-4 * max(1, max|ref|).
The full-size models are opt-in: pytest --full or NNF_ZOO_FULL=1 (minutes, ~600 MB
of models cached in build/zoo/full; scripts/zoo_check.py prints the same as a table).
"""
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "zoo"))

import zoocheck  # noqa: E402

CACHE = ROOT / "build" / "zoo"
FULL = os.environ.get("NNF_ZOO_FULL") == "1"


@pytest.fixture(scope="session")
def tiny_zoo():
    return zoocheck.ensure_zoo(str(CACHE / "tiny"), zoocheck.TINY)


@pytest.fixture(scope="session")
def full_zoo():
    return zoocheck.ensure_zoo(str(CACHE / "full"), zoocheck.FULL)


@pytest.fixture(scope="session")
def tiny_zoo_dynamic():
    return zoocheck.ensure_zoo(str(CACHE / "tiny_dynamic"), zoocheck.TINY,
                               flags=("--dynamic-batch",))


def assert_matches(nnfuse_bin, model_path, timeout, batch=1):
    res, checks = zoocheck.check_model(nnfuse_bin, model_path, timeout=timeout, batch=batch)
    assert res.returncode == 0, f"nnfuse run exited {res.returncode}:\n{res.stderr[-2000:]}"
    bad = [c for c in checks if not c.ok]
    table = "\n".join(f"  {c.name}{list(c.shape)}: max abs err {c.max_abs_err:.3g} "
                      f"(tolerance {c.tolerance:.3g}) {c.why}" for c in checks)
    assert not bad, f"{os.path.basename(model_path)} differs from onnxruntime:\n{table}"


@pytest.mark.parametrize("name", zoocheck.TINY)
def test_tiny_model_matches_onnxruntime(nnfuse_bin, tiny_zoo, name):
    assert_matches(nnfuse_bin, tiny_zoo[name], timeout=120)


@pytest.mark.parametrize("name", zoocheck.TINY)
def test_tiny_model_dynamic_batch_3(nnfuse_bin, tiny_zoo_dynamic, name):
    """The --dynamic-batch variants (symbolic "batch", Shape-computed reshapes) at batch 3."""
    assert_matches(nnfuse_bin, tiny_zoo_dynamic[name], timeout=120, batch=3)


@pytest.mark.parametrize("name", zoocheck.FULL)
def test_full_model_matches_onnxruntime(request, nnfuse_bin, name):
    if not (FULL or request.config.getoption("--full")):
        pytest.skip("full-size zoo models: pytest --full or NNF_ZOO_FULL=1")
    # the fixture is looked up only now so that a skipped run generates nothing
    full_zoo = request.getfixturevalue("full_zoo")
    assert_matches(nnfuse_bin, full_zoo[name], timeout=1800)


def test_zoo_outputs_depend_on_input(tiny_zoo):
    """The comparison above is only meaningful if the reference itself moves
    with the input by far more than the tolerance (make_zoo.py asserts this
    when writing; this guards the cached copies and the feeds used here)."""
    import numpy as np
    import onnx
    for name, path in tiny_zoo.items():
        model = onnx.load(path)
        a = zoocheck.run_ort(path, zoocheck.make_zoo.random_feeds(model, 1))
        b = zoocheck.run_ort(path, zoocheck.make_zoo.random_feeds(model, 2))
        for out in a:
            scale = max(1.0, float(np.abs(a[out]).max()))
            assert float(np.abs(a[out] - b[out]).max()) > 1e-2 * scale, (name, out)


def symbolic_copy(path, out):
    """The model with its inputs' batch and sequence dims symbolic ("B", "S"), as an exporter's
    dynamic_axes write them, and no declared intermediate shapes."""
    import onnx
    model = onnx.load(path)
    g = model.graph
    inits = {i.name for i in g.initializer}
    for v in list(g.input) + list(g.output):
        if v.name in inits:
            continue
        dims = v.type.tensor_type.shape.dim
        for d, name in zip(dims, ("B", "S")):
            d.dim_param = name
    del g.value_info[:]
    onnx.save(model, out)
    return out


def test_symbolic_bert_gets_the_fixed_models_fusions_and_kernels(tiny_zoo, tmp_path):
    """BERT exported with a symbolic batch and sequence: names carry the dims through the
    Shape -> Gather -> Concat -> Reshape arithmetic (src/ops/dimvals.c), so every fusion the fixed
    model gets happens (bias, GELU, both residuals, LayerNorm) and every node runs on a planned
    kernel: the same nodes and kernels as fixed (shape arithmetic aside); and the outputs match
    onnxruntime's at other sequence lengths."""
    import numpy as np
    import onnxruntime as ort
    sys.path.insert(0, str(ROOT / "python"))
    sys.path.insert(0, str(ROOT / "tests" / "py"))
    import nnfuse
    from conftest import profile_nodes

    fixed = tiny_zoo["bert_tiny"]
    sym = symbolic_copy(fixed, str(tmp_path / "bert_sym.onnx"))
    feeds = zoocheck.make_zoo.random_feeds(__import__("onnx").load(fixed), 1)
    for name, a in feeds.items():
        np.save(tmp_path / f"{name}.npy", a)
    given = [a for name in feeds for a in ("-i", f"{name}={tmp_path / (name + '.npy')}")]

    def fused(path):
        return sorted((e["args"]["op_name"], e["args"]["kernel"] == "ref",
                       tuple(sorted(e["args"].get("fused_from", [])))) for e in profile_nodes(path, "--threads", 1, *given)
                      if e["args"]["op_name"] not in ("Shape", "Gather", "Unsqueeze", "Concat", "Slice", "Reshape"))
    want, got = fused(fixed), fused(sym)
    assert got == want, "\n".join(map(str, sorted(set(got) ^ set(want))))
    assert any(op == "MatMul" and len(f) >= 7 for op, _, f in got), got  # the GELU chain
    assert [x for x in got if x[1]] == [("Cast", True, ())], got  # only the mask's Cast on "ref"

    ref = ort.InferenceSession(sym, providers=["CPUExecutionProvider"])
    sessions = [nnfuse.Session(sym, threads=t) for t in (1, 2)]
    rng = np.random.default_rng(3)
    for b, s in ((1, 1), (2, 7), (1, 13), (3, 16)):
        f = {n: (rng.integers(0, 2 if "type" in n or "mask" in n else 100, (b, s))).astype(a.dtype)
             for n, a in feeds.items()}
        want = ref.run(None, f)
        for sess in sessions:
            out = sess.run(f)
            for (name, g), w in zip(out.items(), want):
                scale = max(1.0, float(np.abs(w).max()))
                np.testing.assert_allclose(g, w, rtol=0, atol=1e-4 * scale, err_msg=f"{name} at {b}x{s}")


def test_albert_holds_its_shared_layer_weights_once(nnfuse_bin, tiny_zoo, tmp_path):
    """ALBERT's layers all read one set of weights: the compiled model holds them packed once
    (its weights no more than the file's initialisers, where a block per layer would be three
    times the layer's), and every one of them is released once all its readers packed it."""
    import json
    import subprocess

    import onnx
    path = tiny_zoo["albert_tiny"]
    model = onnx.load(path)
    inits = {i.name: onnx.numpy_helper.to_array(i).nbytes for i in model.graph.initializer}
    shared = {n for n in inits if "albert_layers.0" in n and n.endswith("weight_T")}
    assert len(shared) == 6
    report = tmp_path / "r.json"
    res = subprocess.run([nnfuse_bin, "compile", path, "-o", str(tmp_path / "a.nnf"), "--report", str(report)],
                         capture_output=True, text=True, env=dict(os.environ, NNF_LOG_LEVEL="trace"), timeout=120)
    assert res.returncode == 0, res.stderr
    for name in shared:
        assert f"released the unpacked copy of '{name}' (every reader packed it)" in res.stderr
    weights = json.loads(report.read_text())["weights_bytes"]
    assert weights <= sum(inits.values()), (weights, sum(inits.values()))
