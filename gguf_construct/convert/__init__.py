"""Conversion between safetensors (plain files, Ollama blobs, Ollama manifests) and GGUF, verified by value.

- :func:`convert` — a path to a path: the kinds are detected (GGUF, safetensors, manifest in; ``.gguf``,
  ``.safetensors`` or an Ollama models folder out)
- :func:`to_gguf` / :func:`from_gguf` — the tensor-level conversions, with their ``ConversionReport``

Imports: the library (``api`` and below) and ``migration``'s shared steps; never ``testing`` or ``cli``.
"""

from .files import convert
from .safetensors_gguf import ConversionReport, from_gguf, to_gguf

__all__ = ["ConversionReport", "convert", "from_gguf", "to_gguf"]
