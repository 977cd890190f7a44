"""ONNX backend node cases through `nnfuse run` (tests/conformance/run.py).

test_no_regressions fails when a case listed in tests/conformance/expected_pass.txt
no longer passes, and reports (as a warning) cases that pass but are not listed
yet. test_supported_ops_pass is the stricter rule: a case whose operators
`nnfuse ops --check` all claims must pass.
"""
import json
import pathlib
import subprocess
import sys
import warnings

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUNNER = ROOT / "tests" / "conformance" / "run.py"


@pytest.fixture(scope="module")
def conformance(nnfuse_bin, tmp_path_factory):
    report = tmp_path_factory.mktemp("conformance") / "report.json"
    p = subprocess.run([sys.executable, str(RUNNER), "--nnfuse", nnfuse_bin, "--jobs", "2",
                        "--check-ops", "--quiet", "--report", str(report)],
                       capture_output=True, text=True, timeout=1200)
    # exit 1 means regressions, judged below from the report; anything else is broken
    assert p.returncode in (0, 1) and report.exists(), \
        f"run.py exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    print(p.stdout)
    return json.loads(report.read_text())


def test_no_regressions(conformance):
    by_name = {c["name"]: c for c in conformance["cases"]}
    if conformance["new_passes"]:
        warnings.warn(f"{len(conformance['new_passes'])} conformance cases pass but are not in "
                      f"expected_pass.txt (run tests/conformance/run.py --update-expected): "
                      + " ".join(conformance["new_passes"][:30])
                      + (" ..." if len(conformance["new_passes"]) > 30 else ""))
    lines = []
    for n in conformance["regressions"]:
        c = by_name.get(n)
        lines.append(f"  {n}: {c['status']}: {c['message']}" if c else f"  {n}: case not found")
    assert not lines, f"{len(lines)} conformance regressions:\n" + "\n".join(lines)


def test_supported_ops_pass(conformance):
    bad = [c for c in conformance["cases"]
           if c["status"] in ("fail", "error") and c["ops_supported"]]
    lines = [f"  {c['name']} [{','.join(c['ops'])}]: {c['status']}: {c['message']}" for c in bad]
    if lines:
        print(f"{len(lines)} cases fail although `nnfuse ops --check` accepts them:")
        print("\n".join(lines))
    assert not bad, f"{len(bad)} cases fail with supported ops:\n" + "\n".join(lines[:200])
