"""Writing files safely: every writer of the package builds into a temporary file beside its target, checks it,
and renames it into place (``write_atomic``), so a failure or a kill never leaves a partial file and the input
is never modified. Here too: the temporaries' naming (which lets the next write remove those of a killed
writer, ``clean_stale_temporaries``), the durability policy (``durability``: when a write is fsynced) and the
check every GGUF writer runs before its rename (``verify_gguf_output``), and the output guard (``reading``,
``check_output``): no write replaces or truncates a file the command reads, and every target is a regular file
or a new name (``check_writable``).

The output guard: a command names the files it reads (``with reading(paths):``, or ``inputs=`` of
``check_output``); every ``write_atomic`` in the block refuses a target that is one of them, compared by device
and inode after links are resolved (the same name, ``./x`` for ``x``, a symlink, a hard link, a shard of the
set), with ``output.input`` (an ``InvalidValueError``). Writers check early too (before any work) with
``check_output``. Only an edit without ``-o`` replaces its own input, on purpose and atomically, and only while
it is still the file that was opened (``replaces=``: device, inode, size and modification time compared just
before the rename; a file moved into place meanwhile is refused with ``output.changed``, never discarded).

The output rule: a target that exists must be a regular file (or a symlink to one). A FIFO, a device
(``/dev/null``, ``/dev/stdout`` as root), a socket or a directory, or a symlink to one, is refused with
``output.not_regular`` by ``stat`` before anything is created or opened for writing, and checked again just
before the rename. ``open_append`` opens a results file for appending under the same rule.

Durability: the rename makes every write atomic for the running system, whatever the policy. Surviving a power
loss or a kernel crash needs more: the new file's data on disk before the rename. So by default (``durable=None``,
"auto") a write that *replaces* an existing file (an in-place edit, ``-o`` onto an existing path) fsyncs the new
file before its rename: after a crash the path holds the old file or the new one, never an empty one. A write to
a new path behaves like ``cp``: no fsync, the data left in the page cache for the kernel to write back (a crash
can lose the new file, never anything that was there before). ``durable=True`` always fsyncs (the file, with each
copied piece's write-back started early, and then the folder, so the new name is on disk too: the CLI's ``--sync``);
``durable=False`` never does.
"""

from __future__ import annotations

import contextvars
import errno
import os
import re
import stat
import struct
import tempfile
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import construct
import numpy as np

from ..core import rules
from ..errors import FormatError
from ..formats.base import file_kind, map_file
from ..formats.gguf.schema import GGUF
from ..formats.streaming import _owner, early_writeback

#: Our temporary files: ``.<target name>.<TEMP_TAG><pid>.<random>.tmp`` beside the target. The pid lets the next
#: write to the folder remove the ones whose writer is gone (killed mid-write), and only ours.
TEMP_TAG = "gcx"
_TEMP_NAME = re.compile(r"\..+\." + TEMP_TAG + r"(?P<pid>[0-9]{1,10})\.[^./]+\.tmp\Z")


#: The files the running command reads, as (device, inode, name): ``reading`` adds to it, ``write_atomic`` refuses them.
_INPUTS: contextvars.ContextVar[tuple[tuple[int, int, str], ...]] = contextvars.ContextVar("gguf_construct_inputs", default=())


#: What ``write_atomic(replaces=...)`` compares: (device, inode, size, modification time in ns).
Signature = tuple[int, int, int, int]


