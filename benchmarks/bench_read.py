"""Reader and writer speed against gguf-py's GGUFReader, ggml's C reader and a naive construct schema, in one run.

    python benchmarks/bench_read.py [--repeat N] [--quick]

Files: tests/data's v2-falcon-vocab.gguf (65,024 tokens, 64,784 merges; it ships with the project) and a
generated vocabulary of 102,400 tokens and 99,757 merges (the size of deepseek-llm's). Both sides of a row run
the same N times, taking turns, after one warm-up run each (imports, caches); each figure is the best of N.
Ratios are what to compare across machines. Rows marked "lazy vs eager" compare our lazy operation (arrays left
as views of the file) with a reference that materialises them: they show what laziness buys, not a faster
decoder; the "like for like" rows do the same work on both sides. Prints a markdown table (the one in
docs/speed.md) and the memory check: opening a file and touching every tensor view allocates the same whether the
file holds 16 MiB or 256 MiB of tensor data. ``--quick`` is a smoke run (tiny vocabulary, one run, small files).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
SHIPPED_VOCAB = HERE.parent / "tests" / "data" / "gguf" / "v2-falcon-vocab.gguf"

from naive_schema import NaiveGGUF  # noqa: E402

from gguf_construct import GGUF, load, new  # noqa: E402


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def compare(ours: Callable[[], object], theirs: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best time of each over ``repeat`` runs: one warm-up run each, then the two take turns, so both get the
    same N and a burst of load elsewhere on the machine hits them alike."""
    ours(), theirs()
    o = t = math.inf
    for _ in range(repeat):
        o = min(o, best(ours, 1))
        t = min(t, best(theirs, 1))
    return o, t


def ggml_open(path):
    """ggml's C reader, ``gguf_init_from_file`` (no_alloc: metadata and tensor infos, every string copied into
    the context) and ``gguf_free``, called in-process through ggml-python's ctypes binding; None without it."""
    try:
        import ggml
    except ImportError:
        return None
    encoded = str(path).encode()

    def run():
        ctx = ggml.gguf_init_from_file(encoded, ggml.gguf_init_params(no_alloc=True, ctx=None))
        if not ctx:
            raise RuntimeError(f"ggml could not read {path}")
        ggml.gguf_free(ctx)

    return run


def make_vocab(path: Path, n_tokens: int = 102_400, n_merges: int = 99_757) -> None:
    """A deterministic BPE-like vocabulary file: short tokens, a few long ones, merges of token pairs."""
    rng = np.random.default_rng(0)
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyzĠ Ääöüéèçñßабвгдежзийклмнопрстуфхцчшщъыьэюя中文字词"))
    lengths = np.minimum(rng.geometric(0.25, n_tokens), 40)
    lengths[rng.choice(n_tokens, 50, replace=False)] = 300  # some long tokens take the exact path
    tokens = ["".join(rng.choice(alphabet, n)) + str(i) for i, n in enumerate(lengths)]
    pairs = rng.integers(0, n_tokens, size=(n_merges, 2))
    f = new()
    f.metadata["general.architecture"] = "llama"
    f.metadata["general.name"] = "synthetic-100k-vocab"
    f.metadata["tokenizer.ggml.model"] = "gpt2"
    f.metadata["tokenizer.ggml.tokens"] = tokens
    f.metadata["tokenizer.ggml.token_type"] = np.ones(n_tokens, dtype=np.int32)
    f.metadata["tokenizer.ggml.merges"] = [f"{tokens[a][:8]} {tokens[b][:8]}" for a, b in pairs]
    f.metadata["tokenizer.ggml.bos_token_id"] = 0
    f.save(path)


def ours_full(path):
    f = load(path, strict=False)
    return [v.tolist() if hasattr(v, "tolist") else v for v in (f.metadata[k] for k in f.metadata)]


def gguf_py_full(path):
    from gguf import GGUFReader

    r = GGUFReader(path)
    return [field.contents() for field in r.fields.values()]


def gguf_py_open(path):
    from gguf import GGUFReader

    return GGUFReader(path)


def naive_build(path):
    data = Path(path).read_bytes()
    parsed = NaiveGGUF.parse(data)
    return lambda: NaiveGGUF.build(parsed)


def ours_build_from_scratch(path):
    """Build from plain Python lists (as a caller who made the object would), not from lazy views."""
    c = GGUF.parse(Path(path).read_bytes())
    for kv in c.metadata_kv:
        if str(kv.value_type) == "arr" and str(kv.value.type) == "str":
            kv.value.array = kv.value.array.tolist()
    return lambda: GGUF.build(c)


