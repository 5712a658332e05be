"""Time the safetensors reader against the safetensors library, and MLX dequantization against ``mx.dequantize``.

1. Open a safetensors file and touch every tensor: ``gguf_construct.load`` (memory map, zero-copy views) against
   ``safetensors.safe_open(framework="numpy")`` + ``get_tensor`` (which copies each tensor out of the file), on a
   file of many small tensors and a file of a few large ones. Also the peak Python allocation of each
   (tracemalloc), which shows who copies the data.
2. Dequantize a 16 Mi-value tensor for each MLX mode Ollama writes (int4/int8 affine, group 64; nvfp4; mxfp4;
   mxfp8), as ``load(blob).tensors[name].to_numpy(mlx_rounding=True)`` does, against ``mx.dequantize`` on the CPU
   (evaluated with ``mx.eval``, then copied to numpy like ours).

Best of ``--repeat`` runs, ours and theirs taking turns; compare ratios, not times (a shared 2-core machine).

    PYTHONPATH=. python benchmarks/bench_safetensors.py [--repeat 5] [--size 16Mi]
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
from bench_read import best
from safetensors import safe_open
from safetensors.numpy import save_file

import gguf_construct as gc
from gguf_construct.quants import mlx as mq

MODES = [("int4", "affine", 4, 64), ("int8", "affine", 8, 64), ("nvfp4", "nvfp4", 4, 16), ("mxfp4", "mxfp4", 4, 32), ("mxfp8", "mxfp8", 8, 32)]


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
    with safe_open(str(path), framework="numpy") as f:
        return sum(int(f.get_tensor(k).reshape(-1).view(np.uint8)[:1].sum()) for k in f.keys())  # noqa: SIM118


def bench_open(folder: Path, repeat: int) -> list[str]:
    rng = np.random.default_rng(0)
    files = {
        "2000 tensors × 16 KiB": {f"layers.{i}.w": rng.standard_normal(4096, dtype=np.float32) for i in range(2000)},
        "8 tensors × 32 MiB": {f"w{i}": rng.standard_normal(8 << 20, dtype=np.float32) for i in range(8)},
    }
    rows = ["| file | ours: open + touch every tensor | safetensors safe_open + get_tensor | speed-up | our peak allocation | theirs |", "|---|---:|---:|---:|---:|---:|"]
    for label, tensors in files.items():
        path = folder / "bench.safetensors"
        save_file(tensors, str(path))
        ours, theirs = [], []
        for _ in range(repeat):
            ours.append(best(lambda p=path: ours_touch(p), 1))
            theirs.append(best(lambda p=path: theirs_touch(p), 1))
        o, t = min(ours), min(theirs)
        rows.append(f"| {label} | {o * 1e3:.1f} ms | {t * 1e3:.1f} ms | {t / o:.1f}× | {human(peak(lambda p=path: ours_touch(p)))} | {human(peak(lambda p=path: theirs_touch(p)))} |")
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

        o, t = [], []
        for _ in range(repeat):
            o.append(best(ours, 1))
            t.append(best(theirs, 1))
        exact = np.array_equal(ours(), theirs(), equal_nan=True)
        rows.append(f"| {name} (group {group}) | {min(o) * 1e3:.0f} | {min(t) * 1e3:.0f} | {min(o) / min(t):.2f} | {'yes' if exact else 'NO'} |")
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
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("\n".join(bench_open(Path(tmp), args.repeat)))
    print()
    print("\n".join(bench_dequant(parse_size(args.size), args.repeat)))


if __name__ == "__main__":
    main()
