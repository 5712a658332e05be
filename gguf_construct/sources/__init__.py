"""Where a file's bytes come from: the byte-source seam every load goes through, local or remote.

- ``byte_source``: ``ByteSource``, ``MappedSource`` (a local file, memory-mapped), ``RangedSource`` (a remote one,
  read by ranges into a block cache);
- ``urls``: which paths are remote, where ``hf://`` and ``ollama://`` point; ``http``: HTTP(S) range reads
  (urllib3); ``options``: timeouts, retries, limits;
- ``openers``: ``open_source`` for any path or URL (fsspec for other schemes) and each format's file object over
  a source; ``ollama_registry``, ``ranged_safetensors``, ``remote_shards``: Ollama registries, safetensors and
  shard sets over HTTP.

Imports: ``errors``, ``core``, ``formats``, ``validation``; ``openers`` and the modules above it also the file
objects of ``api`` (never ``api.registry``). Remote sources need the ``remote`` extra.
"""

from __future__ import annotations

from .budget import Budget
from .options import RemoteOptions, configure, options
from .urls import is_remote

__all__ = ["Budget", "RemoteOptions", "configure", "is_remote", "options"]
