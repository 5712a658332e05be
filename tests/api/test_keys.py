"""Typed access to the standard keys (``f.meta``) and the ``validate --keys`` rules."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import corpus_file

import gguf_construct as gc
from gguf_construct.data import example_path
from gguf_construct.errors import UnsupportedTypeError
from gguf_construct.validation import check_keys


def test_typed_reads_resolve_the_architecture_prefix():
    f = gc.load(example_path())
    assert f.meta.general.architecture == "llama"
    assert f.meta.llm.context_length == f.metadata["llama.context_length"] == 256
    assert f.meta.llm.attention.head_count == 4
    assert f.meta.tokenizer.ggml.bos_token_id == 1
    assert f.meta.general.license is None and f.meta.general["license.name"] is None  # standard, absent
    assert f.meta.general.base_model[0].name is None
    with pytest.raises(AttributeError):
        f.meta.general.contxt_length  # a typo is not a standard key  # noqa: B018
    assert "llm" in dir(f.meta) and "context_length" in dir(f.meta.llm)


def test_typed_reads_refuse_mistyped_values():
    f = gc.load(example_path())
    f.metadata.set("general.name", 7, type="u32")
    with pytest.raises(UnsupportedTypeError) as e:  # the catalogue's class for key.type
        f.meta.general.name  # noqa: B018
    assert e.value.rule == "key.type"
    f.metadata.set("llama.context_length", 2**40, type="u64")  # the spec's u64 is accepted too
    assert f.meta.llm.context_length == 2**40


def test_typed_writes_use_the_standard_type(tmp_path):
    f = gc.load(example_path())
    f.meta.general.base_model[0].name = "parent"
    f.meta.llm.rope.freq_base = 10000
    f.meta.split.count = 3
    assert f.metadata.type_of("general.base_model.0.name") == "str"
    assert f.metadata.type_of("llama.rope.freq_base") == "f32"
    assert f.metadata.type_of("split.count") == "u16"
    del f.meta.split.count
    assert "split.count" not in f.metadata
    out = tmp_path / "typed.gguf"
    f.save(out)
    from gguf import GGUFReader

    r = GGUFReader(out)
    assert r.fields["general.base_model.0.name"].contents() == "parent"
    assert r.fields["llama.rope.freq_base"].contents() == pytest.approx(10000)


def test_check_keys_missing_and_mistyped():
    f = gc.load(example_path())
    assert check_keys(f) == []
    del f.metadata["llama.block_count"]
    f.metadata.set("tokenizer.ggml.bos_token_id", 1, type="i8")
    found = {(i.rule, i.severity, i.message.split()[0]) for i in check_keys(f)}
    assert ("key.missing", "error", "llama.block_count") in found
    assert ("key.type", "error", "tokenizer.ggml.bos_token_id") in found
    del f.metadata["general.architecture"]
    assert any(i.rule == "key.missing" and "general.architecture" in i.message for i in check_keys(f))


def test_check_keys_quantized_needs_quantization_version_and_vocab_files_warn():
    f = gc.load(corpus_file("generated/gguf-py-le.gguf"))
    assert any("general.quantization_version" in i.message for i in check_keys(f))
    vocab = gc.load(corpus_file("gguf/v2-falcon-vocab.gguf"))  # lacks falcon.attention.use_norm
    issues = check_keys(vocab)
    assert issues and all(i.severity == "warning" and i.rule == "key.missing" for i in issues)


def test_check_keys_skips_later_shards():
    f = gc.new()
    f.metadata.set("split.no", 1, type="u16")
    f.tensors.add("x", np.zeros(4, dtype=np.float32))
    assert check_keys(f) == []


def test_validate_keys_cli(tmp_path):
    bad = tmp_path / "bad.gguf"
    f = gc.load(example_path())
    del f.metadata["llama.block_count"]
    f.save(bad)
    run = [sys.executable, "-m", "gguf_construct.cli.main", "validate"]
    assert subprocess.run([*run, str(bad)], capture_output=True, text=True).returncode == 0
    r = subprocess.run([*run, "--keys", str(bad), str(example_path())], capture_output=True, text=True)
    assert r.returncode == 1
    assert "[key.missing]" in r.stdout and "llama.block_count" in r.stdout
    assert "1 valid, 1 invalid" in r.stdout  # the summary table for several files
