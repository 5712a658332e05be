"""Every writer's output passes the strictest profile that applies to it, with the standard keys.

GGUF outputs: ``validate --profile ggml --keys``; legacy outputs (``export``): the 'ggml' profile of their format;
safetensors outputs: 'hf'. Inputs: the shipped example, small files of tests/data, and small models drawn by
hypothesis (shapes, types, metadata); each writer runs the way a user runs it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_llama import llama_model

from gguf_construct.api.gguf_file import load_gguf
from gguf_construct.cli.main import main
from gguf_construct.cli.validate import validate_one
from gguf_construct.data import example_path

DATA = Path(__file__).parents[1] / "data"
LEGACY = [
    DATA / "legacy" / "ggmf-v1-llama-vocab.bin",
    DATA / "legacy" / "whisper-ggml-tiny.bin",
    DATA / "legacy-real" / "ggjt-v3" / "t256-ggjt-v3-Q4_0.bin",
    *sorted((DATA / "rwkv").glob("*.bin")),
]
GGUF_INPUTS = [
    example_path(),
    DATA / "generated" / "gguf-py-le.gguf",
    DATA / "generated" / "ggml-writer-all-types.gguf",
    DATA / "gguf" / "v3-llama-vocab.gguf",
]
FAST = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def errors(path: Path, profile: str = "ggml") -> list[str]:
    """The errors ``validate --keys --profile PROFILE`` reports for ``path``."""
    result = validate_one(str(path), profile, keys=True)
    return [f"{i['rule']}: {i['message']}" for i in result["issues"] if i["severity"] == "error"]


def assert_valid(path: Path, profile: str = "ggml", source: Path | None = None) -> None:
    """No error; with ``source`` (an input that breaks rules itself), no error the input did not already have."""
    already = set(errors(source)) if source is not None else set()
    assert [e for e in errors(path, profile) if e not in already] == [], path


def cli(*args: object) -> None:
    assert main([str(a) for a in args]) == 0, args


# -- quantize ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["q8_0", "q4_0", "q4_K", "q6_K", "Q4_K_M", "Q3_K_S", "Q2_K", "Q5_K_M"])
def test_quantize_writes_llama_quantize_keys(target, tmp_path):
    from gguf_construct.cli.quantize import quantize_file
    from gguf_construct.quants.quantize.policy import file_type_of, quantization_version

    src = example_path() if target.islower() and target[-1] != "K" else tmp_path / "m.gguf"
    if src != example_path():
        llama_model().save(src)
    out = tmp_path / "q.gguf"
    quantize_file(str(src), str(out), target, log=lambda line: None)
    assert_valid(out)
    g = load_gguf(out)
    assert g.metadata["general.quantization_version"] == quantization_version() == 2
    assert g.metadata["general.file_type"] == file_type_of(target)


def test_quantize_file_type_names_the_mix(tmp_path):
    """``general.file_type`` is llama_ftype's value for the mix (15 = MOSTLY_Q4_K_M, 7 = MOSTLY_Q8_0)."""
    from gguf_construct.cli.quantize import quantize_file

    src = tmp_path / "m.gguf"
    llama_model(n_layer=1).save(src)
    for target, ftype in (("Q4_K_M", 15), ("q8_0", 7), ("Q5_K_S", 16), ("Q3_K_L", 13)):
        quantize_file(str(src), str(tmp_path / f"{target}.gguf"), target, log=lambda line: None)
        assert load_gguf(tmp_path / f"{target}.gguf").metadata["general.file_type"] == ftype


def test_quantize_of_a_legacy_and_a_safetensors_file(tmp_path):
    from gguf_construct.cli.quantize import quantize_file

    out = tmp_path / "ggjt.gguf"
    quantize_file(str(DATA / "legacy-real" / "ggjt-v3" / "t256-ggjt-v3-Q4_0.bin"), str(out), "q8_0", log=lambda line: None)
    assert_valid(out)
    assert load_gguf(out).metadata["general.architecture"] == "llama"
    st_path = tmp_path / "m.safetensors"
    cli("convert", example_path(), st_path)
    quantize_file(str(st_path), str(tmp_path / "st.gguf"), "q8_0", log=lambda line: None)
    assert_valid(tmp_path / "st.gguf")


@FAST
@given(
    target=st.sampled_from(["q8_0", "q4_1", "q5_K", "Q4_K_S", "Q6_K", "Q3_K_M"]),
    n_layer=st.integers(1, 3),
    n_head_kv=st.sampled_from([1, 4]),
    f32=st.booleans(),
)
def test_quantize_drawn_models(target, n_layer, n_head_kv, f32, tmp_path_factory):
    from gguf_construct.cli.quantize import quantize_file

    d = tmp_path_factory.mktemp("q")
    llama_model(n_layer=n_layer, n_head_kv=n_head_kv, dtype=np.float32 if f32 else np.float16).save(d / "m.gguf")
    quantize_file(str(d / "m.gguf"), str(d / "q.gguf"), target, log=lambda line: None)
    assert_valid(d / "q.gguf")


# -- convert ---------------------------------------------------------------------------------------------------------
def test_the_gguf_inputs_that_should_be_valid_are():
    """The full-validity claims above rest on these inputs passing themselves (the others carry their own errors)."""
    assert errors(example_path()) == []
    assert errors(DATA / "gguf" / "v3-llama-vocab.gguf") == []


