"""Header work at real sizes: what ``info``, ``validate``, ``plan --json``, ``diff A A``, ``split --dry-run``, ``scan
DIR`` and ``gc.load`` plus reading one tensor cost on 40–580 GB models, locally and over the loopback HTTP server, against gguf-py's
``GGUFReader`` (and gguf-parser-go where its binary is on PATH) on the same files.

The models are sparse files (``tests/sparse_models.py``): the header real (every key and tensor info of a
Llama-3-70B-, Llama-3.1-405B-, DeepSeek-V3- or Kimi-K2-like model, a 129k–201k-token BPE vocabulary with its
merges, a chat template), the tensor data a hole. ``zeros`` leaves the data a hole; ``random`` writes 1 GiB of
random bytes at the start of the data (where a reader that walks past the header lands); ``mixed`` writes a 16 MiB
random stripe every GiB of data. They cost a few GB of disk at most, whatever their size.

Each figure is a fresh process: its wall time (median of ``--repeat``) and its own peak resident set (``wait4``'s
``ru_maxrss``, the largest of the runs), with bytecode caching allowed as an installed package runs. Remote rows
also give the requests made and the bytes the server sent.

    PYTHONPATH=. python benchmarks/bench_scale.py [--quick] [--repeat 5] [--shapes llama70b,llama405b]
        [--fills zeros,random,mixed] [--dir DIR] [--json]

``--quick``: the 40 GB model with its data a hole, one run of the local header commands (CI runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.http_testserver import TestServer  # noqa: E402
from tests.peak_rss import run_measured  # noqa: E402
from tests.sparse_models import SHAPES, write_sparse  # noqa: E402

LOAD_ONE = """
import sys, gguf_construct as gc
f = gc.load(sys.argv[1])
name = next(n for n in f.tensors if n.endswith("attn_norm.weight"))
print(float(f.tensors[name].to_numpy().sum()))
"""
GGUF_PY = """
import sys
from gguf import GGUFReader
r = GGUFReader(sys.argv[1])
print(len(r.tensors), len(r.fields))
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    return env


def run(argv: list[str], timeout: float = 600) -> tuple[float, int, int]:
    """One fresh process: wall seconds, its own peak RSS in bytes, its exit code (-9 when killed at ``timeout``)."""
    done = run_measured(argv, timeout=timeout, env=_env())
    return done.seconds, done.peak_rss, done.returncode


def measure(argv: list[str], repeat: int) -> dict:
    """Median wall time and largest peak RSS over ``repeat`` runs (after one untimed run that warms the caches)."""
    run(argv)
    runs = [run(argv) for _ in range(repeat)]
    return {
        "seconds": statistics.median(r[0] for r in runs),
        "rss": max(r[1] for r in runs),
        "exit": sorted({r[2] for r in runs}),
    }


def commands(path: Path, folder: Path, scratch: Path) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "gguf_construct.cli.main"]
    out = scratch / "scan.jsonl"
    return {
        "info": [*cli, "info", str(path)],
        "validate": [*cli, "validate", str(path)],
        "plan --json": [*cli, "plan", str(path), "--json"],
        "diff A A": [*cli, "diff", str(path), str(path)],
        "split --dry-run": [*cli, "split", str(path), "--dry-run", "--max-size", "4G"],
        "scan DIR": ["sh", "-c", f'rm -f "{out}"; exec "$0" "$@"', *cli, "scan", str(folder), "-o", str(out)],
        "load + one tensor": [sys.executable, "-c", LOAD_ONE, str(path)],
    }


def peers(path: Path) -> dict[str, list[str]]:
    out = {}
    try:
        import gguf  # noqa: F401
    except ImportError:
        pass
    else:
        out["gguf-py GGUFReader"] = [sys.executable, "-c", GGUF_PY, str(path)]
    parser = shutil.which("gguf-parser")
    if parser:
        out["gguf-parser-go"] = [parser, "--path", str(path), "--skip-estimate", "--json"]
    return out


