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
