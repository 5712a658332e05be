"""The memory plan of hybrid models (attention and recurrent layers in one stack) against llama.cpp's own accounting.

Models with the widths, heads, state sizes and vocabularies of released hybrids (jamba, granitehybrid with and
without experts, lfm2, lfm2moe, qwen3next, qwen35, qwen35moe, falcon-h1, nemotron_h, nemotron_h_moe, plamo2;
``tests/planning/tiny_hybrid.RELEASED_WIDTHS``: few layers, every kind of layer at least once, fewer experts,
tensors of zero bytes written in a second), at the four context settings
of ``benchmarks/bench_plan.py``. For each: ``gguf_construct.plan`` against ``llama_get_memory_breakdown`` through
llama-cpp-python: the model buffers, the KV cache plus the recurrent state (equal or not; the KV cache's share
also against llama.cpp's log, which prints it in MiB), the compute buffer (bytes, difference), and the plan's time
over llama.cpp's time to load the model and make the context.

    PYTHONPATH=. python benchmarks/bench_plan_hybrid.py [--quick] [--only NAME] [--json]

Needs the test extra (llama-cpp-python). ``--quick``: one model (lfm2's, the smallest file), two settings.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gguf_construct.planning import plan  # noqa: E402
from tests.llama_memory import cpu_features, measure  # noqa: E402
from tests.planning.tiny_hybrid import RELEASED_WIDTHS  # noqa: E402

SETTINGS = [
    dict(n_ctx=4096),
    dict(n_ctx=4096, flash_attn="off"),
    dict(n_ctx=8192, n_ubatch=2048, n_batch=2048, type_k="q8_0", type_v="q8_0"),
    dict(n_ctx=16384, n_seq_max=4, n_ubatch=256),
]
_KV_LOG = re.compile(r"CPU KV buffer size = +([0-9.]+) MiB")


def rows(models: dict, settings: list[dict]) -> list[dict]:
    features = cpu_features()
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in models.items():
            path = Path(tmp) / "model.gguf"
            build().save(path, keep_valid=False)  # a per-layer head_count_kv array, as hybrids' converters write
            for kw in settings:
                t0 = time.perf_counter()
                p = plan(path, features=features, **kw)
                t1 = time.perf_counter()
                m = measure(path, **kw)
                t2 = time.perf_counter()
                logged = [float(x) for x in _KV_LOG.findall("".join(m.log))]
                out.append(
                    dict(
                        model=name,
                        settings=kw,
                        n_ctx=m.n_ctx,
                        model_equal=p.model_bytes == m.total("model"),
                        cache_equal=p.kv_bytes + p.recurrent_bytes == m.total("context"),
                        kv_as_logged=round(p.kv_bytes / 2**20, 2) == round(sum(logged), 2),
                        kv_bytes=p.kv_bytes,
                        state_bytes=p.recurrent_bytes,
                        planned=p.compute_bytes,
                        llama_cpp=m.total("compute"),
                        time_ratio=(t1 - t0) / (t2 - t1),
                    )
                )
                print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one model (lfm2), two settings: a smoke test")
    ap.add_argument("--only", help="only the models whose name contains this")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args()
    models = {k: v for k, v in RELEASED_WIDTHS.items() if not args.only or args.only in k}
    if args.quick:  # the smallest file
        models = {k: v for k, v in models.items() if k.startswith("lfm2")} or dict(list(models.items())[:1])
    found = rows(models, SETTINGS[:2] if args.quick else SETTINGS)
    if args.json:
        print(json.dumps(found, indent=1))
        return
    print("| model | settings | n_ctx | model | KV + state | KV cache | state | compute planned | compute llama.cpp | difference |")
    print("|---|---|---:|---|---|---:|---:|---:|---:|---:|")
    same = {True: "equal", False: "differs"}
    for r in found:
        s = ", ".join(f"{k}={v}" for k, v in r["settings"].items())
        diff = (
            "not planned"
            if r["planned"] is None
            else "exact"
            if r["planned"] == r["llama_cpp"]
            else f"{100 * (r['planned'] - r['llama_cpp']) / r['llama_cpp']:+.2f}%"
        )
        print(
            f"| {r['model']} | {s} | {r['n_ctx']} | {same[r['model_equal']]} | {same[r['cache_equal']]} | {r['kv_bytes']:,} | "
            f"{r['state_bytes']:,} | {r['planned'] or 0:,} | {r['llama_cpp']:,} | {diff} |"
        )
    n = len(found)
    print(
        f"\nmodel buffers equal {sum(r['model_equal'] for r in found)}/{n}; KV cache + state {sum(r['cache_equal'] for r in found)}/{n} "
        f"(KV cache as llama.cpp's log prints it {sum(r['kv_as_logged'] for r in found)}/{n}); compute buffer "
        f"{sum(r['planned'] == r['llama_cpp'] for r in found)}/{n}; plan time / llama.cpp time median "
        f"{statistics.median(r['time_ratio'] for r in found):.3f}"
    )


if __name__ == "__main__":
    main()
