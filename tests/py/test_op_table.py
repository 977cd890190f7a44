"""The operator table drives coverage: every operator `nnfuse ops` lists must be exercised by a
per-op test (C or Python) under its ONNX name, and the listing must be well formed."""
import json
import pathlib
import re
import subprocess

from conftest import NNF_BIN

ROOT = pathlib.Path(__file__).resolve().parents[2]


def table():
    out = subprocess.run([NNF_BIN, "ops", "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_ops_json_is_well_formed():
    ops = table()
    assert len(ops) >= 100
    for o in ops:
        assert set(o) == {"domain", "name", "since_version", "until_version", "dtypes"}
        assert 1 <= o["since_version"] <= o["until_version"], o
        assert o["dtypes"], o
    # one entry per (domain, name, opset): ranges of the same op must not overlap
    by_name = {}
    for o in ops:
        by_name.setdefault((o["domain"], o["name"]), []).append((o["since_version"], o["until_version"]))
    for key, ranges in by_name.items():
        ranges.sort()
        for (a0, a1), (b0, b1) in zip(ranges, ranges[1:]):
            assert a1 < b0, f"{key}: overlapping opset ranges {ranges}"


def test_every_operator_has_a_test():
    sources = ""
    for pattern in ("tests/py/test_ops_*.py", "tests/c/test_ref_*.c"):
        for path in ROOT.glob(pattern):
            sources += path.read_text()
    quoted = set(re.findall(r"[\"']([A-Za-z][A-Za-z0-9]*)[\"']", sources))
    missing = sorted({o["name"] for o in table()} - quoted)
    assert not missing, f"operators in the table without a per-op test: {missing}"
