"""Minimization through the schema: make a finding's file small while the finding holds.

Byte-chunk deletion alone is slow on a GGUF file (most cuts break a count or an offset, so the reader fails
differently and the cut is refused) and leaves whole corpus files as reproducers. ``minimize`` first works on the
parsed file, where each step keeps the file well-formed:

1. drop metadata key-value pairs and tensors (halves first, then one at a time); when the offsets were the running
   sum of padded sizes (wrapping as ggml's do), a drop also moves the later tensors up, keeping that sum;
2. shorten arrays and strings (to one element or character, else to half, again while it holds);
3. zero the tensor data, then cut it after the last byte a tensor claims;

each candidate laid out again by the schema and kept only when ``still_fails`` holds. Then, if time and calls are
left, ``ddmin`` removes byte chunks. Both stop at ``seconds`` and ``max_calls``. A file the schema cannot parse
goes straight to the byte pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
from construct import Container

from ...core.tables import DEFAULT_ALIGNMENT
from ...errors import FormatError
from ...formats.gguf.offsets import padded_offsets  # ggml's wrapping arithmetic
from ...formats.gguf.schema import GGUF

__all__ = ["minimize"]

T = TypeVar("T")


class _Budget:
    def __init__(self, still_fails: Callable[[bytes], bool], seconds: float, max_calls: int):
        self.still_fails, self.deadline, self.calls_left = still_fails, time.monotonic() + seconds, max_calls

    @property
    def left(self) -> bool:
        return self.calls_left > 0 and time.monotonic() < self.deadline

    def check(self, data: bytes) -> bool:
        self.calls_left -= 1
        return self.still_fails(data)


def _fresh(c: Container) -> Container:
    """The parts of a parsed file that ``GGUF.build`` needs, copied so that a candidate can change them."""
    kvs = [Container(key=kv.key, value_type=str(kv.value_type), value=kv.value) for kv in c.metadata_kv]
    infos = [Container(name=t.name, dimensions=list(t.dimensions), type=t.type, offset=int(t.offset)) for t in c.tensor_infos]
    return Container(version=c.version, byte_order=c.byte_order, metadata_kv=kvs, tensor_infos=infos, tensor_data=bytes(c.tensor_data))


def _build(c: Container) -> bytes | None:
    try:
        return GGUF.build(c)
    except (FormatError, ValueError, TypeError, KeyError, OverflowError, IndexError):
        return None


def _shrink_list(items: list[T], keeps: Callable[[list[T]], bool], budget: _Budget) -> list[T]:
    """Delta debugging over a list: remove chunks (halves first, then smaller) while ``keeps`` holds."""
    n = 2
    while items and budget.left:
        chunk = max(1, len(items) // n)
        for start in range(0, len(items), chunk):
            if not budget.left:
                break
            candidate = items[:start] + items[start + chunk :]
            if keeps(candidate):
                items, n = candidate, max(n - 1, 2)
                break
        else:
            if chunk == 1:
                break
            n = min(len(items), n * 2)
    return items


def _shorter(value: Any, value_type: str) -> list[Any]:
    """Smaller versions of a value: half and one element (arrays), half and one character (strings)."""
    if value_type == "str":
        text = str(value)
        return [text[:1], text[: len(text) // 2]] if len(text) > 1 else []
    if value_type == "arr" and int(value.len) > 1:
        n = int(value.len)
        out = []
        for keep in (1, n // 2):
            items = value.array[:keep]
            out.append(Container(type=str(value.type), len=keep, array=items if not isinstance(items, np.ndarray) else items.copy()))
        return out
    return []


def _schema_pass(data: bytes, budget: _Budget) -> bytes:
    try:
        parsed = GGUF.parse(data)
    except (FormatError, ValueError, OverflowError):
        return data
    c = _fresh(parsed)
    if _build(c) != data:  # the schema does not lay this file out byte for byte: edits would change more
        return data
    best = data

    def keeps(candidate: Container) -> bool:
        nonlocal best
        built = _build(candidate)
        if built is None or len(built) > len(best) or not budget.check(built):
            return False
        best = built
        return True

    def with_(**parts: Any) -> Container:
        return Container({**c, **parts})

    kvs = _shrink_list(c.metadata_kv, lambda items: keeps(with_(metadata_kv=items)), budget)
    c = with_(metadata_kv=kvs)
    relay = _laid_out_as_running_sum(c)
    infos = _shrink_list(c.tensor_infos, lambda items: keeps(with_(tensor_infos=items)) or (relay and keeps(_relaid(c, items))), budget)
    c = _reparsed(best, with_(tensor_infos=infos))  # what was kept, with the offsets it was kept with
    for i in range(len(c.metadata_kv)):
        shrunk = True
        while shrunk and budget.left:  # the shortest first, then halves until nothing shorter holds
            kv, shrunk = c.metadata_kv[i], False
            for smaller in _shorter(kv.value, kv.value_type):
                kvs = list(c.metadata_kv)
                kvs[i] = Container(key=kv.key, value_type=kv.value_type, value=smaller)
                if budget.left and keeps(with_(metadata_kv=kvs)):
                    c, shrunk = with_(metadata_kv=kvs), True
                    break
    tensor_data = c.tensor_data
    if any(tensor_data) and budget.left and keeps(with_(tensor_data=bytes(len(tensor_data)))):
        c = with_(tensor_data=bytes(len(tensor_data)))
    for cut in _data_cuts(c):
        if not budget.left:
            break
        if keeps(with_(tensor_data=c.tensor_data[:cut])):
            c = with_(tensor_data=c.tensor_data[:cut])
    return best


def _reparsed(data: bytes, fallback: Container) -> Container:
    try:
        return _fresh(GGUF.parse(data))
    except (FormatError, ValueError, OverflowError):
        return fallback


def _running_sum(c: Container, infos: Sequence[Container]) -> tuple[list[int], int]:
    alignment = next((int(kv.value) for kv in c.metadata_kv if kv.key == "general.alignment" and kv.value_type == "u32"), DEFAULT_ALIGNMENT)
    return padded_offsets([(t.name, list(t.dimensions), str(t.type)) for t in infos], alignment if alignment > 0 else DEFAULT_ALIGNMENT)


def _laid_out_as_running_sum(c: Container) -> bool:
    """Whether the offsets are the running sum of padded sizes: then a dropped tensor moves the later ones up."""
    try:
        return [int(t.offset) for t in c.tensor_infos] == _running_sum(c, c.tensor_infos)[0]
    except (KeyError, ValueError, TypeError):
        return False


def _relaid(c: Container, infos: list[Container]) -> Container:
    offsets, total = _running_sum(c, infos)
    moved = [Container(t, offset=o) for t, o in zip(infos, offsets)]
    return Container({**c, "tensor_infos": moved, "tensor_data": bytes(c.tensor_data[: min(total, len(c.tensor_data))])})


def _data_cuts(c: Container) -> Sequence[int]:
    """Lengths to try for the data section: none, up to the furthest offset any tensor has, half."""
    n = len(c.tensor_data)
    ends = sorted({int(t.offset) for t in c.tensor_infos if int(t.offset) < n})
    return [x for x in (0, ends[-1] if ends else 0, n // 2) if x < n]


def ddmin(data: bytes, still_fails: Callable[[bytes], bool], budget: int = 200, deadline: float | None = None) -> bytes:
    """Delta debugging (Zeller): remove chunks of ``data`` while ``still_fails`` holds, halving the chunk size
    when no chunk can go; at most ``budget`` calls of the predicate (and none past ``deadline``, a monotonic
    time). Then the shortest failing prefix is tried."""
    calls = 0

    def spent() -> bool:
        return calls >= budget or (deadline is not None and time.monotonic() > deadline)

    def check(candidate: bytes) -> bool:
        nonlocal calls
        calls += 1
        return still_fails(candidate)

    n = 2
    while len(data) >= 2 and not spent():
        chunk = max(1, len(data) // n)
        removed = False
        for start in range(0, len(data), chunk):
            if spent():
                break
            candidate = data[:start] + data[start + chunk :]
            if candidate and check(candidate):
                data, n, removed = candidate, max(n - 1, 2), True
                break
        if not removed:
            if chunk == 1:
                break
            n = min(len(data), n * 2)
    lo, hi = 1, len(data)  # the shortest prefix that still fails (binary search, assuming monotony)
    while lo < hi and not spent():
        mid = (lo + hi) // 2
        if check(data[:mid]):
            hi = mid
        else:
            lo = mid + 1
    return data[:hi] if hi < len(data) and not spent() and check(data[:hi]) else data


def minimize(data: bytes, still_fails: Callable[[bytes], bool], *, seconds: float = 30.0, max_calls: int = 300) -> bytes:
    """The smallest file found that still fails: schema steps first, then byte-chunk deletion with what is left
    of ``seconds`` and ``max_calls``."""
    budget = _Budget(still_fails, seconds, max_calls)
    small = _schema_pass(data, budget)
    if budget.left and len(small) > 1:
        deadline = budget.deadline

        def timed(candidate: bytes) -> bool:
            return time.monotonic() < deadline and still_fails(candidate)

        small = ddmin(small, timed, max(1, budget.calls_left))
    return small
