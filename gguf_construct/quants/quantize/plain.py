"""The plain float types ggml converts element by element: F32 (a copy), F16 and BF16 (ggml's roundings)."""

from __future__ import annotations

import numpy as np

from .cfloat import fp32_to_bf16_bits, fp32_to_fp16_bits

CONVERTERS = {
    "f32": lambda x: np.asarray(x, "<f4"),
    "f16": lambda x: fp32_to_fp16_bits(x).astype("<u2"),
    "bf16": lambda x: fp32_to_bf16_bits(x).astype("<u2"),
}
