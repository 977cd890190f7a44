#!/usr/bin/env python3
"""The scoreboard: nnfuse side by side with ONNX Runtime on the model suite.

    bench/compare.py [--models resnet50,mobilenetv2,...|PATH.onnx] [--threads 1,2]
                     [--iterations N] [--warmup N] [--rounds R] [--zoo DIR]
                     [--symbolic [--dims S=1,...]] [--out docs/PERFORMANCE.md]
                     [--peers onnxruntime,openvino]

For every model and thread count, the two engines run in separate processes,
alternately (nnfuse, ORT, nnfuse, ORT, ... for --rounds rounds; each round
starts with the next engine, so no engine always goes first), each process
warming up and then timing --iterations runs on the same input (both use the
seeded generator of `nnfuse run`). The model file is read once before the
rounds, so every first inference finds it in the page cache. Reported, following
/work/shared/guide/BENCHMARKS.md:
  - median latency of each engine over all its timed runs, and their ratio
    (nnfuse / ORT: below 1 is nnfuse faster);
  - spread p90/median of each engine (noise: a ratio inside the spread is no result);
  - peak RSS of each process (getrusage max RSS, minus nothing) and the ratio;
  - first inference (load + session + first run) and the ratio;
  - with --o0 (the default), nnfuse at -O0 too, in the same rounds: the fused
    graph's speed-up over the unfused one and its arena (peak of live
    intermediates) against the unfused one (targets: >= 1.3x, >= 20 % less);
  - nnfuse's first inference from the model compiled once before the rounds (`nnfuse compile`,
    a .nnf whose weights load packed), in the same rounds, against ORT's (--no-compiled: not);
  - with --peers onnxruntime,openvino, OpenVINO too (bench/ov_run.py, f32), in
    the same rounds, in a table of its own (nnfuse / OpenVINO; the targets stay
    those against ORT);
  - the machine's limit (a second table): the model's FLOPs (`nnfuse info`,
    every conv counted as direct), the FMA peak `peak` measures at the start
    on the same thread counts, the time those FLOPs take at that peak (the
    floor), each engine's fraction of the peak, and the latency target
    (0.8 x ORT) against the floor: below 1.00 the target needs fewer
    multiplies than the model's direct FLOPs (Winograd) or a lower precision,
    however fast the kernels are.

Writes OUT (markdown; when OUT exists and holds the markers
<!-- scoreboard:begin --> / <!-- scoreboard:end -->, only the text between them
is replaced), OUT with .json (every number, samples included) and OUT with .png
(bar chart of the ratios). Missing zoo models are generated with
zoo/make_zoo.py. A model that nnfuse cannot run gets a row saying why; the
script goes on with the others.

--symbolic runs each model as an exporter's dynamic_axes write it: the inputs'
batch dim symbolic ("N", or "B" for a token input) and a token input's
sequence dim too ("S"), declared output and intermediate shapes dropped. Both
engines get the same input files, at the model's own shapes or with the dims
--dims names changed (--dims S=1: BERT at one token); nnfuse keeps the dims
symbolic at load (its -i files), so this measures what a user of such an
export gets: shape plans for a CNN, the symbolic-shape kernels for BERT.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_MODELS = "resnet50,mobilenetv2,yolov5s,bert-base,albert-base,unet"
BEGIN, END = "<!-- scoreboard:begin -->", "<!-- scoreboard:end -->"
# The engines nnfuse is measured against: each a runner script in bench/ with ort_run.py's
# `bench` interface. ONNX Runtime is the reference of the targets; the others get a table of
# their own, which says how the runner sets the engine up.
PEERS = {
    "onnxruntime": {"runner": "ort_run.py", "name": "ONNX Runtime"},
    "openvino": {"runner": "ov_run.py", "name": "OpenVINO",
                 "setup": "its CPU plugin in f32, the latency hint, one stream"},
}


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def percentile(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def resolve_model(name: str, zoo: pathlib.Path, python: str) -> pathlib.Path:
    """A path to an .onnx file, or a zoo name generated on demand."""
    if name.endswith(".onnx"):
        return pathlib.Path(name)
    path = zoo / f"{name}.onnx"
    if not path.exists():
        print(f"compare: generating {path} with zoo/make_zoo.py", file=sys.stderr)
        subprocess.run([python, str(ROOT / "zoo" / "make_zoo.py"), "--out", str(zoo), "--only", name], check=True)
    return path


def symbolic_copy(model: pathlib.Path, dims: dict, tmp: pathlib.Path):
    """The model with symbolic input dims (see --symbolic), and a folder of
    inputs at its shapes with `dims` applied, written by ORT's side's
    generator (bench/ort_run.py) so both engines read the same files."""
    import onnx

    m = onnx.load(str(model))
    g = m.graph
    inits = {i.name for i in g.initializer}
    shapes = {}
    for vi in g.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        names = ["B", "S"] if tt.elem_type == onnx.TensorProto.INT64 and len(tt.shape.dim) == 2 else ["N"]
        shape = [d.dim_value for d in tt.shape.dim]
        for i, name in enumerate(names):
            shape[i] = dims.get(name, shape[i])
            tt.shape.dim[i].dim_param = name
        shapes[vi.name] = shape
    for o in g.output:
        o.type.tensor_type.ClearField("shape")
    del g.value_info[:]
    out = tmp / f"{model.stem}-symbolic.onnx"
    onnx.save(m, str(out))
    feeds = tmp / f"{model.stem}-inputs"
    feeds.mkdir(exist_ok=True)
    sys.path.insert(0, str(ROOT / "bench"))
    import numpy as np
    import ort_run

    for name, a in ort_run.make_inputs(str(model), None, 0, shapes).items():
        np.save(feeds / f"{ort_run.safe_name(name)}.npy", a)
    return out, feeds


def run_json(cmd, json_path: pathlib.Path, timeout: float):
    """Run one benchmark process; its JSON result, or an error line."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return None, f"exit {proc.returncode}: {lines[0] if lines else ''}"[:300]
    try:
        return json.loads(json_path.read_text()), None
    except (OSError, ValueError) as e:
        return None, f"unreadable result: {e}"


