"""llama.cpp's CPU RWKV-7 kernel on heads shorter than its SIMD step (docs/findings.md, "llama.cpp"): the numpy
model of the kernel's loop (tests/wkv7_kernel.py) is the RWKV-7 recurrence when the step divides the head size and
overruns the head otherwise; the ggml that llama-cpp-python ships computes exactly that model *with the step of its
own build* (32 with AVX2, 64 with AVX-512), whichever CPU runs the suite. When llama.cpp adds the missing
remainder loop, the overrun cases stop matching the model and these tests say so."""

from __future__ import annotations

import platform

import numpy as np
import pytest
from wkv7_kernel import LlamaGgml, random_case, wkv7_reference, wkv7_simd_model

HEAD_SIZES = [16, 32, 64, 96, 128]


def _overruns(head_size: int, step: int | None) -> bool:
    return step is not None and head_size % step != 0


@pytest.mark.parametrize("step", [None, 16, 32, 64])
@pytest.mark.parametrize("head_size", HEAD_SIZES)
def test_the_kernel_model_is_the_recurrence_exactly_when_the_step_divides_the_head(head_size, step):
    case = random_case(tokens=3, heads=3, head_size=head_size, seed=head_size)
    out, state = wkv7_simd_model(case, step)
    want_out, want_state = wkv7_reference(case)
    assert np.isfinite(out).all() and np.isfinite(state).all()  # read only memory it knows, or wrote first
    error = max(np.abs(out - want_out).max(), np.abs(state - want_state).max())
    if _overruns(head_size, step):
        assert error > 0.1, error
    else:
        assert error < 1e-9, error


@pytest.fixture(scope="module")
def llama_ggml() -> LlamaGgml:
    return LlamaGgml()


def test_the_step_is_read_from_the_build_llama_cpp_runs(llama_ggml):
    """The compile-time features of llama-cpp-python's CPU backend, as llama.cpp itself reports them."""
    from llama_cpp import llama_print_system_info

    info = llama_print_system_info().decode()
    assert ("AVX512 = 1" in info) == llama_ggml.has("avx512") and ("AVX = 1" in info) == llama_ggml.has("avx")
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert llama_ggml.f32_step() == (64 if llama_ggml.has("avx512") else 32)


@pytest.mark.parametrize("tokens", [1, 3])
@pytest.mark.parametrize("head_size", HEAD_SIZES)
def test_llama_cpps_wkv7_is_the_kernel_model_with_its_builds_step(head_size, tokens, llama_ggml):
    """Heads that are not a multiple of the build's GGML_F32_STEP come out as the overrunning loop computes them,
    the others as the recurrence; llama.cpp's values agree with the model to float32 rounding."""
    step = llama_ggml.f32_step()
    case = random_case(tokens=tokens, heads=3, head_size=head_size, seed=head_size + tokens)
    got_out, got_state = llama_ggml.wkv7(case)
    model_out, model_state = wkv7_simd_model(case, step)
    ref_out, _ = wkv7_reference(case)
    scale = max(1.0, float(np.abs(model_out).max()))
    np.testing.assert_allclose(got_out, model_out, rtol=0, atol=2e-5 * scale)
    np.testing.assert_allclose(got_state, model_state, rtol=0, atol=2e-5 * max(1.0, float(np.abs(model_state).max())))
    assert (np.abs(got_out - ref_out).max() > 0.1) == _overruns(head_size, step)
