"""Which type each tensor gets when a model is quantized to a target type: llama-quantize's defaults, as
``src/llama-quant.cpp`` has them (``tensor_allows_quantization``, the OUTPUT branch of ``llama_tensor_get_type``,
``tensor_type_fallback``), with the rules as data in ``schema/quantize.json``.

Not reproduced: the per-ftype mixes (``Q4_K_M`` giving some ``attn_v``/``ffn_down`` layers more bits); the target
type applies to every other quantizable tensor, as with llama-quantize's plain types (``Q4_K_S`` style).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from ...tables import GGML_TYPES, quantize_rules


def quantizable(name: str, n_dims: int) -> bool:
    """``tensor_allows_quantization``: 2-D or more, a name ending in "weight", and none of the excluded kinds."""
    rules = quantize_rules()
    if n_dims < rules.min_dims or not name.endswith(rules.quantize_suffix):
        return False
    if name in rules.never_quantized_names:
        return False
    return not any(part in name for part in rules.never_quantized_substrings)


def _fallback(target: str, ncols: int) -> str:
    """``tensor_type_fallback``: a type whose block divides the row, else F16."""
    rules = quantize_rules()
    if ncols % GGML_TYPES.lookup(target).block_size == 0:
        return target
    other = rules.fallback.get(target)
    if other is None or ncols % GGML_TYPES.lookup(other).block_size:
        return rules.last_resort_type
    return other


def tensor_type(name: str, shape_ggml: tuple[int, ...], target: str, *, has_output: bool, keep: list[str] | None = None) -> str | None:
    """The type for tensor ``name`` (``shape_ggml`` in ggml order), or None to keep it as it is."""
    if any(fnmatchcase(name, pattern) for pattern in keep or ()):
        return None
    if not quantizable(name, len(shape_ggml)):
        return None
    rules = quantize_rules()
    ncols = shape_ggml[0]
    new = target
    is_output = name in rules.output_names or (not has_output and name in rules.token_embedding_names)
    if is_output:
        out = rules.output_type
        if ncols % GGML_TYPES.lookup(target).block_size:
            new = out.indivisible_type
        elif target in out.low_bit_iq_targets:
            new = out.low_bit_iq_type
        elif target not in out.keep_if_target:
            new = out.default
    return _fallback(new, ncols)
