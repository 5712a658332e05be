"""The model shape and resolved context of a file and llama_context_params-like settings, as the planner reads
them (planning.shape.ModelShape, planning.context.resolve)."""

from __future__ import annotations

from gguf_construct.api.gguf_file import load_gguf
from gguf_construct.planning.context import ContextRequest, ResolvedContext, resolve
from gguf_construct.planning.shape import ModelShape


def shape_of(path) -> ModelShape:
    return ModelShape.of(load_gguf(path))


def context_of(shape: ModelShape, **settings) -> ResolvedContext:
    return resolve(shape, ContextRequest(**settings))
