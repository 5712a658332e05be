"""The typed records of the schema tables that no file reader needs: migration, MLX quantization types,
llama-quantize's choices, rwkv.cpp onto llama.cpp and safetensors dtypes.

``load_table`` (in ``tables``) builds them; they live here so that opening a GGUF file does not pay for creating
their classes (a frozen dataclass costs about a millisecond at import). Import them from this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np


@dataclass(frozen=True)
class MigrateLlama:
    tensor_names: tuple[tuple[str, str], ...]
    defaults: Mapping[str, int | float]
    defaults_note: str
    token_types: Mapping[str, int]


@dataclass(frozen=True)
class MigrateRwkv:
    tensor_names: tuple[tuple[str, str], ...]
    architectures: Mapping[str, int]
    context_length: int
    note: str


@dataclass(frozen=True)
class MigrateExample:
    """A ggml-example / whisper.cpp profile's GGUF architecture, tokenizer model and hyper-parameter keys."""

    arch: str
    tokenizer: str | None
    keys: Mapping[str, Any]
    #: required keys the legacy header has no field for: the value the example's code hard-codes
    defaults: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MigrateTable:
    source: str
    llama: MigrateLlama
    rwkv: MigrateRwkv
    examples: Mapping[str, MigrateExample]
    examples_note: str


@dataclass(frozen=True)
class MlxMode:
    """An MLX quantization mode: allowed group sizes and bits, how its scale is stored, whether it has a bias."""

    name: str
    group_sizes: tuple[int, ...]
    bits: tuple[int, ...]
    scale: str  # 'float' (BF16/F16/F32 values), 'e4m3' or 'e8m0' (one byte)
    bias: bool


@dataclass(frozen=True)
class MlxQuantType:
    """An Ollama ``quant_type``: an MLX mode with its bits and default group size."""

    name: str
    mode: str
    bits: int
    group_size: int
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class MlxQuantTypesTable:
    source: str
    modes: tuple[MlxMode, ...]
    quant_types: tuple[MlxQuantType, ...]


@dataclass(frozen=True)
class QuantizeOutputType:
    default: str
    keep_if_target: tuple[str, ...]
    low_bit_iq_targets: tuple[str, ...]
    low_bit_iq_type: str
    indivisible_type: str


@dataclass(frozen=True)
class QuantizeTable:
    """llama-quantize's default choice of which tensors to quantize and to what."""

    source: str
    quantize_suffix: str
    min_dims: int
    never_quantized_substrings: tuple[str, ...]
    never_quantized_names: tuple[str, ...]
    output_names: tuple[str, ...]
    token_embedding_names: tuple[str, ...]
    output_type: QuantizeOutputType
    fallback: Mapping[str, str]
    last_resort_type: str
    #: GGML_QNT_VERSION: what llama-quantize writes as general.quantization_version
    quantization_version: int
    quantization_version_source: str
    #: plain type name → the llama_ftype name written as general.file_type ('_note' explains the choice)
    type_file_types: Mapping[str, str]
    #: llama-quantize's mix name → [llama_ftype name, default type] ('_source' cites them)
    mixes: Mapping[str, Any]
    mix_aliases: Mapping[str, str]
    #: llama_tensor_get_type's per-tensor choices as data (see '_semantics' in the JSON)
    mix_rules: Mapping[str, Any]
    requires_imatrix: Mapping[str, Any]


@dataclass(frozen=True)
class RwkvLlamaTable:
    """rwkv.cpp v6/v7 onto llama.cpp's rwkv6/rwkv7: architectures, file type labels, symbols, metadata,
    tensors and the World vocabulary (nested parts read-only, as in the JSON)."""

    source: str
    note: str
    architectures: Mapping[str, str]
    file_types: Mapping[str, Any]
    symbols: Mapping[str, Mapping[str, Any]]
    metadata: Mapping[str, Any]
    tensors: Mapping[str, Any]
    vocabulary: Mapping[str, Any]


