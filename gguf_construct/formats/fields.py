"""Custom construct fields for the hot and the hostile parts of a schema.

Each class is a ``construct.Construct`` used inside ordinary declarations, with vectorised or tight-loop
``_parse``/``_build``: numeric arrays become numpy views of the input (no copy), string arrays become lazy
``StringArray`` views (one scan of the lengths, decoding on access), tensor data stays a memoryview. Every count
and length is checked against the bytes left before anything is allocated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.rules import Rule

import struct
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from construct import Const, Construct, Container, SizeofError, StopFieldError, Struct, Subconstruct, evaluate
from construct.core import EnumIntegerString

from ..core import rules
from ..core.limits import TABLE as LIMITS
from ..core.limits import breach, limit
from ..core.tables import VALUE_TYPES, ValueType
from .base import BufferStream, as_stream, context_path, readable_path
from .gguf.string_scan import count_format, scan_strings

#: The default of limit ``nesting``: arrays of arrays deeper than this are rejected (the spec sets no bound;
#: ggml allows no nesting at all). The active value is ``limit("nesting")``.
MAX_ARRAY_DEPTH = LIMITS["nesting"].value


#: The ``struct`` code (one that construct's ``FormatField`` takes too) of each numpy dtype code of ``schema/value_types.json``.
STRUCT_CODES = {vt.numpy: vt.struct for vt in VALUE_TYPES.values() if vt.numpy and vt.struct}


def value_type_name(vt: Any) -> str | None:
    """The name of a value type given as id, name or enum string; None when unknown."""
    try:
        return VALUE_TYPES.lookup(vt).name
    except (KeyError, ValueError, TypeError):
        return None


def enum_value_type(vt_id: int) -> Any:
    """A value type id as construct's Enum would parse it (an int that prints as its name)."""
    vt = VALUE_TYPES.get(vt_id)
    return EnumIntegerString.new(vt_id, vt.name) if vt else vt_id


