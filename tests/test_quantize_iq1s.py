"""IQ1_S against ggml's C quantizer, kept apart because ggml builds its IQ1_S neighbour tables in ~25 s on first
use: one process pays that once for every input here (the same inputs and checks as tests/test_quantize.py)."""

from __future__ import annotations

import numpy as np
from test_quantize import INPUTS, N_PER_ROW, assert_exact, rwkv_weights


def test_iq1_s_bit_exact():
    r = np.random.default_rng(7)
    qw = r.uniform(0, 4, N_PER_ROW).astype(np.float32) ** 2
    qw[::13] = 0
    for kind in ("normal", "uniform", "heavy", "zero", "subnormal", "tiny", "huge", "integers", "zero-sub-blocks", "one-outlier"):
        assert_exact("iq1_s", INPUTS[kind], qw)
    x = rwkv_weights()
    assert_exact("iq1_s", x, np.mean(x * x, axis=0).astype(np.float32))
