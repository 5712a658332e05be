"""The file's tensors against those llama.cpp's loader creates: a tensor the architecture never loads is refused.

llama.cpp's loader counts the tensors it creates for the architecture and refuses a file holding more
(``done_getting_tensors``: "wrong number of tensors; expected N, got M"). Where ``schema/memory.json`` lists every
tensor an architecture's loader may create (an entry's ``tensors``: the model's, and each layer's as ``blk.N.``
for N below the block count), a file tensor outside the list can never be created, and the plan refuses the file
as llama.cpp does. The list is the union over the hyperparameters' branches (fused or separate Q/K/V, experts or
not), so a file that has tensors of two branches at once (both ``attn_qkv`` and ``attn_q``), which llama.cpp also
refuses, is not caught here.
"""

from __future__ import annotations

import re

from .shape import ModelShape, architecture, refused

__all__ = ["refuse_unloaded_tensors"]

_BLOCK = re.compile(r"blk\.(0|[1-9]\d*)\.(.+)")


def refuse_unloaded_tensors(shape: ModelShape) -> None:
    """Raise PlanError (rule plan.model) for the first tensor of the file llama.cpp's loader of its architecture
    never creates; nothing for an architecture whose loaded tensors are not listed."""
    entry = architecture(shape.arch)
    listed = entry.get("tensors") if entry is not None else None
    if listed is None:
        return
    model = frozenset(listed["model"])
    layer = frozenset(listed["layer"]) | frozenset(listed["layer_scales"])
    for t in shape.tensors:
        m = _BLOCK.fullmatch(t.name)
        loaded = (m is not None and int(m.group(1)) < shape.n_layer and m.group(2) in layer) or t.name in model
        if not loaded:
            raise refused(
                "",
                f"{shape.arch}: the file has tensor {t.name[:80]!r}, which llama.cpp's {shape.arch} loader never creates "
                f"('wrong number of tensors': it expects all {len(shape.tensors)} of the file's tensors to be created)",
            )
