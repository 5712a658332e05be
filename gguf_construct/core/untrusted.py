"""Untrusted text meets Python's own limits: JSON and decimal numbers from files and command lines.

Python refuses int<->str conversions beyond 4,300 digits (ValueError), its JSON decoder recurses once per
nesting level (RecursionError), and a few bytes of JSON (``{}``) become a few hundred bytes of objects. ``loads``
is the one JSON reader for everything that comes from outside (safetensors headers, Ollama manifests and
configs, values given to ``set``): it bounds size, digits, nesting and objects per byte (the named limits of
``schema/limits.json``) and raises only FormatError subclasses. ``decimal`` reads the digits in a name
(``blk.<n>``) with an ASCII-only pattern: ``str.isdigit()`` accepts superscripts that ``int()`` refuses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import rules
from .limits import breach, limit

#: A run of ASCII digits (``\d`` would also match other scripts' digits, which ``int()`` may refuse).
DIGITS = re.compile(r"[0-9]+\Z")


def decimal(text: str) -> int | None:
    """``text`` as a non-negative int when it is ASCII digits only and at most ``number_digits`` of them; else
    None (a superscript, a sign, thousands of digits)."""
    if len(text) > limit("number_digits") or not DIGITS.match(text):
        return None
    return int(text)


@dataclass(frozen=True)
class Structure:
    """What a JSON text holds outside its strings, counted on the bytes: ``objects`` (``{``), ``arrays``
    (``[``), ``pairs`` (``:``, one per key of every object, duplicates included) and ``strings`` (keys and
    values)."""

    objects: int
    arrays: int
    pairs: int
    strings: int = 0


def loads(
    data: str | bytes | bytearray | memoryview,
    *,
    what: str = "JSON",
    path: str = "",
    offset: int = 0,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> Any:
    """Parse untrusted JSON. LimitError ``limit.header_bytes`` / ``limit.number_digits`` / ``limit.nesting`` /
    ``limit.objects_per_kib`` / ``limit.strings_per_kib`` for a document beyond the named limits; InvalidValueError ``json.syntax`` /
    ``json.utf8`` for one that is not JSON. ``offset`` is where the text starts in its file (for messages).

    Size, nesting, the number of objects and the longest run of digits are measured on the bytes before the
    decoder runs (one vectorised pass: strings masked by quote parity, a running depth), so no hostile
    document makes the decoder build a million objects or recurse a hundred thousand times first."""
    return loads_counted(data, what=what, path=path, offset=offset, object_pairs_hook=object_pairs_hook)[0]


def loads_counted(
    data: str | bytes | bytearray | memoryview,
    *,
    what: str = "JSON",
    path: str = "",
    offset: int = 0,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> tuple[Any, Structure]:
    """``loads``, and the ``Structure`` of the text: a caller can tell from it whether the parsed value lost
    duplicate keys (fewer keys than ``pairs``) without an ``object_pairs_hook`` call per object."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > limit("header_bytes"):
        raise breach("header_bytes", f"{what} of {len(raw)} bytes", path=path, offset=offset)
    structure, long_digits = _check_structure(raw, what, path, offset)
    kwargs: dict[str, Any] = {"object_pairs_hook": object_pairs_hook} if object_pairs_hook else {}
    if long_digits:  # rare: only then pay for a Python call per number
        kwargs["parse_int"] = _bounded_int(what, path, offset)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise rules.JSON_UTF8.error(f"{what} is not UTF-8 ({e.reason})", path=path, offset=offset + e.start) from None
    try:
        return json.loads(text, **kwargs), structure
    except json.JSONDecodeError as e:
        raise rules.JSON_SYNTAX.error(f"{what} is not JSON: {e.msg}", path=path, offset=offset + len(text[: e.pos].encode())) from None
    except RecursionError:  # not reached when the depth check above holds; kept as the last guard
        raise breach("nesting", f"{what} nests deeper than Python's recursion limit", path=path, offset=offset) from None


def json_lines(data: bytes, *, what: str = "JSON lines") -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-blank line of a JSON-lines text (a resume file: ``scan --output``'s, a
    fuzzer's), each through ``loads``: a line too deep or too large is a LimitError, never a RecursionError."""
    for n, raw in enumerate(data.splitlines(), 1):
        if raw.strip():
            yield n, loads(raw, what=f"line {n} of {what}")


#: A JSON string (escapes included): blanked before brackets are counted when the text has escapes.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


#: Bytes of JSON text measured per step: the temporaries are a few bytes per byte of a chunk, not of the text.
CHUNK = 1 << 20

#: Byte → +1 for ``[``/``{``, -1 for ``]``/``}``, else 0.
_STEP = np.zeros(256, np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1
#: The bytes that shape a JSON text outside its strings, and the quotes that delimit them.
_STRUCTURAL = b'"[]{}:'
_NOT_STRUCTURAL = bytes(b for b in range(256) if b not in _STRUCTURAL)
_IS_STRUCTURAL = np.zeros(256, bool)
_IS_STRUCTURAL[list(_STRUCTURAL)] = True
#: Byte → ``d`` for an ASCII digit, else ``.``: a run of digits becomes a run of ``d`` that ``bytes.find`` finds.
_DIGIT_RUNS = bytes(ord("d") if chr(b).isdigit() and b < 128 else ord(".") for b in range(256))


def _check_structure(raw: bytes, what: str, path: str, offset: int) -> tuple[Structure, bool]:
    """Refuse nesting deeper than ``nesting``, more objects and arrays than ``objects_free`` +
    ``objects_per_kib`` per KiB outside strings, and more strings than ``objects_free`` + ``strings_per_kib`` per
    KiB (a string is a Python object too: 500k short ones would cost far more than their bytes); return the counts, and whether a run of
    more than
    ``number_digits`` digits occurs anywhere (strings included).

    Strings are found by quote parity: without backslashes every quote opens or closes one (the decoder sees
    the same strings up to its first syntax error); with backslashes the strings are blanked by a regex first.
    Only the structural bytes (quotes, brackets, colons) are looked at: ``bytes.translate`` drops the rest at C
    speed, then numpy runs over what is left, per ``CHUNK``."""
    bare = _STRING.sub(b'""', raw) if b"\\" in raw else raw
    most = limit("nesting")
    depth, quotes, objects, arrays, pairs, all_quotes = 0, 0, 0, 0, 0, 0
    for start in range(0, len(bare), CHUNK):
        piece = bare[start : start + CHUNK]
        marks = np.frombuffer(piece.translate(None, _NOT_STRUCTURAL), dtype=np.uint8)  # C-speed: only "[]{}: in order
        quote = marks == ord('"')
        outside = (np.cumsum(quote, dtype=np.uint8) + quotes) & 1 == 0  # parity survives the uint8 wrap; a closing quote counts as outside
        kept = marks[outside]
        running = np.cumsum(np.take(_STEP, kept), dtype=np.int32) + depth  # at most CHUNK steps: no overflow
        if len(running):
            peak = int(running.max())
            if peak > most:  # where: the structural bytes' own positions, found only now
                at = np.flatnonzero(_IS_STRUCTURAL[np.frombuffer(piece, dtype=np.uint8)])[
                    np.flatnonzero(outside)[np.argmax(running > most)]
                ]
                raise breach("nesting", f"{what} nests deeper than {most}", path=path, offset=offset + start + int(at))
            depth = int(running[-1])
        objects += int(np.count_nonzero(kept == ord("{")))
        arrays += int(np.count_nonzero(kept == ord("[")))
        pairs += int(np.count_nonzero(kept == ord(":")))
        n_quotes = int(np.count_nonzero(quote))
        all_quotes += n_quotes
        quotes = (quotes + n_quotes) % 2
    budget = limit("objects_free") + limit("objects_per_kib") * len(raw) // 1024
    if objects + arrays > budget:
        raise breach("objects_per_kib", f"{what} holds {objects + arrays} objects and arrays in {len(raw)} bytes", path=path, offset=offset)
    strings = all_quotes // 2  # escaped quotes were blanked with their strings: two quotes per string
    if strings > limit("objects_free") + limit("strings_per_kib") * len(raw) // 1024:
        raise breach("strings_per_kib", f"{what} holds {strings} strings in {len(raw)} bytes", path=path, offset=offset)
    long_digits = b"d" * (limit("number_digits") + 1) in raw.translate(_DIGIT_RUNS)
    return Structure(objects, arrays, pairs, strings), long_digits


def _bounded_int(what: str, path: str, offset: int) -> Callable[[str], int]:
    most = limit("number_digits")

    def parse_int(text: str) -> int:
        if len(text.lstrip("-")) > most:
            raise breach("number_digits", f"{what} holds a number of {len(text)} digits", path=path, offset=offset)
        return int(text)

    return parse_int
