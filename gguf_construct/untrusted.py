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
from collections.abc import Callable
from typing import Any

import numpy as np

from . import rules
from .limits import breach, limit

#: A run of ASCII digits (``\d`` would also match other scripts' digits, which ``int()`` may refuse).
DIGITS = re.compile(r"[0-9]+\Z")
_LONG_DIGITS = {}  # number_digits -> compiled pattern for a run longer than that


def decimal(text: str) -> int | None:
    """``text`` as a non-negative int when it is ASCII digits only and at most ``number_digits`` of them; else
    None (a superscript, a sign, thousands of digits)."""
    if len(text) > limit("number_digits") or not DIGITS.match(text):
        return None
    return int(text)


def _long_digits() -> re.Pattern[bytes]:
    n = limit("number_digits")
    rx = _LONG_DIGITS.get(n)
    if rx is None:
        rx = _LONG_DIGITS[n] = re.compile(rb"[0-9]{%d}" % (n + 1))
    return rx


def loads(data: str | bytes | bytearray | memoryview, *, what: str = "JSON", path: str = "", offset: int = 0,
          object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:  # fmt: skip
    """Parse untrusted JSON. LimitError ``limit.header_bytes`` / ``limit.number_digits`` / ``limit.nesting`` /
    ``limit.objects_per_kib`` for a document beyond the named limits; InvalidValueError ``json.syntax`` /
    ``json.utf8`` for one that is not JSON. ``offset`` is where the text starts in its file (for messages).

    Size, nesting and the number of objects are measured on the bytes before the decoder runs (C-speed
    counting, and a vectorised running depth over the text with its strings blanked), so no hostile document
    makes the decoder build a million objects or recurse a hundred thousand times first."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > limit("header_bytes"):
        raise breach("header_bytes", f"{what} of {len(raw)} bytes", path=path, offset=offset)
    _check_structure(raw, what, path, offset)
    kwargs: dict[str, Any] = {"object_pairs_hook": object_pairs_hook} if object_pairs_hook else {}
    if _long_digits().search(raw):  # rare: only then pay for a Python call per number
        kwargs["parse_int"] = _bounded_int(what, path, offset)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise rules.JSON_UTF8.error(f"{what} is not UTF-8 ({e.reason})", path=path, offset=offset + e.start) from None
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError as e:
        raise rules.JSON_SYNTAX.error(f"{what} is not JSON: {e.msg}", path=path, offset=offset + len(text[: e.pos].encode())) from None
    except RecursionError:  # not reached when the depth check above holds; kept as the last guard
        raise breach("nesting", f"{what} nests deeper than Python's recursion limit", path=path, offset=offset) from None


#: A JSON string (escapes included): blanked before brackets are counted, so that ``"[[["`` counts nothing.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


#: Bytes of JSON text measured per step: the temporaries are a few bytes per byte of a chunk, not of the text.
CHUNK = 1 << 20


def _check_structure(raw: bytes, what: str, path: str, offset: int) -> None:
    """Refuse nesting deeper than ``nesting`` and more objects and arrays than ``objects_free`` +
    ``objects_per_kib`` per KiB, outside strings; cheap when the brackets are few (a real header's case is
    one C-speed pass to blank the strings, then a running depth in chunks)."""
    if raw.count(b"{") + raw.count(b"[") <= limit("nesting"):
        return
    bare = _STRING.sub(b'""', raw)
    most, depth, deepest, found = limit("nesting"), 0, 0, 0
    for start in range(0, len(bare), CHUNK):
        chunk = np.frombuffer(bare, dtype=np.uint8, count=min(CHUNK, len(bare) - start), offset=start)
        opens = (chunk == ord("[")) | (chunk == ord("{"))
        step = opens.view(np.int8) - ((chunk == ord("]")) | (chunk == ord("}"))).view(np.int8)
        running = np.cumsum(step, dtype=np.int32) + depth
        peak = int(running.max())
        if peak > most:
            at = start + int(np.argmax(running > most))
            raise breach("nesting", f"{what} nests deeper than {most}", path=path, offset=offset + at)
        deepest, depth = max(deepest, peak), int(running[-1])
        found += int(np.count_nonzero(opens))
    budget = limit("objects_free") + limit("objects_per_kib") * len(raw) // 1024
    if found > budget:
        raise breach("objects_per_kib", f"{what} holds {found} objects and arrays in {len(raw)} bytes", path=path, offset=offset)


def _bounded_int(what: str, path: str, offset: int) -> Callable[[str], int]:
    most = limit("number_digits")

    def parse_int(text: str) -> int:
        if len(text.lstrip("-")) > most:
            raise breach("number_digits", f"{what} holds a number of {len(text)} digits", path=path, offset=offset)
        return int(text)

    return parse_int
