"""The llama.cpp build the compute graph follows (``schema/memory.json`` ``builds``): the newer build's extra
input block is in its graph and only there, the choice reaches the plan and the command line, and an unknown
build is refused. The byte counts against the newer build itself are a rerun with that build as the oracle
(docs/howto/plan.md, Following a newer llama.cpp)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gguf_construct.api.gguf_file import load_gguf
from gguf_construct.planning import PlanError, plan
from gguf_construct.planning.compute import build_graph, reserved_batches
from gguf_construct.planning.compute.builds import DEFAULT, KNOWN, current, following
from gguf_construct.planning.context import ContextRequest, resolve
from gguf_construct.planning.shape import ModelShape
from tests.tiny_models import llama

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def path(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("builds") / "llama.gguf"
    llama().save(out)
    return out


def _ops(path: Path) -> list[str]:
    shape = ModelShape.of(load_gguf(path))
    ctx = resolve(shape, ContextRequest(n_ctx=512))
    return [n.op for n in build_graph(shape, ctx, reserved_batches(ctx, ctx.n_ctx)[0]).nodes]


def test_the_newer_build_writes_token_rows_into_a_copy_of_the_embeddings(path):
    assert DEFAULT in KNOWN and "b11549" in KNOWN and current() in KNOWN
    with following(DEFAULT):
        old = _ops(path)
    with following("b11549"):
        new = _ops(path)
    assert "DUP" not in old and "SET_ROWS" not in old[:3]
    assert new[:4] == ["GET_ROWS", "GET_ROWS", "DUP", "SET_ROWS"] and new[4:] == old[1:]
    a, b = plan(path, n_ctx=512, llama_cpp=DEFAULT), plan(path, n_ctx=512, llama_cpp="b11549")
    assert (a.llama_cpp, b.llama_cpp) == (DEFAULT, "b11549")
    assert b.compute_bytes is not None and a.compute_bytes is not None and b.compute_bytes > a.compute_bytes
    assert (a.model_bytes, a.kv_bytes) == (b.model_bytes, b.kv_bytes)


def test_an_unknown_build_is_refused(path):
    for bad in ("b1", "", "0.3.36 ", 3):
        with pytest.raises(PlanError) as e:
            plan(path, n_ctx=512, llama_cpp=bad)  # type: ignore[arg-type]
        assert e.value.rule == "plan.request"


def test_cli_follows_the_build_it_is_told(path):
    def run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "gguf_construct.cli.main", "plan", str(path), "--ctx", "512", "--json", *extra],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )

    default, newer = json.loads(run().stdout), json.loads(run("--llama-cpp", "b11549").stdout)
    assert default["llama_cpp"] == DEFAULT and newer["llama_cpp"] == "b11549"
    assert newer["compute_bytes"] == plan(path, n_ctx=512, llama_cpp="b11549").compute_bytes != default["compute_bytes"]
    assert run("--llama-cpp", "b0").returncode == 2


def test_the_newer_build_scales_gemma3s_embeddings_by_a_per_token_input(tmp_path):
    """b11549's gemma3 multiplies the embeddings by an f32 [1, n_tokens] input; gemma2 keeps the constant scale."""
    from tests.tiny_models import gemma2, gemma3

    for name, build, per_token in (("gemma3", gemma3, True), ("gemma2", gemma2, False)):
        path = tmp_path / f"{name}.gguf"
        build().save(path)
        shape = ModelShape.of(load_gguf(path))
        ctx = resolve(shape, ContextRequest(n_ctx=512))
        batch = reserved_batches(ctx, ctx.n_ctx)[0]
        with following("b11549"):
            nodes = build_graph(shape, ctx, batch).nodes
        fifth = nodes[4]  # after the token rows and the copy block
        if per_token:
            assert fifth.op == "MUL" and fifth.src[1].input and fifth.src[1].ne[:2] == (1, batch.n_tokens)
        else:
            assert fifth.op == "SCALE"


def _graph(path: Path, build: str, **settings):
    shape = ModelShape.of(load_gguf(path))
    ctx = resolve(shape, ContextRequest(**settings))
    with following(build):
        return build_graph(shape, ctx, reserved_batches(ctx, ctx.n_ctx)[0])


def test_the_newer_builds_inputs_enter_the_graph_in_its_order(path):
    """The order of the inputs decides where ggml-alloc puts them, and so the buffer's peak."""
    inputs = [t.name for t in _graph(path, "b11549", n_ctx=512).leafs if t.input][:5]
    assert inputs == ["inp_tokens", "inp_mixed_tokens", "inp_embd", "inp_mixed_slots", "inp_mixed_embd"]
    assert [t.name for t in _graph(path, DEFAULT, n_ctx=512).leafs if t.input][:2] == ["inp_tokens", "inp_embd"]


def test_the_newer_build_gathers_mambas_other_states_past_the_first_copy_index(tmp_path):
    from tests.tiny_models import mamba2

    p = tmp_path / "mamba2.gguf"
    mamba2().save(p)
    for build, rows in ((DEFAULT, 0), ("b11549", 3)):  # 4 cells, all in the batch: no extra state, but b11549 reads 3
        g = _graph(p, build, n_ctx=256, n_seq_max=4, n_ubatch=64)
        scans = [i for i, n in enumerate(g.nodes) if n.op == "SSM_SCAN"]
        gathers = [next(n for n in g.nodes[i:] if n.op == "GET_ROWS") for i in scans]
        assert len(gathers) == 2 and all(n.ne[1] == rows for n in gathers)


def test_the_newer_build_selects_gpt_oss_output_rows_in_the_last_layer(tmp_path):
    from tests.tiny_models import gpt_oss

    p = tmp_path / "gpt-oss.gguf"
    gpt_oss().save(p)
    counts = []
    for build, in_layer in ((DEFAULT, False), ("b11549", True)):
        ops = [n.op for n in _graph(p, build, n_ctx=256).nodes]
        last_norm = len(ops) - 1 - ops[::-1].index("RMS_NORM")  # the output norm
        assert (ops[last_norm - 1] != "GET_ROWS") == in_layer  # selected after the loop, just before the norm
        counts.append(ops.count("GET_ROWS"))
    assert counts[1] == counts[0] + 2  # the copy block's row lookup; two selections (output, residual) for one