class StringArray(Sequence[str]):
    """A GGUF string array, decoded on access: the bodies' start offsets into the source buffer are all it keeps.

    The strings lie back to back, so each one ends where the next one's length field begins (the last one at the
    end of the array's region). Bulk work (:meth:`tolist`, :meth:`check_utf8`) goes through the region in windows:
    a window's bytes are copied once with every length field blanked to NUL bytes and decoded with one call; since
    an ASCII byte ends any UTF-8 sequence, the window decodes if and only if each string in it does. The strings
    are then split out of the text at the blanked fields (or sliced out, when a body itself holds a NUL).
    """

    __slots__ = ("_view", "_starts", "_region", "_layout", "path")

    def __init__(self, view: memoryview, starts: np.ndarray, region: tuple[int, int], layout: tuple[str, bool], path: str = ""):
        self._view = view
        self._starts = starts
        self._region = region  # (first length field, end of last body): the array's exact encoded bytes
        self._layout = layout  # (byte order, wide counts) of that encoding
        self.path = path

    def __len__(self) -> int:
        return len(self._starts)

    def _width(self) -> int:
        return 8 if self._layout[1] else 4

    def _end(self, i: int) -> int:
        return int(self._starts[i + 1]) - self._width() if i + 1 < len(self._starts) else self._region[1]

    def _ends(self, i: int = 0, j: int | None = None) -> np.ndarray:
        """End offsets of strings ``i:j``, each derived from the next one's start."""
        starts, n = self._starts, len(self._starts)
        j = n if j is None else j
        ends = np.empty(j - i, dtype=np.int64)
        if j > i:
            np.subtract(starts[i + 1 : j], self._width(), out=ends[:-1])
            ends[-1] = self._end(j - 1)
        return ends

    def _decode(self, i: int) -> str:
        s, e = int(self._starts[i]), self._end(i)
        try:
            return str(self._view[s:e], "utf-8")
        except UnicodeDecodeError as err:
            raise rules.STRING_UTF8.error(f"invalid UTF-8 ({err.reason})", path=f"{self.path}[{i}]", offset=s + err.start) from None

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self._decode(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("StringArray index out of range")
        return self._decode(i)

    def __iter__(self) -> Iterator[str]:
        return iter(self.tolist())

    def _windows(self) -> Iterator[tuple[int, int, int, np.ndarray]]:
        """(first string, end string, region offset, bytes) windows of about ``DECODE_WINDOW`` bytes, each a copy
        of whole strings' encodings whose length fields are blanked to NUL bytes."""
        starts, n, width = self._starts, len(self._starts), self._width()
        i = 0
        while i < n:
            lo = int(starts[i]) - width
            j = max(i + 1, int(np.searchsorted(starts, lo + width + DECODE_WINDOW, side="right")))
            hi = int(starts[j]) - width if j < n else self._region[1]
            buf = np.frombuffer(self._view, dtype=np.uint8, count=hi - lo, offset=lo).copy()
            fields = starts[i:j] - (lo + width)
            for k in range(width):
                buf[fields + k] = 0
            yield i, j, lo, buf
            i = j

    def _window_text(self, i: int, buf: np.ndarray, lo: int) -> str:
        try:
            return str(buf.data, "utf-8")
        except UnicodeDecodeError as err:
            bad = max(i, int(np.searchsorted(self._starts, lo + err.start, side="right")) - 1)
            self._decode(bad)  # raises, naming the element and its offset
            raise rules.STRING_UTF8.error(f"invalid UTF-8 ({err.reason})", path=f"{self.path}[{bad}]", offset=lo + err.start) from None

    def check_utf8(self) -> None:
        """Raise ``InvalidValueError`` (rule ``string.utf8``) at the first string that is not UTF-8, without
        building a Python string per element (an all-ASCII window needs no decoding at all)."""
        for i, _, lo, buf in self._windows():
            if buf.size and int(buf.max()) >= 0x80:
                self._window_text(i, buf, lo)

    def tolist(self) -> list[str]:
        """Every string, decoded (strict UTF-8): one decode per window, then each string sliced out of it."""
        out: list[str] = []
        width = self._width()
        for i, j, lo, buf in self._windows():
            text = self._window_text(i, buf, lo)
            if np.count_nonzero(buf == 0) == (j - i) * width:  # no NUL in any body: the fields are the separators
                parts = text.split("\0" * width)
                del parts[0]  # before the first field
                if out:
                    out.extend(parts)
                else:
                    out = parts
                continue
            begin = self._starts[i:j] - lo
            end = self._ends(i, j) - lo
            if len(text) != buf.size:  # not all ASCII: byte offsets → character offsets
                before = np.zeros(buf.size + 1, dtype=np.int64 if buf.size >= 1 << 31 else np.int32)
                np.cumsum((buf & 0xC0) == 0x80, out=before[1:])
                begin = begin - before[begin]
                end = end - before[end]
            out.extend(map(text.__getitem__, map(slice, begin.tolist(), end.tolist())))
        return out

    def lengths(self) -> np.ndarray:
        """The byte length of every string, without decoding."""
        return self._ends() - self._starts

    def offsets(self) -> np.ndarray:
        """The absolute byte offset of every string body in the source."""
        return self._starts

    def encoded(self, order: str, wide: bool) -> memoryview | bytes:
        """The array's elements encoded for (order, wide): the source bytes themselves when the layout matches."""
        if (order, wide) == self._layout:
            return self._view[self._region[0] : self._region[1]]
        return encode_strings(self.tolist(), order, wide)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StringArray):
            return len(self) == len(other) and bytes(self.encoded(*self._layout)) == bytes(other.encoded(*self._layout))
        if isinstance(other, (list, tuple)):
            return self.tolist() == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        raise TypeError("StringArray is unhashable")

    def __repr__(self) -> str:
        n = len(self)
        head = ", ".join(repr(self[i]) for i in range(min(n, 3)))
        return f"StringArray([{head}{', ...' if n > 3 else ''}], n={n})"


#: Bytes of a string array decoded per call in :meth:`StringArray.tolist` / :meth:`StringArray.check_utf8`:
#: large enough to amortise the per-window numpy calls, small enough that the copy and its text stay in cache.
DECODE_WINDOW = 1 << 20


def encode_strings(items: Sequence[str | bytes], order: str, wide: bool) -> bytes:
    """Length-prefixed UTF-8 strings, back to back: the bodies are joined once and the length fields are
    scattered between them with numpy (no per-string packing)."""
    bodies = [x.encode("utf-8") if isinstance(x, str) else bytes(x) for x in items]
    n = len(bodies)
    if n == 0:
        return b""
    fmt = count_format(order, wide)
    width = fmt.size
    lens = np.fromiter(map(len, bodies), dtype=np.int64, count=n)
    field_at = np.arange(n, dtype=np.int64) * width
    field_at[1:] += np.cumsum(lens[:-1])
    out = np.empty(int(lens.sum()) + n * width, dtype=np.uint8)
    is_body = np.ones(len(out), dtype=bool)
    where = (field_at[:, None] + np.arange(width)).ravel()
    is_body[where] = False
    out[where] = lens.astype(np.dtype(order + ("u8" if wide else "u4"))).view(np.uint8)
    out[is_body] = np.frombuffer(b"".join(bodies), dtype=np.uint8)
    return out.tobytes()


