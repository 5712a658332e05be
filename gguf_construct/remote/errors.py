"""Failures of remote reads: each a ``FormatError`` (so the CLI prints one line and exits 1), carrying the URL and
the HTTP status (None when no response came back: a refused or dropped connection, a timeout). The classes live in
``gguf_construct.errors`` with the rest of the hierarchy (the rule catalogue names them); this module keeps their
import path."""

from __future__ import annotations

from ..errors import RangeNotSupportedError, RemoteChangedError, RemoteError, RemoteLimitError

__all__ = ["RangeNotSupportedError", "RemoteChangedError", "RemoteError", "RemoteLimitError"]
