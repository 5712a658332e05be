"""How remote reads behave: timeouts, retries, limits, extra headers; one process-wide default the CLI sets.

Limits come in two tiers. A command's total budget (``max_bytes``, ``max_requests``, ``max_seconds``,
``max_memory``) is shared by every file it opens (all shards of a set, all blobs of an Ollama model, every later
tensor read): ``budget.Budget`` counts it. Under it, per-file and per-request limits (``max_file_bytes``,
``max_header``, ``request_deadline``, the timeouts) bound any one file or request.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

MiB = 1 << 20


@dataclass(frozen=True)
class RemoteOptions:
    #: extra request headers (``--header 'Name: value'``), e.g. a bearer token for a private server
    headers: dict[str, str] = field(default_factory=dict)
    #: the first ranged read; each further header read doubles, up to ``max_chunk`` (or goes straight to the end of
    #: what a length or count in the header asks for)
    first_chunk: int = 512 * 1024
    max_chunk: int = 16 * MiB
    #: a header larger than this is refused (the anchors: @huggingface/gguf stops at 50 MB)
    max_header: int = 256 * MiB
    #: total bytes a command may fetch, over all its files (None: no limit)
    max_bytes: int | None = None
    #: bytes any one file may fetch (None: only the total applies)
    max_file_bytes: int | None = None
    #: HTTP requests a command may make, retries and redirects included: each shard of a set costs at least one
    max_requests: int | None = 4096
    #: seconds a command's remote reads may take in all, from its first remote open (None: no limit)
    max_seconds: float | None = None
    #: memory the sparse buffers of a command's files may hold; a file that does not fit in what is left is
    #: buffered in a deleted temporary file instead (disk, not memory)
    max_memory: int = 1 << 30
    connect_timeout: float = 10.0
    #: the longest wait for any one socket read, and for an attempt's status line and headers in all
    read_timeout: float = 30.0
    #: one request, from connecting to its body's last byte, may take at most this long in all: the socket is shut
    #: at the deadline, so a server dripping a byte per read timeout is cut off
    request_deadline: float = 600.0
    retries: int = 4
    backoff: float = 0.25
    #: a server's Retry-After is honoured up to this many seconds
    max_retry_after: float = 30.0
    max_redirects: int = 5
    #: a server without range support: download the whole file (progress bar on a terminal) instead of failing
    download: bool = False
    #: the running command's budget (``budget.Budget``); None: each top-level open (``load``, ``validate``, one
    #: ``scan`` line) starts its own from the limits above
    budget: Any = field(default=None, compare=False, repr=False)

    def replace(self, **changes: object) -> RemoteOptions:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


#: the limits the environment may set (``GGUF_CONSTRUCT_<NAME>``), and how each is read
ENVIRONMENT = {
    "max_bytes": int,
    "max_file_bytes": int,
    "max_requests": int,
    "max_seconds": float,
    "max_memory": int,
    "request_deadline": float,
}


def from_environment(environ: Any = None) -> RemoteOptions:
    """The defaults with the limits ``GGUF_CONSTRUCT_MAX_BYTES`` ... set (a value that is not a plain positive
    number is ignored with a warning: a bad variable must not stop every import)."""
    environ = os.environ if environ is None else environ
    changes: dict[str, object] = {}
    for name, kind in ENVIRONMENT.items():
        text = environ.get(f"GGUF_CONSTRUCT_{name.upper()}")
        if text is None:
            continue
        ok = re.fullmatch(r"[0-9]{1,20}" if kind is int else r"[0-9]{1,20}(?:\.[0-9]{1,9})?", text.strip(), re.ASCII)
        value = kind(text.strip()) if ok else None
        if value is None or (kind is float and not math.isfinite(value)):
            warnings.warn(f"GGUF_CONSTRUCT_{name.upper()}={text[:40]!r} is not a number: ignored", stacklevel=2)
            continue
        changes[name] = value
    return RemoteOptions(**changes)  # type: ignore[arg-type]


_current = from_environment()


def options() -> RemoteOptions:
    """The options remote sources are opened with unless given their own."""
    return _current


def configure(opts: RemoteOptions | None = None, **changes: object) -> RemoteOptions:
    """Set the process-wide options (``configure(download=True)``); returns the previous ones."""
    global _current
    previous = _current
    _current = (opts or _current).replace(**changes) if changes else (opts or _current)
    return previous
