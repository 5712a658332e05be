"""``validate --profile ggml`` refuses what llama.cpp's loader refuses of a known architecture (a required tensor
missing, a tensor of the wrong shape: ``schema/arch_tensors.json``), checked against llama.cpp itself; the shipped
example is a model llama.cpp loads and runs, and the planner plans."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from oracles import llama_logits

import gguf_construct as gc
from gguf_construct.data import example_path


def arch_issues(path: Path, profile: str = "ggml") -> list[str]:
    return [i.message for i in gc.validate(path, profile) if i.rule == "tensor.architecture"]


def llama_cpp_loads(path: Path) -> bool:
    from llama_cpp import Llama

    try:
        llm = Llama(model_path=str(path), n_ctx=32, n_threads=1, verbose=False)
    except ValueError:
        return False
    llm.close()
    return True


def test_llama_cpp_loads_and_runs_the_example() -> None:
    assert arch_issues(example_path()) == []
    assert [i for i in gc.validate(example_path(), "ggml") if i.severity == "error"] == []
    n_vocab = len(gc.load(example_path()).metadata["tokenizer.ggml.tokens"])
    logits = llama_logits(example_path(), [1, 3])
    assert logits.shape == (n_vocab,) and np.isfinite(logits).all() and np.ptp(logits) > 0


def test_the_planner_plans_the_example() -> None:
    plan = gc.plan(example_path(), n_ctx=64)
    assert plan.model_bytes >= sum(t.nbytes for t in gc.load(example_path()).tensors.values()) and plan.kv_bytes > 0
    assert plan.compute_bytes


def edited(tmp_path: Path, name: str, drop: str | None = None, reshape: tuple[str, np.ndarray] | None = None) -> Path:
    f = gc.load(example_path())
    out = gc.new()
    for key in f.metadata:
        out.metadata.set(key, f.metadata[key], type=f.metadata.type_of(key))
    for n in f.tensors:
        if n == drop:
            continue
        if reshape and n == reshape[0]:
            out.tensors.add(n, reshape[1])
        else:
            t = f.tensors[n]
            out.tensors.add(n, t.data, t.type.name, t.shape)
    path = tmp_path / name
    out.save(path)
    return path


def test_a_missing_tensor_is_refused_as_llama_cpp_refuses_it(tmp_path: Path) -> None:
    path = edited(tmp_path, "no-attn-k.gguf", drop="blk.1.attn_k.weight")
    assert arch_issues(path) == ["no tensor blk.1.attn_k.weight: llama.cpp's loader requires it for llama"]
    assert arch_issues(path, "spec") == []  # the spec knows nothing of llama.cpp's loader
    assert not llama_cpp_loads(path)


def test_a_wrong_shape_is_refused_as_llama_cpp_refuses_it(tmp_path: Path) -> None:
    path = edited(tmp_path, "narrow-ffn.gguf", reshape=("blk.0.ffn_up.weight", np.zeros((48, 32), np.float16)))
    assert arch_issues(path) == ["blk.0.ffn_up.weight is [32, 48], llama.cpp's loader expects [32, 64] (n_embd, n_ff)"]
    assert not llama_cpp_loads(path)


def test_an_optional_tensor_is_checked_when_present(tmp_path: Path) -> None:
    f = gc.load(example_path())
    n_vocab, n_embd = f.tensors["token_embd.weight"].shape[1], f.tensors["token_embd.weight"].shape[0]
    good = edited(tmp_path, "tied.gguf", reshape=("output_norm.weight", np.ones(n_embd, np.float32)))
    assert arch_issues(good) == []
    f.tensors.add("output.weight", np.zeros((n_vocab + 1, n_embd), np.float16))
    f.save(tmp_path / "bad-output.gguf")
    assert arch_issues(tmp_path / "bad-output.gguf") == [
        f"output.weight is [{n_embd}, {n_vocab + 1}], llama.cpp's loader expects [{n_embd}, {n_vocab}] (n_embd, n_vocab)"
    ]


@pytest.mark.parametrize(
    "key, value, kind",
    [
        ("llama.block_count", 2**32 - 1, "u32"),  # a hostile count: not a loop of four billion layers
        ("llama.attention.head_count", 0, "u32"),  # no head: no head size to derive, nothing claimed
        ("llama.embedding_length", -1, "i64"),
        ("llama.attention.head_count_kv", np.array([4, 2**31 - 1, 4], np.int32), "arr[i32]"),  # per layer, odd
        ("llama.feed_forward_length", "wide", "str"),
    ],
)
def test_odd_hyperparameters_give_findings_not_failures(tmp_path: Path, key: str, value: object, kind: str) -> None:
    f = gc.load(example_path())
    f.metadata.set(key, value, type=kind)
    f.save(tmp_path / "odd.gguf", keep_valid=False)  # a hostile file: the writer would refuse it otherwise
    start = time.perf_counter()
    found = arch_issues(tmp_path / "odd.gguf")
    assert time.perf_counter() - start < 5
    assert all(m.startswith(("no tensor", "blk.", "token_embd", "output")) for m in found), found


def test_files_that_are_not_a_whole_model_are_not_checked(tmp_path: Path) -> None:
    f = gc.load(example_path())
    vocab = gc.new()
    for key in f.metadata:
        vocab.metadata.set(key, f.metadata[key], type=f.metadata.type_of(key))
    vocab.save(tmp_path / "vocab.gguf")
    assert arch_issues(tmp_path / "vocab.gguf") == []
    f = gc.load(edited(tmp_path, "shard.gguf", drop="blk.0.attn_q.weight"))
    f.metadata.set("split.count", 2, type="u16")
    f.save(tmp_path / "shard-of-two.gguf")
    assert arch_issues(tmp_path / "shard-of-two.gguf") == []
    other = gc.new()  # a llama key over tensors that are none of llama's (ggml's own test files)
    other.metadata["general.architecture"] = "llama"
    other.tensors.add("blk.0.q", np.zeros(4, np.float32))
    other.save(tmp_path / "not-a-model.gguf")
    assert arch_issues(tmp_path / "not-a-model.gguf") == []


def test_scan_reports_what_validate_reports_under_ggml(tmp_path: Path) -> None:
    """``scan --profile ggml`` runs the model loader's checks as ``validate`` does, on local files and URLs."""
    from gguf_construct.cli.scan_runner import scan_one
    from tests.http_testserver import TestServer

    path = edited(tmp_path, "no-attn-k.gguf", drop="blk.1.attn_k.weight")
    with TestServer() as server:
        url = server.add_file("/no-attn-k.gguf", path)
        for source in (str(path), url):
            line = scan_one(source, "ggml")
            assert [i["message"] for i in line["issues"] if i["rule"] == "tensor.architecture"] == arch_issues(path)
            assert line["ok"] is False
            assert [i for i in scan_one(source, "spec")["issues"] if i["rule"] == "tensor.architecture"] == []


@pytest.mark.parametrize("arch", ["jamba", "granitehybrid", "lfm2", "nemotron_h"])
def test_per_layer_hyperparameters_are_valid_as_llama_cpp_reads_them(arch, tmp_path):
    """Hybrid models store head_count_kv (and head_count, feed_forward_length) as one value per layer, which
    llama.cpp reads with get_key_or_arr: valid under both profiles, and a file llama.cpp loads."""
    from tests.planning.tiny_hybrid import HYBRID_BUILDERS

    path = tmp_path / f"{arch}.gguf"
    HYBRID_BUILDERS[arch]().save(path, keep_valid=False)
    f = gc.load(path)  # strict: the key types are the spec's as llama.cpp reads them
    assert len(f.metadata[f"{arch}.attention.head_count_kv"]) == f.metadata[f"{arch}.block_count"]
    for profile in ("spec", "ggml"):
        assert [i.message for i in gc.validate(path, profile) if i.rule == "key.type"] == []
    assert llama_cpp_loads(path)
