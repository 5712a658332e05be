"""gguf-construct: GGUF and the model formats before it, declared as construct schemas.

- ``GGUF``: the schema (``GGUF.parse(data)``, ``GGUF.build(container)``, ``GGUF.parse_file(path)``).
- ``load(path)``: a memory-mapped, lazy ``GGUFFile`` to read, edit and ``save``; ``path`` may be a URL
  (http(s)://, hf://, ollama://, fsspec): the header is fetched by ranges, tensors when read.
- ``validate_file(path, profile)``: every rule a file breaks, as ``Issue`` records.
- ``detect(data)`` / ``schema_for(data)``: which format, which schema.
- ``dequantize(data, ggml_type)``: any ggml tensor type to float32, bit-exact with ggml; ``tensor.to_numpy()``.
- ``quantize(values, ggml_type, imatrix=None)``: float rows to any type ggml quantizes, byte for byte as ggml.
- ``migrate(src, dst)`` / ``export(src, dst, to=)``: legacy and rwkv.cpp files to GGUF v3, and back.
- ``FormatError`` and its subclasses: the only exceptions raised for bad input.

``import gguf_construct`` loads only this module, the exceptions and ``migrate``'s two entry points; every other
name is imported on first use (PEP 562 ``__getattr__``): ``gc.GGUF`` the GGUF schema, ``gc.load`` the format
registry (and with it every format's schema, file object and validator), ``gc.quantize`` the quantizers.
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
    TruncatedError,
    UnknownFormatError,
    UnsupportedTypeError,
)
from .migrate import export, migrate  # light: the migrators are imported when called (bound now, so that

# importing the subpackage ``gguf_construct.migrate`` later does not rebind ``gc.migrate`` to the module)

__version__ = "0.1.0"

#: Public name -> the module that defines it, imported on first access.
_LAZY: dict[str, str] = {
    "GGML": "formats.ggml", "GGUF": "formats.gguf", "RWKV": "formats.rwkv", "SAFETENSORS": "formats.safetensors",
    "GGUFFile": "api.file", "from_bytes": "api.file", "new": "api.file", "MetadataField": "api.metadata", "TensorInfo": "api.tensors",
    "load": "registry", "detect": "registry", "schema_for": "registry", "validate_bytes": "registry", "validate_file": "registry",
    "Issue": "validation", "check": "validation",
    "dequantize": "quants", "swap_byte_order": "quants", "quantize": "quants.quantize",
    "RemoteError": "remote.errors",  # a remote read failed (gguf_construct.remote): URL and HTTP status
    "safe_open": "api.safe_open",  # the safetensors library's access: native dtypes, numpy order
}  # fmt: skip

if TYPE_CHECKING:
    from .api.file import GGUFFile, from_bytes, new
    from .api.metadata import MetadataField
    from .api.safe_open import safe_open
    from .api.tensors import TensorInfo
    from .formats.ggml import GGML
    from .formats.gguf import GGUF
    from .formats.rwkv import RWKV
    from .formats.safetensors import SAFETENSORS
    from .quants import dequantize, swap_byte_order
    from .quants.quantize import quantize
    from .registry import detect, load, schema_for, validate_bytes, validate_file
    from .remote.errors import RemoteError
    from .validation import Issue, check


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
    "GGML", "RWKV", "GGUF", "SAFETENSORS", "GGUFFile", "MetadataField", "TensorInfo", "Issue", "FormatError", "DuplicateError", "InvalidValueError",
    "LayoutError", "LimitError", "TruncatedError", "UnknownFormatError", "UnsupportedTypeError", "check", "dequantize", "detect", "export", "migrate", "quantize", "swap_byte_order",
    "from_bytes", "load", "new", "schema_for", "validate_bytes", "validate_file",
]  # fmt: skip
__all__ += ["safe_open"]  # safetensors-style access (gguf_construct.api.safe_open)
__all__ += ["RemoteError"]  # a remote read failed (gguf_construct.remote): URL and HTTP status
