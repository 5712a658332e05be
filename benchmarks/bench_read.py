"""Reader and writer speed against gguf-py's GGUFReader and a naive construct schema, in one run.

    python benchmarks/bench_read.py [--repeat N]

Files: the corpus's v3-gpt-2-vocab.gguf and a generated vocabulary of 102,400 tokens and 99,757 merges (the
size of deepseek-llm's). Each figure is the best of N runs; ratios are what to compare across machines.
Prints a markdown table (the one in README.md) and the memory check: opening a file and touching every tensor
view allocates the same whether the file holds 16 MiB or 256 MiB of tensor data.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
CORPUS = HERE.parent.parent / "shared" / "corpus"

from naive_schema import NaiveGGUF  # noqa: E402

from gguf_construct import GGUF, load, new  # noqa: E402


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def best_alternating(fns, repeats):
    """Best time of each function, the functions taking turns (function i runs ``repeats[i]`` times in all), so
    that load from elsewhere on the shared machine hits them alike."""
    bests = [float("inf")] * len(fns)
    for round_ in range(max(repeats)):
        for i, fn in enumerate(fns):
            if round_ < repeats[i]:
                t = time.perf_counter()
                fn()
                bests[i] = min(bests[i], time.perf_counter() - t)
    return bests


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


def rows(path: Path, repeat: int):
    out = []
    slow = max(1, repeat // 3)
    full_ours, full_ref = best_alternating([lambda: ours_full(path), lambda: gguf_py_full(path)], [repeat, slow])
    out.append(("full parse, every value materialised", "gguf-py GGUFReader + contents()", full_ours, full_ref))
    open_ours, strict_ours, open_ref = best_alternating(
        [lambda: load(path, strict=False), lambda: load(path), lambda: gguf_py_open(path)], [repeat, repeat, slow]
    )
    out.append(("open: header, scalars, tensor infos (arrays lazy)", "gguf-py GGUFReader()", open_ours, open_ref))
    out.append(("open + full validation (strict=True)", "gguf-py GGUFReader()", strict_ours, open_ref))
    c_open = ggml_open(path)
    if c_open is not None:
        strict_again, c_time = best_alternating([lambda: load(path), c_open], [repeat, repeat])
        out.append(("open + full validation (strict=True)", "ggml C gguf_init_from_file (in-process)", strict_again, c_time))
    data = path.read_bytes()
    parsed = GGUF.parse(data)
    build_ours, build_ref = best_alternating([lambda: GGUF.build(parsed), naive_build(path)], [repeat, slow])
    out.append(("build back to bytes (parsed object)", "naive construct schema", build_ours, build_ref))
    scratch = best(ours_build_from_scratch(path), repeat)
    out.append(("build from plain lists of str", "naive construct schema", scratch, build_ref))
    naive_parse = best(lambda: NaiveGGUF.parse(data), slow)
    out.append(("parse, lazy arrays", "naive construct schema parse", open_ours, naive_parse))
    return out


def memory_check(tmp: Path) -> list[tuple[int, int]]:
    """Peak Python allocation of open + touching every tensor view, for two sizes of tensor data."""
    out = []
    for mib in (16, 256):
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
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vocab = Path(tmp) / "vocab-100k.gguf"
        make_vocab(vocab)
        files = [("v3-gpt-2-vocab.gguf", CORPUS / "gguf" / "v3-gpt-2-vocab.gguf"), ("synthetic 100k vocab", vocab)]
        print("| file | operation | gguf-construct | reference | reference time | speed-up |")
        print("|---|---|---:|---|---:|---:|")
        for label, path in files:
            for op, ref_name, ours_t, ref_t in rows(path, args.repeat):
                ratio = ref_t / ours_t
                shown = f"{ratio:.0f}×" if ratio >= 10 else f"{ratio:.2f}×"
                print(f"| {label} | {op} | {ours_t * 1000:.1f} ms | {ref_name} | {ref_t * 1000:.1f} ms | {shown} |")
        print()
        print("| tensor data in file | peak Python allocation: open + touch every tensor view |")
        print("|---:|---:|")
        for mib, peak in memory_check(Path(tmp)):
            print(f"| {mib} MiB | {peak / 1024:.0f} KiB |")


if __name__ == "__main__":
    main()
