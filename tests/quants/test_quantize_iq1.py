"""IQ1_S and IQ1_M against ggml's C quantizer, kept apart because ggml builds their shared neighbour tables in
~25 s on first use: one process pays that once for every input here (the inputs and checks of
tests/quants/test_quantize.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.quants.test_quantize import INPUTS, N_PER_ROW, assert_exact, rwkv_weights

#: "huge" is left out: ggml aborts there, and proving it takes a child process that rebuilds the tables (~25 s);
#: the other grid types check that agreement in tests/quants/test_quantize.py
KINDS = ("normal", "uniform", "heavy", "zero", "subnormal", "tiny", "integers", "zero-sub-blocks", "one-outlier")


@pytest.mark.parametrize("name", ["iq1_s", "iq1_m"])
def test_iq1_bit_exact(name):
    r = np.random.default_rng(7)
    qw = r.uniform(0, 4, N_PER_ROW).astype(np.float32) ** 2
    qw[::13] = 0
    for kind in KINDS:
        assert_exact(name, INPUTS[kind], qw)
        if name == "iq1_m":  # IQ1_M also quantizes without an imatrix
            assert_exact(name, INPUTS[kind])


@pytest.mark.parametrize("name", ["iq1_s", "iq1_m"])
def test_iq1_real_weights(name):
    x = rwkv_weights()
    assert_exact(name, x, np.mean(x * x, axis=0).astype(np.float32))
