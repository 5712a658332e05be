"""``info`` and ``validate`` on every format ``detect()`` knows, from the command line: legacy, rwkv.cpp and
safetensors files give a report, JSON that names their format and tensors, and exit 0; a file that is no model
gives exit 1 with the reason."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import corpus_files

import gguf_construct as gc

OTHER_FORMATS = [p for p in corpus_files("legacy/*.bin") if "not-a-model" not in p.name] + corpus_files("rwkv/*5v2*.bin")


def run(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gguf_construct.cli.main", *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def safetensors_file(tmp_path_factory):
    from safetensors.numpy import save_file

    path = tmp_path_factory.mktemp("st") / "model.safetensors"
    save_file({"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(5, dtype=np.float16)}, str(path), metadata={"k": "v"})
    return path


def check_info(path):
    f = gc.load(path)
    out = run("info", "--json", path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["format"] == f.format
    assert list(report["tensors"]) == list(f.tensors)
    assert [t["shape"] for t in report["tensors"].values()] == [list(t.shape) for t in f.tensors.values()]
    text = run("info", path)
    assert text.returncode == 0 and f.format in text.stdout
    val = run("validate", path)
    assert val.returncode == 0, val.stdout + val.stderr


@pytest.mark.parametrize("path", OTHER_FORMATS, ids=lambda p: p.name)
def test_info_and_validate_on_legacy_and_rwkv_files(path):
    check_info(path)


def test_info_and_validate_on_a_safetensors_file(safetensors_file):
    check_info(safetensors_file)
    assert json.loads(run("info", "--json", safetensors_file).stdout)["summary"]["parameters"] == 17


def test_a_file_that_is_no_model_is_named_as_such():
    [dump] = corpus_files("legacy/not-a-model-*.bin")
    for cmd in ("info", "validate"):
        out = run(cmd, dump)
        assert out.returncode == 1
        assert "format.not_a_model" in out.stdout + out.stderr and "vocabulary dump" in out.stdout + out.stderr


def test_profiles_apply_to_the_formats_they_are_about(tmp_path):
    """'hf' makes a gap before the first tensor an error (the safetensors library refuses it, MLX reads it) and
    checks a GGUF file under 'spec'; 'ggml' checks a safetensors file under 'spec'."""
    header = b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}'
    header += b" " * (-len(header) % 8)
    gap = tmp_path / "gap.safetensors"
    gap.write_bytes(len(header).to_bytes(8, "little") + header + bytes(16))
    example = gc.load(run("example").stdout.strip()).path
    assert run("validate", "--profile", "spec", gap).returncode == 0
    assert run("validate", "--profile", "ggml", gap).returncode == 0
    hf = run("validate", "--profile", "hf", gap, example)
    assert hf.returncode == 1 and "error: [data.gap]" in hf.stdout and f"{example}: ok (hf profile)" in hf.stdout