class GGUFString(Construct):
    """``gguf_string_t``: a count-sized length, then that many bytes of UTF-8 (no terminator)."""

    def __init__(self, order: str, wide: bool):
        super().__init__()
        self.fmt = count_format(order, wide)

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        s.need(self.fmt.size, rules.STRING_TRUNCATED, "string length", path)
        start = s.pos
        (length,) = self.fmt.unpack_from(s.view, start)
        s.pos += self.fmt.size
        s.need(length, rules.STRING_LENGTH, "the string", path)
        if length > limit("string_length"):
            raise breach("string_length", f"a string of {length} bytes", path=readable_path(path), offset=start)
        body = s.view[s.pos : s.pos + length]
        try:
            text = str(body, "utf-8")
        except UnicodeDecodeError as err:
            raise rules.STRING_UTF8.error(f"invalid UTF-8 ({err.reason})", path=readable_path(path), offset=s.pos + err.start) from None
        s.pos += length
        return text

    def _build(self, obj, stream, context, path):
        data = obj.encode("utf-8") if isinstance(obj, str) else bytes(obj)
        stream.write(self.fmt.pack(len(data)))
        stream.write(data)
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("a string has no fixed size", path=path)


class MetadataValue(Construct):
    """``gguf_metadata_value_t``: a scalar, a string or an array, chosen by the sibling ``value_type``.

    Arrays parse to ``Container(type, len, array)`` as in the spec: ``array`` is a read-only numpy view for
    fixed-size element types, a ``StringArray`` for strings and a list of such containers for nested arrays.
    """

    def __init__(self, type_expr: Any, order: str, wide: bool):
        super().__init__()
        self.type_expr = type_expr
        self.order = order
        self.wide = wide
        self.count = count_format(order, wide)
        self.u32 = struct.Struct(order + "I")
        self.string = GGUFString(order, wide)
        # v1 knew value types 0-9 only (64-bit scalars arrived with v2), but their sizes are unambiguous: they are
        # read and built in every version, and validation reports them in a v1 file (rule value.type_v1).
        self.known = {vt.id: vt for vt in VALUE_TYPES.values()}
        self.scalars = {vt.id: struct.Struct(order + vt.struct) for vt in self.known.values() if vt.struct}

    # -- parsing -------------------------------------------------------------------------------------
    def _type(self, vt: Any, stream: BufferStream, path: str, at: int) -> ValueType:
        vid = int(vt)
        found = self.known.get(vid)
        if found is None:
            raise rules.VALUE_TYPE.error(f"value type {vid} is unknown", path=readable_path(path), offset=at)
        return found

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        vt = self._type(evaluate(self.type_expr, context), s, path, s.pos - 4)
        return self._parse_value(s, vt, path, 0)

    def _parse_value(self, s: BufferStream, vt: ValueType, path: str, depth: int) -> Any:
        if vt.name == "str":
            return self.string._parse(s, None, path)
        if vt.name == "arr":
            return self._parse_array(s, path, depth + 1)
        fmt = self.scalars[vt.id]
        s.need(fmt.size, rules.VALUE_TRUNCATED, f"{vt.name} value", path)
        (value,) = fmt.unpack_from(s.view, s.pos)
        s.pos += fmt.size
        if vt.name == "bool" and value in (0, 1):
            value = bool(value)  # any other byte stays an int so that it builds back; validation rejects it
        elif vt.name == "f32" and value != value:
            value = F32(value, self.u32.unpack_from(s.view, s.pos - 4)[0])
        return value

    def _parse_array(self, s: BufferStream, path: str, depth: int) -> Container:
        if depth > limit("nesting"):
            raise breach("nesting", f"arrays nested {depth} deep", path=readable_path(path), offset=s.pos)
        at = s.pos
        s.need(4 + self.count.size, rules.ARRAY_TRUNCATED, "array header", path)
        (etype_id,) = self.u32.unpack_from(s.view, at)
        (n,) = self.count.unpack_from(s.view, at + 4)
        etype = self._type(etype_id, s, context_path(path, "type"), at)
        s.pos = at + 4 + self.count.size
        apath = context_path(path, "array")
        min_size = etype.size or (self.count.size if etype.name == "str" else 4 + self.count.size)
        if n * min_size > s.remaining:
            raise rules.ARRAY_LENGTH.error(
                f"{n} elements of {etype.name} need at least {n * min_size} bytes, {s.remaining} remain",
                path=readable_path(path),
                offset=at + 4,
            )
        if n > limit("array_length"):
            raise breach("array_length", f"an array of {n} elements", path=readable_path(path), offset=at + 4)
        if etype.numpy:
            dtype = np.dtype(self.order + etype.numpy) if (etype.size or 0) > 1 else np.dtype(etype.numpy)
            array: Any = np.frombuffer(s.view, dtype=dtype, count=n, offset=s.pos)
            array.flags.writeable = False
            s.pos += n * etype.size
        elif etype.name == "str":
            region_start = s.pos
            starts = scan_strings(s, n, self.order, self.wide, apath)
            array = StringArray(s.view, starts, (region_start, s.pos), (self.order, self.wide), readable_path(apath))
        else:
            s.charge(n, apath)  # nested arrays: each inner array becomes Python objects
            array = [self._parse_array(s, context_path(apath, i), depth + 1) for i in range(n)]
        return Container(type=enum_value_type(etype.id), len=n, array=array)

    # -- building ------------------------------------------------------------------------------------
    def _build(self, obj, stream, context, path):
        vt_id = value_type_id(evaluate(self.type_expr, context))
        self._build_value(obj, self.known[vt_id], stream, path)
        return obj

    def _build_value(self, obj: Any, vt: ValueType, stream: Any, path: str) -> None:
        if vt.name == "str":
            self.string._build(obj, stream, None, path)
        elif vt.name == "arr":
            self._build_array(obj, stream, path)
        elif isinstance(obj, F32):
            stream.write(self.u32.pack(obj.bits))
        else:
            stream.write(self.scalars[vt.id].pack(obj))

    def _build_array(self, obj: Any, stream: Any, path: str) -> None:
        etype = self.known[value_type_id(obj["type"])]
        items = obj["array"]
        n = len(items)
        stream.write(self.u32.pack(etype.id))
        stream.write(self.count.pack(n))
        if etype.numpy:
            dtype = np.dtype(self.order + etype.numpy) if (etype.size or 0) > 1 else np.dtype(etype.numpy)
            data = np.asarray(items, dtype=dtype) if not isinstance(items, np.ndarray) else items.astype(dtype, copy=False)
            stream.write(np.ascontiguousarray(data).data.cast("B") if n else b"")
        elif etype.name == "str":
            stream.write(
                items.encoded(self.order, self.wide) if isinstance(items, StringArray) else encode_strings(items, self.order, self.wide)
            )
        else:
            for i, inner in enumerate(items):
                self._build_array(inner, stream, context_path(path, i))

    def _sizeof(self, context, path):
        raise SizeofError("a metadata value has no fixed size", path=path)


