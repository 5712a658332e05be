"""Time gguf_construct.quants.dequantize against gguf-py's gguf.quants.dequantize and ggml's C, type by type.

Both dequantize the same tensor (default 16 Mi values, as 4096-value rows: gguf-py gets the 2-D byte array it
expects, we get the flat bytes). Blocks are random bytes whose half-precision scale fields are replaced by random
finite halves, so every value is a number. The C column is ggml's own ``to_float`` (``ggml_get_type_traits(t).to_float``
from ggml-python's shared library, called through ctypes on one thread: the limit a numpy backend is held to).
Times are the best of ``--repeat`` runs, ours and C's taking turns, then gguf-py's in rounds of their own (the
large temporaries it frees would otherwise cost whichever call follows them fresh pages). Then the peak of memory
allocated during one call (tracemalloc, which sees numpy's buffers), minus the output itself, relative to the
output's size. The "one pass" column is the floor a numpy kernel stands on: the time of a single numpy pass that
writes the same number of float32 values (a uint8 → float32 cast into a preallocated array), measured in the same
rounds; "passes in C's time" is C's whole kernel over that pass. Prints markdown tables.

    PYTHONPATH=. python benchmarks/bench_dequant.py [--size 16Mi] [--repeat 5] [--types q4_0,q6_K] [--workers 1 --clock cpu]
"""

from __future__ import annotations

import argparse
import math
import os
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from gguf_construct.core.tables import GGML_TYPES
from gguf_construct.quants import block_dtype, dequant, dequantize

ROW = 4096


