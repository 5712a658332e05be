"""Where a file's bytes come from: the byte-source seam every load goes through, local or remote.

- ``byte_source``: ``ByteSource``, ``MappedSource`` (a local file, memory-mapped), ``RangedSource`` (a remote one,
  read by ranges into a block cache);
- ``urls``: which paths are remote, where ``hf://`` and ``ollama://`` point; ``http``: HTTP(S) range reads
  (urllib3); ``options``: timeouts, retries, limits;
- ``opening``: ``open_source``, the byte source of any path or URL (fsspec for other schemes); ``budget``: the byte
  and request budget of one command.

What the bytes are read into is decided above, in ``api``. Imports: ``errors``, ``core``, ``formats`` (the file
map); never ``api``. Remote sources need the ``remote`` extra.
"""

from __future__ import annotations

from .budget import Budget
from .options import RemoteOptions, configure, options
from .urls import is_remote

__all__ = ["Budget", "RemoteOptions", "configure", "is_remote", "options"]
