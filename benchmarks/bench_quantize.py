"""Time gguf_construct's numpy quantizers against ggml's C (``ggml_quantize_chunk`` through ggml-python: one
thread) and gguf-py's numpy ``gguf.quants.quantize`` where gguf-py can quantize the type.

Every quantizer gets the same float32 tensor of normal values (default 1 Mi values in rows of 4096); the output
of ours is also checked byte for byte against ggml's in the same run. Times are the best of ``--repeat`` rounds, in
which ours, C's and gguf-py's take turns. Prints a markdown table: times in ms, and the ratios ours/ggml-C and gguf-py/ours.

    PYTHONPATH=. python benchmarks/bench_quantize.py [--size 1Mi] [--repeat 3] [--types q4_0,q4_K] [--imatrix]
    PYTHONPATH=. python benchmarks/bench_quantize.py --smoke      # a few small tensors, seconds
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gguf_construct.quants.blocks import resolve  # noqa: E402
from gguf_construct.quants.quantize import REQUIRES_IMATRIX, WEIGHTED, quantize, supported  # noqa: E402
from tests.oracles import ggml_quantize  # noqa: E402

ROW = 4096


def gguf_py_quantizer(name: str):
    """gguf-py's quantize for ``name``, or None when gguf-py cannot quantize it."""
    try:
        import gguf
        from gguf.quants import quantize as gq
    except ImportError:
        return None
    member = {m.name.lower(): m for m in gguf.GGMLQuantizationType}.get(name.lower())
    if member is None:
        return None

    def run(x: np.ndarray) -> bytes:
        return gq(x, member).tobytes()

    try:
        run(np.zeros((1, 256), np.float32))
    except NotImplementedError:
        return None
    except Exception:  # noqa: BLE001  (gguf-py raises its own types for types it lacks)
        return None
    return run


def best(fns: list, repeat: int) -> list[float]:
    """The best time of each of ``fns`` over ``repeat`` rounds, the functions taking turns within a round (so a
    burst of load on the shared machine hits all of them alike)."""
    times = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[i] = min(times[i], time.perf_counter() - t0)
    return times


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1Mi")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--types", default="")
    ap.add_argument("--imatrix", action="store_true", help="quantize with an importance matrix (the types that use one)")
    ap.add_argument("--quick", "--smoke", dest="smoke", action="store_true", help="64 Ki values, one run: checks the script works")
    args = ap.parse_args(argv)
    text = args.size.lower()
    size = (
        int(float(text[:-2]) * (1 << 20))
        if text.endswith("mi")
        else int(float(text[:-2]) * (1 << 10))
        if text.endswith("ki")
        else int(text)
    )
    if args.smoke:
        size, args.repeat = 1 << 16, 1
    names = [n for n in args.types.split(",") if n] or sorted(n for n in supported() if n != "f32")
    import ggml

    newer = [n for n in names if resolve(n).id >= ggml.GGML_TYPE_COUNT]  # the oracle's libggml predates them
    names = [n for n in names if n not in newer]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((max(1, size // ROW), ROW)).astype(np.float32)
    qw = rng.uniform(0, 4, ROW).astype(np.float32)
    print(f"{x.size} values ({x.shape[0]} rows of {ROW}){', with an importance matrix' if args.imatrix else ''}, best of {args.repeat}\n")
    print("| type | ours (ms) | ggml C (ms) | ours / C | gguf-py (ms) | gguf-py / ours | bit-exact |")
    print("|---|---:|---:|---:|---:|---:|:---:|")
    for name in names:
        w = qw if (args.imatrix and name in WEIGHTED) or name in REQUIRES_IMATRIX else None  # IQ2_XXS/XS need one
        tid = resolve(name).id
        gp = gguf_py_quantizer(name) if w is None else None
        fns = [lambda name=name, w=w: quantize(x, name, imatrix=w), lambda tid=tid, w=w: ggml_quantize(x, tid, w)]
        ours_t, c_t, *gp_ts = best(fns + ([lambda gp=gp: gp(x)] if gp else []), args.repeat)
        exact = quantize(x, name, imatrix=w) == ggml_quantize(x, tid, w)
        gp_t = gp_ts[0] if gp_ts else None
        gp_cells = f"{gp_t * 1e3:.1f} | {gp_t / ours_t:.2f}x" if gp_t else "– | –"
        print(f"| {name} | {ours_t * 1e3:.1f} | {c_t * 1e3:.1f} | {ours_t / c_t:.1f}x | {gp_cells} | {'yes' if exact else 'NO'} |")
    if newer:
        print(f"\nnot timed: {', '.join(newer)}, newer than ggml-python's libggml (tests/quants/test_quantize.py checks them)")


if __name__ == "__main__":
    main()
