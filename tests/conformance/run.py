#!/usr/bin/env python3
"""ONNX backend node conformance through the `nnfuse run` command.

    tests/conformance/run.py [--nnfuse build/nnfuse] [--report FILE.json]
                             [--filter REGEX] [--jobs N] [--timeout S]
                             [--source a|b|all] [--check-ops] [--update-expected]

Cases come from two places:
  A  the Debian package libonnx-testdata (root found with `dpkg -L`): one
     folder per case with model.onnx and test_data_set_*/{input,output}_*.pb;
  B  the installed onnx wheel, onnx.backend.test.loader.load_model_tests(
     kind="node"), which builds the (newer) cases in memory.
A case in both is taken from B and reported with source "b". Building B's
cases takes 20-50 s, so they are cached (build/conformance/, per onnx and
numpy version; --no-cache skips it).

Each data set is one `nnfuse run MODEL -i NAME=FILE.npy ... -o DIR` in a
subprocess with a timeout. Outcomes:
  pass         every output has the expected shape and dtype and values within
               the onnx backend runner's tolerances (rtol=1e-3, atol=1e-7 for
               floating point; integers and bools exact);
  fail         wrong values/shape/dtype, or an output missing;
  unsupported  nnfuse exited 3 (an operator, attribute or dtype it lacks);
  error        any other exit code, a crash or a timeout (counts as a fail);
  skipped      the case cannot be written as .npy files (sequence, optional or
               string values, float8/int4/bfloat16 data): not nnfuse's fault.
With --check-ops, every case that does not pass is also run through
`nnfuse ops --check MODEL`; `ops_supported` in the report is true when that
exits 0, i.e. nnfuse claims every operator of a case it got wrong.

tests/conformance/expected_pass.txt lists the cases that pass now (sorted);
--update-expected rewrites it from this run (entries outside --filter or
--source are kept as they are). Exit status: 0 when no case listed there
fails, 1 otherwise (regressions are printed), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import glob
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXPECTED = os.path.join(HERE, "expected_pass.txt")
RTOL, ATOL = 1e-3, 1e-7
EXIT_UNSUPPORTED = 3

# dtypes with a standard .npy form (bfloat16/float8/int4 from ml_dtypes have none)
NPY_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64"}


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    source: str  # "a" or "b"
    model_path: str = ""  # source A: the packaged file
    model_bytes: bytes = b""  # source B: serialised in memory
    # source A: list of test_data_set_* folders; source B: list of (inputs, outputs)
    data: list = field(default_factory=list)
    rtol: float = RTOL
    atol: float = ATOL


@dataclass
class Result:
    name: str
    source: str
    status: str  # pass | fail | unsupported | error | skipped
    message: str = ""
    ops: list = field(default_factory=list)
    seconds: float = 0.0
    ops_supported: bool | None = None


def debian_root() -> str | None:
    """The node-case folder of libonnx-testdata, or None if not installed."""
    try:
        out = subprocess.run(["dpkg", "-L", "libonnx-testdata"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    for line in out.stdout.splitlines():
        line = line.strip()
        if line.endswith("/data/node") and os.path.isdir(line):
            return line
    # Older layouts: find any .../node/test_*/model.onnx and take its grandparent.
    for line in out.stdout.splitlines():
        m = re.match(r"(.*/node)/test_[^/]+/model\.onnx$", line.strip())
        if m and os.path.isdir(m.group(1)):
            return m.group(1)
    return None


def cases_a(root: str) -> list[Case]:
    cases = []
    for d in sorted(glob.glob(os.path.join(root, "test_*"))):
        model = os.path.join(d, "model.onnx")
        if not os.path.isfile(model):
            continue
        sets = sorted(glob.glob(os.path.join(d, "test_data_set_*")))
        cases.append(Case(os.path.basename(d), "a", model_path=model, data=sets))
    return cases


def cases_b(cache_dir: str | None) -> list[Case]:
    """The wheel's cases. Building them runs every case generator (20-50 s), so
    the result is cached per onnx/numpy version as plain tuples in cache_dir."""
    import onnx
    path = None
    if cache_dir:
        key = f"onnx{onnx.__version__}-numpy{np.__version__}-py{sys.version_info[0]}" \
              f".{sys.version_info[1]}"
        path = os.path.join(cache_dir, f"node_cases_{key}.pickle")
        if os.path.exists(path):
            try:
                with open(path, "rb") as f:  # written by this script, below
                    rows = pickle.load(f)
                return [Case(n, "b", model_bytes=m, data=d, rtol=r, atol=t)
                        for n, m, d, r, t in rows]
            except Exception:  # a damaged or foreign cache is rebuilt, not trusted
                pass
    cases = load_cases_b()
    if path:
        try:
            os.makedirs(cache_dir, exist_ok=True)
            rows = [(c.name, c.model_bytes, c.data, c.rtol, c.atol) for c in cases]
            with open(path + ".tmp", "wb") as f:
                pickle.dump(rows, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(path + ".tmp", path)
        except OSError:
            pass
    return cases


def load_cases_b() -> list[Case]:
    import onnx.backend.test.loader as loader
    with warnings.catch_warnings():
        # some case generators overflow on purpose (Cast to float8 etc.)
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            tests = loader.load_model_tests(kind="node")
    cases = []
    for t in tests:
        if t.model is None:
            continue
        cases.append(Case(t.name, "b", model_bytes=t.model.SerializeToString(),
                          data=list(t.data_sets or []), rtol=t.rtol, atol=t.atol))
    return cases


def collect(source: str, filt: re.Pattern | None,
            cache_dir: str | None) -> tuple[list[Case], list[str]]:
    notes = []
    by_name: dict[str, Case] = {}
    if source in ("a", "all"):
        root = debian_root()
        if root is None:
            notes.append("source A: libonnx-testdata is not installed (make deps)")
        else:
            for c in cases_a(root):
                by_name[c.name] = c
    if source in ("b", "all"):
        for c in cases_b(cache_dir):
            by_name[c.name] = c  # B's newer version wins
    cases = [c for n, c in sorted(by_name.items()) if filt is None or filt.search(n)]
    return cases, notes


# --------------------------------------------------------------------------
# Running one case
# --------------------------------------------------------------------------
class Skip(Exception):
    pass


def npy_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"


def as_array(v, what: str) -> np.ndarray:
    from onnx import TensorProto, numpy_helper
    if v is None:
        raise Skip(f"{what}: an omitted optional value")
    if isinstance(v, (list, tuple, dict)):
        raise Skip(f"{what}: a sequence/map value")
    if isinstance(v, TensorProto):
        v = numpy_helper.to_array(v)
    a = np.asarray(v)
    if a.dtype.name not in NPY_DTYPES:
        raise Skip(f"{what}: dtype {a.dtype} has no .npy form")
    return a


def load_pb(path: str, what: str) -> np.ndarray:
    import onnx
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return as_array(t, what)


def model_io(model) -> tuple[list[str], list[str]]:
    for v in list(model.graph.input) + list(model.graph.output):
        kind = v.type.WhichOneof("value")
        if kind != "tensor_type":
            raise Skip(f"{v.name}: a {kind} value")
        if v.type.tensor_type.elem_type == 8:  # STRING
            raise Skip(f"{v.name}: a string tensor")
    inits = {i.name for i in model.graph.initializer}
    ins = [v.name for v in model.graph.input if v.name not in inits]
    return ins, [v.name for v in model.graph.output]


def data_sets(case: Case, ins: list[str], outs: list[str]):
    """Yield (feeds {name: array}, expected [array]) per data set."""
    for ds in case.data:
        if case.source == "a":
            ip = sorted(glob.glob(os.path.join(ds, "input_*.pb")),
                        key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))
            op = sorted(glob.glob(os.path.join(ds, "output_*.pb")),
                        key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))
            xs = [load_pb(p, f"input {i}") for i, p in enumerate(ip)]
            ys = [load_pb(p, f"output {i}") for i, p in enumerate(op)]
        else:
            xs = [as_array(v, f"input {i}") for i, v in enumerate(ds[0])]
            ys = [as_array(v, f"output {i}") for i, v in enumerate(ds[1])]
        if len(xs) != len(ins) or len(ys) != len(outs):
            raise Skip(f"data set has {len(xs)} inputs/{len(ys)} outputs, model "
                       f"{len(ins)}/{len(outs)}")
        yield dict(zip(ins, xs)), ys


def compare(name: str, want: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> str:
    """'' when equal within the onnx backend runner's rules, else why not."""
    if got.shape != want.shape:
        return f"output {name}: shape {list(got.shape)}, expected {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"output {name}: dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind == "f":
        w, g = want.astype(np.float64), got.astype(np.float64)
        ok = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        if not ok.all():
            bad = int((~ok).sum())
            err = np.abs(np.where(ok, 0, g - w))
            i = np.unravel_index(int(np.nanargmax(err)) if np.isfinite(err).any() else 0,
                                 err.shape) if err.ndim else ()
            return (f"output {name}: {bad}/{want.size} values beyond rtol={rtol} atol={atol}; "
                    f"e.g. at {[int(k) for k in i]} got {float(g[i]):.9g}, "
                    f"expected {float(w[i]):.9g}")
        return ""
    if not np.array_equal(got, want):
        bad = int((got != want).sum())
        return f"output {name}: {bad}/{want.size} values differ (exact compare)"
    return ""


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:400]
    return ""