def parse_size(text: str) -> int:
    """``16Mi``, ``1Mi``, ``256Ki`` or a plain number of values."""
    units = {"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30}
    low = text.strip().lower()
    for suffix, factor in units.items():
        if low.endswith(suffix):
            return int(float(low[: -len(suffix)]) * factor)
    return int(low)


def gguf_py_types() -> dict[str, object]:
    """Our type names → gguf-py's enum members, for the types gguf-py can dequantize (F32 excluded: a view)."""
    from gguf import GGMLQuantizationType
    from gguf.quants import _type_traits

    members = {m.name.lower(): m for m in GGMLQuantizationType}
    names = {m.name.lower() for m in _type_traits} | {"f16"}
    return {t.name: members[t.name.lower()] for t in GGML_TYPES.values() if t.name.lower() in names}


def random_tensor(name: str, n_values: int, rng: np.random.Generator) -> np.ndarray:
    """Random blocks of ``name`` holding ``n_values`` values, every f16 field a random finite half."""
    t = GGML_TYPES.lookup(name)
    n_blocks = n_values // t.block_size
    raw = rng.integers(0, 256, n_blocks * t.type_size, dtype=np.uint8)
    blocks = raw.view(block_dtype(t))
    for field, (dt, _) in blocks.dtype.fields.items():
        if dt.base.kind == "f" and dt.base.itemsize == 2:
            shape = blocks[field].shape
            blocks[field] = rng.uniform(-1, 1, size=shape).astype(np.float16)
    return raw


def ggml_to_float(type_id: int) -> Callable[[np.ndarray, int], np.ndarray] | None:
    """ggml's C ``to_float`` for ``type_id`` as a Python function (data, n_values) → float32 values, or None
    when ggml-python is missing or its library has no such type."""
    try:
        import ctypes

        import ggml
    except ImportError:
        return None
    if type_id >= ggml.GGML_TYPE_COUNT:
        return None
    traits = ggml.ggml_get_type_traits(type_id).contents
    if not traits.to_float:
        return None
    to_float = traits.to_float
    as_float = ctypes.POINTER(ctypes.c_float)

    def run(data: np.ndarray, n_values: int) -> np.ndarray:
        out = np.empty(n_values, np.float32)
        to_float(data.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(as_float), n_values)
        return out

    return run


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


CLOCK: Callable[[], float] = time.perf_counter


def best_times(fns: list[Callable[[], object]], repeat: int) -> list[float]:
    """Best time (``CLOCK``: wall, or this process's CPU time with ``--clock cpu``) of each function over
    ``repeat`` rounds; the functions take turns, so that a burst of load from elsewhere hits them alike."""
    best = [math.inf] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = CLOCK()
            fn()
            best[i] = min(best[i], CLOCK() - start)
    return best


def peak_extra(fn: Callable[[], np.ndarray]) -> float:
    """Peak memory allocated during ``fn()`` beyond its result, as a multiple of the result's size."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    result = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return (peak - result.nbytes) / result.nbytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 64 Ki values, one run")
    parser.add_argument("--size", default="16Mi", help="values per tensor (16Mi, 1Mi, 65536 …)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (the best is kept)")
    parser.add_argument("--types", default="", help="comma-separated type names (default: all gguf-py supports)")
    parser.add_argument("--workers", type=int, default=dequant.WORKERS, help="our thread count (1: like for like with C)")
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: this process's CPU time, steadier on a loaded machine (use with --workers 1)",
    )
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    dequant.WORKERS = args.workers

    import gguf.quants

    if args.quick:
        args.size, args.repeat = "64Ki", 1
    n_values = parse_size(args.size)
    n_values -= n_values % ROW
    types = gguf_py_types()
    if args.types:
        types = {k: v for k, v in types.items() if k.lower() in {s.strip().lower() for s in args.types.split(",")}}
    rng = np.random.default_rng(0)
    pass_in, pass_out = rng.integers(0, 256, n_values, dtype=np.uint8), np.empty(n_values, np.float32)
    rows = []
    for name, qtype in types.items():
        t = GGML_TYPES.lookup(name)
        data = random_tensor(name, n_values, rng)
        as_rows = data.reshape(-1, ROW // t.block_size * t.type_size)
        c_fn = ggml_to_float(t.id)
        fns = [lambda d=data, n=name: dequantize(d, n), lambda: np.copyto(pass_out, pass_in, casting="unsafe")]
        if c_fn is not None:
            ours_out = dequantize(data, name)
            if not np.array_equal(ours_out.view(np.uint32), c_fn(data, n_values).view(np.uint32)):
                raise SystemExit(f"{name}: ours differs from ggml's to_float")
            fns.append(lambda d=data, f=c_fn: f(d, n_values))
        with np.errstate(all="ignore"):
            # ours and C take turns; gguf-py runs in rounds of its own after them: its large temporaries, freed
            # just before the next call, would otherwise cost whichever call follows them new pages to fault in
            times = best_times(fns, args.repeat)
            (theirs,) = best_times([lambda d=as_rows, q=qtype: gguf.quants.dequantize(d, q)], args.repeat)
        ours, one_pass = times[:2]
        c_time = times[2] if c_fn is not None else math.nan
        memory = peak_extra(lambda d=data, n=name: dequantize(d, n))
        rows.append((name, ours, theirs, c_time, memory, one_pass))
        print(f"  {name}: {ours * 1e3:.1f} ms vs gguf-py {theirs * 1e3:.1f} ms, C {c_time * 1e3:.1f} ms", flush=True)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"\n{n_values} values ({n_values / (1 << 20):g} Mi) per tensor, best of {args.repeat}; ours on {dequant.WORKERS} thread(s), "
        f"C on 1, {args.clock} time; {os.cpu_count()} CPUs, load average {load:.2f}\n"
    )
    print(
        "| type | ours (ms) | gguf-py (ms) | ggml C, 1 thread (ms) | vs gguf-py | vs C | peak extra memory / output "
        "| one numpy pass (ms) | passes in C's time | ours in passes |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, ours, theirs, c_time, memory, one_pass in rows:
        print(
            f"| {name} | {ours * 1e3:.1f} | {theirs * 1e3:.1f} | {c_time * 1e3:.1f} | "
            f"{theirs / ours:.2f}× | {c_time / ours:.2f}× | {memory:.2f} "
            f"| {one_pass * 1e3:.1f} | {c_time / one_pass:.1f} | {ours / one_pass:.1f} |"
        )
    vs_py = [r[2] / r[1] for r in rows]
    vs_c = [r[3] / r[1] for r in rows if not math.isnan(r[3])]
    print(
        f"\ngeometric mean vs gguf-py {geomean(vs_py):.2f}× (slowest {min(vs_py):.2f}×); "
        f"vs C {geomean(vs_c):.2f}× over {len(vs_c)} types (slowest {min(vs_c, default=math.nan):.2f}×); "
        f"peak extra memory at most {max(r[4] for r in rows):.2f}× the output"
    )


if __name__ == "__main__":
    main()
