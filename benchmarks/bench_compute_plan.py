"""The planned compute buffer at real models' widths, against llama.cpp, and what planning costs.

    python benchmarks/bench_compute_plan.py [--quick]

Models with the widths, heads and vocabularies of Llama-3.2-1B, Qwen3-0.6B and Gemma-3-1B (two layers each: the
compute buffer depends on the widths and the vocabulary, not on the depth, as every layer reuses the same memory;
weights q4_0 to keep the files small) are written to a temporary folder, loaded by llama.cpp
(llama-cpp-python) at several contexts, and their CPU compute buffer (``llama_get_memory_breakdown``) compared
with ``planning.compute.compute_bytes``. Timing: the plan of an 80-layer model (a ModelShape built from metadata
alone, no file) against the time llama.cpp takes to create a context for the two-layer file, as a ratio.
``--quick`` uses one model and two contexts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tests.tiny_models as tm  # noqa: E402
from gguf_construct.planning.compute import compute_bytes  # noqa: E402
from gguf_construct.planning.context import ContextRequest, resolve  # noqa: E402
from gguf_construct.planning.shape import ModelShape, TensorSpan  # noqa: E402
from tests.planning.plan_inputs import shape_of  # noqa: E402

MODELS = {
    "llama (Llama-3.2-1B widths)": lambda: tm.llama(n_embd=2048, n_ff=8192, n_head=32, n_head_kv=8, n_vocab=128256, wtype="q4_0"),
    "qwen3 (Qwen3-0.6B widths)": lambda: tm.qwen3(
        n_embd=1024, n_ff=3072, n_head=16, n_head_kv=8, head_dim=128, n_vocab=151936, wtype="q4_0"
    ),
    "gemma3 (Gemma-3-1B widths)": lambda: tm.gemma3(
        n_embd=1152, n_ff=6912, n_head=4, n_head_kv=1, head_dim=256, sliding_window=512, n_vocab=262144, wtype="q4_0"
    ),
}
CONTEXTS = [
    dict(n_ctx=4096),
    dict(n_ctx=4096, flash_attn="off"),
    dict(n_ctx=8192, n_ubatch=2048, n_batch=2048, type_k="q8_0", type_v="q8_0"),
    dict(n_ctx=16384, n_seq_max=4, n_ubatch=256),
]


def deep_shape(n_layer: int) -> ModelShape:
    """A Llama-3-70B-like shape from metadata alone: what planning a large model costs without reading it."""
    md = {
        "general.architecture": "llama",
        "llama.block_count": n_layer,
        "llama.embedding_length": 8192,
        "llama.feed_forward_length": 28672,
        "llama.attention.head_count": 64,
        "llama.attention.head_count_kv": 8,
        "llama.context_length": 8192,
        "llama.vocab_size": 128256,
    }
    spans = [TensorSpan("token_embd.weight", "q4_0", (8192, 128256), 0, 0, 0)]
    spans += [TensorSpan("output_norm.weight", "f32", (8192,), 0, 0, 0), TensorSpan("output.weight", "q6_K", (8192, 128256), 0, 0, 0)]
    for il in range(n_layer):
        for name, ne in (
            ("attn_norm", (8192,)),
            ("attn_q", (8192, 8192)),
            ("attn_k", (8192, 1024)),
            ("attn_v", (8192, 1024)),
            ("attn_output", (8192, 8192)),
            ("ffn_norm", (8192,)),
            ("ffn_gate", (8192, 28672)),
            ("ffn_up", (8192, 28672)),
            ("ffn_down", (28672, 8192)),
        ):
            spans.append(TensorSpan(f"blk.{il}.{name}.weight", "f32" if len(ne) == 1 else "q4_K", ne, 0, 0, 0))
    return ModelShape.from_metadata(md, spans, "llama")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one model, two contexts")
    args = ap.parse_args()
    from tests.llama_memory import measure

    models = dict(list(MODELS.items())[:1]) if args.quick else MODELS
    contexts = CONTEXTS[:2] if args.quick else CONTEXTS
    print("| model | context | planned (bytes) | llama.cpp (bytes) | planned / llama.cpp |")
    print("|---|---|---:|---:|---:|")
    t_llama = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, build in models.items():
            path = Path(tmp) / "model.gguf"
            build().save(path)
            shape = shape_of(path)
            for kw in contexts:
                t = time.perf_counter()
                measured = measure(path, **kw).total("compute")
                t_llama.append(time.perf_counter() - t)
                planned = compute_bytes(shape, resolve(shape, ContextRequest(**kw)))
                setting = ", ".join(f"{k}={v}" for k, v in kw.items())
                print(f"| {label} | {setting} | {planned:,} | {measured:,} | {planned / measured:.4f} |")
    shape = deep_shape(80)
    ctx = resolve(shape, ContextRequest(n_ctx=8192))
    t = time.perf_counter()
    compute_bytes(shape, ctx)
    t_plan = time.perf_counter() - t
    print(f"\nplanning an 80-layer model's compute buffer: {t_plan / min(t_llama):.2f}x the time llama.cpp takes to load the")
    print("two-layer file and make one context (best of the runs above)")


if __name__ == "__main__":
    main()
