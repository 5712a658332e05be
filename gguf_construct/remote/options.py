"""How remote reads behave: timeouts, retries, limits, extra headers; one process-wide default the CLI sets."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

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
    #: total bytes one source may fetch (None: no limit)
    max_bytes: int | None = None
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    #: one request may take at most this long in all (a server dripping bytes is cut off)
    request_deadline: float = 600.0
    retries: int = 4
    backoff: float = 0.25
    #: a server's Retry-After is honoured up to this many seconds
    max_retry_after: float = 30.0
    max_redirects: int = 5
    #: a server without range support: download the whole file (progress bar on a terminal) instead of failing
    download: bool = False

    def replace(self, **changes: object) -> RemoteOptions:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


_current = RemoteOptions()


def options() -> RemoteOptions:
    """The options remote sources are opened with unless given their own."""
    return _current


def configure(opts: RemoteOptions | None = None, **changes: object) -> RemoteOptions:
    """Set the process-wide options (``configure(download=True)``); returns the previous ones."""
    global _current
    previous = _current
    _current = (opts or _current).replace(**changes) if changes else (opts or _current)
    return previous