def run_case(case: Case, nnfuse: str, work: str, timeout: float, check_ops: bool) -> Result:
    import onnx
    t0 = time.time()
    res = Result(case.name, case.source, "pass")
    d = tempfile.mkdtemp(prefix=case.name[:40] + "_", dir=work)
    try:
        if case.source == "a":
            model = onnx.load(case.model_path)
            model_path = case.model_path
        else:
            model = onnx.ModelProto()
            model.ParseFromString(case.model_bytes)
            model_path = os.path.join(d, "model.onnx")
            with open(model_path, "wb") as f:
                f.write(case.model_bytes)
        res.ops = sorted({(n.domain + "::" if n.domain not in ("", "ai.onnx") else "") + n.op_type
                          for n in model.graph.node})
        try:
            ins, outs = model_io(model)
            sets = list(data_sets(case, ins, outs))
        except Skip as e:
            res.status, res.message = "skipped", str(e)
            return res
        if not sets:
            res.status, res.message = "skipped", "no data sets"
            return res
        for k, (feeds, expected) in enumerate(sets):
            out_dir = os.path.join(d, f"out{k}")
            cmd = [nnfuse, "run", model_path, "-o", out_dir]
            for i, (name, arr) in enumerate(feeds.items()):
                p = os.path.join(d, f"in{k}_{i}.npy")
                np.save(p, arr, allow_pickle=False)
                cmd += ["-i", f"{name}={p}"]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                   stdin=subprocess.DEVNULL, errors="replace")
            except subprocess.TimeoutExpired:
                res.status, res.message = "error", f"timeout after {timeout:g} s"
                return res
            if p.returncode == EXIT_UNSUPPORTED:
                res.status = "unsupported"
                res.message = first_line(p.stderr) or first_line(p.stdout)
                return res
            if p.returncode != 0:
                res.status = "error"
                how = (f"killed by signal {-p.returncode}" if p.returncode < 0
                       else f"exit {p.returncode}")
                res.message = f"{how}: {first_line(p.stderr) or first_line(p.stdout)}"
                return res
            for name, want in zip(outs, expected):
                path = os.path.join(out_dir, npy_name(name))
                if not os.path.exists(path):
                    res.status, res.message = "fail", f"output {name}: not written"
                    return res
                try:
                    got = np.load(path, allow_pickle=False)
                except Exception as e:  # a malformed .npy is nnfuse's failure
                    res.status, res.message = "fail", f"output {name}: unreadable .npy ({e})"
                    return res
                why = compare(name, want, got, case.rtol, case.atol)
                if why:
                    res.status = "fail"
                    res.message = (f"data set {k}: " if len(sets) > 1 else "") + why
                    return res
        return res
    except Exception as e:  # the runner's own trouble with a case is reported, not fatal
        res.status, res.message = "error", f"runner: {type(e).__name__}: {e}"
        return res
    finally:
        if check_ops and res.status in ("fail", "error"):
            res.ops_supported = ops_check(nnfuse, case, d, timeout)
        shutil.rmtree(d, ignore_errors=True)
        res.seconds = round(time.time() - t0, 3)


