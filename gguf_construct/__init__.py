"""gguf-construct: GGUF and the formats before it, declared as construct schemas."""

from .errors import FormatError
from .formats.gguf import GGUF

__all__ = ["GGUF", "FormatError"]
