"""Every tiny model of tests/tiny_models.py loads in llama.cpp and gets a context: the right architecture, all
tensors taken (llama.cpp refuses a file with a tensor it does not create), the cache of the right kind."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp")

from gguf_construct.api.gguf_file import load_gguf  # noqa: E402
from tests.llama_memory import measure  # noqa: E402
from tests.tiny_models import BUILDERS, WEIGHT_TYPES  # noqa: E402

RECURRENT = {"mamba", "mamba2", "rwkv6", "rwkv7"}
SWA = {"gemma2", "gemma3", "gpt-oss"}
# one more weight type per architecture, in turn, so that every type is loaded by several architectures
OTHER_TYPE = {arch: [t for t in WEIGHT_TYPES if t != "f16"][i % 4] for i, arch in enumerate(BUILDERS)}


def _loaded(arch: str, wtype: str, tmp_path) -> None:
    kw = {"n_embd": 256} if wtype == "q4_K" and arch in RECURRENT else {}  # whole q4_K blocks in the rows
    path = tmp_path / f"{arch}-{wtype}.gguf"
    BUILDERS[arch](wtype=wtype, **kw).save(path)
    m = measure(path, n_ctx=256, n_ubatch=64)
    log = "".join(m.log)
    assert f"arch                  = {arch}\n" in log
    data = sum(t.nbytes for t in load_gguf(path).tensors.values())
    assert m.total("model") >= data > 0
    assert m.total("compute") > 0 and m.total("context") > 0
    assert ("RS buffer size" in log) == (arch in RECURRENT)
    assert ("KV buffer size" in log) == (arch not in RECURRENT)
    assert ("creating     SWA KV cache" in log) == (arch in SWA)
    if wtype == "q4_0":  # repacked for the CPU's matrix kernels on every x86-64 with AVX2
        assert m.buffers["CPU_REPACK"]["model"] > 0


@pytest.mark.parametrize("arch", BUILDERS)
def test_loads_in_llama_cpp(arch, tmp_path):
    _loaded(arch, "f16", tmp_path)


@pytest.mark.parametrize("arch", BUILDERS)
def test_loads_with_another_weight_type(arch, tmp_path):
    _loaded(arch, OTHER_TYPE[arch], tmp_path)


def test_weight_type_and_sizes_are_the_callers():
    f = BUILDERS["qwen3moe"](n_layer=3, n_embd=128, n_expert=4, n_expert_used=2, n_ff_exp=64, wtype="q8_0")
    md = f.metadata
    assert (md["qwen3moe.block_count"], md["qwen3moe.expert_count"], md["qwen3moe.expert_feed_forward_length"]) == (3, 4, 64)
    exps = f.tensors["blk.2.ffn_up_exps.weight"]
    assert (exps.type.name, tuple(exps.shape)) == ("q8_0", (128, 64, 4))
    assert f.tensors["blk.0.attn_norm.weight"].type.name == "f32"
    with pytest.raises(ValueError, match="wtype"):
        BUILDERS["llama"](wtype="q5_0")
