"""Planned compute buffers and graphs of a GGUF file, next to llama.cpp's, for the per-family compute tests."""

from __future__ import annotations

from pathlib import Path

from gguf_construct.api.gguf_file import load_gguf
from gguf_construct.planning.compute import Batch, build_graph, compute_bytes
from gguf_construct.planning.context import ContextRequest, resolve
from gguf_construct.planning.shape import ModelShape
from tests.llama_memory import measure
from tests.planning.llama_cgraph import reserved_graph


def planned_and_measured(path: Path, **settings) -> tuple[int, int]:
    """(planned, llama.cpp's) CPU compute buffer for ``path`` with these context settings."""
    shape = ModelShape.of(load_gguf(path))
    planned = compute_bytes(shape, resolve(shape, ContextRequest(**settings)))
    return planned, measure(path, **settings).total("compute")


def graph_summaries(path: Path, batch: Batch, **settings) -> tuple[list, list]:
    """(planned, llama.cpp's) graph for ``batch``, as (op, type, shape, is-view) per node."""
    shape = ModelShape.of(load_gguf(path))
    planned = build_graph(shape, resolve(shape, ContextRequest(**settings)), batch)
    ref = reserved_graph(path, n_tokens=batch.n_tokens, n_seqs=batch.n_seqs, n_outputs=batch.n_outputs, **settings)
    return planned.summary(), ref.summary()
