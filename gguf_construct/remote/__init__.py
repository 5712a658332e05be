"""Model files over HTTP(S), the Hugging Face Hub (``hf://``), Ollama registries (``ollama://``) and fsspec.

The parse runs on the same schemas as for local files; only the byte source differs (``source``): a memory map
for a local file, a ranged, block-cached reader for a remote one that fetches just the header and, on demand,
the tensors that are read. Their failures are ``RemoteError`` and its subclasses (``gguf_construct.errors``).
"""

from __future__ import annotations

from .budget import Budget
from .options import RemoteOptions, configure, options
from .urls import is_remote

__all__ = ["Budget", "RemoteOptions", "configure", "is_remote", "options"]
