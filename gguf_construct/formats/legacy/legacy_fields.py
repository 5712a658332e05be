"""The construct fields of the llama.cpp-family legacy formats (GGML, GGMF, GGJT, rwkv.cpp): names and tokens
that need not be UTF-8, signed dimension lists, vocabularies read in one tight loop, numeric arrays as numpy
views, and records until the end of the file. Every count and length is checked before it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...core.rules import Rule

import struct
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from construct import Construct, Container, SizeofError, evaluate

from ...core import rules
from ...core.limits import breach, limit
from ...core.shapes import shape_problem
from ...core.tables import load_table
from ...errors import InvalidValueError
from ..base import as_stream, context_path, readable_path
from ..fields import CheckedArray

#: Longest tensor name or token accepted (llama.cpp's migrator refuses names of 4096 bytes and more).
MAX_NAME_LENGTH = 4095
#: More dimensions than this cannot be honest in any legacy file (ggml has at most 4; ``schema/legacy.json``).
MAX_DIMS = load_table("legacy").max_n_dims


class LegacyName(Construct):
    """``u8 name[name_len]``: UTF-8 text, no terminator; the length comes from a sibling field."""

    def __init__(self, length: Any, rule: str | Rule, text: bool = True, least: int = 0):
        super().__init__()
        self.length = length
        self.rule = rule
        self.text = text
        self.least = least  # 1 for tensor names: no reader can look up a tensor without a name

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = self.length(context) if callable(self.length) else context[self.length]
        if n < self.least or n > MAX_NAME_LENGTH:
            raise self.rule.error(f"length {n} is not in {self.least}..{MAX_NAME_LENGTH}", path=readable_path(path), offset=s.pos - 4)
        s.need(n, self.rule, "the name", path)
        body = s.view[s.pos : s.pos + n]
        if not self.text:
            s.pos += n
            return bytes(body)
        try:
            out = str(body, "utf-8")
        except UnicodeDecodeError as e:
            raise rules.rule(f"{self.rule}.utf8").error(
                f"invalid UTF-8 ({e.reason})", path=readable_path(path), offset=s.pos + e.start
            ) from None
        s.pos += n
        return out

    def _build(self, obj, stream, context, path):
        stream.write(obj.encode("utf-8") if isinstance(obj, str) else bytes(obj))
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("a name has no fixed size", path=path)


def encoded_len(obj: Any) -> int:
    return len(obj.encode("utf-8") if isinstance(obj, str) else bytes(obj))


class Dims(Construct):
    """``i32 ne[n_dims]``: the count checked (0..MAX_DIMS) before reading; every extent must be ≥ 0."""

    def __init__(self, count: Any):
        super().__init__()
        self.count = count

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = context[self.count]
        if not 0 <= n <= MAX_DIMS:
            raise rules.TENSOR_N_DIMS.error(f"n_dims {n} is not in 0..{MAX_DIMS}", path=readable_path(path), offset=s.pos - 12)
        s.need(4 * n, rules.TENSOR_TRUNCATED, f"{n} dimensions", path)
        ne = list(struct.unpack_from(f"<{n}i", s.view, s.pos))
        if any(d < 0 for d in ne):
            raise rules.TENSOR_NE.error(f"negative dimension in {ne}", path=readable_path(path), offset=s.pos)
        problem = shape_problem(ne)
        if problem:
            raise InvalidValueError(problem[0], f"{ne}: {problem[1]}", path=readable_path(path), offset=s.pos)
        s.pos += 4 * n
        return ne

    def _build(self, obj, stream, context, path):
        stream.write(struct.pack(f"<{len(obj)}i", *obj))
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("dimensions have no fixed size", path=path)


class UntilEOF(CheckedArray):
    """``T items[]`` until the end of the input: no count anywhere, so a short final record is an error, never
    silently dropped. ``min_size`` is the smallest record, so a tail shorter than that is reported as such."""

    def __init__(self, subcon: Construct, min_size: int, rule: str | Rule):
        super().__init__(None, subcon, min_size, rule)

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        out = []
        while s.pos < s.size:
            if s.size - s.pos < self.min_size:
                raise self.rule.truncated(
                    f"{s.size - s.pos} bytes after record {len(out)} are too few for another", path=readable_path(path), offset=s.pos
                )
            context._index = len(out)
            if len(out) >= limit("tensor_count"):
                raise breach("tensor_count", f"more than {len(out)} records", path=readable_path(path), offset=s.pos)
            s.charge(2, path)  # each record is a Container of some hundred bytes
            out.append(self.subcon._parsereport(s, context, context_path(path, len(out))))
        return out

    def _sizeof(self, context, path):
        raise SizeofError("records until the end have no fixed size", path=path)


class LegacyVocab(Sequence[Container]):
    """A legacy vocabulary: ``texts`` (raw bytes: legacy tokens need not be UTF-8) and ``scores`` (float32 numpy
    array, or None where the format has none). Item ``i`` is ``Container(text=…, score=…)`` as the spec has it."""

    __slots__ = ("texts", "scores")

    def __init__(self, texts: list[bytes], scores: np.ndarray | None):
        self.texts = texts
        self.scores = scores

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return Container(text=self.texts[i], score=None if self.scores is None else float(self.scores[i]))

    def __iter__(self) -> Iterator[Container]:
        return (self[i] for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LegacyVocab):
            return NotImplemented
        same_scores = (self.scores is None and other.scores is None) or (
            self.scores is not None and other.scores is not None and np.array_equal(self.scores.view("<u4"), other.scores.view("<u4"))
        )
        return self.texts == other.texts and same_scores

    def __hash__(self) -> int:
        raise TypeError("LegacyVocab is unhashable")

    def __repr__(self) -> str:
        return f"LegacyVocab(n={len(self)}, scores={'yes' if self.scores is not None else 'no'})"

    @classmethod
    def of(cls, obj: Any, scored: bool) -> LegacyVocab:
        """A LegacyVocab from itself, a list of bytes/str, or a list of ``{text, score}`` records."""
        if isinstance(obj, LegacyVocab):
            return obj
        texts, scores = [], []
        for item in obj:
            if isinstance(item, (bytes, bytearray, str)):
                text, score = item, 0.0
            else:
                text, score = item["text"], item.get("score") or 0.0
            texts.append(text.encode("utf-8") if isinstance(text, str) else bytes(text))
            scores.append(score)
        return cls(texts, np.array(scores, dtype="<f4") if scored else None)


class VocabArray(Construct):
    """``{u32 len; u8 text[len]; f32 score?}[count]``: one tight loop, every length checked before it is used."""

    def __init__(self, count: Any, scored: Any):
        super().__init__()
        self.count = count
        self.scored = scored

    def _is_scored(self, context: Any) -> bool:
        return bool(self.scored(context) if callable(self.scored) else self.scored)

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = self.count(context) if callable(self.count) else context[self.count]
        scored = self._is_scored(context)
        least = 8 if scored else 4
        if n < 0 or n * least > s.remaining:
            raise rules.VOCAB_COUNT.truncated(
                f"{n} tokens need at least {max(n, 0) * least} bytes, {s.remaining} remain", path=readable_path(path), offset=s.pos
            )
        view, pos, size = s.view, s.pos, s.size
        unpack = struct.Struct("<I").unpack_from
        texts: list[bytes] = []
        score_at = np.empty(n if scored else 0, dtype=np.int64)
        for i in range(n):
            if pos + 4 > size:
                raise rules.VOCAB_TRUNCATED.error(f"token {i} of {n}: length past the end", path=readable_path(path), offset=pos)
            (length,) = unpack(view, pos)
            if length > MAX_NAME_LENGTH or pos + 4 + length + (4 if scored else 0) > size:
                raise rules.VOCAB_LENGTH.truncated(
                    f"token {i} of {n} claims {length} bytes, {size - pos - 4} remain",
                    path=readable_path(context_path(path, i)),
                    offset=pos,
                )
            pos += 4
            texts.append(bytes(view[pos : pos + length]))
            pos += length
            if scored:
                score_at[i] = pos
                pos += 4
        scores = None
        if scored:
            raw = np.frombuffer(view, dtype=np.uint8)
            scores = raw[score_at[:, None] + np.arange(4)].reshape(-1).view("<f4") if n else np.empty(0, "<f4")
        s.pos = pos
        return LegacyVocab(texts, scores)

    def _build(self, obj, stream, context, path):
        scored = self._is_scored(context)
        vocab = LegacyVocab.of(obj, scored)
        pack_len, pack_score = struct.Struct("<I").pack, struct.Struct("<f").pack
        parts = []
        scores = vocab.scores.view("<u4") if scored and vocab.scores is not None else None
        for i, text in enumerate(vocab.texts):
            parts.append(pack_len(len(text)))
            parts.append(text)
            if scored:
                parts.append(struct.pack("<I", int(scores[i])) if scores is not None else pack_score(0.0))
        stream.write(b"".join(parts))
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("a vocabulary has no fixed size", path=path)


class NumpyArray(Construct):
    """``T values[d0][d1]...`` of a fixed-size numeric type, as a flat read-only numpy view of the input.

    ``shape`` holds the extents (context expressions such as ``this.n_mel``); a negative extent, or more values
    than bytes left, is a TruncatedError with rule ``rule``.
    """

    def __init__(self, shape: tuple[Any, ...], dtype: str, rule: str | Rule):
        super().__init__()
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.rule = rule

    def _count(self, context: Any) -> int:
        n = 1
        for extent in self.shape:
            d = int(evaluate(extent, context))
            if d < 0:
                return -1
            n *= d
        return n

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = self._count(context)
        if n < 0 or n * self.dtype.itemsize > s.remaining:
            raise self.rule.truncated(
                f"{n} values of {self.dtype.itemsize} bytes do not fit the {s.remaining} bytes left", path=readable_path(path), offset=s.pos
            )
        out = np.frombuffer(s.view, dtype=self.dtype, count=n, offset=s.pos)
        out.flags.writeable = False
        s.pos += n * self.dtype.itemsize
        return out

    def _build(self, obj, stream, context, path):
        stream.write(np.ascontiguousarray(obj, dtype=self.dtype).tobytes())
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("a counted array has no fixed size", path=path)
