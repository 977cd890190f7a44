#!/usr/bin/env python3
"""Run the full-size zoo through `nnfuse run` and onnxruntime; print a table
(model, output, max abs err, tolerance, pass) for the closing note.

    scripts/zoo_check.py [--nnfuse build/nnfuse] [--models a,b] [--tiny] [--cache DIR]
Exit 0 when every output of every model is within 1e-4 * max(1, max|ref|).
"""
import argparse
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "zoo"))

import zoocheck  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nnfuse", default=zoocheck.default_bin())
    ap.add_argument("--models", default="", help="comma-separated (default: all full-size)")
    ap.add_argument("--tiny", action="store_true", help="the *_tiny models instead")
    ap.add_argument("--cache", default=None, help="zoo folder (default build/zoo/full|tiny)")
    ap.add_argument("--timeout", type=float, default=1800)
    a = ap.parse_args()
    names = [n for n in a.models.split(",") if n] or (zoocheck.TINY if a.tiny else zoocheck.FULL)
    cache = a.cache or str(ROOT / "build" / "zoo" / ("tiny" if a.tiny else "full"))
    paths = zoocheck.ensure_zoo(cache, names)

    rows, all_ok = [], True
    for n in names:
        t0 = time.time()
        try:
            res, checks = zoocheck.check_model(a.nnfuse, paths[n], timeout=a.timeout)
        except Exception as e:  # a timeout or a missing binary is a row, not a crash
            rows.append((n, "-", "-", "-", f"FAIL ({type(e).__name__}: {e})"))
            all_ok = False
            continue
        secs = time.time() - t0
        if res.returncode != 0:
            line = res.stderr.strip().splitlines()[:1]
            why = f"exit {res.returncode}: {line[0] if line else ''}"
            rows.append((n, "-", "-", "-", f"FAIL ({why})"))
            all_ok = False
            continue
        for c in checks:
            rows.append((n, f"{c.name}{list(c.shape)}", f"{c.max_abs_err:.3g}",
                         f"{c.tolerance:.3g}", "pass" if c.ok else f"FAIL ({c.why})"))
            all_ok &= c.ok
        print(f"# {n}: {secs:.1f} s", file=sys.stderr)

    head = ("model", "output", "max abs err", "tolerance", "pass")
    w = [max(len(str(r[i])) for r in rows + [head]) for i in range(5)]
    print("| " + " | ".join(h.ljust(w[i]) for i, h in enumerate(head)) + " |")
    print("|" + "|".join("-" * (x + 2) for x in w) + "|")
    for r in rows:
        print("| " + " | ".join(str(v).ljust(w[i]) for i, v in enumerate(r)) + " |")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
