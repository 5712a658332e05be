"""The byte source behind a parse: a memory map for a local file, a ranged, block-cached reader for a remote one.

The schemas read a ``memoryview``. A ``RangedSource`` gives them one of the whole file's size over a sparse
buffer (an anonymous or temporary-file map: pages that are never written cost nothing) and records which byte
ranges it has fetched. ``parse_header`` grows a prefix of the file in chunks (starting at ``first_chunk``,
doubling up to ``max_chunk``) until the schema parses it, so it fetches at most the header plus one chunk; a
tensor's bytes are fetched when its data is first read (``LazyRange``, ``LazyRegion``), exactly its range.
"""

from __future__ import annotations

import bisect
import mmap
import os
import re
import tempfile
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from ..core import rules
from ..errors import FormatError, LimitError, TruncatedError
from ..formats.base import map_file
from .budget import budgeted
from .options import RemoteOptions, options

#: Sparse buffers up to this size are anonymous maps (while the command's memory budget has room); larger ones
#: are a deleted temporary file (no overcommit).
ANONYMOUS_LIMIT = 256 << 20
#: The largest remote file the reader maps (16 TiB, ext4's largest file): a larger size is refused, not mapped.
MAX_SIZE = 1 << 44


class ByteSource(Protocol):
    """What a loader needs from where the bytes are."""

    name: str
    size: int

    def view(self) -> memoryview:
        """The whole file as a memoryview (for a remote file only the fetched ranges hold its bytes)."""

    def ensure(self, start: int, end: int) -> memoryview:
        """Bytes ``[start, end)``, fetched first if needed."""

    def lazy(self, start: int, end: int) -> Any:
        """A tensor's data source for ``[start, end)``: a view, or a callable that fetches on first read."""

    def parse_header(self, schema: Any, tail: str, **kw: Any) -> Any:
        """``schema.parse`` of the file, reading only what the header needs; ``tail`` names the container
        field that holds the rest of the file (the data section), which stays unread."""


class MappedSource:
    """A local file through a read-only memory map: everything is there, nothing is copied."""

    def __init__(self, path: str | os.PathLike[str]):
        self.name = os.fspath(path)
        self._view = map_file(path)
        self.size = len(self._view)
        #: (device, inode, size, mtime_ns) of the file as opened: a rewrite of it checks this before its rename
        self.signature = _signature(self._view, self.name)

    def view(self) -> memoryview:
        return self._view

    def ensure(self, start: int, end: int) -> memoryview:
        return self._view[start:end]

    def lazy(self, start: int, end: int) -> memoryview:
        return self._view[start:end]

    def parse_header(self, schema: Any, tail: str, **kw: Any) -> Any:
        return schema.parse(self._view, **kw)


