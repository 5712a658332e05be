"""Before/after for kernel work: dequantize with another checkout's package and with this one, and ggml's C, in turns.

Both packages are imported into one process (the other checkout's first, under its own module objects), so the
two versions and C run on the same tensors, one after the other, in every round: a burst of load from other jobs
hits all three alike. Checks that the new output equals C's bit for bit. Prints a markdown table.

    git worktree add /tmp/before <commit>
    PYTHONPATH=. python benchmarks/bench_dequant_ab.py /tmp/before [--size 4Mi] [--repeat 9] [--workers 1] [--types q4_K,q8_0]
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
import time
from pathlib import Path
from types import ModuleType

import numpy as np
from bench_dequant import geomean, ggml_to_float, gguf_py_types, parse_size, random_tensor


def load_dequant(root: Path) -> ModuleType:
    """``gguf_construct.quants.dequant`` of the checkout at ``root``, as a fresh module tree."""
    for name in [m for m in sys.modules if m == "gguf_construct" or m.startswith("gguf_construct.")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    try:
        return importlib.import_module("gguf_construct.quants.dequant")
    finally:
        sys.path.pop(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, nargs="?", help="root of the other checkout")
    parser.add_argument("--quick", action="store_true", help="this checkout against itself, 64 Ki values, 2 types: checks the script")
    parser.add_argument("--size", default="4Mi")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--workers", type=int, default=1, help="1: CPU time of this process; more: wall time")
    parser.add_argument("--types", default="")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    if args.quick:
        args.before, args.size, args.repeat, args.types = args.before or here, "64Ki", 1, args.types or "q4_K,q8_0"
    elif args.before is None:
        parser.error("name the other checkout (or --quick)")

    old = load_dequant(args.before.resolve())
    new = load_dequant(here)
    if Path(old.__file__).resolve() == Path(new.__file__).resolve() and not args.quick:
        raise SystemExit("both checkouts are the same")
    from gguf_construct.core.tables import GGML_TYPES

    old.WORKERS = new.WORKERS = args.workers
    clock = time.process_time if args.workers == 1 else time.perf_counter
    n_values = parse_size(args.size)
    names = list(gguf_py_types())
    if args.types:
        wanted = {s.strip().lower() for s in args.types.split(",")}
        names = [n for n in names if n.lower() in wanted]
    rng = np.random.default_rng(0)
    rows = []
    for name in names:
        t = GGML_TYPES.lookup(name)
        data = random_tensor(name, n_values - n_values % t.block_size, rng)
        n = data.size // t.type_size * t.block_size
        c_fn = ggml_to_float(t.id)
        if c_fn is None:
            continue
        with np.errstate(all="ignore"):
            if not np.array_equal(new.dequantize(data, name).view(np.uint32), c_fn(data, n).view(np.uint32)):
                raise SystemExit(f"{name}: new output differs from ggml's to_float")
            fns = [
                lambda f=c_fn, d=data, k=n: f(d, k),
                lambda d=data, k=name: old.dequantize(d, k),
                lambda d=data, k=name: new.dequantize(d, k),
            ]
            best = [math.inf] * 3
            for _ in range(args.repeat):
                for i, fn in enumerate(fns):
                    start = clock()
                    fn()
                    best[i] = min(best[i], clock() - start)
        rows.append((name, *best))
        print(f"  {name}: C {best[0] * 1e3:.2f} ms, before {best[1] * 1e3:.2f} ms, after {best[2] * 1e3:.2f} ms", flush=True)

    print(
        f"\n{n_values} values per tensor, best of {args.repeat}, {args.workers} worker(s), {'CPU' if args.workers == 1 else 'wall'} time\n"
    )
    print("| type | ggml C (ms) | before (ms) | after (ms) | speed-up | before vs C | after vs C |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, c, before, after in rows:
        print(
            f"| {name} | {c * 1e3:.2f} | {before * 1e3:.2f} | {after * 1e3:.2f} | "
            f"{before / after:.2f}× | {c / before:.2f}× | {c / after:.2f}× |"
        )
    print(
        f"\nGeometric mean speed-up {geomean([r[2] / r[3] for r in rows]):.2f}×; against "
        f"C {geomean([r[1] / r[2] for r in rows]):.2f}× before "
        f"(slowest {min(r[1] / r[2] for r in rows):.2f}×), {geomean([r[1] / r[3] for r in rows]):.2f}× "
        f"after (slowest {min(r[1] / r[3] for r in rows):.2f}×)."
    )


if __name__ == "__main__":
    main()
