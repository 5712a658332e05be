"""What llama.cpp's loader refuses of a known architecture: a required tensor missing, or a tensor whose shape is
not the one the hyperparameters give (``schema/arch_tensors.json``). Applied under the 'ggml' profile to a parsed
GGUF container holding one of the architecture's model-level tensors (``token_embd.weight``, ...); a file without
tensors (vocab only), a file of ggml's own tests (an architecture key over a few layer tensors) and a later shard
of a split set are not a whole model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from construct import Container

from ..core import rules
from ..core.tables import load_table
from .issue import Issue

_MAX_LAYERS = 4096  # beyond any model: a hostile block_count must not make the check loop for long


def check_architecture_tensors(c: Container, arch: str | None, out: list[Issue]) -> None:
    """Append an issue (rule ``tensor.architecture``) per required tensor missing and per tensor of the wrong
    shape, for an architecture the table knows."""
    table = load_table("arch_tensors")
    spec = table.architectures.get(arch) if arch else None
    infos = c["tensor_infos"]
    if arch is None or spec is None or not len(infos):
        return
    meta = {kv["key"]: kv["value"] for kv in c["metadata_kv"]}
    split_count = meta.get("split.count")
    if isinstance(split_count, int) and not isinstance(split_count, bool) and split_count > 1:
        return
    n_layer = meta.get(f"{arch}.block_count")
    if not isinstance(n_layer, int) or isinstance(n_layer, bool) or not 0 <= n_layer <= _MAX_LAYERS:
        return  # the key rules report a missing or odd block_count
    shapes = {ti["name"]: ([int(d) for d in ti["dimensions"]], i, ti.get("_offset")) for i, ti in enumerate(infos)}
    expected: list[tuple[str, list[str], bool, int | None]] = [(n, dims, True, None) for n, dims in spec.get("model", {}).items()]
    expected += [(n, dims, False, None) for n, dims in spec.get("optional", {}).items()]
    for layer in range(n_layer):
        dense = _dims(table.dims, meta, arch, layer).get("n_expert") == 0
        for part, required in (("layer", True), ("layer_optional", False), ("dense_layer", dense)):
            if part == "dense_layer" and not dense:
                continue
            expected += [(n.replace("{i}", str(layer)), dims, required, layer) for n, dims in spec.get(part, {}).items()]
    if not any(name in shapes for name in (*spec.get("model", {}), *spec.get("optional", {}))):
        return  # none of the model's own tensors (token_embd ...): a file of ggml's tests, not a model to load
    cache: dict[int | None, dict[str, int]] = {}
    for name, dims, required, at_layer in expected:
        found = shapes.get(name)
        if found is None:
            if required:
                out.append(Issue(rules.TENSOR_ARCHITECTURE, f"no tensor {name}: llama.cpp's loader requires it for {arch}", "tensor_infos"))
            continue
        values = cache.setdefault(at_layer, _dims(table.dims, meta, arch, at_layer or 0))
        want = [values.get(d) for d in dims]
        if None in want:
            continue  # a hyperparameter missing or odd: the key rules say so
        got, i, at = found
        if got != want:
            out.append(
                Issue(
                    rules.TENSOR_ARCHITECTURE,
                    f"{name} is {got}, llama.cpp's loader expects {want} ({', '.join(dims)})",
                    f"tensor_infos[{i}].dimensions",
                    at,
                )
            )


def _dims(declared: Mapping[str, Any], meta: Mapping[str, Any], arch: str, layer: int) -> dict[str, int]:
    """Each dimension of ``declared`` for ``layer`` (a dimension that cannot be read is left out)."""
    out: dict[str, int] = {}
    for name, how in declared.items():
        value = _read(meta, how.get("key", "").replace("{arch}", arch), layer) if "key" in how else None
        if value is None and "default" in how:
            default = how["default"]
            value = out.get(default) if isinstance(default, str) else default
        if value is None and "count_of" in how:
            arr = meta.get(how["count_of"])
            value = int(arr["len"]) if isinstance(arr, Container) and "len" in arr else None
        if value is None and "quotient" in how:
            a, b = (out.get(d) for d in how["quotient"])
            value = a // b if a is not None and b else None
        if "product" in how:
            a, b = (out.get(d) for d in how["product"])
            value = a * b if a is not None and b is not None else None
        if value is not None:
            out[name] = value
    return out


def _read(meta: Mapping[str, Any], key: str, layer: int) -> int | None:
    """An integer key's value, or its element ``layer`` when it is an array (llama.cpp's per-layer keys)."""
    value = meta.get(key)
    if isinstance(value, Container) and "array" in value:
        items = value["array"]
        try:
            value = items[layer] if layer < len(items) else None
            value = int(value) if value is not None and not isinstance(value, (str, bytes, Container, list)) else None
        except (TypeError, ValueError, OverflowError, IndexError):
            return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