def summarize(runs):
    samples = [s for r in runs for s in r.get("samples_ms", [])]
    if not samples:  # an older binary without samples: fall back to per-process medians
        samples = [r["latency_ms"]["median"] for r in runs]
    med = statistics.median(samples)
    return {
        "median_ms": med,
        "p90_ms": percentile(samples, 0.9),
        "spread": percentile(samples, 0.9) / med if med > 0 else float("nan"),
        "rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
        "first_ms": statistics.median(r["first_ms"] for r in runs),
        "processes": len(runs),
        "timed_runs": len(samples),
    }


def warm_page_cache(model: pathlib.Path):
    """Reads the model file (and any external data beside it) once, so that
    every engine's first inference reads it from the page cache: otherwise the
    engine that runs first pays for the disk alone (BERT-base: 1276 ms
    against 538 in the next round)."""
    paths = [model] + [p for p in model.parent.glob(model.stem + "*") if p.suffix in (".data", ".bin")]
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def compile_model(args, model: pathlib.Path, tmp: pathlib.Path):
    """`nnfuse compile MODEL -o TMP/MODEL.nnf`: the compiled file (nnfuse's own deployment form,
    as an ATC .om), or None with the reason printed."""
    out = tmp / f"{model.stem}.nnf"
    res = subprocess.run([args.nnfuse, "compile", str(model), "-o", str(out)], capture_output=True,
                         text=True, timeout=args.timeout)
    if res.returncode != 0:
        print(f"compare: {model.name}: compile failed: {res.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return out


def bench_pair(model: pathlib.Path, threads: int, args, tmp: pathlib.Path, feeds: pathlib.Path = None,
               compiled: pathlib.Path = None):
    nn_json = tmp / "nnfuse.json"
    given = [a for f in sorted(feeds.glob("*.npy")) for a in ("-i", f"{f.stem}={f}")] if feeds else []
    nn_cmd = [args.nnfuse, "bench", str(model), "--threads", str(threads), "--warmup", str(args.warmup),
              "--iterations", str(args.iterations), *given, "--json", str(nn_json)]
    o0_json = tmp / "nnfuse-O0.json"
    o0_cmd = nn_cmd[:-1] + [str(o0_json), "-O0"]
    runs = {"nnfuse": [], "onnxruntime": [], "nnfuse -O0": []}
    engines = [("nnfuse", nn_cmd, nn_json)]
    for peer in args.peers:
        peer_json = tmp / f"{peer}.json"
        cmd = [args.python, str(ROOT / "bench" / PEERS[peer]["runner"]), "bench", str(model), "--threads", str(threads),
               "--warmup", str(args.warmup), "--iterations", str(args.iterations), "--json", str(peer_json)]
        engines.append((peer, cmd + (["--inputs", str(feeds)] if feeds else []), peer_json))
        runs[peer] = []
    if args.o0:
        engines.append(("nnfuse -O0", o0_cmd, o0_json))
    if compiled:  # its first inference: one timed run is all it needs
        nnf_json = tmp / "nnfuse-nnf.json"
        engines.append(("nnfuse .nnf", [args.nnfuse, "bench", str(compiled), "--threads", str(threads),
                                        "--warmup", "0", "--iterations", "1", *given, "--json",
                                        str(nnf_json)], nnf_json))
        runs["nnfuse .nnf"] = []
        warm_page_cache(compiled)
    errors, failed = [], set()
    warm_page_cache(model)
    for rnd in range(args.rounds):
        first = rnd % len(engines)
        for label, cmd, path in engines[first:] + engines[:first]:
            if label in failed:
                continue  # an engine that fails once fails every round: do not wait for it again
            if path.exists():
                path.unlink()
            res, err = run_json(cmd, path, args.timeout)
            if err:
                errors.append(f"{label}: {err}")
                failed.add(label)
                print(f"compare: {model.name} x{threads} round {rnd + 1} {label}: {err}", file=sys.stderr)
            else:
                runs[label].append(res)
        if failed & {"nnfuse", "onnxruntime"}:
            break  # no ratio to report
    nn_runs, ort_runs, o0_runs = runs["nnfuse"], runs["onnxruntime"], runs["nnfuse -O0"]
    row = {"model": model.stem, "threads": threads, "errors": errors}
    for eng in ["nnfuse"] + args.peers:
        if runs[eng]:
            row[eng] = summarize(runs[eng])
            row[eng + "_raw"] = runs[eng]
    if nn_runs and o0_runs:
        row["nnfuse_O0"] = summarize(o0_runs)
        row["fused_speedup"] = row["nnfuse_O0"]["median_ms"] / row["nnfuse"]["median_ms"]
        arena, arena0 = nn_runs[0].get("arena_bytes"), o0_runs[0].get("arena_bytes")
        if arena and arena0:
            row["arena_mb"], row["arena_O0_mb"] = arena / 2**20, arena0 / 2**20
            row["arena_saving"] = 1 - arena / arena0
    if nn_runs and ort_runs:
        a, b = row["nnfuse"], row["onnxruntime"]
        row["latency_ratio"] = a["median_ms"] / b["median_ms"]
        row["rss_ratio"] = a["rss_mb"] / b["rss_mb"]
        row["first_ratio"] = a["first_ms"] / b["first_ms"]
    if compiled and runs["nnfuse .nnf"] and ort_runs:
        row["compiled"] = summarize(runs["nnfuse .nnf"])
        row["compiled_first_ratio"] = row["compiled"]["first_ms"] / row["onnxruntime"]["first_ms"]
    for peer in args.peers[1:]:
        if nn_runs and runs[peer]:
            a, b = row["nnfuse"], row[peer]
            row[peer + "_ratios"] = {"latency": a["median_ms"] / b["median_ms"], "rss": a["rss_mb"] / b["rss_mb"],
                                     "first": a["first_ms"] / b["first_ms"]}
    return row


def stdout_json(cmd, timeout: float):
    """cmd's standard output read as JSON; None when it fails."""
    try:
        return json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True).stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def measure_peaks(build: pathlib.Path, threads) -> dict:
    """{threads: FMA GFLOP/s} from BUILD/peak, run before any benchmark (~3 s
    a run; every run gives the 1-thread figure too); {} when it fails."""
    peaks = {}
    for t in sorted({t for t in threads if t > 1}) or [1]:
        res = stdout_json([str(build / "peak"), "--json", "--threads", str(t)], 120)
        if not res:
            print(f"compare: {build / 'peak'} --threads {t} failed: no limit table", file=sys.stderr)
            return {}
        peaks.setdefault(1, res["fma_gflops_1"])
        if t > 1:
            peaks[t] = res["fma_gflops_n"]
    return {t: peaks[t] for t in threads if t in peaks}


