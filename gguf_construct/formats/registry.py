"""Which schema, loader and validator serve each format ``detect()`` can name.

Entries are ``"module:attribute"`` strings, imported on first use, so that opening a GGUF file never imports the
legacy or safetensors code (and the other way round). Each format module adds its own line here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FormatEntry:
    #: the construct schema: ``schema.parse(bytes)`` / ``schema.build(container)``
    schema: str
    #: ``loader(path, *, strict: bool) -> file object`` with ``.format``, ``.metadata`` and ``.tensors``
    loader: str
    #: ``validator(data: memoryview, profile: str) -> list[Issue]``
    validator: str


FORMATS: dict[str, FormatEntry] = {
    "gguf": FormatEntry("gguf_construct.formats.gguf:GGUF", "gguf_construct.api.file:load_gguf", "gguf_construct.validation:validate_gguf_bytes"),
}


def resolve(ref: str) -> Any:
    """The object a ``"module:attribute"`` reference names."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def entry(fmt: str) -> FormatEntry:
    return FORMATS[fmt]
