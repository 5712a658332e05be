"""``diff``: metadata, tensor infos and dequantized value differences, checked against numpy."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from conftest import corpus_file

import gguf_construct as gc
from gguf_construct.cli.diff import diff_files
from gguf_construct.data import example_path


def run(*args):
    return subprocess.run([sys.executable, "-m", "gguf_construct.cli.main", *map(str, args)], capture_output=True, text=True, timeout=120)


def test_identical_files():
    d = diff_files(gc.load(example_path()), gc.load(example_path()))
    assert d["same"] and d["tensors"]["identical"] == len(gc.load(example_path()).tensors)
    r = run("diff", example_path(), example_path())
    assert r.returncode == 0 and r.stdout.rstrip().endswith("same")


def test_metadata_and_values(tmp_path):
    f = gc.load(example_path())
    f.metadata["general.name"] = "changed"
    f.metadata.set("llama.context_length", 512, type="u64")
    del f.metadata["tokenizer.ggml.eos_token_id"]
    f.metadata["my.new"] = 1
    q = f.tensors["blk.0.attn_q.weight"].to_numpy()
    noisy = (q + np.float32(1e-3) * np.sign(q)).astype(np.float16)
    f.tensors.replace("blk.0.attn_q.weight", noisy)
    f.tensors.replace("output_norm.weight", np.ones(f.tensors["output_norm.weight"].shape, dtype=np.float16))  # type change, same values
    out = tmp_path / "b.gguf"
    f.save(out)
    d = diff_files(gc.load(example_path()), gc.load(out))
    m = d["metadata"]
    assert [e["key"] for e in m["only_a"]] == ["tokenizer.ggml.eos_token_id"] and [e["key"] for e in m["only_b"]] == ["my.new"]
    changed = {e["key"]: e for e in m["changed"]}
    assert changed["general.name"]["value"] == ["gguf-construct example", "changed"]
    assert changed["llama.context_length"]["type"] == ["u32", "u64"]
    t = {e["name"]: e for e in d["tensors"]["changed"]}
    want = np.abs(q.astype(np.float64) - noisy.astype(np.float64))
    assert t["blk.0.attn_q.weight"]["values"]["max_abs"] == want.max()
    assert t["blk.0.attn_q.weight"]["values"]["max_rel"] == want.max() / np.abs(q.astype(np.float64)).max()
    assert t["output_norm.weight"]["type"] == ["f32", "f16"] and t["output_norm.weight"]["values"]["max_abs"] == 0
    assert d["tensors"]["identical"] == len(f.tensors) - 2 and not d["same"]
    r = run("diff", "--json", example_path(), out)
    assert r.returncode == 1 and json.loads(r.stdout)["metadata"]["only_b"][0]["key"] == "my.new"


def test_big_and_little_endian_twins_hold_the_same_values():
    d = diff_files(gc.load(corpus_file("generated/gguf-py-le.gguf")), gc.load(corpus_file("generated/gguf-py-be.gguf")))
    assert d["header"] == {"byte_order": ["little", "big"]}
    assert not d["metadata"]["changed"]
    # multi-byte types differ in bytes but not in value
    assert d["tensors"]["changed"] and all(
        e["values"]["max_abs"] == 0 and e["values"]["nan_mismatch"] == 0 for e in d["tensors"]["changed"]
    )
