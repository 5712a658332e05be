"""A header whose sizes do not fit its tensors (zero heads or experts, a wrong block count, a state size no
tensor has) is refused with a PlanError naming the architecture, as llama.cpp refuses the file; no IndexError,
KeyError, ZeroDivisionError or bare ValueError escapes the compute planner."""

from __future__ import annotations

import pytest

from gguf_construct.api.gguf_file import load_gguf
from gguf_construct.planning import PlanError, plan_shape
from gguf_construct.planning.context import ContextRequest
from gguf_construct.planning.shape import ModelShape
from tests.tiny_models import BUILDERS

ARCHS = ["qwen3moe", "qwen2moe", "gpt-oss", "glm4moe", "deepseek2", "mamba", "mamba2", "rwkv6", "rwkv7", "llama"]
VALUES = (0, 1, 7, 100_000)


@pytest.mark.parametrize("arch", ARCHS)
def test_every_integer_key_changed_plans_or_is_refused(arch, tmp_path):
    kw = dict(n_vocab=16, n_expert=4, n_expert_used=2) if arch == "llama" else dict(n_vocab=16)
    BUILDERS[arch](**kw).save(tmp_path / "m.gguf")
    f = load_gguf(tmp_path / "m.gguf")
    md = dict(f.metadata.items())
    tensors = ModelShape.of(f).tensors
    keys = [k for k, v in md.items() if k.startswith(f"{arch}.") and type(v) is int]
    assert len(keys) >= 5
    refused = 0
    for key in keys:
        for value in VALUES:
            try:  # the header's reading refuses some (more layers than llama.cpp holds), the planners the rest
                shape = ModelShape.from_metadata({**md, key: value}, tensors, arch)
                plan_shape(shape, ContextRequest(n_ctx=256, n_ubatch=32))
            except PlanError as e:
                assert arch in str(e) or "llama.cpp" in str(e)
                refused += 1
    assert refused  # some changes (block_count 7, embedding_length 0) cannot make the graph
