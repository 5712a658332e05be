"""Which type each tensor gets when a model is quantized: llama-quantize's choices, as ``src/llama-quant.cpp``
has them, with the rules as data in ``schema/quantize.json``.

Two kinds of target:

- a ggml type (``q4_K``, ``iq4_xs``: :func:`tensor_type`): every quantizable tensor gets it, except the output
  tensor (``tensor_allows_quantization``, the OUTPUT branch of ``llama_tensor_get_type``, ``tensor_type_fallback``);
  ``general.file_type`` is :func:`file_type_of` it.
- a llama-quantize mix (``Q4_K_M``, ``Q3_K_S``, ``IQ2_M``: :func:`mixes`, :func:`plan`): ``llama_tensor_get_type``'s
  per-tensor choices by category, block index, expert count and grouped-query factor (``mix_rules`` in the JSON);
  ``general.file_type`` is the mix's llama_ftype.

Not reproduced: llama-quantize's ``--tensor-type``/``--output-tensor-type`` overrides and ``--pure`` (``--keep``
keeps tensors as they are instead), and rules for architectures the rules name by a model size other than the
70B LLaMA-2 (``LLM_TYPE_70B``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from ...core.tables import FILE_TYPES, GGML_TYPES, quantize_rules


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


def choice_reason(name: str, shape_ggml: tuple[int, ...], target: str, chosen: str | None, *, keep: list[str] | None = None) -> str:
    """Why tensor ``name`` got ``chosen`` (None: kept as it is) when ``target`` (a ggml type or a mix) was asked:
    one short phrase for the command's report ("rows of 64 are not a multiple of 256")."""
    rules = quantize_rules()
    if chosen is None:
        if any(fnmatchcase(name, pattern) for pattern in keep or ()):
            return "matched --keep"
        if len(shape_ggml) < rules.min_dims:
            return f"fewer than {rules.min_dims} dimensions (norms, biases: llama-quantize keeps them)"
        return "a kind llama-quantize never quantizes"
    ncols = shape_ggml[0] if shape_ggml else 0
    asked = target if not is_mix(target) else mixes()[target].default_type
    if chosen == asked:
        return "as asked"
    block = GGML_TYPES.lookup(asked).block_size
    if ncols % block:
        return f"rows of {ncols} are not a multiple of {block}"
    if name in rules.output_names or name in rules.token_embedding_names:
        return "the output tensor gets llama-quantize's type for it"
    return f"{target}'s choice for this tensor" if is_mix(target) else "llama-quantize's choice for this tensor"


# -- general.file_type and general.quantization_version ------------------------------------------------------------
def quantization_version() -> int:
    """GGML_QNT_VERSION: the ``general.quantization_version`` llama-quantize writes."""
    return quantize_rules().quantization_version


def file_type_id(name: str) -> int:
    """The id of a llama_ftype name of ``schema/file_types.json`` (``MOSTLY_Q4_K_M`` → 15)."""
    ids = {v: k for k, v in FILE_TYPES.items()}
    return ids[name]


def file_type_of(target: str) -> int | None:
    """``general.file_type`` for a quantization to ``target``: a mix's llama_ftype, or for a ggml type the llama_ftype
    whose default type it is (``type_file_types``); None for a type no llama_ftype describes."""
    mix = mixes().get(target)
    if mix is not None:
        return file_type_id(mix.file_type)
    name = quantize_rules().type_file_types.get(target)
    return None if name is None else file_type_id(name)


# -- llama-quantize's mixes -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Mix:
    """A llama-quantize file type: its name (``Q4_K_M``), llama_ftype name (``MOSTLY_Q4_K_M``) and default type."""

    name: str
    file_type: str
    default_type: str


def mixes() -> dict[str, Mix]:
    """llama-quantize's quantization mixes by the names it takes (``Q4_K_M``, ``Q4_K`` = ``Q4_K_M`` …), spelt as
    llama-quantize spells them: upper case. A ggml type's own spelling (``q4_K``) names the plain type instead."""
    rules = quantize_rules()
    table = {name: Mix(name, *row) for name, row in rules.mixes.items() if not name.startswith("_")}
    for alias, name in rules.mix_aliases.items():
        table[alias] = table[name]
    return table


