"""Writing files safely: every writer of the package builds into a temporary file beside its target, checks it,
and renames it into place (``write_atomic``), so a failure or a kill never leaves a partial file and the input
is never modified. Here too: the temporaries' naming (which lets the next write remove those of a killed
writer, ``clean_stale_temporaries``) and the check every GGUF writer runs before its rename
(``verify_gguf_output``).
"""

from __future__ import annotations

import os
import re
import struct
import tempfile
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import construct

from . import rules
from .errors import FormatError
from .formats.gguf import GGUF

#: Our temporary files: ``.<target name>.<TEMP_TAG><pid>.<random>.tmp`` beside the target. The pid lets the next
#: write to the folder remove the ones whose writer is gone (killed mid-write), and only ours.
TEMP_TAG = "gcx"
_TEMP_NAME = re.compile(r"\..+\." + TEMP_TAG + r"(?P<pid>[0-9]{1,10})\.[^./]+\.tmp\Z")


def write_atomic(path: str | os.PathLike[str], write: Any, verify: Any = None) -> None:
    """Call ``write(fileobj)`` on a temporary file in ``path``'s folder, then ``verify(temp_path)`` (which
    raises when the result must not replace ``path``), then rename it to ``path``. Any failure leaves ``path``
    untouched and removes the temporary file; stale temporary files of ours in the folder are removed first."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    clean_stale_temporaries(folder)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{TEMP_TAG}{os.getpid()}.", suffix=".tmp", dir=folder)
    try:
        os.fchmod(fd, _new_file_mode(target))
        with os.fdopen(fd, "wb") as f:
            try:
                write(f)
            except FormatError:
                raise
            except (ValueError, OverflowError, struct.error, construct.ConstructError) as e:  # what was to be written cannot be
                raise rules.WRITE_INVALID.error(f"cannot write {target.name}: {str(e).splitlines()[-1] if str(e) else type(e).__name__}") from None
            f.flush()
            os.fsync(f.fileno())
        if verify is not None:
            verify(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
    from .formats.base import map_file
    from .validation import check

    view = map_file(tmp)
    try:
        container = GGUF.parse(view)
        if already is not None:
            new = [i for i in check(container, len(view), "spec", unknown_types="warning") if i.severity == "error" and i.rule not in already]
            if new:
                raise new[0].error()
    except FormatError as e:
        raise type(e)(e.rule, f"the file about to be written would not {'read back' if already is None else 'validate'} ({e.message}); nothing was written", path=e.path, offset=e.offset) from None


def _new_file_mode(target: Path) -> int:
    """The mode a plain ``open(target, 'w')`` would give: the existing file's, else 0o666 less the umask."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask

