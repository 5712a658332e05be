"""Tiny models saved once per test session for the planning tests."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

from tests.tiny_llama import llama_model


@cache
def tmp_dir() -> Path:
    """One temporary folder for the session's models."""
    return Path(tempfile.mkdtemp(prefix="gc-planning-"))


@cache
def tiny_llama_path() -> Path:
    """tests/tiny_llama.py's model with the tokenizer llama.cpp needs to make a context."""
    f = llama_model()
    md = f.metadata
    md["tokenizer.ggml.model"] = "llama"
    md["tokenizer.ggml.tokens"] = ["<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(29)]
    md["tokenizer.ggml.scores"] = [0.0] * 32
    md["tokenizer.ggml.token_type"] = [2, 3, 3] + [1] * 29
    path = tmp_dir() / "llama.gguf"
    f.save(path)
    return path
