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

from .errors import InvalidValueError
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
    ``json.utf8`` for one that is not JSON. ``offset`` is where the text starts in its file (for messages)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > limit("header_bytes"):
        raise breach("header_bytes", f"{what} of {len(raw)} bytes", path=path, offset=offset)
    _check_objects(raw, what, path, offset)
    kwargs: dict[str, Any] = {"object_pairs_hook": object_pairs_hook} if object_pairs_hook else {}
    if _long_digits().search(raw):  # rare: only then pay for a Python call per number
        kwargs["parse_int"] = _bounded_int(what, path, offset)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidValueError("json.utf8", f"{what} is not UTF-8 ({e.reason})", path=path, offset=offset + e.start) from None
    try:
        value = json.loads(text, **kwargs)
    except json.JSONDecodeError as e:
        raise InvalidValueError("json.syntax", f"{what} is not JSON: {e.msg}", path=path, offset=offset + len(text[: e.pos].encode())) from None
    except RecursionError:
        raise breach("nesting", f"{what} nests deeper than Python's recursion limit", path=path, offset=offset) from None
    depth = nesting(value)
    if depth > limit("nesting"):
        raise breach("nesting", f"{what} nests {depth} deep", path=path, offset=offset)
    return value


def _check_objects(raw: bytes, what: str, path: str, offset: int) -> None:
    """Refuse more JSON objects and arrays than ``objects_free`` + ``objects_per_kib`` per KiB allow, before
    parsing (bracket counting is C-fast; brackets inside strings are discounted only when it matters)."""
    budget = limit("objects_free") + limit("objects_per_kib") * len(raw) // 1024
    if raw.count(b"{") + raw.count(b"[") <= budget:
        return
    bare = re.sub(rb'"(?:[^"\\]|\\.)*"', b'""', raw)
    found = bare.count(b"{") + bare.count(b"[")
    if found > budget:
        raise breach("objects_per_kib", f"{what} holds {found} objects and arrays in {len(raw)} bytes", path=path, offset=offset)


def _bounded_int(what: str, path: str, offset: int) -> Callable[[str], int]:
    most = limit("number_digits")

    def parse_int(text: str) -> int:
        if len(text.lstrip("-")) > most:
            raise breach("number_digits", f"{what} holds a number of {len(text)} digits", path=path, offset=offset)
        return int(text)

    return parse_int


def nesting(value: Any) -> int:
    """How deeply JSON arrays and objects nest in ``value`` (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            children = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))
    return deepest
