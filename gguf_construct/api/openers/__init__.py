"""Opening a format over a byte source: every path from a ``sources`` byte source to a file object not taken by a
local ``load`` alone.

- ``over_source``: each format's file object over one ``ByteSource`` (safetensors, legacy and rwkv.cpp, the
  refusal of a manifest by URL; GGUF's is ``api.gguf_file.gguf_from_source``, which local files use too);
- ``remote_shards``: a gguf-split set by the URL of its first shard;
- ``ollama_registry``: an ``ollama://`` model from a registry.

Imports: the file objects of ``api`` and everything below them; ``api.registry`` dispatches to these modules.
"""
