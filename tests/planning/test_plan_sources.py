"""The plan of a split set (local and over HTTP from a loopback server) is llama.cpp's, from the headers alone;
an architecture the rules do not know still gets its weights planned; GPU placement and ``auto``; the CLI."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from http_testserver import TestServer
from tiny_models import BUILDERS

import gguf_construct as gc
from gguf_construct.api.shard_set import split
from gguf_construct.cli.main import main
from gguf_construct.planning import plan
from gguf_construct.planning.weights import INPUT, OUTPUT, on_gpu
from gguf_construct.sources.options import configure

FAST = {"retries": 2, "backoff": 0.01, "connect_timeout": 5.0, "read_timeout": 10.0, "request_deadline": 30.0}


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def shards(tmp_path):
    f = BUILDERS["llama"](wtype="q4_0", n_layer=3)
    return split(f, tmp_path / "tiny", max_tensors=9)


def test_split_set_matches_llama_cpp(shards):
    pytest.importorskip("llama_cpp")
    from llama_memory import cpu_features, measure

    assert len(shards) >= 3
    m = measure(shards[0], n_ctx=512)
    p = plan(shards[0], n_ctx=512, features=cpu_features())
    assert dict(p.weights.by_buffer) == {k: b["model"] for k, b in m.buffers.items() if b["model"]}
    assert p.kv_bytes == m.total("context")


def test_remote_split_set_is_planned_from_its_headers(tmp_path):
    shards = split(BUILDERS["llama"](n_layer=3, n_embd=512, n_ff=1024), tmp_path / "big", max_tensors=9)
    previous = configure(**FAST)
    try:
        with TestServer() as server:
            for path in shards:
                server.add(f"/m/{path.name}", path.read_bytes())
            local = plan(shards[0], n_ctx=1024, features=("avx2",)).to_json()
            remote = plan(server.url(f"/m/{shards[0].name}"), n_ctx=1024, features=("avx2",)).to_json()
            assert remote == local
            size = sum(p.stat().st_size for p in shards)
            assert 0 < server.counts.bytes < size / 4  # headers only, never the tensor data
            code, out, _ = cli("plan", server.url(f"/m/{shards[0].name}"), "--ctx", "1024", "--cpu", "avx2", "--json")
            assert code == 0 and json.loads(out)["kv_bytes"] == local["kv_bytes"]
    finally:
        configure(previous)


def test_unknown_architecture_plans_weights_and_says_what_it_cannot(tmp_path):
    f = BUILDERS["llama"]()
    f.metadata["general.architecture"] = "mystery"
    for key in [k for k in f.metadata if k.startswith("llama.")]:
        f.metadata[key.replace("llama.", "mystery.", 1)] = f.metadata[key]
        del f.metadata[key]
    f.save(tmp_path / "m.gguf")
    p = gc.plan(tmp_path / "m.gguf")
    assert p.model_bytes == sum(t.nbytes for t in f.tensors.values())  # one mapped span, the whole data
    assert p.kv_bytes == 0 and p.compute_bytes is None and p.total_bytes is None
    assert any("'mystery' is not in schema/memory.json" in n for n in p.notes)
    code, out, _ = cli("plan", str(tmp_path / "m.gguf"), "--json")
    assert code == 0 and json.loads(out)["total_bytes"] is None


def test_gpu_placement_follows_llama_cpp():
    # n_layer 4: 1 offloads the output layer, 2 adds layer 3, 5 everything but the input layer
    assert [on_gpu(OUTPUT, 4, n) for n in range(3)] == [False, True, True]
    assert [on_gpu(3, 4, n) for n in range(4)] == [False, False, True, True]
    assert [on_gpu(0, 4, n) for n in (4, 5, 99)] == [False, True, True]
    assert not on_gpu(INPUT, 4, 99)


def test_auto_finds_the_most_layers_that_fit(tmp_path):
    BUILDERS["llama"](n_layer=4).save(tmp_path / "m.gguf")
    two = plan(tmp_path / "m.gguf", n_ctx=512, n_gpu_layers=2)
    assert two.gpu["total_bytes"] > 0 and two.weights.gpu > 0
    fit = plan(tmp_path / "m.gguf", n_ctx=512, n_gpu_layers="auto", gpu_mem=two.gpu["total_bytes"])
    assert fit.n_gpu_layers == 2
    assert plan(tmp_path / "m.gguf", n_ctx=512, n_gpu_layers="auto", gpu_mem=two.gpu["total_bytes"] - 1).n_gpu_layers == 1
    everything = plan(tmp_path / "m.gguf", n_ctx=512, n_gpu_layers=99)
    assert everything.weights.by_buffer.keys() == {"GPU", "CPU_Mapped"}  # the input layer stays on the CPU


def test_cli_report_and_refusals(tmp_path):
    BUILDERS["gemma3"]().save(tmp_path / "g.gguf")
    code, out, _ = cli("plan", str(tmp_path / "g.gguf"), "--ctx", "8192", "--ubatch", "64")
    assert code == 0 and "sliding-window cache" in out and "KV cache" in out
    code, out, _ = cli("plan", str(tmp_path / "g.gguf"), "--json", "--parallel", "2", "--cache-type-k", "q8_0")
    data = json.loads(out)
    assert code == 0 and all(isinstance(data[k], int) for k in ("model_bytes", "kv_bytes", "recurrent_bytes", "n_ctx"))
    code, _, err = cli("plan", str(tmp_path / "g.gguf"), "--flash-attn", "off", "--cache-type-v", "q4_0")
    assert code == 2 and "needs flash attention" in err
    code, _, err = cli("plan", str(tmp_path / "g.gguf"), "--n-gpu-layers", "auto")
    assert code == 2 and "--gpu-mem" in err
    code, _, _ = cli("plan", str(tmp_path / "missing.gguf"))
    assert code == 2


def test_max_seconds_stops_a_remote_plan_after_its_fetches(tmp_path, monkeypatch):
    """``--max-seconds`` is the whole command's: a plan whose header arrived in time but whose planning outlasts
    the budget stops at the next step with ``remote.deadline`` (exit 2), not after the whole plan."""
    import time

    from gguf_construct.planning import planner

    BUILDERS["llama"]().save(tmp_path / "m.gguf")
    slow_steps = []

    def slow_compute(shape, ctx, checkpoint):
        slow_steps.append(time.monotonic())
        time.sleep(3.5)  # a planning step longer than the budget left: the header is read by now
        checkpoint()
        raise AssertionError("the deadline has passed: the checkpoint must have stopped the plan")

    monkeypatch.setattr(planner, "compute_bytes", slow_compute)
    previous = configure(**FAST)
    try:
        with TestServer() as server:
            server.add("/m.gguf", (tmp_path / "m.gguf").read_bytes())
            start = time.monotonic()
            code, _, err = cli("plan", server.url("/m.gguf"), "--ctx", "512", "--max-seconds", "3")
            assert code == 2 and "[remote.deadline]" in err, err
            assert slow_steps and time.monotonic() - start < 15
            assert server.counts.requests >= 1
    finally:
        configure(previous)
