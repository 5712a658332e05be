"""How cost grows with the work: parse time against vocabulary size, open time against tensor count, and
hash/set time against file size. Each should be linear; the table gives the cost per unit at every size and the
plot (``--plot``, needs the ``bench`` extra: matplotlib) shows it on log-log axes beside a slope-1 line.

    PYTHONPATH=. python benchmarks/bench_scaling.py [--smoke] [--gib 1,3,10] [--plot benchmarks/scaling.png]

Sizes: vocabularies of 10k, 100k and 1M strings (as many merges; synthetic, like bench_read.py's), files of 1k,
10k and 100k tensor infos, files of 1, 3 and 10 GiB of tensor data (``--gib``; made with our writer in a
temporary folder, deleted afterwards). ``--smoke`` runs tiny sizes in seconds, to check the script itself.
In-process figures (parse, open) are the least CPU time of ``--repeat`` runs; hash and set run as processes
(bench_stream.py's way) and are wall times.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_read import ggml_open, make_vocab, ours_full  # noqa: E402
from bench_stream import make_file, timed, warm  # noqa: E402

from gguf_construct import load, new  # noqa: E402


def best(fn, repeat: int) -> float:
    """Least CPU time of this process over ``repeat`` runs: steadier than wall time on a shared machine, and the
    same thing for single-threaded work."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def many_tensors(path: Path, n: int) -> None:
    """A file of ``n`` tensor infos (tiny f32 tensors named like a model's)."""
    f = new()
    f.metadata["general.architecture"] = "llama"
    one = np.zeros(8, dtype=np.float32)
    for i in range(n):
        f.tensors.add(f"blk.{i // 16}.t{i % 16}.weight", one)
    f.save(path)


def open_rows(
    tmp: Path, kind: str, sizes: list[int], make, variants: dict[str, Callable[[Path], object]], repeat: int
) -> list[tuple[str, int, float]]:
    """Per size ``n``: a file made by ``make(path, n)``, each of our ``variants`` timed on it, then ggml's C reader."""
    rows = []
    for n in sizes:
        path = tmp / f"{kind}-{n}.gguf"
        make(path, n)
        rows += [(label, n, best(lambda p=path, fn=fn: fn(p), repeat)) for label, fn in variants.items()]
        c_open = ggml_open(path)
        if c_open is not None:
            rows.append(("ggml C gguf_init_from_file", n, best(c_open, repeat)))
        path.unlink()
        print(f"  {kind} {n}: done", flush=True)
    return rows


def vocab_rows(tmp: Path, sizes: list[int], repeat: int) -> list[tuple[str, int, float]]:
    variants = {"full parse, every string materialised": ours_full, "strict load()": load}
    return open_rows(tmp, "vocab", sizes, lambda path, n: make_vocab(path, n_tokens=n, n_merges=n), variants, repeat)


def tensor_rows(tmp: Path, counts: list[int], repeat: int) -> list[tuple[str, int, float]]:
    variants = {"open (strict=False)": lambda p: load(p, strict=False), "strict load()": load}
    return open_rows(tmp, "tensors", counts, many_tensors, variants, repeat)


def file_rows(tmp: Path, gibs: list[float], repeat: int) -> list[tuple[str, float, float]]:
    py = sys.executable
    rows = []
    for gib in gibs:
        src = tmp / "model.gguf"
        out = tmp / "out.gguf"
        make_file(src, int(gib * (1 << 30)))
        warm(src)
        cmds = {
            "hash": [py, "-m", "gguf_construct.cli.main", "hash", str(src)],
            "set one key": [py, "-m", "gguf_construct.cli.main", "set", str(src), "general.name", "renamed", "-o", str(out)],
            "cp": ["cp", str(src), str(out)],
        }
        for label, cmd in cmds.items():
            wall = min(timed(cmd, tmp)[0] for _ in range(repeat) if not out.unlink(missing_ok=True))
            rows.append((label, src.stat().st_size / (1 << 30), wall))
        src.unlink()
        out.unlink(missing_ok=True)
        print(f"  {gib:g} GiB: done", flush=True)
    return rows


def table(title: str, unit: str, per: float, rows: list[tuple[str, float, float]]) -> None:
    print(f"\n{title}\n")
    print(f"| operation | {unit} | time | per {per:g} {unit} | per-unit cost vs the smallest size |")
    print("|---|---:|---:|---:|---:|")
    first: dict[str, float] = {}
    for label, n, t in rows:
        unit_cost = t / n * per
        first.setdefault(label, unit_cost)
        print(f"| {label} | {n:,.6g} | {t * 1e3:.1f} ms | {unit_cost * 1e3:.3f} ms | {unit_cost / first[label]:.2f}× |")


def plot(path: Path, panels: list[tuple[str, str, list[tuple[str, float, float]]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4))
    for ax, (title, xlabel, rows) in zip(np.atleast_1d(axes), panels):
        for label in dict.fromkeys(r[0] for r in rows):
            xs = np.array([r[1] for r in rows if r[0] == label], float)
            ys = np.array([r[2] for r in rows if r[0] == label], float)
            ax.loglog(xs, ys, "o-", label=label)
        xs = np.array(sorted({r[1] for r in rows}), float)
        y0 = min(r[2] for r in rows if r[1] == xs[0])
        ax.loglog(xs, y0 * xs / xs[0], "k:", label="linear (slope 1)")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("seconds")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"\nplot: {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", "--smoke", dest="smoke", action="store_true", help="tiny sizes, to check the script in seconds")
    ap.add_argument("--gib", default="1,3,10", help="file sizes for hash/set, GiB (skipped sizes are reported)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where to make the big files")
    ap.add_argument("--plot", default="", help="write the plot here (PNG; needs matplotlib)")
    args = ap.parse_args()
    vocab = [1_000, 10_000] if args.smoke else [10_000, 100_000, 1_000_000]
    counts = [100, 1_000] if args.smoke else [1_000, 10_000, 100_000]
    gibs = [1 / 64, 1 / 16] if args.smoke else [float(x) for x in args.gib.split(",")]
    repeat = 1 if args.smoke else args.repeat
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-scaling-") as tmp:
        tmp_path = Path(tmp)
        free = shutil.disk_usage(tmp).free / (1 << 30)
        fits = [g for g in gibs if 2 * g + 1 < free]
        for g in gibs:
            if g not in fits:
                print(f"  {g:g} GiB skipped: {free:.0f} GiB free in {args.dir}, a source and a copy need {2 * g:g}")
        v = vocab_rows(tmp_path, vocab, repeat)
        t = tensor_rows(tmp_path, counts, repeat)
        f = file_rows(tmp_path, fits, repeat)
    load_avg = os.getloadavg()[0]
    print(f"\n{os.cpu_count()} CPUs, load average {load_avg:.2f}; best of {repeat}")
    table("Parse time against vocabulary size (tokens + as many merges)", "strings", 1000, v)
    table("Open time against tensor count", "tensors", 1000, t)
    table("Hash and set time against file size (warm page cache)", "GiB", 1, f)
    if args.plot:
        plot(
            Path(args.plot),
            [
                ("parse vs vocabulary size", "tokens (and as many merges)", v),
                ("open vs tensor count", "tensor infos", t),
                ("hash / set vs file size", "GiB of tensor data", f),
            ],
        )


if __name__ == "__main__":
    main()
