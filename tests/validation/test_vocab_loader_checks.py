"""Warnings for vocabularies llama.cpp's loader refuses or aborts on (src/llama-vocab.cpp): duplicate tokens and
BYTE tokens it cannot decode. GGUF allows both, so they are warnings; llama.cpp's verdict is checked too."""

from __future__ import annotations

import pytest

import gguf_construct as gc


def _vocab(tmp_path, model: str, tokens: list[str], types: list[int]):
    f = gc.new()
    f.metadata["general.architecture"] = "llama"
    f.metadata["tokenizer.ggml.model"] = model
    f.metadata["tokenizer.ggml.tokens"] = tokens
    f.metadata.set("tokenizer.ggml.token_type", types, type="arr[i32]")
    path = tmp_path / "v.gguf"
    f.save(path)
    return path


def _warnings(path) -> dict[str, str]:
    return {i.rule: i.severity for i in gc.validate(path) if i.rule.startswith("tokenizer.")}


@pytest.mark.parametrize(
    "model, tokens, types, rule",
    [
        ("llama", ["<unk>", "a", "b", "a"], [2, 1, 1, 1], "tokenizer.duplicate"),
        ("bert", ["[PAD]", "a", "b"], [3, 1, 6], "tokenizer.byte_token"),
        ("llama", ["<unk>", "<0x-1>"], [2, 6], "tokenizer.byte_token"),
        ("llama", ["<unk>", "<0x4>"], [2, 6], "tokenizer.byte_token"),
    ],
)
def test_refused_vocabularies_are_warned_about(tmp_path, model, tokens, types, rule):
    assert _warnings(_vocab(tmp_path, model, tokens, types)) == {rule: "warning"}


def test_good_byte_tokens_and_other_models_pass(tmp_path):
    assert _warnings(_vocab(tmp_path, "llama", ["<unk>", "<0x0A>", "<0xff>"], [2, 6, 6])) == {}
    assert _warnings(_vocab(tmp_path, "gpt2", ["a", "<0x-1>"], [1, 6])) == {}  # BPE reads byte tokens otherwise
