"""The contexts llama.cpp refuses, refused by the plan too, and only those: a quantized K or V cache whose block
does not divide the head size under flash attention (on or auto), checked against llama.cpp's own answer over
head sizes, cache types and flash-attention modes; and a 201k vocabulary (gpt-oss's) planned to the byte."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp")

from gguf_construct.planning import PlanError, plan  # noqa: E402
from tests.llama_memory import measure  # noqa: E402
from tests.planning.compute_check import planned_and_measured  # noqa: E402
from tests.tiny_models import gpt_oss, llama, zero_filled  # noqa: E402

CACHES = [("q8_0", "f16"), ("q4_0", "f16"), ("iq4_nl", "f16"), ("q5_1", "f16"), ("bf16", "f16"), ("f16", "q8_0"), ("f16", "q4_1")]


@pytest.fixture(scope="module")
def heads(tmp_path_factory):
    """llama files with heads of 16, 48 and 64 values."""
    out = {}
    for head in (16, 48, 64):
        path = tmp_path_factory.mktemp("heads") / f"head{head}.gguf"
        llama(n_embd=head * 4, n_head=4, n_head_kv=4, n_ff=128).save(path)
        out[head] = path
    return out


@pytest.mark.parametrize("head", [16, 48, 64])
def test_block_refusals_are_llama_cpps(heads, head):
    """For every cache pair and flash mode: the plan refuses exactly when llama.cpp refuses, and says why."""
    for type_k, type_v in CACHES:
        for flash in ("on", "auto", "off"):
            if flash == "off" and type_v != "f16":
                continue  # a quantized V cache needs flash attention: refused by both, tested elsewhere
            settings = dict(n_ctx=512, type_k=type_k, type_v=type_v, flash_attn=flash)
            try:
                measure(heads[head], **settings)
                llama_refuses = False
            except RuntimeError as e:
                assert "does not divide" in str(e), e
                llama_refuses = True
            try:
                plan(heads[head], **settings)
                plan_refuses = False
            except PlanError as e:
                assert e.rule == "plan.request" and "do not divide the head size" in str(e)
                plan_refuses = True
            assert plan_refuses == llama_refuses, (head, settings)
    if head == 16:  # the case the table must contain: heads of 16 with q8_0
        with pytest.raises(PlanError, match="q8_0 K cache has blocks of 32"):
            plan(heads[16], n_ctx=512, type_k="q8_0")


@pytest.mark.parametrize(
    "settings",
    [dict(n_ctx=4096), dict(n_ctx=4096, flash_attn="off"), dict(n_ctx=8192, n_ubatch=2048, type_k="q8_0", type_v="q8_0")],
    ids=["fa-auto", "fa-off", "q8_0-ubatch2048"],
)
def test_gpt_oss_with_a_201k_vocabulary(tmp_path_factory, settings):
    """gpt-oss's vocabulary of 201,088 tokens: the output rows dominate the compute buffer (hundreds of MiB)."""
    path = tmp_path_factory.getbasetemp() / "gpt-oss-201k.gguf"
    if not path.exists():
        zero_filled(gpt_oss, n_vocab=201_088).save(path)
    planned, measured = planned_and_measured(path, **settings)
    assert planned == measured and measured > 200 * 2**20
