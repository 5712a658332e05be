"""Tensor bytes that stay in their file: copied in the kernel, read in bounded chunks, never all mapped in.

A file opened with :func:`.base.map_file` is a :class:`FileMap`: a read-only memory map that keeps its own file
descriptor. Every view of it (the tensor data section, each tensor's slice) can therefore be traced back to a
(descriptor, offset) span with :func:`file_span`, and

- :func:`write_data` copies such a span into an output file with ``os.copy_file_range`` (a reflink or an
  in-kernel copy, whichever the filesystem offers), else ``os.sendfile``, else bounded ``pread``/``write``
  chunks: the bytes never pass through the process, so its resident size does not grow with the file;
- :func:`read_chunks` yields any tensor's bytes as bounded chunks read with ``pread`` into reused buffers (the
  map's pages are never touched, so they never count in the process's resident size).

Views of anything else (bytes, numpy arrays, an in-memory file) are written or yielded slice by slice.
"""

from __future__ import annotations

import contextvars
import errno
import functools
import io
import mmap
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np

from .base import FileMap, open_map  # noqa: F401 - the mapped file these spans are read from

#: Bytes per chunk when data has to pass through the process: large enough for few system calls, small
#: enough to stay a fixed, small part of the resident size.
CHUNK = 8 << 20


class Span(NamedTuple):
    """Where a view's bytes lie in a mapped file."""

    fd: int
    offset: int
    length: int


def _address(buf: Any) -> int:
    return int(np.frombuffer(buf, dtype=np.uint8).__array_interface__["data"][0])


def _owner(data: Any) -> FileMap | None:
    """The :class:`FileMap` under a view (a memoryview, or a numpy array over one), if any."""
    for _ in range(64):  # views of views: a short chain in practice
        if isinstance(data, FileMap):
            return data
        if isinstance(data, memoryview):
            data = data.obj
        elif isinstance(data, np.ndarray) and data.base is not None:
            data = data.base
        else:
            return None
    return None


def file_span(data: Any) -> Span | None:
    """The (descriptor, offset, length) of ``data`` when it is a contiguous view of a :class:`FileMap` (a
    memoryview, or a numpy array over one), else None."""
    view = data.data if isinstance(data, np.ndarray) else data
    if not isinstance(view, memoryview) or not view.c_contiguous or view.nbytes == 0:
        return None
    owner = _owner(view)
    if owner is None or owner.closed:
        return None
    offset = _address(view.cast("B") if view.format != "B" or view.ndim != 1 else view) - _address(owner)
    if not 0 <= offset <= len(owner) - view.nbytes:
        return None
    return Span(owner.fd, offset, view.nbytes)


