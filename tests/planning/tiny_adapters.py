"""Tiny LoRA adapters for the tiny models: a pair of random matrices per adapted weight, shaped as
convert_lora_to_gguf.py writes them (A: ne0 of the weight by the rank; B: the rank by ne1 of the weight; the
token embeddings' pair flipped; the experts' stacks as stacks)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from gguf_construct.api.gguf_file import GGUFFile, new
from gguf_construct.quants.quantize import quantize


def _add(f: GGUFFile, name: str, ne: tuple[int, ...], dtype: str, rng: np.random.Generator) -> None:
    values = (rng.standard_normal(ne[::-1]) * 0.01).astype(np.float32)
    if dtype == "f32":
        f.tensors.add(name, values)
    elif dtype == "f16":
        f.tensors.add(name, values.astype(np.float16))
    else:
        f.tensors.add(name, quantize(values.reshape(-1, ne[0]), dtype), dtype, ne)


def lora_for(
    base: GGUFFile,
    targets: Iterable[str],
    *,
    rank: int = 8,
    dtype: str = "f32",
    alpha: float | None = 16.0,
    arch: str | None = None,
    invocation_tokens: list[int] | None = None,
    seed: int = 0,
) -> GGUFFile:
    """An adapter of ``base`` adapting the weights ``targets`` (names of its tensors) at ``rank``."""
    rng = np.random.default_rng(seed)
    f = new()
    md = f.metadata
    md.set("general.architecture", arch or str(base.metadata["general.architecture"]))
    md.set("general.type", "adapter")
    md.set("adapter.type", "lora")
    if alpha is not None:
        md.set("adapter.lora.alpha", alpha, type="f32")
    if invocation_tokens is not None:
        md.set("adapter.alora.invocation_tokens", np.array(invocation_tokens, np.uint32), type="arr[u32]")
    for name in targets:
        ne = tuple(int(d) for d in base.tensors[name].shape)
        rest = ne[2:]
        if name.endswith("token_embd.weight"):
            a, b = (rank, ne[1]), (rank, ne[0])
        else:
            a, b = (ne[0], rank, *rest), (rank, ne[1], *rest)
        _add(f, f"{name}.lora_a", a, dtype, rng)
        _add(f, f"{name}.lora_b", b, dtype, rng)
    return f


def saved(f: GGUFFile, path: Path) -> Path:
    f.save(path)
    return path