@dataclass(frozen=True)
class SafetensorsDtype:
    """A safetensors dtype: name, bits per element, numpy dtype code (None for BF16/F4/F6/F8), its position
    in safetensors' Dtype enum, and whether MLX writes it."""

    name: str
    bits: int
    numpy: str | None
    order: int
    mlx: bool

    def nbytes(self, n_elements: int) -> int | None:
        """Bytes for ``n_elements`` values; None when they do not fill whole bytes."""
        total = n_elements * self.bits
        return total // 8 if total % 8 == 0 else None

    @property
    def storage(self) -> np.dtype:
        """The numpy dtype the raw data is viewed as: the value's own, else unsigned integers of its width."""
        if self.numpy:
            return np.dtype(self.numpy)
        return np.dtype("<u2") if self.bits == 16 else np.dtype(np.uint8)


@dataclass(frozen=True)
class SafetensorsDtypesTable:
    source: str
    dtypes: tuple[SafetensorsDtype, ...]


def _migrate(d: Mapping[str, Any]) -> MigrateTable:
    return MigrateTable(
        source=d["source"],
        llama=MigrateLlama(**d["llama"]),
        rwkv=MigrateRwkv(**d["rwkv"]),
        examples=MappingProxyType({name: MigrateExample(**e) for name, e in d["examples"].items()}),
        examples_note=d["examples_note"],
    )


def _quantize(d: Mapping[str, Any]) -> QuantizeTable:
    fields = {k: v for k, v in d.items() if k != "_source"}
    return QuantizeTable(source=d["_source"], **{**fields, "output_type": QuantizeOutputType(**d["output_type"])})


@dataclass(frozen=True)
class MemoryTable:
    """How llama.cpp sizes the buffers it allocates for a model (``planning``): each part a read-only mapping
    with its own ``source``."""

    source: str
    context: Mapping[str, Any]
    buffer: Mapping[str, Any]
    swa: Mapping[str, Any]
    recurrent: Mapping[str, Any]
    architectures: Mapping[str, Any]
    repack: Mapping[str, Any]
    duplicated_output: Mapping[str, Any]
    limits: Mapping[str, Any]
    devices: Mapping[str, Any]
    checked_against: Mapping[str, Any]
    builds: Mapping[str, Any]
    backends: Mapping[str, Any]
    #: how llama.cpp's multimodal loader (libmtmd) sizes a projector file (``planning.mmproj``)
    clip: Mapping[str, Any]


@dataclass(frozen=True)
class ArchTensorsTable:
    """The tensors llama.cpp's loader requires of an architecture, with shapes derived from the hyperparameters
    (``validation.arch_tensors``): ``dims`` says how each dimension is read, ``architectures`` lists the tensors
    of the model, of each layer, and of each layer without experts (``dense_layer``)."""

    source: str
    dims_note: str
    dims: Mapping[str, Any]
    architectures: Mapping[str, Any]


@dataclass(frozen=True)
class ForkTypesTable:
    """Tensor types of forks of llama.cpp numbered where ggml numbers its own (``validation.fork_types``): each
    with its id, name, fork (a key of ``forks``), block and type size, and whether only KV caches use it."""

    source: str
    forks: Mapping[str, str]
    types: tuple[Mapping[str, Any], ...]


#: table name → its builder (``tables.load_table`` calls them through ``tables._later``).
BUILDERS: dict[str, Any] = {
    "arch_tensors": lambda d: ArchTensorsTable(**d),
    "fork_types": lambda d: ForkTypesTable(**d),
    "memory": lambda d: MemoryTable(**d),
    "migrate": _migrate,
    "quantize": _quantize,
    "mlx_quant_types": lambda d: MlxQuantTypesTable(
        d["source"],
        tuple(MlxMode(r["mode"], r["group_sizes"], r["bits"], r["scale"], r["bias"]) for r in d["modes"]),
        tuple(MlxQuantType(**r) for r in d["quant_types"]),
    ),
    "rwkv_llama": lambda d: RwkvLlamaTable(**d),
    "safetensors_dtypes": lambda d: SafetensorsDtypesTable(
        d["source"], tuple(SafetensorsDtype(order=i, **r) for i, r in enumerate(d["dtypes"]))
    ),
}
