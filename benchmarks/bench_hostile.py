"""Crafted inputs against the reader: peak Python allocation per input byte and CPU seconds.

    python benchmarks/bench_hostile.py [--before DIR] [--timeout S] [NAME ...]

Each input of ``gguf_construct.strategies.hostile.HOSTILE`` (default: the amplification and quadratic classes)
is written to a file and loaded leniently in a fresh process under ``tracemalloc``. ``--before DIR`` also runs
the reader of another checkout (e.g. ``git worktree add /tmp/before b25aa4f``) on the same bytes, so both
columns come from one run. Prints the markdown table of README's "Hostile input" section.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gguf_construct.strategies.hostile import HOSTILE  # noqa: E402

DEFAULT = ["gguf-empty-arrays", "gguf-empty-keys", "gguf-tensor-infos", "st-braces", "ggml-zeros", "st-60k-bad-entries", "gguf-60k-huge-dims", "st-deep-json"]

PROBE = """
import json, sys, time, tracemalloc
import gguf_construct as gc
path = sys.argv[1]
tracemalloc.start()
start = time.process_time()
try:
    f = gc.load(path, strict=False)
    for t in f.tensors.values():
        t.shape
    result = "loaded"
except Exception as e:
    result = getattr(e, "rule", type(e).__name__)
cpu = time.process_time() - start
print(json.dumps({"peak": tracemalloc.get_traced_memory()[1], "cpu": cpu, "result": result}))
"""


def probe(source: Path, path: Path, timeout: float) -> str:
    try:
        out = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, timeout=timeout, cwd=source,
                             env={"PYTHONPATH": str(source), "PATH": "/usr/bin:/bin"})  # fmt: skip
        r = json.loads(out.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return f"over {timeout:.0f} s"
    except (IndexError, ValueError):
        return "crashed"
    return f"{r['peak'] / path.stat().st_size:.1f}×, {r['cpu']:.2f} s, {r['result']}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=DEFAULT)
    ap.add_argument("--before", type=Path, help="another checkout whose reader to measure too")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--quick", action="store_true", help="the two smallest inputs: checks the script")
    args = ap.parse_args()
    if args.quick:
        args.names = sorted(DEFAULT, key=lambda n: len(next(h for h in HOSTILE if h.name == n).make()))[:2]
    by_name = {h.name: h for h in HOSTILE}
    suffix = {"gguf": ".gguf", "safetensors": ".safetensors", "ggml": ".bin", "ggjt": ".bin", "rwkv": ".bin"}
    print("| input | size | " + ("before | " if args.before else "") + "after |")
    print("|---|---:|" + ("---|" if args.before else "") + "---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names:
            h = by_name[name]
            path = Path(tmp) / f"{name}{suffix[h.format]}"
            path.write_bytes(h.make())
            cells = [name, f"{path.stat().st_size / 1e6:.1f} MB"]
            if args.before:
                cells.append(probe(args.before, path, args.timeout))
            cells.append(probe(ROOT, path, args.timeout))
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