def remote(path: Path, repeat: int) -> dict[str, dict]:
    """``info`` and ``plan --json`` of the file served by the loopback server: time, RSS, requests, bytes sent."""
    cli = [sys.executable, "-m", "gguf_construct.cli.main"]
    rows = {}
    with TestServer() as server:
        url = server.add_file("/" + path.name, path)
        for label, argv in {"info URL": [*cli, "info", url], "plan URL --json": [*cli, "plan", url, "--json"]}.items():
            server.reset_counts()
            row = measure(argv, repeat)
            served = server.counts
            runs = repeat + 1
            row["requests"] = served.requests // runs
            row["fetched"] = served.bytes // runs
            rows[label] = row
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--shapes", default="llama70b,llama405b,deepseek-v3,kimi-k2")
    ap.add_argument("--fills", default="zeros,random,mixed")
    ap.add_argument("--dir", help="where to write the sparse files (default: a temporary folder, removed after)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.repeat, a.shapes, a.fills = 1, "llama70b", "zeros"
    base = Path(a.dir or tempfile.mkdtemp(prefix="bench-scale-"))
    results = []
    try:
        for shape in a.shapes.split(","):
            f = SHAPES[shape][0]()
            for fill in a.fills.split(","):
                folder = base / f"{shape}-{fill}"
                folder.mkdir(parents=True, exist_ok=True)
                path = folder / f"{shape}-{fill}.gguf"
                size = write_sparse(path, f, fill)
                scratch = base / "scratch"
                scratch.mkdir(exist_ok=True)
                todo = commands(path, folder, scratch)
                if a.quick:
                    todo = {k: v for k, v in todo.items() if k in ("info", "validate", "plan --json")}
                rows = {label: measure(argv, a.repeat) for label, argv in todo.items()}
                if not a.quick:
                    rows.update({label: measure(argv, a.repeat) for label, argv in peers(path).items()})
                    if fill == "random":
                        rows.update(remote(path, a.repeat))
                results.append({"shape": shape, "fill": fill, "bytes": size, "rows": rows})
                report(results[-1])
                path.unlink()
    finally:
        if not a.dir:
            shutil.rmtree(base, ignore_errors=True)
    summary(results)
    if a.json:
        json.dump(results, sys.stdout, indent=1)
        print()
    failed = [(r["shape"], r["fill"], k) for r in results for k, v in r["rows"].items() if v["exit"] != [0] and k != "diff A A"]
    if failed:
        sys.exit(f"commands failed: {failed}")


def report(r: dict) -> None:
    print(f"\n{r['shape']} ({r['bytes'] / 1e9:.0f} GB), data {r['fill']}: {SHAPES[r['shape']][1]}")
    print(f"  {'command':<22} {'wall s':>7} {'peak RSS MB':>12} {'exit':>5} {'requests':>9} {'fetched MB':>11}")
    for label, v in r["rows"].items():
        extra = f" {v['requests']:>9} {v['fetched'] / 1e6:>11.1f}" if "requests" in v else ""
        print(f"  {label:<22} {v['seconds']:>7.2f} {v['rss'] / 1e6:>12.0f} {','.join(map(str, v['exit'])):>5}{extra}")


#: the header-only commands held to the goals: at most 1 s and 150 MB, whatever the size and the data
GOAL_COMMANDS = ("info", "validate", "plan --json")
GOAL_SECONDS, GOAL_RSS, GOAL_SPREAD = 1.0, 150e6, 0.20


def summary(results: list[dict]) -> None:
    """One markdown table (a row per command, a column per file: median seconds / peak MB) and the goals."""
    if not results:
        return
    columns = [(r["shape"], r["fill"]) for r in results]
    labels = list(dict.fromkeys(k for r in results for k in r["rows"]))
    print("\n| command | " + " | ".join(f"{s} ({r['bytes'] / 1e9:.0f} GB), {f}" for (s, f), r in zip(columns, results)) + " |")
    print("|---|" + "---:|" * len(results))
    for label in labels:
        cells = []
        for r in results:
            v = r["rows"].get(label)
            cell = "" if v is None else f"{v['seconds']:.2f} s, {v['rss'] / 1e6:.0f} MB"
            if v is not None and "requests" in v:
                cell += f", {v['requests']} req, {v['fetched'] / 1e6:.1f} MB read"
            cells.append(cell)
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()
    for r in results:
        rows, ref = r["rows"], r["rows"].get("gguf-py GGUFReader")
        for label in GOAL_COMMANDS:
            v = rows.get(label)
            if v is None:
                continue
            ok = v["seconds"] <= GOAL_SECONDS and v["rss"] <= GOAL_RSS
            versus = ""
            if ref:
                speed, memory = ref["seconds"] / v["seconds"], v["rss"] / ref["rss"]
                met = "met" if speed >= 10 and memory <= 1 / 3 else "NOT met"
                versus = f"; vs gguf-py {speed:.0f}x faster, {memory:.2f} of its memory ({met})"
            state = "met" if ok else "NOT met"
            print(f"goal {r['shape']}/{r['fill']} {label}: {v['seconds']:.2f} s, {v['rss'] / 1e6:.0f} MB ({state}){versus}")
    by_size: dict[tuple[str, str], list[float]] = {}
    for r in results:
        for label in GOAL_COMMANDS:
            if label in r["rows"]:
                by_size.setdefault((r["fill"], label), []).append(r["rows"][label]["seconds"])
    for (fill, label), times in by_size.items():
        if len(times) > 1:
            spread = max(times) / min(times) - 1
            print(f"goal spread across sizes, {fill} {label}: {spread:.0%} ({'met' if spread <= GOAL_SPREAD else 'NOT met'})")


if __name__ == "__main__":
    main()
