"""Shared pytest setup: make the in-repo Python package importable and locate the build."""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
os.environ.setdefault("NNF_LIB", str(ROOT / "build" / "libnnfuse.so"))
NNF_BIN = os.environ.get("NNF_BIN", str(ROOT / "build" / "nnfuse"))


# --- zoo and conformance fixtures (tests/py/test_zoo.py, test_conformance.py) ---
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def nnfuse_bin():
    """The command under test: build/nnfuse, or $NNF_BIN. Missing is a failure,
    not a skip: `make test` builds it first, so its absence is a real problem."""
    if not os.access(NNF_BIN, os.X_OK):
        pytest.fail(f"nnfuse command not found at {NNF_BIN} (build it, or set NNF_BIN)")
    return NNF_BIN


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help="also run the full-size zoo models against onnxruntime "
                          "(same as NNF_ZOO_FULL=1; minutes)")
