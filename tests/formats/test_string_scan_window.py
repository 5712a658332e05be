"""The speculative string scan against the exact loop: the same starts, end position and error (rule, offset)
for any string list, byte order and trailing bytes; bounded time and memory on layouts built to defeat it."""

from __future__ import annotations

import struct
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gguf_construct.errors import FormatError
from gguf_construct.formats.base import BufferStream
from gguf_construct.formats.gguf import string_scan
from gguf_construct.formats.gguf.string_scan import SCAN_WINDOW, _scan_loop, scan_strings


def _outcome(buf: bytes, n: int, order: str, exact: bool) -> tuple[object, ...]:
    stream = BufferStream(buf)
    try:
        if exact:
            starts = np.empty(n, dtype=np.int64)
            _scan_loop(stream, n, 0, order, True, "k", starts)
        else:
            starts = scan_strings(stream, n, order, True, "k")
    except FormatError as e:
        return ("error", e.rule, e.offset)
    return ("ok", starts.tolist(), stream.pos)


def _layout(lengths: list[int], body: str, order: str) -> bytes:
    """Length-prefixed strings; bodies of zeros, of false candidates (a small u64 every 8 bytes) or of 'x'."""
    out = bytearray()
    for length in lengths:
        out += struct.pack(order + "Q", length)
        if body == "zeros":
            out += bytes(length)
        elif body == "candidates":
            out += ((struct.pack(order + "Q", 3)) * (length // 8 + 1))[:length]
        else:
            out += b"x" * length
    return bytes(out)


_LENGTH = st.one_of(
    st.integers(0, 255),
    st.integers(256, 3000),
    st.sampled_from([SCAN_WINDOW - 16, SCAN_WINDOW - 9, SCAN_WINDOW - 8, SCAN_WINDOW, 2 * SCAN_WINDOW + 1]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    lengths=st.lists(_LENGTH, min_size=65, max_size=400),
    body=st.sampled_from(["zeros", "candidates", "text"]),
    order=st.sampled_from("<>"),
    junk=st.one_of(st.binary(max_size=64), st.integers(0, 3 * SCAN_WINDOW).map(bytes)),
    extra=st.integers(-3, 3),
    cut=st.one_of(st.none(), st.floats(0.0, 1.0)),
)
def test_speculation_agrees_with_the_loop(lengths: list[int], body: str, order: str, junk: bytes, extra: int, cut: float | None) -> None:
    buf = _layout(lengths, body, order) + junk
    if cut is not None:
        buf = buf[: int(len(buf) * cut)]
    n = max(65, min(len(lengths) + extra, len(buf) // 8))
    assert _outcome(buf, n, order, exact=False) == _outcome(buf, n, order, exact=True)


def _adversarial(order: str) -> dict[str, tuple[bytes, int]]:
    n = 200_000
    q = struct.Struct(order + "Q").pack
    return {
        "zero-length strings": (bytes(8 * n), n),
        "one zero byte each": ((q(1) + b"\0") * n, n),
        "short then zeros": ((q(8) + bytes(8) + q(3) + b"abc") * (n // 2), n),
        "tokens then zero-length": ((q(5) + b"hello") * n + bytes(8 * n), 2 * n),
        "false candidates in long bodies": ((q(300) + q(7) * 37 + b"abcd") * (n // 40), n // 40),
    }


@pytest.mark.parametrize("order", "<>")
def test_adversarial_layouts_cost_what_the_loop_costs(order: str) -> None:
    for name, (buf, n) in _adversarial(order).items():
        started = time.perf_counter()
        exact = _outcome(buf, n, order, exact=True)
        loop_time = time.perf_counter() - started
        started = time.perf_counter()
        fast = _outcome(buf, n, order, exact=False)
        spec_time = time.perf_counter() - started
        assert fast == exact, name
        assert spec_time < 4 * loop_time + 0.2, (name, spec_time, loop_time)
        tracemalloc.start()
        try:
            _outcome(buf, n, order, exact=False)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 8 * n + 40_000_000, (name, peak)


def test_a_window_of_zeros_stays_within_its_bound() -> None:
    """The largest window full of candidates: the temporaries the module's comment promises."""
    window = string_scan.SCAN_WINDOW_MAX
    zeros = memoryview(bytes(window))
    tracemalloc.start()
    try:
        cand, ends = string_scan._short_string_candidates(zeros, 0, window, "<")
        breaks = np.append(np.flatnonzero(ends[:-1] != cand[1:]), len(cand) - 1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(cand) == len(breaks) == window - 7
    assert peak <= 33 * window, peak
