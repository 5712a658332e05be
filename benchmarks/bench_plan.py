"""The memory plan against llama.cpp's own accounting, per architecture and context, and the bytes fetched to plan
a remote file.

1. For each architecture of ``tests/tiny_models.py`` (built larger than the tests build them, q4_0 weights so that
   the CPU's repacking shows) and each context, ``gguf_construct.plan`` against ``llama_get_memory_breakdown``
   through llama-cpp-python: model, KV cache + recurrent state, compute buffer (bytes and our / llama.cpp).
2. The same model split into shards, served over HTTP by the loopback test server: requests and bytes fetched
   by ``plan(URL)`` against the size of the set.

    PYTHONPATH=. python benchmarks/bench_plan.py [--quick] [--contexts 512,4096,32768] [--markdown]

Needs the test extra (llama-cpp-python). ``--quick`` runs two architectures at one context.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the oracle, the tiny models and the loopback server live with the tests

from http_testserver import TestServer  # noqa: E402
from llama_memory import cpu_features, measure  # noqa: E402
from tiny_models import BUILDERS  # noqa: E402

from gguf_construct.api.shard_set import split  # noqa: E402
from gguf_construct.planning import plan  # noqa: E402

SIZES = {
    "rwkv6": dict(n_embd=512),
    "rwkv7": dict(n_embd=512),
    "mamba": dict(n_embd=512),
}
LARGER = dict(n_layer=4, n_embd=512)


def mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.2f}"


def ratio(ours: int | None, theirs: int) -> str:
    if ours is None or theirs == 0:
        return "n/a" if ours is None else ("1.0000" if ours == 0 else "inf")
    return f"{ours / theirs:.4f}"


def build(arch: str, folder: Path) -> Path:
    kw = SIZES.get(arch, LARGER)
    path = folder / f"{arch}.gguf"
    try:
        BUILDERS[arch](wtype="q4_0", **kw).save(path)
    except TypeError:  # a builder without one of the size parameters
        BUILDERS[arch](wtype="q4_0").save(path)
    return path


def table(archs: list[str], contexts: list[int], folder: Path) -> list[str]:
    features = cpu_features()
    rows = [
        "| architecture | n_ctx asked → used | model MiB (ours/llama.cpp) | KV+state MiB (ours/llama.cpp) "
        "| compute MiB ours | compute MiB llama.cpp | compute ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for arch in archs:
        path = build(arch, folder)
        for n_ctx in contexts:
            m = measure(path, n_ctx=n_ctx)
            p = plan(path, n_ctx=n_ctx, features=features)
            model_ok = "=" if p.model_bytes == m.total("model") else "≠"
            ctx_ok = "=" if p.kv_bytes + p.recurrent_bytes == m.total("context") else "≠"
            rows.append(
                f"| {arch} | {n_ctx} → {m.n_ctx} | {mib(p.model_bytes)} {model_ok} {mib(m.total('model'))} | "
                f"{mib(p.kv_bytes + p.recurrent_bytes)} {ctx_ok} {mib(m.total('context'))} | {mib(p.compute_bytes)} | "
                f"{mib(m.total('compute'))} | {ratio(p.compute_bytes, m.total('compute'))} |"
            )
            print(rows[-1], flush=True)
    return rows


def remote(folder: Path) -> list[str]:
    shards = split(BUILDERS["llama"](n_layer=8, n_embd=1024, n_ff=2816), folder / "remote", max_tensors=20)
    size = sum(s.stat().st_size for s in shards)
    with TestServer() as server:
        for s in shards:
            server.add(f"/m/{s.name}", s.read_bytes())
        start = time.perf_counter()
        p = plan(server.url(f"/m/{shards[0].name}"), n_ctx=4096)
        seconds = time.perf_counter() - start
        assert p.to_json() == plan(shards[0], n_ctx=4096).to_json()
        return [
            "| set | shards | bytes of the set | requests | bytes fetched | fetched / set | seconds |",
            "|---|---|---|---|---|---|---|",
            f"| llama, 8 layers, f16 | {len(shards)} | {size:,} | {server.counts.requests} | "
            f"{server.counts.bytes:,} | {server.counts.bytes / size:.4f} | {seconds:.2f} |",
        ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="two architectures, one context: a smoke test")
    ap.add_argument("--contexts", default="512,4096,32768", help="contexts to plan (comma-separated)")
    args = ap.parse_args()
    contexts = [512] if args.quick else [int(c) for c in args.contexts.split(",")]
    archs = ["llama", "rwkv7"] if args.quick else list(BUILDERS)
    with tempfile.TemporaryDirectory() as tmp:
        rows = table(archs, contexts, Path(tmp))
        print()
        print("\n".join(rows))
        print()
        print("\n".join(remote(Path(tmp))))


if __name__ == "__main__":
    main()