def release(data: Any) -> None:
    """Drop the pages of a mapped file's view from this process (``madvise(MADV_DONTNEED)``; they are read from
    the file again if touched): after a view has been transformed, its pages need not stay resident."""
    span = file_span(data)
    owner = _owner(memoryview(data)) if span is not None else None
    if span is None or owner is None or not hasattr(owner, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
        return
    start = span.offset - span.offset % mmap.PAGESIZE
    owner.madvise(mmap.MADV_DONTNEED, start, span.offset + span.length - start)


def transformed(data: Any, transform: Any) -> Any:
    """``transform(data)``, then ``data``'s pages released (:func:`release`)."""
    out = transform(data)
    release(data)
    return out


def _output_fd(stream: Any) -> int | None:
    """The descriptor of a real file ``stream`` writes to, or None (an in-memory stream)."""
    try:
        return stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None


#: Bytes copied per ``copy_file_range`` call; when the output is to be fsynced, the disk write-back of each
#: piece starts as soon as it is copied (:func:`early_writeback`).
PIECE = 256 << 20

#: Whether :func:`copy_span` starts each piece's write-back at once: only worth it when the file is fsynced
#: next (``fileio.write_atomic`` turns it on exactly then); otherwise the copy stays in the page cache, as ``cp``'s.
_EARLY_WRITEBACK: contextvars.ContextVar[bool] = contextvars.ContextVar("gguf_construct_early_writeback", default=False)


@contextmanager
def early_writeback(enabled: bool) -> Iterator[None]:
    """Within the block, :func:`copy_span` starts the disk write-back of each piece it copies (``enabled``) or
    leaves it to the kernel (not ``enabled``, the default)."""
    token = _EARLY_WRITEBACK.set(enabled)
    try:
        yield
    finally:
        _EARLY_WRITEBACK.reset(token)


@functools.cache
def _sync_file_range() -> Any:
    """libc's ``sync_file_range`` (Linux), or None: Python's ``os`` does not expose it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    return fn


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Start writing ``fd``'s dirty pages in [offset, offset + length) to disk without waiting for them
    (``sync_file_range(SYNC_FILE_RANGE_WRITE)``): the final ``fsync`` of an atomic write then waits only for
    the tail, so copying and writing to disk overlap instead of running one after the other."""
    fn = _sync_file_range()
    if fn is not None:
        fn(fd, offset, length, 2)  # SYNC_FILE_RANGE_WRITE; a failure only means fsync does the work later


def copy_span(span: Span, out_fd: int, out_offset: int) -> None:
    """Copy ``span`` to ``out_fd`` at ``out_offset``: ``copy_file_range`` in pieces of :data:`PIECE` bytes
    (each piece's write-back started at once under :func:`early_writeback`), else ``sendfile``, else chunks."""
    writeback = _EARLY_WRITEBACK.get()
    done = 0
    while done < span.length and hasattr(os, "copy_file_range"):  # in the kernel; a reflink where the filesystem can
        try:
            k = os.copy_file_range(span.fd, out_fd, min(PIECE, span.length - done), span.offset + done, out_offset + done)
        except OSError:
            break
        if k == 0:
            break
        if writeback:
            start_writeback(out_fd, out_offset + done, k)
        done += k
    if done < span.length and hasattr(os, "sendfile"):
        try:
            os.lseek(out_fd, out_offset + done, os.SEEK_SET)
            while done < span.length:
                k = os.sendfile(out_fd, span.fd, span.offset + done, min(span.length - done, 1 << 30))
                if k == 0:
                    break
                done += k
        except OSError:
            pass
    while done < span.length:  # bounded chunks through the process
        chunk = os.pread(span.fd, min(CHUNK, span.length - done), span.offset + done)
        if not chunk:
            raise OSError(errno.EIO, f"the source file ended {span.length - done} bytes early while copying")
        os.pwrite(out_fd, chunk, out_offset + done)
        done += len(chunk)


def write_data(stream: Any, data: Any) -> None:
    """``stream.write(data)`` for tensor bytes: in the kernel when ``data`` is a view of a mapped file and
    ``stream`` a real file, else in bounded slices."""
    view = memoryview(data)
    span = file_span(view)
    out_fd = _output_fd(stream) if span is not None else None
    if span is not None and out_fd is not None:
        stream.flush()
        at = stream.tell()
        copy_span(span, out_fd, at)
        stream.seek(at + span.length)  # also brings the stream's own idea of its position up to date
        return
    flat = view if view.format == "B" and view.ndim == 1 else view.cast("B")
    for i in range(0, len(flat), CHUNK):
        stream.write(flat[i : i + CHUNK])


def read_chunks(data: Any, buffers: Iterator[bytearray] | None = None) -> Iterator[memoryview]:
    """``data``'s bytes as consecutive chunks of at most :data:`CHUNK` bytes. A view of a mapped file is read
    with ``pread`` into the buffers ``buffers`` hands out (a fresh one per chunk by default); a chunk is only
    valid until its buffer is handed out again."""
    view = memoryview(data)
    span = file_span(view)
    if span is None:
        flat = view if view.format == "B" and view.ndim == 1 else view.cast("B")
        for i in range(0, len(flat), CHUNK):
            yield flat[i : i + CHUNK]
        return
    if hasattr(os, "posix_fadvise"):  # a larger read-ahead window for a file read from disk
        os.posix_fadvise(span.fd, span.offset, span.length, os.POSIX_FADV_SEQUENTIAL)
    done = 0
    while done < span.length:
        buf = next(buffers) if buffers is not None else bytearray(CHUNK)
        want = min(len(buf), span.length - done)
        if hasattr(os, "preadv"):
            k = os.preadv(span.fd, [memoryview(buf)[:want]], span.offset + done)
        else:
            chunk = os.pread(span.fd, want, span.offset + done)
            k = len(chunk)
            buf[:k] = chunk
        if k <= 0:
            raise OSError(errno.EIO, f"the source file ended {span.length - done} bytes early while reading")
        yield memoryview(buf)[:k]
        done += k
