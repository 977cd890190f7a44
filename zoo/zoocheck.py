"""Run zoo models through `nnfuse run` and onnxruntime and compare the outputs.

Shared by tests/py/test_zoo.py and scripts/zoo_check.py. The zoo is generated
into a cache folder keyed by the generator's own hash, so an edited
make_zoo.py regenerates it and an unchanged one costs nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import make_zoo  # noqa: E402

TINY = [s.name for s in make_zoo.SPECS if s.small]
FULL = [s.name for s in make_zoo.SPECS if not s.small]


def default_bin() -> str:
    return os.environ.get("NNF_BIN", os.path.join(ROOT, "build", "nnfuse"))


def ensure_zoo(cache_dir: str, names: list[str], flags=()) -> dict[str, str]:
    """Generate the named models into cache_dir unless a copy made by this very
    make_zoo.py with these flags is there already; returns name -> path."""
    h = hashlib.sha256()
    with open(make_zoo.__file__, "rb") as f:
        h.update(f.read())
    h.update(repr(sorted(flags)).encode())
    stamp = h.hexdigest()[:16]
    paths = {n: os.path.join(cache_dir, n + ".onnx") for n in names}
    stamp_file = os.path.join(cache_dir, "STAMP")
    fresh = os.path.exists(stamp_file) and open(stamp_file).read().strip() == stamp
    missing = [n for n, p in paths.items() if not (fresh and os.path.exists(p))]
    if missing:
        os.makedirs(cache_dir, exist_ok=True)
        if not fresh:
            # stale models from an older generator must not survive next to the new stamp
            for p in paths.values():
                if os.path.exists(p):
                    os.remove(p)
        make_zoo.main(["--out", cache_dir, "--only", ",".join(missing), "-q", *flags])
        with open(stamp_file + ".tmp", "w") as f:
            f.write(stamp + "\n")
        os.replace(stamp_file + ".tmp", stamp_file)
    return paths


def feeds_for(model_path: str, seed: int = 1234, batch: int = 1) -> dict[str, np.ndarray]:
    import onnx
    model = onnx.load(model_path, load_external_data=False)
    return make_zoo.random_feeds(model, seed, batch)


def run_ort(model_path: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def npy_name(name: str) -> str:
    """The CLI's rule for output file names (docs: CLI.md, `nnfuse run`)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"


@dataclass
class NnfuseResult:
    returncode: int
    outputs: dict  # name -> ndarray (those that were written)
    stderr: str


def run_nnfuse(nnfuse: str, model_path: str, feeds: dict[str, np.ndarray], out_names,
               timeout: float = 600, extra=()) -> NnfuseResult:
    with tempfile.TemporaryDirectory(prefix="nnf_zoo_") as tmp:
        cmd = [nnfuse, "run", model_path, "-o", os.path.join(tmp, "out")]
        for name, arr in feeds.items():
            path = os.path.join(tmp, "in_" + npy_name(name))
            np.save(path, arr)
            cmd += ["-i", f"{name}={path}"]
        cmd += list(extra)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        outs = {}
        for name in out_names:
            path = os.path.join(tmp, "out", npy_name(name))
            if os.path.exists(path):
                outs[name] = np.load(path)
        return NnfuseResult(p.returncode, outs, (p.stderr or "") + (p.stdout or ""))


@dataclass
class OutputCheck:
    name: str
    shape: tuple
    max_abs_err: float
    tolerance: float
    ok: bool
    why: str = ""


def compare(ref: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> list[OutputCheck]:
    """Tolerance per output: 1e-4 * max(1, max|ref|)."""
    checks = []
    for name, r in ref.items():
        tol = 1e-4 * max(1.0, float(np.abs(r).max()) if r.size else 1.0)
        g = got.get(name)
        if g is None:
            checks.append(OutputCheck(name, r.shape, float("inf"), tol, False, "not written"))
            continue
        if g.shape != r.shape or g.dtype != r.dtype:
            why = f"got {g.dtype}{list(g.shape)}, want {r.dtype}{list(r.shape)}"
            checks.append(OutputCheck(name, r.shape, float("inf"), tol, False, why))
            continue
        err = float(np.abs(g.astype(np.float64) - r.astype(np.float64)).max()) if r.size else 0.0
        ok = bool(np.isfinite(err) and err <= tol)
        checks.append(OutputCheck(name, r.shape, err, tol, ok, "" if ok else "beyond tolerance"))
    return checks


def check_model(nnfuse: str, model_path: str, timeout: float = 600, batch: int = 1):
    """-> (NnfuseResult, [OutputCheck]) for one model on one seeded input
    (batch only matters for a model with a symbolic batch dimension)."""
    feeds = feeds_for(model_path, batch=batch)
    ref = run_ort(model_path, feeds)
    res = run_nnfuse(nnfuse, model_path, feeds, list(ref), timeout=timeout)
    return res, compare(ref, res.outputs)
