"""What every format schema shares: a zero-copy stream over a buffer, and turning any failure into a FormatError.

Stock construct fields read small ``bytes`` copies through ``BufferStream.read``; the hot pieces in
:mod:`.fields` look at ``BufferStream.view`` directly, so large arrays and tensor data are never copied.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
import struct
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import construct
import numpy as np

from ..core import rules
from ..core.limits import breach, limit
from ..core.rules import Rule
from ..errors import FormatError

Buffer = bytes | bytearray | memoryview | mmap.mmap


class BufferStream:
    """A read-only, seekable stream over a memoryview."""

    def __init__(self, data: Any) -> None:
        view = data if isinstance(data, memoryview) else memoryview(data)
        if view.ndim != 1 or view.format != "B":
            view = view.cast("B")
        self.view = view
        self.size = len(view)
        self.pos = 0
        # the record budget (limits objects_free, objects_per_kib): see ``charge``
        self.objects = 0
        self.high = 0
        self._free = limit("objects_free")
        self._per_kib = limit("objects_per_kib")

    def charge(self, n: int, path: str = "") -> None:
        """Count ``n`` parsed records (each a Python object of some hundred bytes) against the budget:
        ``objects_free`` plus ``objects_per_kib`` per KiB of the furthest position read. Keeps the Python
        memory of a parse proportional to the bytes it read, whatever the bytes (empty arrays, empty keys)."""
        self.objects += n
        if self.objects > self._free:
            self.high = max(self.high, self.pos)
            if self.objects > self._free + self._per_kib * self.high // 1024:
                raise breach(
                    "objects_per_kib", f"{self.objects} records in the first {self.high} bytes", path=readable_path(path), offset=self.pos
                )

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes; a short read leaves the position where the read started, so the error points there."""
        if n is None or n < 0:
            n = self.size - self.pos
        out = bytes(self.view[self.pos : self.pos + n])
        if len(out) == n:
            self.pos += n
        return out

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self.pos, self.size)[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    @property
    def remaining(self) -> int:
        return max(0, self.size - self.pos)

    def need(self, n: int, rule: Rule, what: str, path: str) -> None:
        """Raise TruncatedError unless ``n`` more bytes are present."""
        if n > self.size - self.pos:
            raise rule.truncated(f"{what} needs {n} bytes but only {self.remaining} remain", path=readable_path(path), offset=self.pos)


def as_stream(stream: Any) -> BufferStream:
    """The BufferStream behind ``stream``; other streams are read into memory once."""
    if isinstance(stream, BufferStream):
        return stream
    return BufferStream(stream.read())


def open_regular(path: str | os.PathLike[str], *, blocking: bool = True) -> Any:
    """Open a file for binary reading, refusing anything but a regular file *before* reading from it.

    A FIFO would block ``open()`` until a writer comes, a directory or a device is not a model file: the file
    is opened with O_NONBLOCK (which never blocks, even on a FIFO), checked with ``fstat`` on that very
    descriptor (no race between a check and the open), then switched back to blocking reads unless
    ``blocking`` is False (a regular file on disk never blocks anyway; a kernel file that passes for one, such
    as ``/proc/kmsg``, then answers EAGAIN, an OSError, instead of waiting for ever).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise rules.FILE_NOT_REGULAR.error(f"{os.fspath(path)} is {file_kind(mode)}, not a regular file", offset=0)
        os.set_blocking(fd, blocking)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], *, what: str = "the file", most: int | None = None) -> bytes:
    """A small input file whole (a value file, a list of sources, a vocabulary): a regular file only
    (``open_regular``: a FIFO never blocks, ``/dev/zero`` is refused), at most ``most`` bytes (default: the
    ``header_bytes`` limit), its size checked before a byte is read and the read bounded too (a file that grows
    meanwhile is refused, not read without end), without blocking (``/proc/kmsg`` is an OSError, not a hang)."""
    most = limit("header_bytes") if most is None else most
    with open_regular(path, blocking=False) as f:
        size = os.fstat(f.fileno()).st_size
        pieces: list[bytes] = []
        got = 0
        while size <= most and got <= most:
            try:
                piece = os.read(f.fileno(), min(1 << 20, most + 1 - got))
            except BlockingIOError:  # no file on disk waits: a kernel file that passes for one (/proc/kmsg)
                raise rules.FILE_NOT_REGULAR.error(f"{what} {os.fspath(path)} would make the reader wait: not a file on disk") from None
            if not piece:
                break
            pieces.append(piece)
            got += len(piece)
        data = b"".join(pieces)
    if size > most or len(data) > most:
        raise breach("header_bytes", f"{what} {os.fspath(path)} has more than {most} bytes")
    return data


def file_kind(mode: int) -> str:
    """What a path that is not a regular file is, by its ``st_mode``, for a message."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def real_path(path: str | os.PathLike[str]) -> Path:
    """The absolute path with symlinks resolved as far as they go: ``os.path.realpath``, which leaves a symlink
    loop as it is, where ``Path.resolve()`` raises RuntimeError (the open then fails with an OSError)."""
    return Path(os.path.realpath(os.fspath(path)))


class FileMap(mmap.mmap):
    """A read-only memory map that remembers its file (``fd``, a duplicate closed with the map, and ``path``)."""

    fd: int
    path: str


def open_map(path: str | os.PathLike[str]) -> FileMap:
    """Map ``path`` read-only (it must not be empty: an empty file cannot be mapped)."""
    with open_regular(path) as f:  # a FIFO or a directory is refused before it is opened
        m = FileMap(f.fileno(), 0, access=mmap.ACCESS_READ)
        m.fd = os.dup(f.fileno())
    m.path = os.fspath(path)
    weakref.finalize(m, os.close, m.fd)
    return m


def map_file(path: str | os.PathLike[str]) -> memoryview:
    """Memory-map a regular file read-only (an empty file gives an empty view; anything but a regular file is
    refused before it is opened). The map remembers its file (``FileMap``), so that views of it can be copied or
    read without touching their pages (:mod:`.streaming`)."""
    with open_regular(path) as f:
        empty = os.fstat(f.fileno()).st_size == 0
    if empty:
        return memoryview(b"")
    return memoryview(open_map(path))


def map_untracked(path: str | os.PathLike[str]) -> memoryview:
    """Memory-map a regular file read-only holding as few descriptors as the platform allows: none where
    ``mmap`` takes ``trackfd=False`` (Python 3.13+), else the one the map keeps, and never ``FileMap``'s second
    one. For models made of many files (an Ollama model's blobs, one per tensor): a 600-blob model stays far
    under the usual limit of 1,024 open files. Copies out of such a map go through memory, not
    ``copy_file_range``."""
    with open_regular(path) as f:
        if os.fstat(f.fileno()).st_size == 0:
            return memoryview(b"")
        try:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ, trackfd=False)  # type: ignore[call-arg,unused-ignore]
        except TypeError:  # before Python 3.13: the map keeps a descriptor of its own
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return memoryview(m)


