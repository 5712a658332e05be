"""Failures of remote reads: each a ``FormatError`` (so the CLI prints one line and exits 1), carrying the URL and
the HTTP status (None when no response came back: a refused or dropped connection, a timeout)."""

from __future__ import annotations

from ..errors import FormatError


class RemoteError(FormatError):
    """A remote read failed: ``url`` and ``status`` say where and how."""

    def __init__(self, rule: str, message: str, *, url: str = "", status: int | None = None, offset: int | None = None) -> None:
        self.url = url
        self.status = status
        detail = f"{message} ({url}" + (f", HTTP {status}" if status is not None else "") + ")" if url else message
        super().__init__(rule, detail, offset=offset)


class RangeNotSupportedError(RemoteError):
    """The server ignores ``Range``: reading a header would download the whole file (``--download`` allows it)."""


class RemoteChangedError(RemoteError):
    """The file changed between two reads (another ETag, size or a full body in answer to ``If-Range``)."""


class RemoteLimitError(RemoteError):
    """A configured limit (total bytes, header size, redirects, time) was reached."""
