"""What format is this? ``detect`` names it from the first bytes; ``schema_for`` returns its schema."""

from __future__ import annotations

import os
from typing import Any

from construct import Construct

from ..errors import UnknownFormatError
from .gguf import MAGIC
from .registry import FORMATS, resolve

#: Bytes ``detect`` needs to tell every known format apart.
PREFIX_SIZE = 16


def _prefix(data: Any) -> bytes:
    if isinstance(data, (str, os.PathLike)):
        from .base import open_regular

        with open_regular(data) as f:
            return f.read(PREFIX_SIZE)
    return bytes(memoryview(data)[:PREFIX_SIZE])


def detect(data: Any) -> str:
    """The format name ('gguf') of a byte string, a file prefix or a path; UnknownFormatError otherwise."""
    head = _prefix(data)
    if head[:4] == MAGIC:
        return "gguf"
    if _safetensors(head):
        return "safetensors"
    if head.startswith(b'{"schemaVersion"'):
        return "ollama"  # an Ollama (Docker v2) manifest, as Go's encoder writes it
    legacy = _legacy(head)
    if legacy:
        return legacy
    raise UnknownFormatError("format.unknown", f"not a known model file (starts with {head[:8].hex(' ')})", offset=0)


def schema_for(data: Any) -> Construct:
    """The construct schema for the detected format."""
    return resolve(FORMATS[detect(data)].schema)


def _legacy(head: bytes) -> str | None:
    """'ggml', 'ggmf', 'ggjt' or 'rwkv' ('fmgg' is GGMF v1 or rwkv.cpp 100/101: the version decides); None if
    the magic is not theirs; UnknownFormatError for a known magic with an unknown version or a known non-model."""
    from .ggml import legacy_tables

    magics = {m.bytes.encode(): name for name, m in legacy_tables().magics.items()}
    name = magics.get(head[:4])
    if name is None:
        count, first = int.from_bytes(head[:4], "little"), int.from_bytes(head[4:8], "little")
        if len(head) >= 8 and 0 < count <= 1 << 21 and first <= 256:
            raise UnknownFormatError("format.not_a_model", f"no magic: this looks like a bare vocabulary dump ({count} tokens, then the tokens; "
                                     "llama.cpp wrote one on 2023-03-21), not a model file", offset=0)  # fmt: skip
        return None
    if name == "ggml":
        return name
    version = int.from_bytes(head[4:8], "little") if len(head) >= 8 else None
    if name == "ggmf" and version in legacy_tables().rwkv.versions:
        return "rwkv"
    if name == "ggla":
        raise UnknownFormatError("format.not_a_model", "a llama.cpp legacy LoRA adapter ('ggla'): not a model file, not supported", offset=0)
    if version not in legacy_tables().magics[name].versions:
        raise UnknownFormatError("header.version", f"{name} magic with unknown version {version}", offset=4)
    return name


def _safetensors(head: bytes) -> bool:
    """A u64 header length within the safetensors limit, then ``{`` (no legacy magic reads as such a length)."""
    from .safetensors import looks_like_safetensors

    return looks_like_safetensors(head)
