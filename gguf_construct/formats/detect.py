"""What format is this? ``detect`` names it from the first bytes; ``schema_for`` returns its schema."""

from __future__ import annotations

import os
from typing import Any

from construct import Construct

from ..errors import UnknownFormatError
from .gguf import MAGIC
from .registry import FORMATS, resolve

#: Bytes ``detect`` needs to tell every known format apart.
PREFIX_SIZE = 8


def _prefix(data: Any) -> bytes:
    if isinstance(data, (str, os.PathLike)):
        with open(data, "rb") as f:
            return f.read(PREFIX_SIZE)
    return bytes(memoryview(data)[:PREFIX_SIZE])


def detect(data: Any) -> str:
    """The format name ('gguf') of a byte string, a file prefix or a path; UnknownFormatError otherwise."""
    head = _prefix(data)
    if head[:4] == MAGIC:
        return "gguf"
    raise UnknownFormatError("format.unknown", f"not a known model file (starts with {head[:8].hex(' ')})", offset=0)


def schema_for(data: Any) -> Construct:
    """The construct schema for the detected format."""
    return resolve(FORMATS[detect(data)].schema)