@pytest.mark.parametrize("src", GGUF_INPUTS, ids=lambda p: p.name)
def test_convert_gguf_to_gguf_safetensors_and_ollama(src, tmp_path):
    cli("convert", src, tmp_path / "v2.gguf", "--version", "2")
    assert_valid(tmp_path / "v2.gguf", source=src)
    cli("convert", src, tmp_path / "be.gguf", "--byte-order", "big")
    assert_valid(tmp_path / "be.gguf", "spec", source=src)  # ggml reads its own byte order only: 'spec' is the strictest
    if len(load_gguf(src).tensors):
        cli("convert", src, tmp_path / "out.safetensors")
        assert_valid(tmp_path / "out.safetensors", "hf")
        cli("convert", tmp_path / "out.safetensors", tmp_path / "back.gguf")
        assert_valid(tmp_path / "back.gguf", source=src)
        cli("convert", src, str(tmp_path / "ollama") + "/")
        blobs = [p for p in (tmp_path / "ollama").rglob("sha256-*")]
        assert blobs
        for blob in blobs:
            if blob.stat().st_size < 1 << 20 and blob.read_bytes()[:1] != b"{":
                assert errors(blob, "hf") == [], blob


# -- migrate and export --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("src", LEGACY, ids=lambda p: p.name)
def test_migrate_and_export(src, tmp_path):
    from gguf_construct.migration import export, migrate

    out = tmp_path / "m.gguf"
    migrate(src, out)
    assert_valid(out)
    arch = load_gguf(out).metadata["general.architecture"]
    to = "ggjt" if arch == "llama" else "rwkv" if arch.startswith("rwkv") else None
    if to:
        export(out, tmp_path / "back.bin", to)
        assert errors(tmp_path / "back.bin") == []


# -- set, delete, rename-tensor, split, merge --------------------------------------------------------------------------
@pytest.mark.parametrize("src", GGUF_INPUTS, ids=lambda p: p.name)
def test_edits_split_and_merge(src, tmp_path):
    from gguf_construct.api.shard_set import merge, split

    f = tmp_path / "f.gguf"
    shutil.copy(src, f)
    cli("set", f, "general.name", "edited")
    cli("set", f, "general.description", "a file edited by a test")
    cli("delete", f, "general.description")
    names = list(load_gguf(f).tensors)
    if names:
        cli("rename-tensor", f, names[-1], names[-1] + "_x")
        cli("rename-tensor", f, names[-1] + "_x", names[-1])
    assert_valid(f, source=src)
    if len(names) < 2:
        return
    split(load_gguf(f), tmp_path / "s", max_tensors=max(1, len(names) // 3))
    shards = sorted(tmp_path.glob("s-*-of-*.gguf"))
    assert len(shards) > 1
    for shard in shards:
        assert_valid(shard, source=src)
    merge(shards[0], tmp_path / "merged.gguf")
    assert_valid(tmp_path / "merged.gguf", source=src)


# -- new().save() ----------------------------------------------------------------------------------------------------
@FAST
@given(n_layer=st.integers(1, 2), f32=st.booleans())
def test_new_model_with_its_keys_validates(n_layer, f32, tmp_path_factory):
    d = tmp_path_factory.mktemp("n")
    llama_model(n_layer=n_layer, dtype=np.float32 if f32 else np.float16, n_embd=64, n_ff=128).save(d / "m.gguf")
    assert_valid(d / "m.gguf")


@FAST
@given(data=st.data(), profile=st.sampled_from(["llama", "gpt2", "gptj", "gptneox", "mpt", "starcoder", "whisper"]))
def test_migrate_drawn_example_files(data, profile, tmp_path_factory):
    """ggml-example and whisper.cpp files drawn from their schemas migrate to files with their architecture's keys."""
    from gguf_construct.migration import migrate
    from gguf_construct.testing.strategies import legacy_bytes

    d = tmp_path_factory.mktemp("x")
    (d / "in.bin").write_bytes(data.draw(legacy_bytes(fmt="ggml", profile=profile)))
    try:
        migrate(d / "in.bin", d / "out.gguf")
    except Exception as e:  # a drawn file may be one migration refuses by a named rule (a tensor it has no name for)
        from gguf_construct.errors import FormatError

        assert isinstance(e, FormatError) and e.rule != "migrate.verify", e
        return
    assert_valid(d / "out.gguf")


def test_quantize_then_validate_as_a_user_does(tmp_path):
    """``quantize EXAMPLE q8.gguf --type q8_0``, then ``validate --keys --profile ggml`` and ``info``, as commands."""
    import subprocess
    import sys

    def run(*args: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gguf_construct.cli.main", *map(str, args)], capture_output=True, text=True, timeout=300
        )

    out = tmp_path / "q8.gguf"
    assert run("quantize", example_path(), out, "--type", "q8_0").returncode == 0
    checked = run("validate", "--keys", "--profile", "ggml", out)
    assert checked.returncode == 0, checked.stdout
    assert "MOSTLY_Q8_0" in run("info", out).stdout
    assert run("quantize", example_path(), tmp_path / "m.gguf", "--type", "Q4_K_M").returncode == 0
    assert run("validate", "--keys", "--profile", "ggml", tmp_path / "m.gguf").returncode == 0
