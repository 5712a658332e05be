"""Hyperparameters llama.cpp reads as one value or an array (``llama_model_loader::get_key_or_arr``): an array must
have exactly as many entries as the loader expects, or llama.cpp refuses the file ("key ... has wrong array
length"): one per layer (``{arch}.block_count``) for the per-layer ones, four for the multi-section rope of the
architectures that read it. ``schema/keys.json`` ``layer_arrays`` lists them. Applied under the 'ggml' profile
(``model_issues``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from construct import Container

from ..core import rules
from ..core.tables import load_table
from .issue import Issue


def check_layer_arrays(c: Container, arch: str | None, out: list[Issue]) -> None:
    """Append an issue (rule ``key.array_length``) per such key whose array has the wrong number of entries."""
    if arch is None:
        return
    table: Mapping[str, Any] = load_table("keys").layer_arrays
    meta = {kv["key"]: (i, kv) for i, kv in enumerate(c["metadata_kv"])}
    found = meta.get(f"{arch}.block_count")
    n_layer = found[1]["value"] if found else None
    expected = {key.replace("{arch}", arch): ("the block count", n_layer) for key in table["per_layer"]}
    expected |= {f["key"].replace("{arch}", arch): ("", int(f["length"])) for f in table["fixed"] if arch in f["architectures"]}
    for key, (what, n) in expected.items():
        if key not in meta or not isinstance(n, int) or isinstance(n, bool):
            continue  # absent, or no block count to compare with (the key rules say so)
        i, kv = meta[key]
        value = kv["value"]
        if not isinstance(value, Container) or "array" not in value:
            continue  # one value: llama.cpp uses it for every layer
        length = len(value["array"])
        if length != n:
            expected_text = f"{n} ({what})" if what else str(n)
            out.append(
                Issue(
                    rules.KEY_ARRAY_LENGTH,
                    f"{key} has {length} entries, llama.cpp's loader expects {expected_text}",
                    f"metadata_kv[{i}].value",
                    kv.get("_offset"),
                )
            )
