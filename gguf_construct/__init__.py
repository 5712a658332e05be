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
"""

from .api import GGUFFile, MetadataField, TensorInfo, from_bytes, load, new
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
from .formats.detect import detect, schema_for
from .formats.ggml import GGML
from .formats.gguf import GGUF
from .formats.rwkv import RWKV
from .formats.safetensors import SAFETENSORS
from .migrate import export, migrate
from .quants import dequantize, swap_byte_order
from .quants.quantize import quantize
from .remote.errors import RemoteError
from .validation import Issue, check, validate_bytes, validate_file

__version__ = "0.1.0"

__all__ = [
    "GGML", "RWKV", "GGUF", "SAFETENSORS", "GGUFFile", "MetadataField", "TensorInfo", "Issue", "FormatError", "DuplicateError", "InvalidValueError",
    "LayoutError", "LimitError", "TruncatedError", "UnknownFormatError", "UnsupportedTypeError", "check", "dequantize", "detect", "export", "migrate", "quantize", "swap_byte_order",
    "from_bytes", "load", "new", "schema_for", "validate_bytes", "validate_file",
]  # fmt: skip
__all__ += ["RemoteError"]  # a remote read failed (gguf_construct.remote): URL and HTTP status
