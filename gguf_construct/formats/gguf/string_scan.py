"""The scan of a GGUF string array: where each of ``n`` length-prefixed strings starts, found without decoding
them (the bodies stay in the input; ``fields.StringArray`` decodes on access).

The exact walk is a loop (each position depends on the one before); for u64 lengths a vectorised speculation
proves most positions first. Every length is checked against the bytes left; errors carry rule, path, offset.
"""

from __future__ import annotations

import struct

import numpy as np

from ...core import rules
from ..base import BufferStream, readable_path


def count_format(order: str, wide: bool) -> struct.Struct:
    """The packed count/length field: u64 from GGUF v2 on, u32 in v1."""
    return struct.Struct(order + ("Q" if wide else "I"))


def scan_strings(stream: BufferStream, n: int, order: str, wide: bool, path: str) -> np.ndarray:
    """Walk ``n`` length-prefixed strings from the stream's position; return the body starts (each body ends
    where the next length field begins; the last one at the stream's new position).

    Each position depends on the one before, so the exact walk is a loop (``_scan_loop``). For u64 lengths a
    vectorised speculation does most of the work first (``_scan_speculative``); it only ever returns positions
    it has proven, and leaves the rest, and every error, to the loop.
    """
    starts = np.empty(n, dtype=np.int64)
    done = _scan_speculative(stream, n, order, starts) if wide and n > 64 else 0
    _scan_loop(stream, n, done, order, wide, path, starts)
    return starts


def _scan_loop(stream: BufferStream, n: int, first: int, order: str, wide: bool, path: str, starts: np.ndarray) -> None:
    fmt = count_format(order, wide)
    width = fmt.size
    unpack = fmt.unpack_from
    view, pos, size = stream.view, stream.pos, stream.size
    for i in range(first, n):
        if pos + width > size:
            stream.pos = pos
            raise rules.ARRAY_TRUNCATED.error(f"string {i} of {n}: length field past the end", path=readable_path(path), offset=pos)
        (length,) = unpack(view, pos)
        pos += width
        if length > size - pos:
            raise rules.STRING_LENGTH.error(
                f"string {i} of {n} claims {length} bytes, {size - pos} remain", path=readable_path(path), offset=pos - width
            )
        starts[i] = pos
        pos += length
    stream.pos = pos


def _short_string_candidates(view: memoryview, pos: int, window: int, order: str) -> tuple[np.ndarray, np.ndarray]:
    """Positions in ``[pos, pos + window - 8]`` holding a u64 below 256, and where each such string would end
    (its position + 8 + that value).

    Read as four phase-shifted u32 views (zero-copy, vectorised): a u64 is below 256 when its high word is 0
    and its low word is below 256. Arithmetic is in place: a window of zeros makes every position a candidate,
    and each int64 temporary then takes 8 bytes per byte of window.
    """
    mask = np.zeros(window - 7, dtype=bool)
    for phase in range(4):
        count = (window - phase) // 4
        if count < 2:
            continue
        words = np.frombuffer(view, dtype=order + "u4", count=count, offset=pos + phase)
        lo, hi = (words[:-1], words[1:]) if order == "<" else (words[1:], words[:-1])
        lane = mask[phase::4]
        k = min(len(lane), len(lo))
        lane[:k] = (hi[:k] == 0) & (lo[:k] < 256)
    cand = np.flatnonzero(mask)
    del mask
    raw = np.frombuffer(view, dtype=np.uint8, count=window, offset=pos)
    ends = (raw[cand] if order == "<" else raw[7:][cand]).astype(np.int64)
    ends += cand
    ends += 8
    return cand, ends


#: The speculative scan's window, in bytes: the first one, and the largest. Its temporaries take up to ~32
#: bytes per byte of window (a window of zeros makes every position a candidate), so the cap bounds them
#: (~35 MB) whatever the file's size. A window doubles each time the strings run past its end, and never
#: spans much more than the strings left can take at the mean length seen so far: the scan reads the string
#: region and at most a window beyond it, never the tensor data of a large file.
SCAN_WINDOW = 1 << 14
SCAN_WINDOW_MAX = 1 << 20

#: The speculation pays while each of its Python-level steps proves many strings at once; where false
#: candidates break every run (zero-length strings, bodies of zeros) a step proves one, at some twenty times
#: the exact loop's cost per string. After ``SPECULATION_FREE_STEPS`` steps, a scan proving fewer than
#: ``STRINGS_PER_STEP`` strings per step on average leaves the rest to the loop.
SPECULATION_FREE_STEPS = 64
STRINGS_PER_STEP = 16


def _next_window(step: int, done: int, n: int, scanned: int) -> int:
    """The next window's size: twice the last (the strings outran it), at most what the ``n - done`` strings
    left would span at twice the mean length of the ``done`` already proven over ``scanned`` bytes, within
    ``[SCAN_WINDOW, SCAN_WINDOW_MAX]``."""
    mean = scanned / done if done else 16.0
    expected = int((n - done) * mean * 2) + 4096
    return max(SCAN_WINDOW, min(2 * step, expected, SCAN_WINDOW_MAX))


def _scan_speculative(stream: BufferStream, n: int, order: str, starts: np.ndarray) -> int:
    """Find string positions for u64 lengths with numpy; return how many were proven (from the first).

    Short strings (length < 256, nearly every token and merge) have seven zero bytes after the length byte;
    the positions that look like that are candidates, and every true position of a short string is one. From
    a true position, a run of candidates where each one's end is the next one's start is proven by induction.
    Where the run breaks, the true next position is the known end of the last proven string: a long string
    there is read exactly, a false candidate (seven zeros inside a body) is stepped over. What cannot be
    proven is left to the exact loop, which also reports every error.
    """
    view, size = stream.view, stream.size
    unpack = struct.Struct(order + "Q").unpack_from
    done, pos, last_end = 0, stream.pos, stream.pos
    first = pos
    step, steps = SCAN_WINDOW, 0
    while done < n:
        window = min(size - pos, step)
        if window < 16:
            break
        cand, nxt = _short_string_candidates(view, pos, window, order)
        breaks = np.flatnonzero(nxt[:-1] != cand[1:])
        breaks = np.append(breaks, len(cand) - 1)
        cur, limit = 0, size - pos
        while done < n:
            steps += 1
            if steps > SPECULATION_FREE_STEPS and done < STRINGS_PER_STEP * steps:
                stream.pos = pos + cur
                return done  # not paying: the loop is faster here
            i = int(np.searchsorted(cand, cur))
            if i == len(cand) or cand[i] != cur:
                if cur + 8 > window - 8:
                    break  # near the window's end: start a new window here
                (length,) = unpack(view, pos + cur)
                if length > limit - cur - 8:
                    stream.pos = pos + cur
                    return done  # the loop reports it
                starts[done] = pos + cur + 8
                cur += 8 + length
                last_end = pos + cur
                done += 1
                continue
            b = int(breaks[np.searchsorted(breaks, i)])
            take = min(b - i + 1, n - done)
            seg = nxt[i : i + take]
            if int(seg[-1]) > limit:  # a body past the end of the file: stop before it
                take = int(np.searchsorted(seg, limit, side="right"))
                seg = seg[:take]
                if take == 0:
                    stream.pos = pos + cur
                    return done
            starts[done : done + take] = cand[i : i + take] + (pos + 8)
            last_end = int(seg[-1]) + pos
            done += take
            cur = int(seg[-1])
        if cur == 0:
            break
        pos += cur
        step = _next_window(step, done, n, pos - first)
    stream.pos = last_end
    return done
