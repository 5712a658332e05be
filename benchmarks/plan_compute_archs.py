"""The planned CPU compute buffer of the MoE, MLA and recurrent architectures at real models' widths and
vocabularies, against llama.cpp's, and the time a plan takes against the time llama.cpp takes to load the model
and make the context.

Each model has the widths, heads and vocabulary of a released one but two layers (the compute buffer depends on
the widths and the vocabulary, not the depth: every layer reuses the same memory) and fewer experts where a real
count would make the file large (the experts' count only sizes the router's logits); its tensors are zero bytes
(tests/tiny_models.py ``zero_filled``), written in a second. For each context setting: the compute buffer
``plan()`` predicts from the GGUF header, the one llama.cpp allocates (``llama_get_memory_breakdown``, through
tests/llama_memory.py), their difference, and the ratio of the two wall times within this run. Prints a Markdown
table (``--json`` for the raw rows). Run from the repository root (it needs llama-cpp-python)::

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
from tests.tiny_models import deepseek2, glm4moe, gpt_oss, llama, mamba, mamba2, qwen3moe, rwkv6, rwkv7, zero_filled  # noqa: E402

MODELS = {
    "qwen3moe (Qwen3-30B-A3B widths, 16 of 128 experts)": lambda: zero_filled(
        qwen3moe, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128, n_expert=16, n_expert_used=8, n_ff_exp=768,
        n_vocab=151936, wtype="q4_0",
    ),
    "gpt-oss (gpt-oss-20b widths, 8 of 32 experts)": lambda: zero_filled(
        gpt_oss, n_embd=2880, n_head=64, n_head_kv=8, head_dim=64, n_expert=8, n_expert_used=4, n_ff_exp=2880,
        sliding_window=128, n_vocab=201088, wtype="q4_0",
    ),
    "glm4moe (GLM-4.5-Air widths, 16 of 128 experts, a next-token-prediction block)": lambda: zero_filled(
        glm4moe, n_layer=3, n_nextn=1, n_embd=4096, n_ff=10944, n_head=96, n_head_kv=8, head_dim=128, n_expert=16,
        n_expert_used=8, n_ff_exp=1408, n_vocab=151552, wtype="q4_0",
    ),
    "llama with experts (Mixtral-8x7B widths, 4 of 8 experts)": lambda: zero_filled(
        llama, n_embd=4096, n_ff=14336, n_head=32, n_head_kv=8, n_expert=4, n_expert_used=2, n_vocab=32000, wtype="q4_0"
    ),
    "deepseek2 MLA (DeepSeek-V2-Lite widths, 16 of 64 experts)": lambda: zero_filled(
        deepseek2, n_embd=2048, n_head=16, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
        n_expert=16, n_expert_used=6, n_expert_shared=2, n_ff_exp=1408, n_ff=10944, n_vocab=102400, wtype="q4_0",
    ),
    "mamba (mamba-1.4b widths)": lambda: zero_filled(mamba, n_embd=2048, d_state=16, dt_rank=128, n_vocab=50280, wtype="q4_0"),
    "mamba2 (Mamba-Codestral-7B widths)": lambda: zero_filled(
        mamba2, n_embd=4096, d_state=128, head_dim=64, n_group=8, n_vocab=32768, wtype="q4_0"
    ),
    "rwkv6 (RWKV-6 1.6B widths)": lambda: zero_filled(
        rwkv6, n_embd=2048, head_size=64, n_ff=7168, time_mix_extra_dim=32, time_decay_extra_dim=64, n_vocab=65536, wtype="q4_0"
    ),
    "rwkv7 (RWKV-7 1.5B widths)": lambda: zero_filled(
        rwkv7, n_embd=2048, head_size=64, n_ff=8192, decay_lora_rank=96, iclr_lora_rank=96, value_residual_mix_lora_rank=64,
        gate_lora_rank=256, n_vocab=65536, wtype="q4_0",
    ),
}  # fmt: skip
SETTINGS = [
    dict(n_ctx=4096),
    dict(n_ctx=4096, flash_attn="off"),
    dict(n_ctx=8192, n_ubatch=2048, n_batch=2048, type_k="q8_0", type_v="q8_0"),
    dict(n_ctx=16384, n_seq_max=4, n_ubatch=256),
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
    ap.add_argument("--only", help="only the models whose name contains this")
    args = ap.parse_args()
    if args.only:
        for name in [m for m in MODELS if args.only not in m]:
            del MODELS[name]
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
