"""Reproducer: llama.cpp's CPU wkv7 kernel overruns RWKV-7 heads shorter than its SIMD step (docs/findings.md).

Makes random rwkv.cpp v7 models (d = 128) with heads of 16, 32 and 64, migrates each with ``gguf-construct
migrate``, runs it in llama.cpp (llama-cpp-python) and in the numpy forward pass over the rwkv.cpp file, and prints
the build's GGML_F32_STEP and the largest logit difference. A head shorter than the step (16 on AVX2; 16 and 32 on
AVX-512) gives differences of order 1; heads of 64 agree to about 1e-6.

    PYTHONPATH=. python tests/reproducers/llama_cpp_wkv7_short_heads.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))

from oracles import llama_logits  # noqa: E402
from rwkv_models import synthetic_v7  # noqa: E402
from rwkv_reference import RwkvReference  # noqa: E402
from wkv7_kernel import LlamaGgml  # noqa: E402

PROMPT = [34, 105, 110]


def main() -> int:
    step = LlamaGgml().f32_step()
    print(f"llama-cpp-python's ggml: GGML_F32_STEP = {step}")
    with tempfile.TemporaryDirectory() as tmp:
        for head_size in (16, 32, 64):
            src = synthetic_v7(Path(tmp) / f"h{head_size}.bin", d=128, head_size=head_size)
            out = Path(tmp) / f"h{head_size}.gguf"
            subprocess.run(
                [sys.executable, "-m", "gguf_construct.cli.main", "migrate", str(src), str(out)], check=True, capture_output=True
            )
            got, want = llama_logits(out, PROMPT), RwkvReference(src).logits(PROMPT)
            print(
                f"head size {head_size:3}: max |llama.cpp - reference| = {np.abs(got - want).max():.3g}, "
                f"argmax {got.argmax()} vs {want.argmax()}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
