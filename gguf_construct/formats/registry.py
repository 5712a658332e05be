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
    #: ``loader(path, *, strict: bool, profile: str) -> file object`` with ``.format``, ``.metadata`` and ``.tensors``
    loader: str
    #: ``validator(data: memoryview, profile: str) -> list[Issue]``
    validator: str
    #: the validation profiles this format has; under any other known profile it is checked under 'spec'
    profiles: tuple[str, ...] = ("spec", "ggml")


FORMATS: dict[str, FormatEntry] = {
    "gguf": FormatEntry("gguf_construct.formats.gguf:GGUF", "gguf_construct.api.file:load_gguf", "gguf_construct.validation:validate_gguf_bytes"),
    "ollama": FormatEntry("gguf_construct.formats.ollama:OLLAMA_MANIFEST", "gguf_construct.api.ollama:load_manifest", "gguf_construct.api.ollama:validate_manifest_bytes", ("spec",)),
    "safetensors": FormatEntry("gguf_construct.formats.safetensors:SAFETENSORS", "gguf_construct.api.safetensors:load_safetensors", "gguf_construct.validation_safetensors:validate_safetensors_bytes", ("spec", "hf")),
    "ggml": FormatEntry("gguf_construct.formats.ggml:GGML", "gguf_construct.api.legacy:load_legacy", "gguf_construct.validation_legacy:validate_legacy_bytes"),
    "ggmf": FormatEntry("gguf_construct.formats.ggml:GGML", "gguf_construct.api.legacy:load_legacy", "gguf_construct.validation_legacy:validate_legacy_bytes"),
    "ggjt": FormatEntry("gguf_construct.formats.ggml:GGML", "gguf_construct.api.legacy:load_legacy", "gguf_construct.validation_legacy:validate_legacy_bytes"),
    "rwkv": FormatEntry("gguf_construct.formats.rwkv:RWKV", "gguf_construct.api.legacy:load_rwkv", "gguf_construct.validation_legacy:validate_rwkv_bytes"),
}


#: Every profile name: 'spec' (each format's own document), 'ggml' (also what ggml's readers demand, for GGUF and
#: the legacy formats), 'hf' (also what the safetensors library demands, for safetensors files).
PROFILES = ("spec", "ggml", "hf")


def resolve(ref: str) -> Any:
    """The object a ``"module:attribute"`` reference names."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def entry(fmt: str) -> FormatEntry:
    return FORMATS[fmt]
