"""Tensor types of forks of llama.cpp whose ids collide with ggml's (``schema/fork_types.json``): a file written by
such a fork is named as one, instead of being read as ggml's type of that id or as an unknown id."""

from __future__ import annotations

from typing import Any

from ..core.tables import GGML_TYPES, load_table


def fork_types_of(type_id: int) -> list[Any]:
    """The fork types numbered ``type_id``, file types first (KV-cache types are never stored in files)."""
    rows = [t for t in load_table("fork_types").types if t["id"] == type_id]
    return sorted(rows, key=lambda t: t["kv_cache_only"])


def describe(type_id: int) -> str:
    """ "TQ3_1S of the TurboQuant forks of llama.cpp (...)" for the fork types of ``type_id``, or ""."""
    table = load_table("fork_types")
    named = [
        f"{t['name']} of the {table.forks[t['fork']]}" + (" (a KV-cache type)" if t["kv_cache_only"] else "")
        for t in fork_types_of(type_id)
    ]
    return "; ".join(named)


def fitting(type_id: int, n_elements: int, span: int, alignment: int) -> list[str]:
    """The fork types numbered ``type_id`` whose size for ``n_elements`` values fills ``span`` bytes (up to the
    alignment's padding) while ggml's type of that id does not: the file is the fork's."""

    def fills(block: int, size: int) -> bool:
        if block <= 0 or n_elements % block:
            return False
        nbytes = n_elements // block * size
        return nbytes <= span < nbytes + alignment

    ours = GGML_TYPES.get(type_id)
    if ours is not None and not ours.removed and fills(ours.block_size, ours.type_size):
        return []
    return [t["name"] for t in fork_types_of(type_id) if fills(t["block_size"], t["type_size"])]