def signature(path: str | os.PathLike[str] | int) -> Signature | None:
    """The (device, inode, size, mtime_ns) of what ``path`` (or a descriptor) names, links followed; None when
    nothing is there."""
    try:
        st = os.stat(path)
    except (OSError, ValueError, TypeError):
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def check_writable(target: str | os.PathLike[str], *, what: str = "the output", folder: bool = False) -> None:
    """Refuse (``output.not_regular``) a ``target`` that exists and is not a regular file once links are followed:
    a FIFO, a device, a socket, a directory (unless ``folder``: an output that is a folder of files, such as an
    Ollama models root). Only ``stat`` is used: nothing is opened, so a FIFO never blocks and a device is never
    written. A missing name (or a dangling link) is a new file, allowed; a path the system cannot take (a NUL
    byte) is refused under the same rule."""
    name = os.fspath(target)
    try:
        st = os.stat(name)
    except ValueError:
        raise rules.OUTPUT_NOT_REGULAR.error(f"{what} {name!r} is not a path the system can take (a NUL byte)") from None
    except OSError:
        st = None  # absent (created), or a folder that cannot be searched: the write itself then fails with an OSError
    place = _system_place(name)
    if place is not None:
        raise rules.OUTPUT_NOT_REGULAR.error(
            f"{what} {name} is {place}, not a file of a folder of files: only regular files are written; give a file path"
        )
    if st is not None and not stat.S_ISREG(st.st_mode) and not (folder and stat.S_ISDIR(st.st_mode)):
        link = " (through a symlink)" if os.path.islink(name) else ""
        raise rules.OUTPUT_NOT_REGULAR.error(
            f"{what} {name} is {file_kind(st.st_mode)}{link}, not a regular file: only regular files are written; give a file path"
        )


#: Folders of the system's own objects (devices, processes, kernel settings): never a place for an output, even
#: when what a name there leads to is a regular file (``/dev/stdout`` → ``/proc/self/fd/1`` → a log file: the
#: rename would replace the link ``/dev/stdout`` itself).
_SYSTEM_FOLDERS = ("/dev", "/proc", "/sys")


def _system_place(name: str) -> str | None:
    """What makes ``name`` a system object rather than a file: in one of ``_SYSTEM_FOLDERS``, or a symlink into
    one (a process's descriptor), by its name or at any step of its chain of links (``realpath`` alone would
    follow ``/proc/self/fd/1`` on to the file behind it); None for an ordinary path."""
    path, how = os.path.abspath(name), "in"
    for _ in range(41):  # the system's own bound on a chain of links is 40
        for candidate in (path, os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))):
            for folder in _SYSTEM_FOLDERS:
                if candidate == folder or candidate.startswith(folder + "/"):
                    return f"{how} {folder}"
        try:
            link = os.readlink(path)
        except (OSError, ValueError):
            return None  # not a link (or nothing there): the end of the chain
        path, how = os.path.normpath(os.path.join(os.path.dirname(path), link)), "a link into"
    return None


