"""One exception hierarchy for everything a file can do wrong.

Every rejection of an input names the rule it broke (a stable id such as ``string.length``), the field path in
the schema's own names (``metadata_kv[9].value``) and the byte offset where the problem was found. Parsing and
validation raise nothing else: see ``guarded`` in :mod:`gguf_construct.formats.base`.
"""

from __future__ import annotations

from typing import Any


class FormatError(ValueError):
    """The bytes are not a valid file of the expected format."""

    def __init__(self, rule: object, message: str, *, path: str = "", offset: int | None = None) -> None:
        self.rule = str(rule)  # a catalogue Rule stands for its id
        self.path = path
        self.offset = offset
        self.message = message
        super().__init__(self.describe())

    def describe(self) -> str:
        """One line: rule, field, offset, message."""
        where = []
        if self.path:
            where.append(self.path)
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"[{self.rule}] {' at '.join(where) + ': ' if where else ''}{self.message}"


class UnknownFormatError(FormatError):
    """The bytes are not any format this package knows."""


class TruncatedError(FormatError):
    """A count, length or offset points past the end of the data."""


class LimitError(FormatError):
    """A configured limit (nesting depth, string or array size) was exceeded."""


class InvalidValueError(FormatError):
    """A field holds a value the format forbids (bad UTF-8, a bool of 2, a zero dimension)."""


class UnsupportedTypeError(FormatError):
    """An unknown, removed or version-inappropriate value type or tensor type."""

    #: for a GGUF metadata value of an unknown type: the keys before it, as a read-only ``GGUFFile``
    #: (``api.gguf_file.readable_prefix``), or None
    partial: Any = None


class LayoutError(FormatError):
    """Tensor data placement is wrong: misaligned, overlapping, outside the file, or inconsistent."""


class DuplicateError(FormatError):
    """A key or tensor name occurs twice."""


class MigrationError(FormatError):
    """A migration cannot be done without losing or inventing a value, or its output failed verification."""


class PlanError(FormatError):
    """What llama.cpp would refuse, so the memory plan refuses it instead of planning it: a header llama.cpp
    cannot size a model from (rule ``plan.model``: a key of the wrong type or out of range, a missing tensor), or
    a context request it rejects (``plan.request``: too many sequences, a cache type it cannot use)."""


class ShapeError(PlanError):
    """A ggml operation the planned graph would call with shapes or types ggml refuses (``plan.model``)."""


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the pip extra that brings it."""

    def __init__(self, feature: str, extra: str, package: str) -> None:
        self.extra = extra
        super().__init__(f"{feature} needs {package}: pip install 'gguf-construct[{extra}]'", name=package)


class RemoteError(FormatError):
    """A remote read failed: ``url`` and ``status`` say where and how."""

    def __init__(
        self, rule: str, message: str, *, url: str = "", status: int | None = None, offset: int | None = None, path: str = ""
    ) -> None:
        self.url = url
        self.status = status
        detail = f"{message} ({url}" + (f", HTTP {status}" if status is not None else "") + ")" if url else message
        super().__init__(rule, detail, path=path, offset=offset)


class RangeNotSupportedError(RemoteError):
    """The server ignores ``Range``: reading a header would download the whole file (``--download``, or
    ``gguf_construct.sources.configure(download=True)``, allows it)."""


class RemoteChangedError(RemoteError):
    """The file changed between two reads (another ETag, size or a full body in answer to ``If-Range``)."""


class RemoteLimitError(RemoteError):
    """A configured limit (total bytes, header size, redirects, time) was reached."""


class VerificationError(ValueError):
    """A converted tensor's values differ from the input's (a conversion reads its output back before it is
    renamed into place)."""