_PATH_PART = re.compile(r"\s*->\s*")


def readable_path(path: str) -> str:
    """construct's ``(parsing) -> metadata_kv -> [9] -> value`` as ``metadata_kv[9].value``."""
    out = ""
    for part in _PATH_PART.split(path or ""):
        if not part or part.startswith("("):
            continue
        if part.startswith("["):
            out += part
        else:
            out += ("." if out else "") + part
    return out


T = TypeVar("T")


def guarded(action: Callable[[], T], stream: BufferStream | None, rule: str = "parse") -> T:
    """Run a parse, turning construct's and Python's low-level exceptions into FormatError.

    The schema checks every count and length before it reads, so these conversions are a safety net: a
    FormatError with rule ``internal.*`` means a check is missing, and the fuzz tests treat it as a bug.
    """
    try:
        return action()
    except FormatError:
        raise
    except construct.StreamError as e:
        raise rules.rule(f"{rule}.truncated").error(str(e).splitlines()[-1], path=readable_path(e.path or ""), offset=_at(stream)) from None
    except construct.ConstructError as e:
        raise rules.rule(f"{rule}.invalid").error(str(e).splitlines()[-1], path=readable_path(e.path or ""), offset=_at(stream)) from None
    except RecursionError:
        raise rules.LIMIT_NESTING.error("nesting too deep for Python's recursion limit", offset=_at(stream)) from None
    except MemoryError:
        raise rules.INTERNAL_MEMORY.error("out of memory", offset=_at(stream)) from None
    except (struct.error, IndexError, KeyError, ValueError, TypeError, OverflowError, UnicodeError) as e:
        raise FormatError(f"internal.{type(e).__name__}", str(e), offset=_at(stream)) from None


def _at(stream: BufferStream | None) -> int | None:
    """Where the failing read started (BufferStream does not advance on a short read)."""
    return stream.pos if stream is not None else None


def context_path(path: str, index: int | str) -> str:
    """Extend a construct path with an array index or a field name."""
    return f"{path} -> [{index}]" if isinstance(index, int) else f"{path} -> {index}"


class FileConstruct(construct.Construct):
    """Base of the whole-file schemas (GGUF, GGML, RWKV, SAFETENSORS, ...): ``parse`` reads a buffer without
    copying it and turns every low-level failure into a FormatError; ``parse_file`` memory-maps the file."""

    #: how ``sizeof`` names what has no fixed size
    what = "a file"

    def _sizeof(self, context: Any, path: str) -> int:
        raise construct.SizeofError(f"{self.what} has no fixed size", path=path)

    def parse(self, data: Any, **contextkw: Any) -> Any:
        """Parse a whole file held in memory (bytes, bytearray, memoryview, mmap); tensor data is not copied."""
        s = BufferStream(data)
        return guarded(lambda: self.parse_stream(s, **contextkw), s)

    def parse_file(self, filename: Any, **contextkw: Any) -> Any:
        """Parse a file through a read-only memory map."""
        return self.parse(map_file(filename), **contextkw)


def tensor_bytes(data: Any) -> memoryview:
    """A tensor's data source as flat bytes, copying only a non-contiguous array: bytes-like, a numpy array of
    any shape (0-d and empty included), or a callable returning one (so that a conversion runs only when its
    tensor is written, one tensor at a time). ValueError when there is no data."""
    if callable(data):
        data = data()
    if data is None:
        raise ValueError("a tensor has no data to write")
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8).data
    view = memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")