def _signature(view: memoryview, path: str) -> tuple[int, int, int, int] | None:
    """The opened file's (device, inode, size, mtime_ns): from the map's own descriptor, else (an empty file is
    not mapped) from the path."""
    from ..formats.streaming import _owner

    owner = _owner(view)
    try:
        st = os.fstat(owner.fd) if owner is not None else os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class _Intervals:
    """Disjoint, sorted ``[start, end)`` ranges: what has been fetched."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def missing(self, start: int, end: int) -> list[tuple[int, int]]:
        gaps, pos = [], start
        i = max(0, bisect.bisect_right(self.starts, start) - 1)
        while pos < end and i < len(self.starts):
            s, e = self.starts[i], self.ends[i]
            if e <= pos:
                i += 1
                continue
            if s >= end:
                break
            if s > pos:
                gaps.append((pos, s))
            pos = max(pos, e)
            i += 1
        if pos < end:
            gaps.append((pos, end))
        return gaps

    def add(self, start: int, end: int) -> None:
        i = bisect.bisect_left(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        merged_s: list[int] = []
        merged_e: list[int] = []
        for s, e in zip(self.starts, self.ends):
            if merged_e and s <= merged_e[-1]:
                merged_e[-1] = max(merged_e[-1], e)
            else:
                merged_s.append(s)
                merged_e.append(e)
        self.starts, self.ends = merged_s, merged_e

    def covered(self) -> int:
        return sum(e - s for s, e in zip(self.starts, self.ends))


def sparse_buffer(size: int, *, in_memory: bool = True) -> Any:
    """A zero-filled, writable buffer of ``size`` bytes whose untouched pages cost nothing: an anonymous map when
    ``in_memory`` and ``size`` is at most ``ANONYMOUS_LIMIT``, else a map of a deleted temporary file. OSError
    when the system cannot make it."""
    if size == 0:
        return bytearray()
    if in_memory and size <= ANONYMOUS_LIMIT:
        return mmap.mmap(-1, size)
    with tempfile.TemporaryFile(prefix="gguf-construct-") as f:  # deleted at once; the map keeps it alive
        f.truncate(size)
        return mmap.mmap(f.fileno(), size)


#: ``fetch(start, into)`` fills ``into`` with the file's bytes from ``start`` on, or raises a RemoteError.
Fetch = Callable[[int, memoryview], None]


class RangedSource:
    """A remote file read by ranges into a sparse buffer; each byte is fetched at most once, and a read shorter
    than ``first_chunk`` fetches that much (so a run of small tensors costs one request, not one each).

    Every fetch counts against the per-file limit (``max_file_bytes``) and the command's budget (``opts.budget``:
    bytes, and the buffer's memory). ``on_complete(view)``, when given, runs once every byte has been fetched (an
    Ollama blob's size and digest check); its FormatError fails that read and every later one.
    Counts ``requests`` and ``fetched`` bytes (the benchmarks and tests read them).
    """

    def __init__(
        self,
        name: str,
        size: int,
        fetch: Fetch,
        opts: RemoteOptions | None = None,
        *,
        first: Any = b"",
        on_complete: Callable[[memoryview], None] | None = None,
        spool: Any = None,
    ):
        if not 0 <= size <= MAX_SIZE:
            raise rules.REMOTE_SIZE.error(f"the file has {size} bytes, more than the {MAX_SIZE} the reader maps", url=name)
        self.name = name
        self.size = size
        self.opts = budgeted(opts or options())
        self._fetch = fetch
        #: whether the buffer is ``spool`` itself (a whole download already on disk): then it holds every byte
        self.adopted = False
        self._buffer = self._make_buffer(size, spool)
        self._view = memoryview(self._buffer)
        self._have = _Intervals()
        self._lock = threading.Lock()
        self.on_complete = on_complete
        self._failed: FormatError | None = None
        self.requests = 0
        self.fetched = 0
        if len(first):  # what the first request (which told the size) brought
            n = min(len(first), size)
            self._view[:n] = first[:n]
            self._have.add(0, n)
            self.fetched, self.requests = n, 1

    def _make_buffer(self, size: int, spool: Any = None) -> Any:
        """The sparse buffer, in memory while the command's memory budget has room for all of it, else on disk:
        a map of ``spool`` when given (a temporary file already holding the whole file: ``adopted``), else of a
        new temporary file; its reservation is given back when the source is collected."""
        budget = self.opts.budget
        in_memory = size <= ANONYMOUS_LIMIT and budget.reserve_memory(size)
        if in_memory:
            weakref.finalize(self, budget.release_memory, size)
        try:
            if spool is not None and not in_memory and size:
                self.adopted = True
                return mmap.mmap(spool.fileno(), size)
            return sparse_buffer(size, in_memory=in_memory)
        except (OSError, OverflowError, ValueError) as e:
            raise rules.REMOTE_SIZE.error(
                f"no buffer of {size} bytes can be made for it ({type(e).__name__}: {e})", url=self.name
            ) from None

    def view(self) -> memoryview:
        return self._view

    def filled(self, n: int) -> None:
        """Record that one request wrote the file's first ``n`` bytes into ``view()`` (a whole download)."""
        with self._lock:
            self._have.add(0, n)
            self.fetched += n
            self.requests += 1

    def ensure(self, start: int, end: int) -> memoryview:
        start, end = max(0, start), min(self.size, end)
        if self._failed is not None:
            raise self._failed
        with self._lock:
            for s, e in self._have.missing(start, end):
                if e - s < self.opts.first_chunk:  # read ahead to one small chunk: the small tensors that follow come along
                    e = max(e, self._have.missing(s, min(self.size, s + self.opts.first_chunk))[0][1])
                limit = self.opts.max_file_bytes
                if limit is not None and self.fetched + (e - s) > limit:
                    raise rules.REMOTE_MAX_BYTES.error(
                        f"reading bytes {s}..{e} would pass the limit of {limit} bytes fetched per file", url=self.name, offset=s
                    )
                self.opts.budget.take_bytes(e - s, self.name, s)
                self._fetch(s, self._view[s:e])  # written in place
                self.requests += 1
                self._have.add(s, e)
                self.fetched += e - s
            if self.on_complete is not None and self.complete:
                self._run_on_complete()
        return self._view[start:end]

    @property
    def complete(self) -> bool:
        return self._have.covered() >= self.size

    def _run_on_complete(self) -> None:
        """Once every byte is in: the check runs once; a failure fails this read and every later one."""
        check, self.on_complete = self.on_complete, None
        try:
            check(self._view)  # type: ignore[misc]
        except FormatError as e:
            self._failed = e
            raise

    def lazy(self, start: int, end: int) -> LazyRange:
        return LazyRange(self, start, end)

    def parse_header(self, schema: Any, tail: str, **kw: Any) -> Any:
        """Parse growing prefixes until the header fits: a truncation (or a count larger than the bytes present)
        means 'fetch more'; any other error is the file's. Then ``tail`` is pointed at the whole file's rest."""
        o = self.opts
        have = self._have.ends[0] if self._have.starts[:1] == [0] else 0
        n = min(self.size, have if have >= 4096 else max(have, o.first_chunk))  # what the first request brought
        chunk = max(n, 1)
        while True:
            prefix = self.ensure(0, n)
            try:
                container = schema.parse(prefix, **kw)
                break
            except (TruncatedError, LimitError) as e:
                if n >= self.size:
                    raise
                needed = _needed_end(e, n)
                if needed is not None and needed > self.size:
                    raise _as_whole_file(e, n, self.size) from None  # the whole file could not satisfy it either
                if n >= o.max_header:
                    raise rules.REMOTE_MAX_HEADER.error(
                        f"the header is larger than {o.max_header} bytes (the limit; see RemoteOptions.max_header)", url=self.name
                    ) from None
                chunk = min(chunk * 2, o.max_chunk)
                n = min(self.size, max(n + chunk, needed or 0), o.max_header)
        rest = container.get(tail)
        header_end = n - len(rest) if rest is not None else n
        if header_end > o.max_header:
            raise rules.REMOTE_MAX_HEADER.error(
                f"the header is {header_end} bytes, more than the limit of {o.max_header} (RemoteOptions.max_header)", url=self.name
            )
        if rest is not None:
            container[tail] = self._view[header_end:]  # the rest of the prefix becomes the rest of the file
        return container