def value_type_id(vt: Any) -> int:
    """A value type given as id, enum string or name, as its id."""
    if isinstance(vt, (int, EnumIntegerString)):
        return int(vt)
    return VALUE_TYPES.lookup(vt).id


class F32(float):
    """A float32 NaN that remembers its bit pattern: a Python float may not keep a NaN's payload."""

    __slots__ = ("bits",)
    bits: int

    def __new__(cls, value: float, bits: int) -> F32:
        out = super().__new__(cls, value)
        out.bits = bits
        return out


class CheckedArray(Construct):
    """``T items[count]`` where ``count`` comes from the file: checked against the bytes left before parsing.

    ``min_size`` is the fewest bytes one item can take; a count larger than ``remaining // min_size`` cannot
    be honest and is rejected before any allocation.
    """

    def __init__(self, count: Any, subcon: Construct, min_size: int, rule: str | Rule, limit_name: str | None = None, weight: int = 0):
        super().__init__()
        self.count = count
        self.subcon = subcon
        self.min_size = min_size
        self.rule = rule
        self.limit_name = limit_name  # the named limit on the count (``limits.TABLE``), if any
        self.weight = weight  # records each item charges against the stream's object budget

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = evaluate(self.count, context)
        at = s.pos
        if n * self.min_size > s.remaining:
            raise self.rule.truncated(
                f"count {n} needs at least {n * self.min_size} bytes, {s.remaining} remain", path=readable_path(path), offset=s.pos
            )
        if self.limit_name is not None and n > limit(self.limit_name):
            raise breach(self.limit_name, f"a count of {n}", path=readable_path(path), offset=at)
        out = []
        parse = self.subcon._parsereport
        weight = self.weight
        for i in range(n):
            context._index = i
            if weight:
                s.charge(weight, path)
            out.append(parse(s, context, context_path(path, i)))
        return out

    def _build(self, obj, stream, context, path):
        for i, item in enumerate(obj):
            context._index = i
            self.subcon._build(item, stream, context, context_path(path, i))
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("a counted array has no fixed size", path=path)


