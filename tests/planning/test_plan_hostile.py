"""Hostile headers: a plan is made or refused with a PlanError (exit 2 from the CLI) or the reader's FormatError,
never another exception, and quickly: keys of the wrong type, out of llama.cpp's ranges, per-layer arrays of the
wrong length, and every reader-breaking file of the fuzzing strategies."""

from __future__ import annotations

import contextlib
import io
import time

import numpy as np
import pytest
from tiny_models import BUILDERS

from gguf_construct.cli.main import main
from gguf_construct.errors import FormatError
from gguf_construct.planning import ContextRequest, ModelShape, PlanError, plan, plan_shape
from gguf_construct.testing.strategies import READER_BREAKERS, reader_breaker

KEYS = (
    "block_count",
    "embedding_length",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "context_length",
    "attention.sliding_window",
    "expert_count",
    "wkv.head_size",
    "ssm.inner_size",
)
VALUES = ["12", 1.5, True, -1, 2**40, 0, 1, 2**32 - 1, [4, 4, 4], [-4, 4], ["a", "b"], [[1]], np.array([2, 2])]


def _planned_or_refused(path) -> None:
    start = time.monotonic()
    with contextlib.suppress(PlanError, FormatError):
        plan(path, n_ctx=512)
    assert time.monotonic() - start < 5, "a hostile header must not make the plan slow"


def _plan_with(shape: ModelShape, changes: dict) -> None:
    """The plan of ``shape`` with its metadata changed: made, or refused with a PlanError, quickly."""
    md = {**shape.metadata, **changes}
    start = time.monotonic()
    with contextlib.suppress(PlanError):
        plan_shape(ModelShape.from_metadata(md, shape.tensors, shape.arch), ContextRequest(n_ctx=512))
    assert time.monotonic() - start < 5, f"a hostile header must not make the plan slow: {changes}"


@pytest.mark.parametrize("arch", ["llama", "gemma3", "qwen3moe", "deepseek2", "rwkv7", "mamba"])
def test_hostile_keys(arch):
    shape = ModelShape.of(BUILDERS[arch]())
    for key in KEYS:
        for value in VALUES:
            _plan_with(shape, {f"{arch}.{key}": value})


def test_random_headers(tmp_path):
    rng = np.random.default_rng(0)
    shapes = [ModelShape.of(BUILDERS[arch]()) for arch in ("llama", "gemma2", "qwen3moe", "rwkv6")]
    for _ in range(200):
        shape = shapes[rng.integers(len(shapes))]
        keys = rng.choice(KEYS, 3, replace=False)
        _plan_with(shape, {f"{shape.arch}.{k}": VALUES[rng.integers(len(VALUES))] for k in keys})


def test_refusals_name_the_key_and_the_cli_exits_2(tmp_path):
    f = BUILDERS["llama"]()
    f.metadata.set("llama.attention.head_count", [4, 4, 4], type="arr[u32]")
    f.save(tmp_path / "a.gguf", keep_valid=False)
    with pytest.raises(PlanError, match="llama.attention.head_count has 3 values for 2 layers"):
        plan(tmp_path / "a.gguf")
    f.metadata.set("llama.block_count", 100_000, type="u32")
    f.save(tmp_path / "b.gguf", keep_valid=False)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["plan", str(tmp_path / "b.gguf")]) == 2
    assert "block_count" in err.getvalue() and "Traceback" not in err.getvalue()


@pytest.mark.parametrize("name", sorted(READER_BREAKERS))
def test_reader_breaking_files(name, tmp_path):
    for seed in range(3):
        path = tmp_path / f"{name}-{seed}.gguf"
        path.write_bytes(reader_breaker(name, seed))
        _planned_or_refused(path)