#: what the schemas' truncation messages say: "... N bytes but only R remain" / "... N bytes, R remain"
_NEED = re.compile(r"(\d+) bytes(?: but only|,) (\d+) remain")


def _needed_end(e: FormatError, n: int) -> int | None:
    """Where the bytes a failed read of an ``n``-byte prefix asked for end, when its message says."""
    m = _NEED.search(e.message)
    return None if m is None else n - int(m.group(2)) + int(m.group(1))


def _as_whole_file(e: FormatError, n: int, size: int) -> FormatError:
    """The same error as a parse of the whole file gives: the bytes that remain counted to the file's end."""
    m = _NEED.search(e.message)
    assert m is not None
    message = e.message[: m.start(2)] + str(int(m.group(2)) + size - n) + e.message[m.end(2) :]
    return type(e)(e.rule, message, path=e.path, offset=e.offset)


class LazyRange:
    """Bytes ``[start, end)`` of a ranged source, fetched on first call; slicing gives a smaller lazy range.

    A tensor data source (``formats.gguf.schema.tensor_bytes`` calls it), so a tensor is fetched when it is read."""

    __slots__ = ("source", "start", "end")

    def __init__(self, source: RangedSource, start: int, end: int):
        self.source, self.start, self.end = source, start, max(start, end)

    def __len__(self) -> int:
        return self.end - self.start

    def __getitem__(self, key: slice) -> LazyRange:
        if not isinstance(key, slice):
            raise TypeError("a lazy range is sliced, not indexed")
        a, b, _ = key.indices(len(self))
        return LazyRange(self.source, self.start + a, self.start + max(a, b))

    def __call__(self) -> memoryview:
        return self.source.ensure(self.start, self.end)

    def __repr__(self) -> str:
        return f"LazyRange({self.source.name!r}, {self.start}, {self.end})"


class LazyRegion(np.ndarray):
    """A uint8 array over a ranged source's sparse buffer whose slices fetch their bytes first (the data region
    of a safetensors file: its tensors slice it)."""

    _source: RangedSource | None
    _base_offset: int

    def __new__(cls, source: RangedSource, start: int, end: int) -> LazyRegion:
        base = np.frombuffer(source.view(), dtype=np.uint8, count=end - start, offset=start) if end > start else np.empty(0, np.uint8)
        obj = base.view(cls)
        obj._source, obj._base_offset = source, start
        obj.flags.writeable = False
        return obj

    def __array_finalize__(self, obj: Any) -> None:
        self._source = None  # views and results are plain data
        self._base_offset = 0

    def __getitem__(self, key: Any) -> Any:
        if self._source is not None:
            if isinstance(key, slice) and key.step in (None, 1):
                a, b, _ = key.indices(len(self))
                if b > a:
                    self._source.ensure(self._base_offset + a, self._base_offset + b)
            else:
                self._source.ensure(self._base_offset, self._base_offset + len(self))
        return np.ndarray.__getitem__(self.view(np.ndarray), key)
