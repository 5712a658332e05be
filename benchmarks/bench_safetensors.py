"""Time the safetensors reader against the safetensors library, and MLX dequantization against ``mx.dequantize``.

1. Open a safetensors file and read the first element of every tensor: ``gguf_construct.load`` (memory map,
   zero-copy views) against the safetensors library, on a file of many small tensors and a file of a few large
   ones, two ways: like for like, ``safe_open(framework="numpy").get_slice(k)[:1]`` (reads one element too), and
   lazy vs eager, ``get_tensor(k)`` (copies each whole tensor out of the file: what a caller who wants the
   array gets, not the same work as our view). Also the peak Python allocation of each (tracemalloc), which
   shows who copies the data.
2. Dequantize a 16 Mi-value tensor for each MLX mode Ollama writes (int4/int8 affine, group 64; nvfp4; mxfp4;
   mxfp8), as ``load(blob).tensors[name].to_numpy(mlx_rounding=True)`` does, against ``mx.dequantize`` on the CPU
   (evaluated with ``mx.eval``, then copied to numpy like ours).

Best of ``--repeat`` runs, ours and theirs taking turns after a warm-up run each; compare ratios, not times (a
shared 2-core machine). ``--quick`` is a smoke run (small files, 64 Ki values, one run).

    PYTHONPATH=.:benchmarks python benchmarks/bench_safetensors.py [--repeat 5] [--size 16Mi] [--quick] [--open-only]
"""

from __future__ import annotations

import argparse
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import mlx.core as mx
import numpy as np
from bench_dequant import parse_size
from bench_read import compare
from safetensors import safe_open
from safetensors.numpy import save_file

import gguf_construct as gc
from gguf_construct.quants import mlx as mq

MODES = [
    ("int4", "affine", 4, 64),
    ("int8", "affine", 8, 64),
    ("nvfp4", "nvfp4", 4, 16),
    ("mxfp4", "mxfp4", 4, 32),
    ("mxfp8", "mxfp8", 8, 32),
]


def peak(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    fn()
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return top


def ours_touch(path: Path) -> int:
    f = gc.load(path)
    return sum(int(t.data[:1].sum()) for t in f.tensors.values())


def theirs_touch(path: Path) -> int:
    """get_tensor: the whole tensor copied out of the file, then its first byte."""
    with safe_open(str(path), framework="numpy") as f:
        return sum(int(f.get_tensor(k).reshape(-1).view(np.uint8)[:1].sum()) for k in f.keys())  # noqa: SIM118


def theirs_slice(path: Path) -> int:
    """get_slice(k)[:1]: the library's lazy access, one element read (our tensors here are 1-D)."""
    with safe_open(str(path), framework="numpy") as f:
        return sum(int(f.get_slice(k)[:1].view(np.uint8)[:1].sum()) for k in f.keys())  # noqa: SIM118


def bench_open(folder: Path, repeat: int, quick: bool = False) -> list[str]:
    rng = np.random.default_rng(0)
    count, small, big = (20, 4096, 1 << 18) if quick else (2000, 4096, 8 << 20)
    files = {
        f"{count} tensors × {human(small * 4)}": {f"layers.{i}.w": rng.standard_normal(small, dtype=np.float32) for i in range(count)},
        f"8 tensors × {human(big * 4)}": {f"w{i}": rng.standard_normal(big, dtype=np.float32) for i in range(8)},
    }
    rows = [
        "| file | safetensors library | kind | ours: open + first element of every "
        "tensor | theirs | speed-up | our peak allocation | theirs |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for label, tensors in files.items():
        path = folder / "bench.safetensors"
        save_file(tensors, str(path))
        ours_peak = human(peak(lambda p=path: ours_touch(p)))
        for name, kind, theirs in (
            ("safe_open + get_slice(k)[:1]", "like for like", theirs_slice),
            ("safe_open + get_tensor(k)", "lazy vs eager (copy)", theirs_touch),
        ):
            o, t = compare(lambda p=path: ours_touch(p), lambda p=path, fn=theirs: fn(p), repeat)
            rows.append(
                f"| {label} | {name} | {kind} | {o * 1e3:.1f} ms | {t * 1e3:.1f} ms | {t / o:.1f}× | "
                f"{ours_peak} | {human(peak(lambda p=path, fn=theirs: fn(p)))} |"
            )
    return rows


def bench_dequant(n_values: int, repeat: int) -> list[str]:
    rng = np.random.default_rng(1)
    w = mx.array(rng.normal(0, 0.05, (n_values // 4096, 4096)).astype(np.float32)).astype(mx.bfloat16)
    rows = ["| mode | ours (ms) | mx.dequantize (ms) | ours / theirs | bit-exact |", "|---|---:|---:|---:|---|"]
    for name, mode, bits, group in MODES:
        parts = mx.quantize(w, group_size=group, bits=bits, mode=mode)
        q, s, b = parts[0], parts[1], parts[2] if mode == "affine" else None
        args = (np.array(q), raw(s), None if b is None else raw(b))

        def ours(args=args, mode=mode, bits=bits, group=group):
            return mq.dequantize_mlx(mode, *args, bits=bits, group_size=group, scale_dtype="BF16", mlx_rounding=True)

        def theirs(q=q, s=s, b=b, mode=mode, bits=bits, group=group):
            out = mx.dequantize(q, s, b, group_size=group, bits=bits, mode=mode).astype(mx.float32)
            mx.eval(out)
            return np.array(out)

        o, t = compare(ours, theirs, repeat)
        exact = np.array_equal(ours(), theirs(), equal_nan=True)
        rows.append(f"| {name} (group {group}) | {o * 1e3:.0f} | {t * 1e3:.0f} | {o / t:.2f} | {'yes' if exact else 'NO'} |")
    return rows


def raw(a: mx.array) -> np.ndarray:
    return np.array(a.view(mx.uint16)) if a.dtype == mx.bfloat16 else np.array(a)


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--size", default="16Mi", help="values per dequantized tensor")
    ap.add_argument("--quick", action="store_true", help="smoke run: small files, 64 Ki values, one run")
    ap.add_argument("--open-only", action="store_true", help="only the open table (no MLX dequantization)")
    args = ap.parse_args()
    repeat = 1 if args.quick else args.repeat
    with tempfile.TemporaryDirectory() as tmp:
        print("\n".join(bench_open(Path(tmp), repeat, args.quick)))
    if args.open_only:
        return
    print()
    print("\n".join(bench_dequant(parse_size("64Ki" if args.quick else args.size), repeat)))


if __name__ == "__main__":
    main()
