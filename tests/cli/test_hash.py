"""``hash``: the same lines as gguf-py's gguf_hash, and tensor-by-tensor comparison of two files."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import corpus_file

import gguf_construct as gc
from gguf_construct.cli.hash import compare, hash_file
from gguf_construct.data import example_path


def run(*args, cwd=None):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize(
    "path",
    [
        corpus_file("generated/gguf-py-le.gguf"),
        corpus_file("generated/ggml-writer-kquants.gguf"),
        corpus_file("generated/gguf-py-align64.gguf"),
        example_path(),
    ],
    ids=lambda p: p.name,
)
@pytest.mark.parametrize("flags", [[], ["--no-layer"]])
def test_same_output_as_gguf_hash(path, flags):
    ours = run("-m", "gguf_construct.cli.main", "hash", path, *flags)
    theirs = run("-m", "gguf.scripts.gguf_hash", path, *flags)
    assert ours.returncode == theirs.returncode == 0
    assert ours.stdout == theirs.stdout and ours.stdout.count("\n") >= 3


def test_skipped_buffers_like_gguf_hash(tmp_path):
    import numpy as np

    f = gc.load(example_path())
    f.tensors.add("blk.0.attention.bias", np.ones(8, dtype=np.float32))
    f.save(tmp_path / "b.gguf")
    h = hash_file(gc.load(tmp_path / "b.gguf"))
    assert "blk.0.attention.bias" not in h["tensors"]
    assert h == hash_file(gc.load(example_path()))  # the skipped buffer changes nothing
    assert "blk.0.attention.bias" in hash_file(gc.load(tmp_path / "b.gguf"), include_all=True)["tensors"]


def test_against_proves_a_rewrite_kept_every_tensor(tmp_path):
    src = corpus_file("generated/gguf-py-le.gguf")
    be = tmp_path / "v2.gguf"
    gc.load(src).save(be, version=2)  # another version: the header moves, tensor bytes must not
    r = run("-m", "gguf_construct.cli.main", "hash", src, "--against", be)
    assert r.returncode == 0 and "9 tensors identical, 0 different" in r.stdout
    f = gc.load(src)
    name = next(iter(f.tensors))
    t = f.tensors[name]
    f.tensors.replace(name, bytes(len(t.data)), ggml_type=t.type, shape=t.shape)
    f.save(tmp_path / "changed.gguf")
    c = compare(hash_file(gc.load(src)), hash_file(gc.load(tmp_path / "changed.gguf")))
    assert c["different"] == [name] and len(c["identical"]) == 8
    r = run("-m", "gguf_construct.cli.main", "hash", src, "--against", tmp_path / "changed.gguf")
    assert r.returncode == 1 and f"different  {name}" in r.stdout


def test_no_layer_json_has_only_the_whole_model_hashes():
    full = json.loads(run("-m", "gguf_construct.cli.main", "hash", example_path(), "--json").stdout)
    brief = json.loads(run("-m", "gguf_construct.cli.main", "hash", example_path(), "--json", "--no-layer").stdout)
    assert len(full["tensors"]) == len(gc.load(example_path()).tensors) > 0
    assert "tensors" not in brief
    assert brief == {k: v for k, v in full.items() if k != "tensors"} and brief["sha256"]
