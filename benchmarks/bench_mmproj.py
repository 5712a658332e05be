"""A multimodal projector's plan (``plan --mmproj``) against libmtmd's own account, at released models' widths.

Each projector has the widths, depths, heads, patch grids and projector of a released one, its tensors zero bytes
left as a hole in a sparse file (``tests.sparse_models.write_sparse``: written in a second); beside a text model
of the projector's output width, libmtmd (llama-cpp-python 0.3.36's, through ``tests/mtmd_memory.py``) loads it on
the CPU and reports ``clip_get_mem_usage`` without and with warmup. The table gives the weights buffer planned
(each tensor padded to 32 bytes, as allocated), whether the tensors' unpadded total equals libmtmd's own count
(``clip_get_mem_usage`` adds ``ggml_nbytes``, not the padding: tests/planning/test_plan_mmproj.py checks the buffer
itself), the compute buffer planned and measured, and the plan's time.

    PYTHONPATH=. python benchmarks/bench_mmproj.py [--quick] [--json]

``--quick``: two projectors at small widths (CI runs it). Needs the test extra (llama-cpp-python).
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

from gguf_construct.planning.mmproj import plan_projector  # noqa: E402
from tests.mtmd_memory import measure  # noqa: E402
from tests.planning import tiny_mmproj as T  # noqa: E402
from tests.sparse_models import write_sparse  # noqa: E402
from tests.tiny_models import llama, zero_filled  # noqa: E402

#: name → (builder, sizes, the text model's width)
PROJECTORS = {
    "gemma3 (Gemma 3 4B's SigLIP, 896 px)": (
        T.gemma3, dict(n_embd=1152, n_ff=4304, n_layer=27, n_head=16, image=896, patch=14, proj_dim=2560), 2560
    ),
    "mlp (LLaVA-1.5-7B's CLIP ViT-L/14, 336 px)": (
        T.mlp, dict(n_embd=1024, n_ff=4096, n_layer=24, n_head=16, image=336, patch=14, proj_dim=4096, cls=True), 4096
    ),
    "idefics3 (SmolVLM-256M's SigLIP, 512 px)": (
        T.idefics3, dict(n_embd=768, n_ff=3072, n_layer=12, n_head=12, image=512, patch=16, proj_dim=576, merge=4), 576
    ),
    "internvl (InternVL3-1B's InternViT-300M, 448 px)": (
        T.internvl, dict(n_embd=1024, n_ff=4096, n_layer=24, n_head=16, image=448, patch=14, proj_dim=896, merge=2), 896
    ),
    "qwen2.5vl_merger (Qwen2.5-VL-3B's ViT)": (
        T.qwen2vl, dict(n_embd=1280, n_ff=3420, n_layer=32, n_head=16, patch=14, proj_dim=2048, window=8), 2048
    ),
    "pixtral (Mistral Small 3.1's, with its patch merger)": (
        T.pixtral, dict(n_embd=1024, n_ff=4096, n_layer=24, n_head=16, patch=14, proj_dim=5120, merge=2), 5120
    ),
    "ultravox (Whisper-large-v3 encoder, stack 8)": (
        T.qwen2a, dict(n_embd=1280, n_ff=5120, n_layer=32, n_head=20, n_mel=128, proj_dim=2048, stack=8, hidden=4096), 2048
    ),
}  # fmt: skip
QUICK = {
    "gemma3 (tiny)": (T.gemma3, dict(n_embd=128, n_ff=256, n_layer=2, n_head=4, image=128, patch=8, proj_dim=256), 256),
    "qwen2a (tiny)": (T.qwen2a, dict(n_embd=64, n_ff=128, n_layer=2, n_head=4, n_mel=16, proj_dim=256), 256),
}  # fmt: skip


def text_model(path: Path, n_embd: int) -> Path:
    """One zero-filled llama layer of width ``n_embd``: what mtmd checks the projector's output width against."""
    if not path.exists():
        write_sparse(path, zero_filled(llama, n_layer=1, n_embd=n_embd, n_ff=n_embd, n_head=8, n_head_kv=8))
    return path


def run(projectors: dict, tmp: Path) -> list[dict]:
    rows = []
    for name, (builder, sizes, width) in projectors.items():
        path = tmp / f"{len(rows)}.gguf"
        write_sparse(path, T.zero_filled(builder, **sizes))
        start = time.perf_counter()
        planned = plan_projector(path)
        seconds = time.perf_counter() - start
        measured = measure(text_model(tmp / f"text-{width}.gguf", width), path)
        if measured.refused:
            raise RuntimeError(f"{name}: libmtmd refused it: {measured.refused}")
        rows.append(
            {
                "projector": name,
                "weights_planned": planned.weights_bytes,
                "weights_unpadded_planned": planned.weights_nbytes,
                "weights_libmtmd": measured.weights["CPU"],
                "compute_planned": planned.compute_bytes,
                "compute_libmtmd": measured.compute["CPU"],
                "plan_seconds": round(seconds, 3),
            }
        )
        print(f"  {name}: done", file=sys.stderr)
    return rows


def table(rows: list[dict]) -> str:
    mib = 2**20
    out = [
        "| projector | weights buffer (MiB) | libmtmd's count equal | compute planned (MiB) | compute libmtmd (MiB) | equal | plan s |",
        "|---|---:|:-:|---:|---:|:-:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['projector']} | {r['weights_planned'] / mib:,.2f} "
            f"| {'yes' if r['weights_unpadded_planned'] == r['weights_libmtmd'] else 'NO'} "
            f"| {r['compute_planned'] / mib:,.2f} | {r['compute_libmtmd'] / mib:,.2f} "
            f"| {'yes' if r['compute_planned'] == r['compute_libmtmd'] else 'NO'} | {r['plan_seconds']:.3f} |"
        )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two small projectors (CI)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-mmproj-") as tmp:
        rows = run(QUICK if args.quick else PROJECTORS, Path(tmp))
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    equal = all(r["weights_unpadded_planned"] == r["weights_libmtmd"] and r["compute_planned"] == r["compute_libmtmd"] for r in rows)
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