def is_mix(target: str) -> bool:
    """Whether ``target`` names a llama-quantize mix (exact spelling, see :func:`mixes`)."""
    return target in mixes()


@dataclass(frozen=True)
class ModelFacts:
    """What the mix rules read of a model besides tensor names: ``hparams`` as llama.cpp loads them."""

    arch: str = ""
    n_layer: int = 0
    n_head: int = 0
    n_head_kv: int = 0
    n_expert: int = 0

    @property
    def n_gqa(self) -> int:
        """``llama_hparams::n_gqa``: heads per KV head (0 without KV heads)."""
        return self.n_head // self.n_head_kv if self.n_head_kv else 0

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> ModelFacts:
        """The facts from GGUF metadata (``{arch}.block_count``, ``.attention.head_count[_kv]``, ``.expert_count``);
        a per-layer array gives its first layer's value, as ``n_head()`` does."""
        arch = metadata.get("general.architecture")
        arch = arch if isinstance(arch, str) else ""

        def first(key: str, default: int) -> int:
            value = metadata.get(f"{arch}.{key}", default)
            if hasattr(value, "__len__") and not isinstance(value, str):
                value = value[0] if len(value) else default
            try:
                return int(value)
            except (TypeError, ValueError):
                return default

        n_head = first("attention.head_count", 0)
        return cls(arch, first("block_count", 0), n_head, first("attention.head_count_kv", n_head), first("expert_count", 0))


_BLOCK = re.compile(r"blk\.([0-9]+)\.")


def visit_order(names: Sequence[str]) -> list[str]:
    """llama_model_loader's ``weights_map`` order (``weight_name_comparer``): by block index (-1 outside a block),
    then by name; the mix rules count tensors in this order."""

    def key(name: str) -> tuple[int, bytes]:
        m = _BLOCK.match(name)
        return (int(m.group(1)) if m else -1, name.encode("utf-8"))

    return sorted(names, key=key)


def _category(name: str) -> str:
    for category, how, patterns in quantize_rules().mix_rules["categories"]:
        if (name in patterns) if how == "name" else any(p in name for p in patterns):
            return str(category)
    return "other"