class AlignPadding(Construct):
    """Zero bytes up to the next multiple of ``alignment`` (none when ``enabled`` is false).

    Parses to the padding bytes themselves, so that a file with non-zero padding still builds back exactly;
    builds the given bytes when their length is right, zeros otherwise.
    """

    def __init__(self, alignment: Any, enabled: Any = True, rule: str | Rule = "padding"):
        super().__init__()
        self.flagbuildnone = True
        self.alignment = alignment
        self.enabled = enabled
        self.rule = rule

    def _size(self, pos: int, context: Any) -> int:
        if not evaluate(self.enabled, context):
            return 0
        alignment = evaluate(self.alignment, context)
        if alignment < 1:
            raise rules.ALIGNMENT_ZERO.error("general.alignment is 0", offset=pos)
        return (-pos) % alignment

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = self._size(s.pos, context)
        s.need(n, self.rule, f"{n} bytes of alignment padding", path)
        return s.read(n)

    def _build(self, obj, stream, context, path):
        n = self._size(stream.tell(), context)
        stream.write(bytes(obj) if obj is not None and len(obj) == n else b"\0" * n)
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("padding depends on the position", path=path)


class Remainder(Construct):
    """All bytes to the end of the input, as a zero-copy memoryview (tensor data is never copied on read)."""

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        out = s.view[s.pos :]
        s.pos = s.size
        return out

    def _build(self, obj, stream, context, path):
        stream.write(obj)
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("the remainder has no fixed size", path=path)


class Magic(Const):
    """A file signature: ``Const(value)`` (or one of ``value, *others``) whose mismatch says the input is another
    format (UnknownFormatError, rule ``header.magic``) and whose absence is a truncated header."""

    def __init__(self, value: bytes, *others: bytes):
        super().__init__(value)
        self.accepted = (value, *others)

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        n = len(self.value)
        s.need(n, rules.HEADER_TRUNCATED, "the magic", path)
        at = s.pos
        got = s.read(n)
        if got not in self.accepted:
            expected = " or ".join(map(repr, self.accepted))
            raise rules.HEADER_MAGIC.error(f"magic is {got!r}, not {expected}", path=readable_path(path), offset=at)
        return got

    def _build(self, obj, stream, context, path):
        value = self.value if obj is None else bytes(obj)
        if value not in self.accepted:
            raise ValueError(f"magic {value!r} is not {' or '.join(map(repr, self.accepted))}")
        stream.write(value)
        return value


class Version(Subconstruct):
    """A format version: ``OneOf(subcon, versions)`` whose other values are an UnsupportedTypeError (rule
    ``header.version``), naming ``what`` format; a missing version is a truncated header."""

    def __init__(self, subcon: Construct, versions: Any, what: str):
        super().__init__(subcon)
        self.versions = versions  # a collection, or a context function giving one
        self.what = what

    def _parse(self, stream, context, path):
        s = as_stream(stream)
        s.need(self.subcon.sizeof(), rules.HEADER_TRUNCATED, "the version", path)
        at = s.pos
        version = self.subcon._parsereport(s, context, path)
        allowed = evaluate(self.versions, context)
        if version not in allowed:
            listed = ", ".join(map(str, allowed[:-1])) + (" or " if len(allowed) > 1 else "") + str(allowed[-1])
            raise rules.HEADER_VERSION.error(
                f"{evaluate(self.what, context)} version {version} is not {listed}", path=readable_path(path), offset=at
            )
        return version

    def _build(self, obj, stream, context, path):
        if obj not in evaluate(self.versions, context):
            raise ValueError(f"cannot build {evaluate(self.what, context)} version {obj}")
        return self.subcon._build(obj, stream, context, path)


class Located(Struct):
    """A ``Struct`` that records where each of its fields starts: ``obj._at[name]`` is the field's absolute
    offset in the input (bookkeeping, like ``_offset``: ignored by Container equality and by building)."""

    def _parse(self, stream, context, path):
        obj = Container()
        at: dict[str, int] = {}
        obj._at = at
        context = Container(
            _=context,
            _params=context._params,
            _root=None,
            _parsing=context._parsing,
            _building=context._building,
            _sizing=context._sizing,
            _subcons=self._subcons,
            _io=stream,
            _index=context.get("_index", None),
        )
        context._root = context._.get("_root", context)
        for sc in self.subcons:
            try:
                if sc.name:
                    at[sc.name] = stream.tell()
                subobj = sc._parsereport(stream, context, path)
                if sc.name:
                    obj[sc.name] = subobj
                    context[sc.name] = subobj
            except StopFieldError:
                break
        return obj
