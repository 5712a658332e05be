"""An Ollama model manifest as a construct: the whole input is Docker v2 manifest JSON.

Parsing gives a ``gguf_construct.api.ollama.Manifest`` (checked: schemaVersion 2, layers with mediaType,
``sha256:<hex>`` digest and size); building writes a Manifest as Go's ``json.Encoder`` does (compact, newline).
A manifest written that way builds back to the same bytes. The blobs it names are opened by
``api.ollama.open_model``.
"""

from __future__ import annotations

from .base import FileConstruct, as_stream


class ManifestConstruct(FileConstruct):
    what = "an Ollama manifest"

    def _parse(self, stream, context, path):
        from ..api.ollama import parse_manifest

        s = as_stream(stream)
        raw = bytes(s.view[s.pos :])
        s.pos = s.size
        return parse_manifest(raw)

    def _build(self, obj, stream, context, path):
        stream.write(obj.to_bytes())
        return obj


#: Ollama's model manifest (JSON).
OLLAMA_MANIFEST = ManifestConstruct()
