"""The fuzzer's two text files: ``findings.tsv`` (one row per saved kind) and the ``--known`` list.

``findings.tsv`` is a real TSV: a header row, then every field quoted (``csv``, tab-separated, quotes doubled),
so that a reader's message with a tab, a newline or a quote stays inside its field and can never forge a row.
It is read back the same way, and an existing file that is not one of ours (no header, a broken row, a symlink,
not a regular file) is refused as ``output.foreign`` before anything is written.

A ``--known`` file is untrusted text: a regular file (a FIFO or a device is refused without being read), at most
:data:`KNOWN_MAX` bytes, UTF-8. It is a list of signatures (``*`` wildcards, ``#`` comments), or a findings.tsv,
whose signature column is taken.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from ...api.fileio import write_atomic
from ...core import rules
from ...errors import FormatError
from ...formats.base import open_regular

#: The columns of findings.tsv.
HEADER = ("reproducer", "bytes", "class", "signature", "explanation", "origin")
#: A findings.tsv or --known file larger than this is not one (a reader's garbage, /dev/zero).
KNOWN_MAX = 16 << 20
_DIALECT: dict[str, Any] = {"delimiter": "\t", "lineterminator": "\n", "quoting": csv.QUOTE_ALL}


class Row(NamedTuple):
    reproducer: str
    size: int
    cls: str
    signature: str
    explanation: str
    origin: str


class KnownListError(ValueError):
    """A --known file that cannot be used (not a regular file, too large, not UTF-8, a broken findings.tsv)."""


def _text(path: Path, what: str) -> str:
    """The UTF-8 text of a regular file of at most :data:`KNOWN_MAX` bytes, or KnownListError saying why not."""
    try:
        f = open_regular(path)
    except FormatError as e:
        raise KnownListError(e.message) from None
    with f:
        data = f.read(KNOWN_MAX + 1)
    if len(data) > KNOWN_MAX:
        raise KnownListError(f"{path} is larger than {KNOWN_MAX >> 20} MiB: not {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise KnownListError(f"{path} is not UTF-8 text (byte {e.start}): not {what}") from None


def _rows(text: str, path: Path) -> list[Row]:
    """The rows of a findings.tsv's text (KnownListError when it is not one)."""
    csv.field_size_limit(max(csv.field_size_limit(), KNOWN_MAX))  # a field as long as the file may be (a long key's signature)
    try:
        table = list(csv.reader(io.StringIO(text, newline=""), **_DIALECT))
    except csv.Error as e:
        raise KnownListError(f"{path} is not a findings.tsv: {e}") from None
    if not table or tuple(table[0]) != HEADER:
        raise KnownListError(f"{path} is not a findings.tsv: its first row is not {'/'.join(HEADER)}")
    rows = []
    for n, cells in enumerate(table[1:], 2):
        if len(cells) != len(HEADER) or not cells[1].isdigit() or not cells[0] or "/" in cells[0] or cells[0].startswith("."):
            raise KnownListError(f"{path} is not a findings.tsv: row {n} is not a saved finding")
        rows.append(Row(cells[0], int(cells[1]), cells[2], cells[3], cells[4], cells[5]))
    return rows


def load_known(path: Path | None) -> list[str]:
    """Signatures (shell-style patterns allowed) from a --known file: one per line, ``#`` comments; or the
    signature column of a findings.tsv. Raises KnownListError (or OSError: missing, unreadable)."""
    if path is None:
        return []
    text = _text(path, "a list of signatures")
    if text.startswith('"' + HEADER[0] + '"'):
        return [row.signature for row in _rows(text, path)]
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip() if not line.startswith("#") else ""
        if line:
            out.append(line)
    return out


def read_findings(path: Path) -> list[Row]:
    """The rows of an existing findings.tsv to resume (none when there is none); ``output.foreign`` when the
    path is a symlink, not a regular file, or not a findings.tsv."""
    if not os.path.lexists(path):
        return []
    if os.path.islink(path):
        raise rules.OUTPUT_FOREIGN.error(f"{path} is a symbolic link, not a findings.tsv of fuzz; give another --output")
    try:
        return _rows(_text(path, "a findings.tsv"), path)
    except KnownListError as e:
        raise rules.OUTPUT_FOREIGN.error(f"{e}; give another --output") from None


def write_findings(path: Path, rows: Iterable[Row], inputs: Iterable[Any] = ()) -> None:
    """Write findings.tsv whole, atomically (a symlink in its place is refused, never followed)."""
    if os.path.islink(path):
        raise rules.OUTPUT_FOREIGN.error(f"{path} is a symbolic link, not a findings.tsv of fuzz; give another --output")
    text = io.StringIO()
    writer = csv.writer(text, **_DIALECT)
    writer.writerow(HEADER)
    writer.writerows((r.reproducer, str(r.size), r.cls, r.signature, r.explanation, r.origin) for r in rows)
    write_atomic(path, lambda f: f.write(text.getvalue().encode("utf-8", "backslashreplace")), inputs=inputs)
