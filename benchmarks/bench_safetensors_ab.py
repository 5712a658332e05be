"""Before/after for the safetensors open: another checkout's ``gguf_construct`` and this one, each against the
safetensors library, on a file of many small tensors (the like-for-like row of ``bench_safetensors.py``).

Each measurement runs in a fresh process with one checkout first on ``sys.path`` (two versions of the package
cannot share a process: their lazy imports resolve through ``sys.modules``), and times the library in the same
process, taking turns; the rounds alternate between the checkouts, so a burst of load from other jobs hits
both. Best of all rounds per column; the ratio is library / ours (above 1: ours is faster).

    git worktree add /tmp/before <commit>     # or: git archive <commit> | tar -x -C /tmp/before
    python benchmarks/bench_safetensors_ab.py /tmp/before [--tensors 2000] [--rounds 5] [--repeat 10]
    python benchmarks/bench_safetensors_ab.py --quick     # this checkout against itself, 50 tensors: checks the script
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLUMNS = ("open + first element", "gc.load", "gc.load(strict=False)", "library: safe_open + get_slice(k)[:1]")


def measure(path: str, repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` seconds for each column, in this process (whatever ``gguf_construct`` it imports)."""
    import numpy as np
    from safetensors import safe_open

    import gguf_construct as gc

    def touch():
        f = gc.load(path)
        return sum(int(t.data[:1].sum()) for t in f.tensors.values())

    def library():
        with safe_open(path, framework="numpy") as f:
            return sum(int(f.get_slice(k)[:1].view(np.uint8)[:1].sum()) for k in f.keys())  # noqa: SIM118

    fns = dict(zip(COLUMNS, (touch, lambda: gc.load(path), lambda: gc.load(path, strict=False), library)))
    if touch() != library():
        raise SystemExit("ours and the library read different first bytes")
    best = dict.fromkeys(COLUMNS, math.inf)
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path, nargs="?", help="root of the other checkout")
    ap.add_argument("--tensors", type=int, default=2000, help="tensors of 4096 float32 values (16 KiB)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.repeat)))
        return
    if args.quick:
        args.before, args.tensors, args.rounds, args.repeat = HERE.parent, 50, 1, 2
    if args.before is None:
        ap.error("give the other checkout's root (or --quick)")
    import numpy as np
    from safetensors.numpy import save_file

    trees = {"before": args.before.resolve(), "after": HERE.parent}
    best = {tree: dict.fromkeys(COLUMNS, math.inf) for tree in trees}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "many.safetensors")
        rng = np.random.default_rng(0)
        save_file({f"layers.{i}.w": rng.standard_normal(4096, dtype=np.float32) for i in range(args.tensors)}, path)
        for _ in range(args.rounds):
            for tree, root in trees.items():
                env = dict(os.environ, PYTHONPATH=str(root))
                out = subprocess.run(
                    [sys.executable, __file__, "--measure", path, "--repeat", str(args.repeat)],
                    env=env,
                    cwd=root,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                for name, seconds in json.loads(out.stdout).items():
                    best[tree][name] = min(best[tree][name], seconds)
    print(f"{args.tensors} tensors × 16 KiB, best of {args.rounds} rounds × {args.repeat} runs (ms; × = library / ours)\n")
    print("| checkout | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    for tree, row in best.items():
        lib = row[COLUMNS[-1]]
        cells = [f"{row[c] * 1e3:.1f} ({lib / row[c]:.2f}×)" for c in COLUMNS[:-1]] + [f"{lib * 1e3:.1f}"]
        print(f"| {tree} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
