"""gguf-construct: GGUF and the model formats before it, declared as construct schemas.

- ``GGUF``, ``GGML``, ``RWKV``, ``SAFETENSORS``: the schemas (``GGUF.parse(data)``, ``GGUF.build(container)``,
  ``GGUF.parse_file(path)``).
- ``load(path)``: the file object of any format to read, edit and ``save``: a memory-mapped, lazy ``GGUFFile``
  for GGUF (a ``ShardedGGUF`` for a gguf-split set), a ``SafetensorsFile``, a ``LegacyFile`` (GGML, GGMF, GGJT,
  rwkv.cpp) or an ``OllamaModel``; ``path`` may be a URL (http(s)://, hf://, ollama://, fsspec): the header is
  fetched by ranges, tensors when read. ``new()`` and ``from_bytes(data)`` make a ``GGUFFile`` from nothing or from bytes.
- ``validate(path_or_bytes, profile, limits=None)``: every rule a file breaks, as ``Issue`` records.
- ``detect(data)`` / ``schema_for(data)``: which format, which schema.
- ``dequantize(data, ggml_type)``: any ggml tensor type to float32, bit-exact with ggml; ``tensor.to_numpy()``.
- ``quantize(values, ggml_type, imatrix=None)``: float rows to any type ggml quantizes, byte for byte as ggml.
- ``migrate(src, dst)`` / ``export(src, dst, to=)``: legacy and rwkv.cpp files to GGUF v3, and back.
- ``FormatError`` and its subclasses: the exceptions raised for bad input (``RemoteError`` and its subclasses
  for remote reads, ``MigrationError`` for a migration, ``PlanError`` for what llama.cpp would refuse to plan);
  ``VerificationError`` when a conversion's output does not read back as its input; ``MissingExtraError`` (an
  ``ImportError``) names the extra an optional feature needs.
- ``safe_open(path)``: the safetensors library's access (native dtypes, numpy order) to safetensors and GGUF files.
- ``plan(path, n_ctx=...)``: llama.cpp's memory for a GGUF model (weights, KV cache, recurrent state, compute
  buffer) from its header alone, local or remote, as a ``Plan``.

``import gguf_construct`` loads only this module, the exceptions and ``migrate``'s two entry points; every other
name is imported on first use (PEP 562 ``__getattr__`` over ``_LAZY``, the package's one lazy-import mechanism):
``gc.GGUF`` the GGUF schema, ``gc.load`` the format registry, ``gc.quantize`` the quantizers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import (
    DuplicateError,
    FormatError,
    InvalidValueError,
    LayoutError,
    LimitError,
    MigrationError,
    MissingExtraError,
    PlanError,
    RangeNotSupportedError,
    RemoteChangedError,
    RemoteError,
    RemoteLimitError,
    ShapeError,
    TruncatedError,
    UnknownFormatError,
    UnsupportedTypeError,
    VerificationError,
)
from .migration import export, migrate  # light: the migrators are imported when called

__version__ = "0.1.0"

#: Public name -> the module that defines it, imported on first access.
_LAZY: dict[str, str] = {
    "GGML": "formats.legacy.schema",
    "GGUF": "formats.gguf.schema",
    "RWKV": "formats.rwkv.schema",
    "SAFETENSORS": "formats.safetensors.schema",
    "GGUFFile": "api.gguf_file",
    "ShardedGGUF": "api.shard_set",
    "SafetensorsFile": "api.safetensors_file",
    "LegacyFile": "api.legacy_file",
    "OllamaModel": "api.ollama_model",
    "from_bytes": "api.gguf_file",
    "new": "api.gguf_file",
    "MetadataField": "api.metadata",
    "TensorInfo": "api.tensors",
    "load": "api.registry",
    "detect": "api.registry",
    "schema_for": "api.registry",
    "validate": "api.registry",
    "Issue": "validation",
    "dequantize": "quants",
    "swap_byte_order": "quants",
    "quantize": "quants.quantize",
    "safe_open": "api.safe_open",
    "plan": "planning",
    "Plan": "planning",
}

if TYPE_CHECKING:
    from .api.gguf_file import GGUFFile, from_bytes, new
    from .api.legacy_file import LegacyFile
    from .api.metadata import MetadataField
    from .api.ollama_model import OllamaModel
    from .api.registry import detect, load, schema_for, validate
    from .api.safe_open import safe_open
    from .api.safetensors_file import SafetensorsFile
    from .api.shard_set import ShardedGGUF
    from .api.tensors import TensorInfo
    from .formats.gguf.schema import GGUF
    from .formats.legacy.schema import GGML
    from .formats.rwkv.schema import RWKV
    from .formats.safetensors.schema import SAFETENSORS
    from .planning import Plan, plan
    from .quants import dequantize, swap_byte_order
    from .quants.quantize import quantize
    from .validation import Issue


def __getattr__(name: str) -> Any:
    """A public name on first use (then cached in the module), or a subpackage (``gc.api``, ``gc.quants``)."""
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    try:
        return importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    # schemas
    "GGML",
    "GGUF",
    "RWKV",
    "SAFETENSORS",
    # files
    "GGUFFile",
    "LegacyFile",
    "OllamaModel",
    "SafetensorsFile",
    "ShardedGGUF",
    "MetadataField",
    "TensorInfo",
    "from_bytes",
    "load",
    "new",
    "safe_open",
    # formats, validation
    "Issue",
    "detect",
    "schema_for",
    "validate",
    # tensor data
    "dequantize",
    "quantize",
    "swap_byte_order",
    # migration
    "export",
    "migrate",
    # memory
    "Plan",
    "plan",
    # exceptions
    "DuplicateError",
    "FormatError",
    "InvalidValueError",
    "LayoutError",
    "LimitError",
    "MigrationError",
    "MissingExtraError",
    "PlanError",
    "RangeNotSupportedError",
    "RemoteChangedError",
    "RemoteError",
    "RemoteLimitError",
    "ShapeError",
    "TruncatedError",
    "UnknownFormatError",
    "UnsupportedTypeError",
    "VerificationError",
]