def ops_check(nnfuse: str, case: Case, d: str, timeout: float) -> bool | None:
    path = case.model_path if case.source == "a" else os.path.join(d, "model.onnx")
    try:
        p = subprocess.run([nnfuse, "ops", "--check", path], capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.returncode == 0


# --------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------
STATUSES = ("pass", "fail", "unsupported", "error", "skipped")


def per_op(results: list[Result]) -> dict:
    """For every operator, the outcomes of the cases whose model contains it."""
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        for op in r.ops:
            table[op][r.status] += 1
    return {op: {s: c[s] for s in STATUSES} for op, c in sorted(table.items())}


def read_expected(path: str) -> list[str]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return sorted({ln.strip() for ln in f if ln.strip() and not ln.startswith("#")})


def write_expected(path: str, names: list[str]):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for n in sorted(set(names)):
            f.write(n + "\n")
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nnfuse", default=os.environ.get("NNF_BIN",
                                                       os.path.join(ROOT, "build", "nnfuse")))
    ap.add_argument("--report", help="write the JSON report here")
    ap.add_argument("--filter", help="only cases whose name matches this regex")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per nnfuse run")
    ap.add_argument("--source", choices=("a", "b", "all"), default="all")
    ap.add_argument("--check-ops", action="store_true",
                    help="run `nnfuse ops --check` on every case that fails")
    ap.add_argument("--expected", default=EXPECTED, help="the expected-pass list")
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "conformance"),
                    help="where the onnx wheel's built cases are cached")
    ap.add_argument("--no-cache", action="store_true", help="rebuild them in memory")
    ap.add_argument("--update-expected", action="store_true")
    ap.add_argument("-q", "--quiet", action="store_true", help="no per-operator table")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="list every newly passing case and every case that does not pass")
    a = ap.parse_args(argv)

    if not os.access(a.nnfuse, os.X_OK):
        print(f"run.py: nnfuse command not found at {a.nnfuse}", file=sys.stderr)
        return 2
    try:
        filt = re.compile(a.filter) if a.filter else None
    except re.error as e:
        print(f"run.py: bad --filter: {e}", file=sys.stderr)
        return 2

    t0 = time.time()
    cases, notes = collect(a.source, filt, None if a.no_cache else a.cache)
    t_load = time.time() - t0
    for n in notes:
        print("note:", n, file=sys.stderr)

    work = tempfile.mkdtemp(prefix="nnf_conformance_")
    results: list[Result] = []
    try:
        with cf.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
            futs = [ex.submit(run_case, c, a.nnfuse, work, a.timeout, a.check_ops) for c in cases]
            for f in cf.as_completed(futs):
                results.append(f.result())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results.sort(key=lambda r: r.name)
    t_all = time.time() - t0

    totals = collections.Counter(r.status for r in results)
    passed = [r.name for r in results if r.status == "pass"]
    expected = read_expected(a.expected)
    by_name = {r.name: r for r in results}
    regressions = [n for n in expected if n in by_name and by_name[n].status != "pass"]
    # a listed case that has vanished is a regression too, unless this run chose
    # to look at one source only
    missing = [n for n in expected if n not in by_name and a.source == "all"
               and (filt is None or filt.search(n))]
    new_passes = sorted(set(passed) - set(expected))

    if not a.quiet:
        ops = per_op(results)
        w = max([len(k) for k in ops] + [8])
        print(f"{'operator':<{w}}  " + "  ".join(f"{s:>11}" for s in STATUSES))
        for op, c in ops.items():
            print(f"{op:<{w}}  " + "  ".join(f"{c[s]:>11}" for s in STATUSES))
        print()
    src = collections.Counter(r.source for r in results)
    print(f"{len(results)} cases (source a: {src['a']}, b: {src['b']}) in {t_all:.1f} s "
          f"(loading {t_load:.1f} s), {a.jobs} jobs: "
          + ", ".join(f"{totals[s]} {s}" for s in STATUSES))
    if a.verbose:
        for r in results:
            if r.status != "pass":
                print(f"{r.status:<11} {r.name}: {r.message}")
    for n in regressions:
        r = by_name[n]
        print(f"REGRESSION {n}: {r.status}: {r.message}")
    for n in missing:
        print(f"REGRESSION {n}: listed in {os.path.basename(a.expected)} but no such case found")
    if new_passes:
        shown = new_passes if a.verbose else new_passes[:20]
        rest = len(new_passes) - len(shown)
        more = f" ... and {rest} more" if rest else ""
        print(f"{len(new_passes)} newly passing (not in {os.path.basename(a.expected)}; "
              f"--update-expected adds them): " + " ".join(shown) + more)

    if a.report:
        os.makedirs(os.path.dirname(os.path.abspath(a.report)), exist_ok=True)
        report = {
            "nnfuse": os.path.abspath(a.nnfuse),
            "filter": a.filter,
            "seconds": round(t_all, 1),
            "jobs": a.jobs,
            "rtol": RTOL, "atol": ATOL,
            "notes": notes,
            "totals": {s: totals[s] for s in STATUSES},
            "regressions": regressions + missing,
            "new_passes": new_passes,
            "per_op": per_op(results),
            "cases": [asdict(r) for r in results],
        }
        with open(a.report, "w") as f:
            json.dump(report, f, indent=1)

    if a.update_expected:
        # entries this run did not look at stay as they are
        keep = [n for n in expected if n not in by_name
                and (a.source != "all" or (filt is not None and not filt.search(n)))]
        write_expected(a.expected, keep + passed)
        print(f"wrote {a.expected}: {len(set(keep + passed))} cases")
        return 0
    return 1 if (regressions or missing) else 0


if __name__ == "__main__":
    sys.exit(main())
