"""Shared pytest setup: make the in-repo Python package importable and locate the build."""
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
os.environ.setdefault("NNF_LIB", str(ROOT / "build" / "libnnfuse.so"))
NNF_BIN = os.environ.get("NNF_BIN", str(ROOT / "build" / "nnfuse"))
# The blocked layout (passes/layout_nchwc.c) runs on the vector tiers only: with NNF_ISA=scalar
# a model keeps NCHW, so tests of the plan's structure (blocked ops, fused nodes, buffers shared
# through a reorder) check their results but not that structure.
BLOCKED = os.environ.get("NNF_ISA", "").strip().lower() != "scalar"
# The suffixes a planned element-wise kernel's name may end in: the tier in force (the machine's
# widest vector tier unless NNF_ISA names another).
TIER_SUFFIXES = ("scalar",) if not BLOCKED else ("avx2", "avx512")


def model_of(graph, opset=17, *domains):
    """The ModelProto of GRAPH at OPSET of the default domain, plus (domain, version) pairs.
    Its IR version is the oldest that the opset allows (8 up to opset 18, 10 after), not the
    newest that the installed onnx writes by default: an onnxruntime older than that onnx
    refuses a newer IR version ("Unsupported model IR version"), and nothing here needs one."""
    from onnx import helper
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)] +
                              [helper.make_opsetid(d, v) for d, v in domains])
    model.ir_version = 8 if opset <= 18 else 10
    return model


def profile_nodes(path, *args, env=None):
    """The "Node" events of `nnfuse profile PATH ARGS... -o TRACE` (its Chrome trace), in run
    order; the trace goes beside the model (PATH with .trace.json)."""
    import json
    import subprocess
    path = pathlib.Path(path)
    trace = path.with_suffix(".trace.json")
    subprocess.run([NNF_BIN, "profile", str(path), *map(str, args), "-o", str(trace)], check=True,
                   capture_output=True, env=env)
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    return [e for e in events if e.get("cat") == "Node"]


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