def ours_parse_full(data: bytes):
    """Parse and materialise every array (strings decoded), as the naive schema's parse does."""
    c = GGUF.parse(data)
    return [kv.value.array.tolist() for kv in c.metadata_kv if str(kv.value_type) == "arr"]


LIKE, LAZY = "like for like", "lazy vs eager"


def rows(path: Path, repeat: int):
    """(operation, kind, reference, our time, reference time) for one file."""
    data = path.read_bytes()
    parsed = GGUF.parse(data)
    naive_parsed = NaiveGGUF.parse(data)
    out = []
    o, t = compare(lambda: ours_full(path), lambda: gguf_py_full(path), repeat)
    out.append(("open, every value materialised", LIKE, "gguf-py GGUFReader + contents() of every field", o, t))
    o, t = compare(lambda: load(path, strict=False), lambda: gguf_py_open(path), repeat)
    out.append(("open: header, scalars, tensor infos (arrays lazy)", LAZY, "gguf-py GGUFReader() (every array's parts built)", o, t))
    o, t = compare(lambda: load(path), lambda: gguf_py_open(path), repeat)
    out.append(("open + full validation (strict=True)", LAZY, "gguf-py GGUFReader() (no validation)", o, t))
    c_open = ggml_open(path)
    if c_open is not None:  # ggml's C reader checks and copies every field, as strict loading checks every one
        o, t = compare(lambda: load(path), c_open, repeat)
        out.append(("open + full validation (strict=True)", LIKE, "ggml C gguf_init_from_file (in-process)", o, t))
    o, t = compare(lambda: ours_parse_full(data), lambda: NaiveGGUF.parse(data), repeat)
    out.append(("parse, every array materialised", LIKE, "naive construct schema parse", o, t))
    o, t = compare(lambda: GGUF.parse(data), lambda: NaiveGGUF.parse(data), repeat)
    out.append(("parse, arrays lazy", LAZY, "naive construct schema parse", o, t))
    o, t = compare(ours_build_from_scratch(path), lambda: NaiveGGUF.build(naive_parsed), repeat)
    out.append(("build from plain lists of str", LIKE, "naive construct schema build", o, t))
    o, t = compare(lambda: GGUF.build(parsed), lambda: NaiveGGUF.build(naive_parsed), repeat)
    out.append(("build back a parsed object (arrays still their file bytes)", LAZY, "naive construct schema build", o, t))
    return out


def memory_check(tmp: Path, sizes: tuple[int, ...] = (16, 256)) -> list[tuple[int, int]]:
    """Peak Python allocation of open + touching every tensor view, for two sizes of tensor data (MiB)."""
    out = []
    for mib in sizes:
        path = tmp / f"tensors-{mib}.gguf"
        f = new()
        f.metadata["general.architecture"] = "llama"
        n = mib * 2**20 // 4 // 8
        for i in range(8):
            f.tensors.add(f"blk.{i}.w", np.full(n, i, dtype=np.float32))
        f.save(path)
        del f
        tracemalloc.start()
        g = load(path)
        total = sum(int(t.data[-1]) for t in g.tensors.values())
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert total >= 0
        out.append((mib, peak))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs per side per row (after one warm-up run each)")
    ap.add_argument("--quick", action="store_true", help="smoke run: a 2,000-token vocabulary, one run, 1 and 4 MiB files")
    args = ap.parse_args()
    repeat = 1 if args.quick else args.repeat
    with tempfile.TemporaryDirectory() as tmp:
        vocab = Path(tmp) / "vocab.gguf"
        make_vocab(vocab, *((2_000, 1_900) if args.quick else ()))
        files = [("synthetic 2k vocab", vocab)] if args.quick else [(SHIPPED_VOCAB.name, SHIPPED_VOCAB), ("synthetic 100k vocab", vocab)]
        print(f"best of {repeat} per side, taking turns after a warm-up run each\n")
        print("| file | operation | kind | gguf-construct | reference | reference time | speed-up |")
        print("|---|---|---|---:|---|---:|---:|")
        for label, path in files:
            for op, kind, ref_name, ours_t, ref_t in rows(path, repeat):
                ratio = ref_t / ours_t
                shown = f"{ratio:.0f}×" if ratio >= 10 else f"{ratio:.2f}×"
                print(f"| {label} | {op} | {kind} | {ours_t * 1000:.1f} ms | {ref_name} | {ref_t * 1000:.1f} ms | {shown} |", flush=True)
        print()
        print("| tensor data in file | peak Python allocation: open + touch every tensor view |")
        print("|---:|---:|")
        for mib, peak in memory_check(Path(tmp), (1, 4) if args.quick else (16, 256)):
            print(f"| {mib} MiB | {peak / 1024:.0f} KiB |")


if __name__ == "__main__":
    main()
