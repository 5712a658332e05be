"""The planned CPU compute buffer of the MoE, MLA and recurrent architectures against llama.cpp's, on models
larger than the tests' (still random weights), and the time a plan takes against the time llama.cpp takes to load
the model and make the context.

For each model and context setting: the compute buffer ``plan()`` predicts from the GGUF header, the one
llama.cpp allocates (``llama_get_memory_breakdown``, through tests/llama_memory.py), their difference, and the
ratio of the two wall times within this run. Prints a Markdown table (``--json`` for the raw rows). Run from the
repository root (it needs llama-cpp-python)::

    PYTHONPATH=. python benchmarks/plan_compute_archs.py [--smoke]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gguf_construct.planning import plan  # noqa: E402
from tests.llama_memory import measure  # noqa: E402
from tests.tiny_models import deepseek2, mamba, qwen3moe, rwkv6, rwkv7  # noqa: E402

MODELS = {
    "qwen3moe 4L 512d 32x2 experts q4_0": lambda: qwen3moe(
        n_layer=4, n_embd=512, n_head=8, n_head_kv=2, head_dim=64, n_expert=32, n_expert_used=2, n_ff_exp=256, n_vocab=2000, wtype="q4_0"
    ),
    "deepseek2 MLA 4L 512d q_lora 16x4 experts": lambda: deepseek2(
        n_layer=4,
        n_embd=512,
        n_head=8,
        kv_lora_rank=256,
        q_lora_rank=192,
        qk_nope_head_dim=64,
        qk_rope_head_dim=32,
        v_head_dim=64,
        n_expert=16,
        n_expert_used=4,
        n_ff_exp=256,
        n_ff=1024,
        n_vocab=2000,
        wtype="q8_0",
    ),  # fmt: skip
    "deepseek2 kv_b layout 3L 256d": lambda: deepseek2(n_layer=3, mla=False, n_vocab=2000),
    "mamba 4L 512d": lambda: mamba(n_layer=4, n_embd=512, d_state=16, dt_rank=32, n_vocab=2000),
    "rwkv6 4L 512d": lambda: rwkv6(n_layer=4, n_embd=512, head_size=64, n_ff=1792, n_vocab=2000),
    "rwkv7 4L 512d": lambda: rwkv7(n_layer=4, n_embd=512, head_size=64, n_ff=2048, decay_lora_rank=64, iclr_lora_rank=64, n_vocab=2000),
}
SETTINGS = [
    dict(n_ctx=4096),
    dict(n_ctx=4096, flash_attn="off"),
    dict(n_ctx=8192, n_ubatch=2048, n_batch=2048),
    dict(n_ctx=4096, n_seq_max=4, type_k="q8_0", type_v="q8_0"),
    dict(n_ctx=2048, n_ubatch=128, n_seq_max=2),
]


def rows(smoke: bool) -> list[dict]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in MODELS.items():
            path = Path(tmp) / "model.gguf"
            build().save(path)
            for settings in SETTINGS[:2] if smoke else SETTINGS:
                t0 = time.perf_counter()
                planned = plan(path, **settings).compute_bytes  # type: ignore[arg-type]
                t1 = time.perf_counter()
                measured = measure(path, **settings).total("compute")
                t2 = time.perf_counter()
                out.append(dict(model=name, settings=settings, planned=planned, llama_cpp=measured, time_ratio=(t1 - t0) / (t2 - t1)))
            if smoke:
                break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--smoke", action="store_true", help="one model, two settings")
    args = ap.parse_args()
    found = rows(args.smoke)
    if args.json:
        print(json.dumps(found, indent=1))
        return
    print("| model | settings | planned | llama.cpp | difference | plan time / llama.cpp time |")
    print("|---|---|---:|---:|---:|---:|")
    for r in found:
        s = ", ".join(f"{k}={v}" for k, v in r["settings"].items())
        diff = "exact" if r["planned"] == r["llama_cpp"] else f"{100 * (r['planned'] - r['llama_cpp']) / r['llama_cpp']:+.2f}%"
        print(f"| {r['model']} | {s} | {r['planned']:,} | {r['llama_cpp']:,} | {diff} | {r['time_ratio']:.2f} |")


if __name__ == "__main__":
    main()