def _more_bits(i: int, n: int) -> bool:
    """``use_more_bits``: the first and last eighth of the layers and every third one between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


_LAYER = {
    "first_eighth": lambda i, n: i < n // 8,
    "first_sixteenth": lambda i, n: i < n // 16,
    "more_bits": _more_bits,
    "middle": lambda i, n: n // 8 <= i < 7 * n // 8,
}


class _State:
    """``quantize_state_impl``: the position counters and what the conditions read."""

    def __init__(self, names: Sequence[str], facts: ModelFacts, mix: Mix, has_imatrix: bool):
        rules = quantize_rules().mix_rules
        self.facts, self.mix, self.has_imatrix = facts, mix, has_imatrix
        self.categories = {n: _category(n) for n in names}
        self.tied = "output" not in self.categories.values()
        self.seen = {"attention_wv": 0, "ffn_down": 0, "ffn_gate": 0, "ffn_up": 0}
        self.totals = {"attention_wv": sum(c in rules["attention_wv"] for c in self.categories.values())}
        for kind in ("ffn_down", "ffn_gate", "ffn_up"):
            self.totals[kind] = facts.n_layer
        big = rules["model_70b"]
        self.model_70b = (
            facts.arch in big["architectures"]
            and facts.n_layer == big["block_count"]
            and (facts.n_head != facts.n_head_kv) == big["grouped"]
        )

    def position(self, kind: str, name: str) -> tuple[int, int]:
        """(index, count) for layer conditions: ``layer_info`` (the block of the name with experts) or a counter."""
        if kind == "ffn_down_seen":
            return self.seen["ffn_down"], self.totals["ffn_down"]
        if kind in ("ffn_down", "ffn_gate", "ffn_up") and max(1, self.facts.n_expert) > 1:
            m = _BLOCK.match(name)
            if m is None or int(m.group(1)) >= self.facts.n_layer:
                raise ValueError(f"{name}: no block index below {self.facts.n_layer} (llama-quantize fails the same way)")
            return int(m.group(1)), self.facts.n_layer
        return self.seen[kind], self.totals[kind]

    def holds(self, cond: Mapping[str, Any], name: str, shape: Sequence[int], current: str, kind: str | None) -> bool:
        f = self.facts
        for key, want in cond.items():
            if key == "any":
                ok = any(self.holds(c, name, shape, current, kind) for c in want)
            elif key == "category":
                ok = self.categories[name] in want
            elif key == "category_not":
                ok = self.categories[name] not in want
            elif key == "tied":
                ok = self.tied == want
            elif key == "ftype":
                ok = self.mix.file_type in want
            elif key == "arch":
                ok = f.arch in want
            elif key == "arch_not":
                ok = f.arch not in want
            elif key == "n_gqa_min":
                ok = f.n_gqa >= want
            elif key == "n_expert":
                ok = f.n_expert == want
            elif key == "n_expert_min":
                ok = f.n_expert >= want
            elif key == "imatrix":
                ok = self.has_imatrix == want
            elif key == "model_70b":
                ok = self.model_70b == want
            elif key == "indivisible":
                ok = (shape[0] % GGML_TYPES.lookup(current).block_size != 0) == want
            elif key == "default_type_not":
                ok = current not in want
            elif key == "type_in":
                ok = current in want
            elif key == "ne2_min":
                ok = (shape[2] if len(shape) > 2 else 1) >= want
            elif key == "layer":
                i, n = self.position(kind or "", name)
                ok = _LAYER[want](i, n)
            elif key == "index_below":
                ok = self.position(kind or "", name)[0] < want
            else:
                raise KeyError(f"schema/quantize.json: unknown mix condition {key!r}")
            if not ok:
                return False
        return True

    def choose(self, name: str, shape: Sequence[int]) -> str:
        """``llama_tensor_get_type_impl`` for one tensor (advancing the counters as it does)."""
        new = self.mix.default_type
        for group in quantize_rules().mix_rules["groups"]:
            if not self.holds(group["if"], name, shape, new, None):
                continue
            for branch in group["branches"]:
                if not self.holds(branch.get("if", {}), name, shape, new, None):
                    continue
                kind = branch.get("position", branch.get("count"))
                for rule in branch["rules"]:
                    if self.holds(rule["if"], name, shape, new, kind):
                        new = rule["type"] or new
                        break
                for rule in branch.get("then", ()):
                    if self.holds(rule["if"], name, shape, new, kind):
                        new = rule["type"]
                if branch.get("count"):
                    self.seen[branch["count"]] += 1
                break
            break
        return new


def plan(
    tensors: Sequence[tuple[str, tuple[int, ...]]],
    mix: str | Mix,
    facts: ModelFacts,
    *,
    has_imatrix: bool = False,
    keep: list[str] | None = None,
) -> dict[str, str | None]:
    """The type of each tensor (name, shape in ggml order) under a llama-quantize mix, or None to keep it as it is
    (not quantizable, or matched by ``keep``): ``llama_tensor_get_type`` over the tensors in the loader's order."""
    m = mixes()[mix] if isinstance(mix, str) else mix
    shapes = dict(tensors)
    state = _State(list(shapes), facts, m, has_imatrix)
    out: dict[str, str | None] = {}
    for name in visit_order(list(shapes)):
        shape = shapes[name]
        if any(fnmatchcase(name, pattern) for pattern in keep or ()) or not quantizable(name, len(shape)):
            out[name] = None
            continue
        out[name] = _fallback(state.choose(name, shape), shape[0])
    return {name: out[name] for name in shapes}


def needs_imatrix(name: str, ggml_type: str, mix: str | None) -> bool:
    """``tensor_requires_imatrix``: the lowest-bit types (and Q2_K_S's q2_K) need an importance matrix, except in the
    token embedding and output tensors."""
    rules = quantize_rules()
    if name in rules.output_names or name in rules.token_embedding_names:
        return False
    table = rules.requires_imatrix
    if ggml_type in table["types"]:
        return True
    return ggml_type == "q2_K" and mix is not None and mixes()[mix].file_type in table["q2_K_in"]