def model_gflops(nnfuse: str, model: pathlib.Path):
    """The model's FLOPs as `nnfuse info` counts them (direct convs), or None."""
    res = stdout_json([nnfuse, "info", str(model), "--json"], 600)
    return res.get("gflops") if res else None


def add_limit(row, gflops, peak):
    """The row's figures against the FMA peak (see the module doc)."""
    if not gflops or not peak:
        return
    row["gflops"], row["peak_gflops"] = gflops, peak
    row["floor_ms"] = 1e3 * gflops / peak
    for eng in ("nnfuse", "onnxruntime"):
        if eng in row and row[eng]["median_ms"] > 0:
            row[eng]["pct_peak"] = 100 * row["floor_ms"] / row[eng]["median_ms"]
    if "onnxruntime" in row:
        row["target_ms"] = 0.8 * row["onnxruntime"]["median_ms"]
        row["target_over_floor"] = row["target_ms"] / row["floor_ms"]


def fmt(x, spec=".2f"):
    return "–" if x is None or x != x else format(x, spec)


def markdown(rows, meta) -> str:
    out = [
        f"Measured {meta['date']} on {meta['cpu']} ({meta['cores']} cores), nnfuse {meta['nnfuse_version']} vs "
        f"ONNX Runtime {meta['ort_version']}; {meta['rounds']} alternating rounds x {meta['iterations']} timed "
        f"runs (after {meta['warmup']} warm-up) per engine. Ratios are nnfuse / ORT: below 1.00 is better for nnfuse. "
        "Targets (BENCHMARKS.md): latency <= 0.80, peak RSS <= 0.60, first inference <= 0.50; "
        "fused vs -O0 >= 1.3x faster with >= 20 % less arena.",
        "",
        "| model | threads | nnfuse median ms | ORT median ms | latency ratio | spread p90/med (nnfuse, ORT) "
        "| nnfuse RSS MiB | ORT RSS MiB | RSS ratio | first ms (nnfuse, ORT) | first ratio "
        "| -O0 ms | fused speed-up | arena MiB (fused, -O0) | arena saved |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        a, b = r.get("nnfuse"), r.get("onnxruntime")
        if not a or not b:
            why = "; ".join(r["errors"]) or "no result"
            out.append(f"| {r['model']} | {r['threads']} | {fmt(a and a['median_ms'])} | {fmt(b and b['median_ms'])} "
                       f"| – | – | – | – | – | – | not measured: {why.replace('|', '/')} | – | – | – | – |")
            continue
        out.append(
            f"| {r['model']} | {r['threads']} | {fmt(a['median_ms'])} | {fmt(b['median_ms'])} | "
            f"**{fmt(r['latency_ratio'])}** | {fmt(a['spread'])}, {fmt(b['spread'])} | {fmt(a['rss_mb'], '.1f')} | "
            f"{fmt(b['rss_mb'], '.1f')} | **{fmt(r['rss_ratio'])}** | {fmt(a['first_ms'], '.1f')}, "
            f"{fmt(b['first_ms'], '.1f')} | **{fmt(r['first_ratio'])}** | "
            f"{fmt(r.get('nnfuse_O0', {}).get('median_ms'))} | {fmt(r.get('fused_speedup'))} | "
            f"{fmt(r.get('arena_mb'), '.1f')}, {fmt(r.get('arena_O0_mb'), '.1f')} | "
            f"{fmt(r.get('arena_saving') and 100 * r['arena_saving'], '.0f')} % |")
    limit = [r for r in rows if "floor_ms" in r and r.get("nnfuse") and r.get("onnxruntime")]
    if limit:
        out += [
            "",
            "Against the machine's limit: the model's FLOPs with every conv counted as direct (`nnfuse info`), "
            "the FMA peak `peak` measured at the start of this run, the time those FLOPs take at that peak "
            "(floor), each engine's fraction of the peak (a Winograd conv does fewer multiplies, so it can pass "
            "100 %), and the latency target (0.8 x ORT) over the floor: under 1.00 the target needs fewer "
            "multiplies than the direct FLOPs, or a lower precision, however fast the kernels are.",
            "",
            "| model | threads | GFLOP | peak GFLOP/s | floor ms | nnfuse % of peak | ORT % of peak "
            "| target ms (0.8 x ORT) | target / floor |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in limit:
            out.append(
                f"| {r['model']} | {r['threads']} | {fmt(r['gflops'], '.3f')} | {fmt(r['peak_gflops'], '.1f')} | "
                f"{fmt(r['floor_ms'])} | {fmt(r['nnfuse'].get('pct_peak'), '.0f')} % | "
                f"{fmt(r['onnxruntime'].get('pct_peak'), '.0f')} % | {fmt(r['target_ms'])} | "
                f"**{fmt(r['target_over_floor'])}** |")
    compiled = [r for r in rows if r.get("compiled") and r.get("nnfuse") and r.get("onnxruntime")]
    if compiled:
        out += [
            "",
            "The compiled model (`nnfuse compile MODEL -o MODEL.nnf` once, before the rounds; not timed): "
            "nnfuse's first inference from the .nnf file, whose weights load packed from the file, in the "
            "same rounds (one timed run a process). ORT loads its .onnx as above.",
            "",
            "| model | threads | nnfuse first ms (.onnx) | nnfuse first ms (.nnf) | ORT first ms "
            "| first ratio (.nnf / ORT) | nnfuse RSS MiB (.nnf) |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in compiled:
            c = r["compiled"]
            out.append(f"| {r['model']} | {r['threads']} | {fmt(r['nnfuse']['first_ms'], '.1f')} | "
                       f"{fmt(c['first_ms'], '.1f')} | {fmt(r['onnxruntime']['first_ms'], '.1f')} | "
                       f"**{fmt(r['compiled_first_ratio'])}** | {fmt(c['rss_mb'], '.1f')} |")
    for peer in meta["peers"][1:]:
        name, runner = PEERS[peer]["name"], PEERS[peer]["runner"]
        out += [
            "",
            f"nnfuse against {name} {meta['peer_versions'].get(peer, '?').split('-')[0]} in the same rounds "
            f"({PEERS[peer]['setup']}; `bench/{runner}`): ratios nnfuse / {name}, below 1.00 is better for nnfuse.",
            "",
            f"| model | threads | nnfuse median ms | {name} median ms | latency ratio | {name} spread p90/med "
            f"| RSS MiB (nnfuse, {name}) | RSS ratio | first ms (nnfuse, {name}) | first ratio |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            a, b, q = r.get("nnfuse"), r.get(peer), r.get(peer + "_ratios")
            if not q:
                why = "; ".join(e for e in r["errors"] if e.startswith(peer)) or "no result"
                out.append(f"| {r['model']} | {r['threads']} | {fmt(a and a['median_ms'])} | – | – | – | – | – "
                           f"| – | not measured: {why.replace('|', '/')} |")
                continue
            out.append(
                f"| {r['model']} | {r['threads']} | {fmt(a['median_ms'])} | {fmt(b['median_ms'])} | "
                f"**{fmt(q['latency'])}** | {fmt(b['spread'])} | {fmt(a['rss_mb'], '.1f')}, {fmt(b['rss_mb'], '.1f')} "
                f"| **{fmt(q['rss'])}** | {fmt(a['first_ms'], '.1f')}, {fmt(b['first_ms'], '.1f')} "
                f"| **{fmt(q['first'])}** |")
    out.append("")
    out.append(f"Command: `{meta['command']}`")
    return "\n".join(out) + "\n"


def write_markdown(path: pathlib.Path, table: str, png_name: str):
    block = f"{BEGIN}\n{table}\n![nnfuse / ONNX Runtime ratios]({png_name})\n{END}"
    if path.exists():
        text = path.read_text()
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            path.write_text(head + block + tail)
            return
    path.write_text("# nnfuse vs ONNX Runtime\n\nWritten by `bench/compare.py`.\n\n" + block + "\n")


def chart(rows, path: pathlib.Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare: matplotlib is not installed (pip install -r requirements.txt): no chart", file=sys.stderr)
        return False
    good = [r for r in rows if "latency_ratio" in r]
    labels = [f"{r['model']}\n{r['threads']} thr" for r in good]
    series = [("latency", "latency_ratio", 0.8), ("peak RSS", "rss_ratio", 0.6), ("first inference", "first_ratio", 0.5)]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(good) + 2), 4.5))
    width = 0.8 / len(series)
    for k, (name, key, target) in enumerate(series):
        xs = [i + (k - 1) * width for i in range(len(good))]
        bars = ax.bar(xs, [r[key] for r in good], width, label=f"{name} (target ≤ {target})")
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(good)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("nnfuse / ONNX Runtime (lower is better)")
    ax.set_title("nnfuse vs ONNX Runtime")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT_MODELS, help="comma list of zoo names or .onnx paths")
    ap.add_argument("--threads", default=f"1,{os.cpu_count() or 1}", help="comma list (default 1 and all cores)")
    ap.add_argument("--iterations", type=int, default=20, help="timed runs per process")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3, help="alternating A B rounds")
    ap.add_argument("--zoo", default=str(ROOT / "zoo" / "models"))
    ap.add_argument("--out", default=str(ROOT / "out" / "compare" / "PERFORMANCE.md"),
                    help="markdown file; .json and .png are written beside it")
    ap.add_argument("--nnfuse", default=os.environ.get("NNF_BIN", str(ROOT / "build" / "nnfuse")))
    ap.add_argument("--python", default=os.environ.get("NNF_PYTHON", sys.executable),
                    help="Python with onnxruntime, for the ORT processes")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per benchmark process")
    ap.add_argument("--no-o0", dest="o0", action="store_false", help="skip the nnfuse -O0 runs")
    ap.add_argument("--peers", default="onnxruntime",
                    help="comma list of engines to run beside nnfuse: onnxruntime (always, first), openvino")
    ap.add_argument("--no-compiled", dest="compiled", action="store_false",
                    help="skip the first inference from a compiled .nnf file (nnfuse compile)")
    ap.add_argument("--symbolic", action="store_true",
                    help="each model with symbolic batch (and sequence) dims, as dynamic_axes exports")
    ap.add_argument("--dims", default="", help="with --symbolic: symbolic dims to run at, e.g. S=1,B=2")
    args = ap.parse_args(argv)
    try:
        dims = {k.strip(): int(v) for k, v in (d.split("=") for d in args.dims.split(",") if d.strip())}
    except ValueError:
        ap.error("--dims takes NAME=INT,...")
    if args.iterations < 1 or args.rounds < 1 or args.warmup < 0:
        ap.error("--iterations and --rounds must be >= 1, --warmup >= 0")
    threads = sorted({int(t) for t in args.threads.split(",") if t.strip()})
    args.peers = ["onnxruntime"] + [p for p in dict.fromkeys(x.strip() for x in args.peers.split(","))
                                    if p and p != "onnxruntime"]
    if any(p not in PEERS for p in args.peers):
        ap.error(f"--peers takes a comma list of {', '.join(PEERS)}")
    if not os.access(args.nnfuse, os.X_OK):
        print(f"compare: {args.nnfuse} not found; build with `make` or pass --nnfuse", file=sys.stderr)
        return 2
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    zoo = pathlib.Path(args.zoo)
    version = subprocess.run([args.nnfuse, "--version"], capture_output=True, text=True).stdout.split()[-1:]
    meta = {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu_name(), "cores": os.cpu_count(), "nnfuse_version": version[0] if version else "?",
        "ort_version": "?", "rounds": args.rounds, "iterations": args.iterations, "warmup": args.warmup,
        "command": "bench/compare.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "peers": args.peers, "peer_versions": {},
    }
    peaks = measure_peaks(pathlib.Path(args.nnfuse).parent, threads)
    meta["fma_peak_gflops"] = {str(t): g for t, g in peaks.items()}
    rows = []
    with tempfile.TemporaryDirectory(prefix="nnfuse-scoreboard-") as tmpdir:
        tmp = pathlib.Path(tmpdir)
        for name in [m.strip() for m in args.models.split(",") if m.strip()]:
            try:
                model = resolve_model(name, zoo, args.python)
            except subprocess.CalledProcessError as e:
                rows.extend({"model": name, "threads": t, "errors": [f"zoo generation failed: {e}"]} for t in threads)
                continue
            feeds = None
            if args.symbolic:
                model, feeds = symbolic_copy(model, dims, tmp)
            # a symbolic model's FLOPs are not those of the dims it runs at
            gflops = model_gflops(args.nnfuse, model) if peaks and not args.symbolic else None
            # a symbolic model compiles without shapes: little of it would load packed
            compiled = compile_model(args, model, tmp) if args.compiled and not args.symbolic else None
            for t in threads:
                print(f"compare: {model.stem}, {t} thread(s)", file=sys.stderr)
                rows.append(bench_pair(model, t, args, tmp, feeds, compiled))
                add_limit(rows[-1], gflops, peaks.get(t))
    for peer in args.peers:
        meta["peer_versions"][peer] = next((r[peer + "_raw"][0].get("version", "?") for r in rows
                                            if r.get(peer + "_raw")), "?")
    meta["ort_version"] = meta["peer_versions"]["onnxruntime"]
    table = markdown(rows, meta)
    png = out.with_suffix(".png")
    have_png = chart(rows, png)
    write_markdown(out, table, png.name if have_png else "(no chart: matplotlib missing)")
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(table)
    print(f"compare: wrote {out}, {out.with_suffix('.json')}" + (f", {png}" if have_png else ""), file=sys.stderr)
    return 0 if all("latency_ratio" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