def open_append(path: str | os.PathLike[str], *, what: str = "the output") -> Any:
    """``open(path, "a")`` for a results file, under the output rule: refused by ``stat`` first (``check_writable``),
    then opened without blocking and without following a final symlink swapped in meanwhile, and checked again on
    the descriptor itself (``fstat``) before a byte is written. A text stream (UTF-8)."""
    check_writable(path, what=what)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not os.path.islink(path):
        flags |= getattr(os, "O_NOFOLLOW", 0)  # a symlink named on purpose is followed; one swapped in after the check is not
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENXIO):  # a symlink swapped in, or a FIFO with no reader
            raise rules.OUTPUT_NOT_REGULAR.error(f"{what} {os.fspath(path)} changed into something else than a regular file") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise rules.OUTPUT_NOT_REGULAR.error(f"{what} {os.fspath(path)} is {file_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "a", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def identity(path: str | os.PathLike[str] | int) -> tuple[int, int] | None:
    """(device, inode) of what ``path`` (or an open descriptor) names once every link is followed, or None when
    nothing is there (a URL, a missing file, a dangling link)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError, TypeError):
        return None
    return st.st_dev, st.st_ino


def _identities(paths: Iterable[Any]) -> list[tuple[int, int, str]]:
    out = []
    for p in paths:
        if p is None:
            continue
        if isinstance(p, int):  # an open descriptor (a memory map's)
            try:
                st = os.fstat(p)
            except OSError:
                continue
            try:
                name = os.readlink(f"/proc/self/fd/{p}")  # Linux: the mapped file's name, for the message
            except OSError:
                name = f"descriptor {p}"
            out.append((st.st_dev, st.st_ino, name))
            continue
        ident = identity(p)
        if ident is not None:
            out.append((*ident, os.fspath(p)))
    return out


@contextmanager
def reading(paths: Iterable[Any]) -> Iterator[None]:
    """Within the block, every ``write_atomic`` (and ``check_output``) refuses a target that is one of ``paths``
    (files, or open descriptors; URLs and missing paths are skipped): the files the running command reads."""
    token = _INPUTS.set(_INPUTS.get() + tuple(_identities(paths)))
    try:
        yield
    finally:
        _INPUTS.reset(token)


def check_output(target: str | os.PathLike[str], inputs: Iterable[Any] = (), *, what: str = "the output", folder: bool = False) -> None:
    """Refuse (``output.input``, an ``InvalidValueError``) a ``target`` that is one of ``inputs`` or of the files
    the running command reads (``reading``): same device and inode once links are followed. A target that does
    not exist yet is no input. A target that exists and is not a regular file (or, with ``folder``, a directory)
    is refused too (``check_writable``)."""
    check_writable(target, what=what, folder=folder)
    ident = identity(target)
    if ident is None:
        return
    for dev, ino, name in (*_INPUTS.get(), *_identities(inputs)):
        if (dev, ino) == ident:
            same = "" if os.path.abspath(name) == os.path.abspath(target) else f" (the same file as {name})"
            raise rules.OUTPUT_INPUT.error(
                f"{what} {os.fspath(target)} is an input of this command{same}: writing it "
                "would replace what is being read; give another output path"
            )


def files_of(model: Any) -> list[str]:
    """The local files a loaded model reads: its path, a shard set's shards, an Ollama model's blobs (URLs and
    in-memory models give nothing to compare)."""
    out: list[Any] = [getattr(model, "path", None), *(getattr(model, "shard_paths", None) or [])]
    blobs = getattr(model, "blobs", None)
    if isinstance(blobs, dict):
        out += [getattr(b, "path", None) for b in blobs.values()]
    return [os.fspath(p) for p in out if isinstance(p, (str, os.PathLike))]


def files_under(folder: str | os.PathLike[str] | None) -> list[str]:
    """Every regular file under ``folder`` (an input folder, such as a fuzzing corpus); nothing for None."""
    if folder is None or not os.path.isdir(folder):
        return []
    return [os.path.join(root, name) for root, _, names in os.walk(folder) for name in names]


def mapped_files(sources: Iterable[Any]) -> list[int]:
    """The descriptors of the memory-mapped files under data sources (views of a ``FileMap``): what a writer
    copies from, so what its target must not be."""
    fds = []
    for s in sources:
        try:
            owner = _owner(s if isinstance(s, np.ndarray) else memoryview(s))
        except TypeError:  # a callable or a remote range: not a view of a local file
            continue
        if owner is not None and not owner.closed:
            fds.append(owner.fd)
    return fds


#: The policy of the writes that name none (``durable=None``): None is "auto" (see the module's docstring).
_DURABLE: contextvars.ContextVar[bool | None] = contextvars.ContextVar("gguf_construct_durable", default=None)


@contextmanager
def durability(durable: bool | None) -> Iterator[None]:
    """Every ``write_atomic`` in the block that passes no ``durable`` of its own follows ``durable`` (True:
    always fsync, False: never, None: auto). The command line's ``--sync`` is ``with durability(True)``; so is
    a caller's way to make durable the writes of a function that takes no ``durable`` (``migrate``, ...)."""
    token = _DURABLE.set(durable)
    try:
        yield
    finally:
        _DURABLE.reset(token)


def fsyncs(path: str | os.PathLike[str], durable: bool | None = None) -> bool:
    """Whether a write to ``path`` under ``durable`` (None: the active :func:`durability`, else auto) fsyncs:
    always or never when the policy says so, else exactly when the rename will replace an existing entry."""
    policy = _DURABLE.get() if durable is None else durable
    return os.path.lexists(path) if policy is None else policy


def write_atomic(
    path: str | os.PathLike[str],
    write: Any,
    verify: Any = None,
    *,
    durable: bool | None = None,
    inputs: Iterable[Any] = (),
    replaces: Signature | None = None,
) -> None:
    """Call ``write(fileobj)`` on a temporary file in ``path``'s folder, then ``verify(temp_path)`` (which
    raises when the result must not replace ``path``), then rename it to ``path``. Any failure leaves ``path``
    untouched and removes the temporary file; stale temporary files of ours in the folder are removed first.
    ``durable`` is the durability policy (None: the active :func:`durability`, by default auto: fsync only when
    replacing an existing file; True: always, the folder too; False: never). A target that is a file the running
    command reads (:func:`reading`) or one of ``inputs`` is refused before anything is written, as is a target
    that is not a regular file (``check_writable``, again just before the rename). ``replaces``: the
    ``signature`` of the file this write replaces (an edit of its own file); if the path holds anything else
    just before the rename (moved into place, rewritten, removed meanwhile), ``output.changed`` is raised and the
    path is left as it is."""
    target = Path(path)
    check_output(target, inputs)
    _check_unchanged(target, replaces)
    folder = target.parent if str(target.parent) else Path(".")
    clean_stale_temporaries(folder)
    sync = fsyncs(target, durable)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{TEMP_TAG}{os.getpid()}.", suffix=".tmp", dir=folder)
    try:
        os.fchmod(fd, _new_file_mode(target))
        with os.fdopen(fd, "wb") as f:
            try:
                with early_writeback(sync):
                    write(f)
            except FormatError:
                raise
            except (ValueError, OverflowError, struct.error, construct.ConstructError) as e:  # what was to be written cannot be
                raise rules.WRITE_INVALID.error(
                    f"cannot write {target.name}: {str(e).splitlines()[-1] if str(e) else type(e).__name__}"
                ) from None
            f.flush()
            if sync:
                os.fsync(f.fileno())
        if verify is not None:
            verify(tmp)
        check_writable(target)  # what may have been put there while the file was written
        _check_unchanged(target, replaces)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if sync and (_DURABLE.get() if durable is None else durable):  # asked for: the new name on disk too
        _fsync_folder(folder)


def _check_unchanged(target: Path, replaces: Signature | None) -> None:
    if replaces is not None and signature(target) != replaces:
        raise rules.OUTPUT_CHANGED.error(
            f"{target} changed while it was being rewritten (another file was moved into place, or it was modified "
            "or removed); nothing was written: run the command again on the file as it is now"
        )


def _fsync_folder(folder: Path) -> None:
    """fsync a folder, so that a rename in it survives a crash (where the platform lets a folder be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse to fsync a folder; the file itself is on disk
    finally:
        os.close(fd)


def clean_stale_temporaries(folder: Path) -> list[Path]:
    """Remove our temporary files in ``folder`` whose writing process no longer runs (a SIGKILL mid-write
    leaves one as large as the output); returns what was removed. Other files are never touched."""
    removed: list[Path] = []
    try:
        names = [e.name for e in os.scandir(folder) if e.name.startswith(".") and e.name.endswith(".tmp")]
    except OSError:
        return removed
    for name in names:
        m = _TEMP_NAME.match(name)
        if m is None or _alive(int(m.group("pid"))):
            continue
        p = folder / name
        try:
            if p.is_file() and not p.is_symlink():
                p.unlink()
                removed.append(p)
        except OSError:
            pass
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process, or cannot tell: keep the file
    return True


def verify_gguf_output(tmp: str | os.PathLike[str], already: AbstractSet[str] | None = frozenset()) -> None:
    """What every GGUF writer checks before its rename: the written file parses (under the active limits) and
    breaks no spec rule beyond ``already`` (the rules its source broke; None: parsing is all that is checked).
    So no writer turns a file ``validate`` accepts into one it refuses (``set general.alignment 7``, a tensor
    renamed onto another's name), while repairing a broken file one fix at a time stays possible."""
    from ..validation import check  # loaded by a write, not by every read

    view = map_file(tmp)
    try:
        container = GGUF.parse(view)
        if already is not None:
            new = [
                i for i in check(container, len(view), "spec", unknown_types="warning") if i.severity == "error" and i.rule not in already
            ]
            if new:
                raise new[0].error()
    except FormatError as e:
        raise type(e)(
            e.rule,
            f"the file about to be written would not {'read back' if already is None else 'validate'} ({e.message}); nothing was written",
            path=e.path,
            offset=e.offset,
        ) from None


def _new_file_mode(target: Path) -> int:
    """The mode a plain ``open(target, 'w')`` would give: the existing file's, else 0o666 less the umask."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
