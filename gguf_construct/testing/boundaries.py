"""GGUF files that put one quantity a reader computes at a boundary of 32-, 63- or 64-bit arithmetic, every other
field consistent.

A reader does arithmetic on the fields the schema declares: element counts are products of dimensions (checked
dimension by dimension, so the product of the leading ones is a quantity of its own), byte sizes
multiply by a type size and divide by a block size (``GGML_TYPES``), padded sizes round up to the alignment, tensor
offsets are running sums of padded sizes, strings are allocated with one more byte than their length, arrays take
count × element size bytes, and a count of records costs count × an overhead the file does not carry (the reader's
own struct size). Each :class:`Quantity` names one such derived quantity, the fields it comes from and the rule our
validator names when it is out of range; it solves for field values that make the quantity exactly a target value.

Targets (:func:`targets`) sit on both sides of each boundary ``B`` in 2**31, 2**32, 2**63 and 2**64: just below
(``B - d``), exactly at, just above (``B + d``), and wrapped to a small value (``B + w`` for w of 0, 1, a few bytes and
a few KiB, so that the file can hold what the wrapped size claims). ``d`` is 1 (or the step the quantity moves in),
and for quantities a reader adds an overhead of its own to, a log-spaced family of margins from 1 byte to 1 MiB.

The target is planted last among small valid tensors and keys: offsets stay the running sums ggml computes
(wrapping at 2**64, ``padded_offsets``), alignment is respected, and the data section holds what the (wrapped) sums
claim, up to 1 MiB. The only thing a reader can trip on is the one quantity.

``boundary_files()`` yields every target in order; ``boundary_file(rng)`` draws one; each is a :class:`BoundaryFile`
with the bytes, the target and the rule our validator names for it.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from construct import Container

from ..core.tables import DEFAULT_ALIGNMENT, GGML_TYPES, VALUE_TYPES
from ..formats.gguf.offsets import GGML_MAX_DIMS, SIZE_T, Layout, padded_offsets
from ..formats.gguf.schema import GGUF

__all__ = [
    "BITS",
    "MARGINS",
    "QUANTITIES",
    "WRAPS",
    "BoundaryFile",
    "Quantity",
    "BoundaryTarget",
    "boundary_file",
    "boundary_files",
    "targets",
]

#: The boundaries of C arithmetic: int32, uint32 (size_t on 32-bit hosts), int64, uint64 (size_t).
BITS = (31, 32, 63, 64)
#: Small values a wrapped quantity is aimed at: nothing, one byte, a few bytes, a few KiB.
WRAPS = (0, 1, 8, 4096)
#: Log-spaced margins for an overhead the reader adds and the file does not carry (1 byte to 1 MiB).
MARGINS = tuple(1 << k for k in range(0, 21, 4))
#: The most bytes of tensor data a generated file holds.
MAX_DATA = 1 << 20
INT64_MAX = 2**63 - 1
#: Sized, current ggml types (name, block size, type size), from the tables.
_TYPES = tuple((t.name, t.block_size, t.type_size) for t in GGML_TYPES.values() if not t.removed and t.type_size)
#: Element sizes of the fixed-size array element types (gguf_type).
_ELEMENT_SIZES = {vt.name: vt.size for vt in VALUE_TYPES.values() if vt.name in ("u8", "u16", "u32", "u64") and vt.size}


@dataclass(frozen=True)
class BoundaryTarget:
    """Where one quantity is aimed: ``value`` (exact, unwrapped) near ``2**bits`` on ``side``
    ('below', 'at', 'above', 'wrapped'), ``margin`` the overhead it leaves room for (0: none)."""

    quantity: str
    bits: int
    side: str
    value: int
    margin: int = 0

    @property
    def label(self) -> str:
        off = self.value - 2**self.bits
        sign = "+" if off >= 0 else "-"
        return f"{self.quantity}@2^{self.bits}{sign}{abs(off)}:{self.side}" + (f"/margin {self.margin}" if self.margin else "")


@dataclass(frozen=True)
class BoundaryFile:
    """A generated file: its bytes, what it aims at, and the rule our validator names for it."""

    target: BoundaryTarget
    rule: str
    data: bytes

    @property
    def label(self) -> str:
        return self.target.label

    @property
    def record(self) -> str:
        """Where the target's record is: 'tensor' (the last tensor), 'kv' (the last key) or 'header' (a count)."""
        q = self.target.quantity
        return "tensor" if q.startswith(("tensor.", "data.")) else "kv" if q.startswith(("string.", "array.")) else "header"


# -- the surrounding valid file ---------------------------------------------------------------------------------
def _kv(key: str, value_type: str, value: Any) -> Container:
    return Container(key=key, value_type=value_type, value=value)


def _default_kvs() -> list[Container]:
    return [
        _kv("general.architecture", "str", "llama"),
        _kv("general.name", "str", "boundary"),
        _kv("llama.block_count", "u32", 1),
        _kv("llama.context_length", "u32", 64),
        _kv("llama.embedding_length", "u32", 8),
    ]


#: Keys a target adds or that would change the layout (the alignment): never taken from a base file.
_OWN_KEYS = ("general.alignment", "general.description", "llama.boundary", "tokenizer.ggml.tokens")
#: The largest base tensor kept (bytes): the base stays small, so only the planted quantity is large.
_BASE_TENSOR_MAX = 1 << 16


@dataclass(frozen=True)
class Base:
    """The valid file a target is planted in: its keys and small tensors (copied for each plan)."""

    key_values: tuple[Container, ...]
    tensor_infos: tuple[tuple[str, tuple[int, ...], str], ...]

    def kvs(self) -> list[Container]:
        return [Container(kv) for kv in self.key_values]

    def tensors(self) -> list[tuple[str, list[int], str]]:
        return [(n, list(d), t) for n, d, t in self.tensor_infos]

    @classmethod
    def of(cls, kvs: Sequence[Container], tensors: Sequence[tuple[Any, Sequence[int], str]]) -> Base:
        """A base from another file's keys and tensors: those a target would clash with, tensors that are not
        small and valid (a previous target's), and names that are not text are left out."""
        keep_kvs = [kv for kv in kvs if isinstance(kv.key, str) and kv.key not in _OWN_KEYS]
        keep: dict[str, tuple[str, tuple[int, ...], str]] = {}
        for name, dims, t in tensors:
            if isinstance(name, str) and not name.startswith("blk.0.boundary") and _small_valid(dims, str(t)):
                keep.setdefault(name, (name, tuple(int(d) for d in dims), str(t)))
        return cls(tuple(keep_kvs), tuple(keep.values()))


def _small_valid(dims: Sequence[int], ggml_type: str) -> bool:
    try:
        t = GGML_TYPES.lookup(ggml_type)
    except (KeyError, ValueError):
        return False
    if t.removed or not t.type_size or not 1 <= len(dims) <= 4 or any(int(d) < 1 for d in dims):
        return False
    return int(dims[0]) % t.block_size == 0 and _nbytes_exact([int(d) for d in dims], t.name) <= _BASE_TENSOR_MAX


DEFAULT_BASE = Base(tuple(_default_kvs()), (("token_embd.weight", (32, 2), "f32"), ("output_norm.weight", (8,), "f32")))


@dataclass
class FieldPlan:
    """What a quantity's solver decides: the keys and tensors of the file, the rule our validator names for it, the
    data section's size (None: the running sum of padded sizes, capped at ``MAX_DATA``) and one field patched in
    after building (where, as a function of the layout, and the value)."""

    kvs: list[Container]
    tensors: list[tuple[str, list[int], str]]
    rule: str
    data_size: int | None = None
    patch: Callable[[Layout], tuple[int, str]] | None = None
    patch_value: int = 0


def build_plan(plan: FieldPlan) -> bytes:
    """The plan laid out by the schema: offsets the running sums of padded sizes (wrapping at 2**64, as ggml
    computes them), then the one patched field."""
    offsets, total = padded_offsets(plan.tensors, DEFAULT_ALIGNMENT)
    size = min(total, MAX_DATA) if plan.data_size is None else min(plan.data_size, MAX_DATA)
    infos = [Container(name=n, dimensions=d, type=t, offset=o) for (n, d, t), o in zip(plan.tensors, offsets)]
    c = Container(version=3, byte_order="little", metadata_kv=plan.kvs, tensor_infos=infos, tensor_data=bytes(size))
    data = GGUF.build(c)
    if plan.patch is None:
        return data
    layout = Layout(data)
    at, fmt = plan.patch(layout)
    return layout.patch(at, fmt, plan.patch_value)


def _small_total(tensors: Sequence[tuple[str, list[int], str]]) -> int:
    return padded_offsets(tensors, DEFAULT_ALIGNMENT)[1]


# -- the quantities ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Quantity:
    """One quantity a reader derives from fields: ``solve(value, rng)`` plans a file whose quantity is exactly
    ``value`` (None when no field values give it), ``step`` is the unit it moves in, ``margins`` whether a reader
    adds an unknown overhead to it, ``wraps`` whether a wrapped small value is a target."""

    name: str
    what: str
    solve: Callable[[int, random.Random, Base], FieldPlan | None]
    step: int = 1
    margins: bool = False
    wraps: bool = True


def _factor(n: int, limit: int = INT64_MAX, rng: random.Random | None = None) -> list[int] | None:
    """``n`` as a product of at most four positive factors each at most ``limit`` (ne0 first), or None."""
    if n <= limit:
        return [n]
    for f in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 32, 64, 256, 641, 4096, 65536, 6700417):
        if n % f == 0 and n // f <= limit:
            return [n // f, f] if rng is None or rng.random() < 0.5 else [f, n // f]
    return None


def _tensor_rule(elements: int, nbytes: int) -> str:
    """What our validator names for one tensor of ``elements`` and (exact) ``nbytes`` beside small valid ones."""
    if elements > INT64_MAX:
        return "tensor.ne_overflow"
    if nbytes > INT64_MAX - 64:
        return "tensor.nbytes_overflow"
    return "tensor.bounds"


def _plant(tensor: tuple[str, list[int], str], base: Base) -> FieldPlan:
    """The small valid file with ``tensor`` last, its data section what the (wrapped) sizes claim."""
    tensors = [*base.tensors(), tensor]
    _, dims, name = tensor
    elements = 1
    for d in dims:
        elements *= d
    nbytes = _nbytes_exact(dims, name)
    return FieldPlan(base.kvs(), tensors, _tensor_rule(elements, nbytes), _data_for(tensors, nbytes, base))


def _wrapped_size(tensors: Sequence[tuple[str, list[int], str]], bits: int = 64) -> int:
    """The data section a reader computing in ``bits``-bit arithmetic expects (the wrapped running sum)."""
    return _exact_total(tensors) % 2**bits


def _exact_total(tensors: Sequence[tuple[str, list[int], str]]) -> int:
    total = 0
    for _, dims, t in tensors:
        n = _nbytes_exact(dims, t)
        total += n + (-n % DEFAULT_ALIGNMENT)
    return total


def _nbytes_exact(dims: Sequence[int], ggml_type: str) -> int:
    t = GGML_TYPES.lookup(ggml_type)
    n = 1
    for d in dims:
        n *= d
    return n * t.type_size // t.block_size


def _data_for(tensors: Sequence[tuple[str, list[int], str]], value: int, base: Base) -> int:
    """The data section that holds what the quantity claims once wrapped: the wrapped sum at the first boundary
    ``value`` crossed (32 or 64 bits), the small tensors' bytes when it is not small."""
    for bits in (32, 64):
        if value >= 2**bits and value - 2**bits <= MAX_DATA:
            return _wrapped_size(tensors, bits)
    return _small_total(base.tensors())


def _solve_elements(value: int, rng: random.Random, base: Base) -> FieldPlan | None:
    """An element count (the product of the dimensions) of ``value``, of a one-element-block type."""
    dims = _factor(value, INT64_MAX, rng)
    if dims is None:
        return None
    name, _, _ = rng.choice([t for t in _TYPES if t[1] == 1])
    return _plant(("blk.0.boundary.weight", dims, name), base)


def _solve_leading(value: int, rng: random.Random, base: Base) -> FieldPlan | None:
    """The product of a tensor's leading dimensions (what a reader checks dimension by dimension) of ``value``, then
    a dimension 0 and ones up to ``GGML_MAX_DIMS``: the tensor is empty, so no data stands in the way, and a reader
    whose running check skips a 0 or 1 accepts what a stricter check of the same product refuses."""
    split = [f for f in (2, 3, 5, 7, 11, 13, 17, 73, 127, 641) if value % f == 0 and 2 <= value // f <= INT64_MAX]
    if split:
        f = rng.choice(split)
        lead = [value // f, f] if rng.random() < 0.5 else [f, value // f]
    elif value <= INT64_MAX:
        lead = [value]
    else:
        return None
    dims = [*lead, 0, *[1] * (GGML_MAX_DIMS - len(lead) - 1)]
    name, _, _ = rng.choice([t for t in _TYPES if t[1] == 1])
    return FieldPlan(base.kvs(), [*base.tensors(), ("blk.0.boundary.weight", dims, name)], "tensor.shape")


def _types_for_bytes(value: int, rng: random.Random) -> list[tuple[str, int, int]]:
    """Types whose whole blocks make exactly ``value`` bytes with an element count int64 holds (those first)."""
    fits = [t for t in _TYPES if value % t[2] == 0]
    rng.shuffle(fits)
    return sorted(fits, key=lambda t: value // t[2] * t[1] > INT64_MAX)


def _solve_nbytes(value: int, rng: random.Random, base: Base) -> FieldPlan | None:
    """A tensor's byte size (elements ÷ block size × type size) of exactly ``value``."""
    for name, block, size in _types_for_bytes(value, rng):
        blocks = _factor(value // size, INT64_MAX // block, rng)
        if blocks is not None:
            dims = [blocks[0] * block, *blocks[1:]]
            return _plant(("blk.0.boundary.weight", dims, name), base)
    return None


def _solve_row(value: int, rng: random.Random, base: Base) -> FieldPlan | None:
    """A row size (ne0 ÷ block size × type size) of exactly ``value``: one row, so ne0 carries it all."""
    for name, block, size in _types_for_bytes(value, rng):
        if value // size * block <= INT64_MAX:
            return _plant(("blk.0.boundary.weight", [value // size * block], name), base)
    return None


def _solve_padded(value: int, rng: random.Random, base: Base) -> FieldPlan | None:
    """A padded size (byte size rounded up to the alignment) of exactly ``value``, the padding doing the last step
    when it can: a byte size just under ``value`` (ggml d99724f2 takes an f16 tensor of 2**63 - 2 elements, whose
    padded size wraps to 0)."""
    if value % DEFAULT_ALIGNMENT:
        return None
    fallback = None
    for k in (*sorted(range(1, DEFAULT_ALIGNMENT), key=lambda _: rng.random()), 0):
        plan = _solve_nbytes(value - k, rng, base)
        if plan is not None and plan.rule != "tensor.ne_overflow":  # an element count a reader lets through
            return plan
        fallback = fallback or plan
    return fallback


def _split(total: int, parts: int, rng: random.Random) -> list[int]:
    """``total`` (a multiple of the alignment) as ``parts`` multiples of the alignment of about equal size (each,
    the last included, within a quarter of the mean: none passes 2**63 - 64 when the mean is at most 2**61)."""
    unit = DEFAULT_ALIGNMENT
    units = total // unit
    mean = units // parts
    jitter = mean // (4 * parts)
    sizes = [mean + rng.randint(-jitter, jitter) for _ in range(parts - 1)]
    sizes.append(units - sum(sizes))
    return [n * unit for n in sizes]


def _big_tensors(sizes: Sequence[int], last_type: str = "f32") -> list[tuple[str, list[int], str]]:
    out = []
    for i, size in enumerate(sizes):
        t = last_type if i == len(sizes) - 1 else "f32"
        ts = GGML_TYPES.lookup(t).type_size
        out.append((f"blk.0.boundary_{i}.weight", [size // ts], t))
    return out


def _solve_sum(value: int, rng: random.Random, base: Base) -> FieldPlan | None:
    """The data section's size (the running sum of padded sizes) of exactly ``value``: the small tensors, then two
    or three big ones, each well inside int64 on its own."""
    rest = value - _small_total(base.tensors())
    if value % DEFAULT_ALIGNMENT or rest < 2 * DEFAULT_ALIGNMENT:
        return None
    sizes = _split(rest, max(2, -(-rest // (2**61))), rng)
    tensors = base.tensors() + _big_tensors(sizes)
    return FieldPlan(base.kvs(), tensors, "tensor.bounds", _data_for(tensors, value, base))


def _solve_end(value: int, rng: random.Random, base: Base) -> FieldPlan | None:
    """Where the last tensor's data ends (its offset, a running sum, plus its byte size) at exactly ``value``:
    the bounds check ``offset + size <= data size`` a reader makes, in its own arithmetic."""
    small = _small_total(base.tensors())
    rest = value - small
    if rest < 2 * DEFAULT_ALIGNMENT:
        return None
    # the tensors before the last end inside 2**64 (its offset is a running sum a reader can hold), the last one
    # carries the rest across the boundary
    head = min(rest - rest % DEFAULT_ALIGNMENT - DEFAULT_ALIGNMENT, SIZE_T - small - DEFAULT_ALIGNMENT)
    sizes = _split(head, -(-head // (2**61)), rng)
    last = rest - head
    if last > INT64_MAX - 64:
        return None
    tensors = base.tensors() + _big_tensors(sizes) + [("blk.0.boundary_end.weight", [last], "i8")]
    return FieldPlan(base.kvs(), tensors, "tensor.bounds", _data_for(tensors, value, base))


def _solve_string(value: int, rng: random.Random, base: Base) -> FieldPlan | None:
    """A string length + 1 (the allocation with room for the NUL) of exactly ``value``; the string holds the bytes
    the wrapped allocation claims."""
    length = value - 1
    if not 0 <= length < SIZE_T:
        return None
    held = next((value - 2**bits for bits in (32, 64) if 0 <= value - 2**bits <= 4096), 0)
    kvs = base.kvs()
    where = rng.choice(("key", "value"))
    kvs.append(_kv("general.description" if where == "value" else "x" * max(1, held), "str", "y" * held))
    i = len(kvs) - 1
    return FieldPlan(
        kvs, base.tensors(), "string.length", None, lambda b: (b.kv(i)["key_length" if where == "key" else "value"], "Q"), length
    )


def _solve_array(value: int, rng: random.Random, base: Base) -> FieldPlan | None:
    """An array's byte length (count × element size) of exactly ``value``; the array holds the elements the
    wrapped length claims."""
    fits = [(t, s) for t, s in _ELEMENT_SIZES.items() if value % s == 0 and value // s < SIZE_T]
    if not fits:
        return None
    element, size = rng.choice(fits)
    held = next((value - 2**bits for bits in (32, 64) if 0 <= value - 2**bits <= 4096), 0) // size
    kvs = base.kvs()
    kvs.append(_kv("llama.boundary", "arr", Container(type=element, len=held, array=[0] * held)))
    i = len(kvs) - 1
    return FieldPlan(kvs, base.tensors(), "array.length", None, lambda b: (b.kv(i)["array_count"], "Q"), value // size)


def _solve_count(header_field: str) -> Callable[[int, random.Random, Base], FieldPlan | None]:
    """A record count (``tensor_count``, ``metadata_kv_count``, a string array's count) that makes count × an
    unknown per-record size reach ``value`` for a record size drawn from ``MARGINS``: the solver is given the count
    directly (the targets of a count quantity are already divided by the record size)."""

    def solve(value: int, rng: random.Random, base: Base) -> FieldPlan | None:
        if not 0 < value < SIZE_T:
            return None
        if header_field == "strings":
            kvs = base.kvs()
            kvs.append(_kv("tokenizer.ggml.tokens", "arr", Container(type="str", len=2, array=["a", "b"])))
            i = len(kvs) - 1
            return FieldPlan(kvs, base.tensors(), "array.length", None, lambda b: (b.kv(i)["array_count"], "Q"), value)
        rule = "header.n_tensors" if header_field == "tensor_count" else "header.n_kv"
        return FieldPlan(base.kvs(), base.tensors(), rule, None, lambda b: (b.header(header_field), "Q"), value)

    return solve


QUANTITIES: dict[str, Quantity] = {
    q.name: q
    for q in (
        Quantity("tensor.elements", "the product of a tensor's dimensions", _solve_elements),
        Quantity(
            "tensor.leading_elements",
            "the product of a tensor's leading dimensions, a dimension 0 after them",
            _solve_leading,
            wraps=False,
        ),
        Quantity("tensor.row_size", "ne0 ÷ block size × type size", _solve_row),
        Quantity("tensor.nbytes", "a tensor's byte size (elements ÷ block size × type size)", _solve_nbytes),
        Quantity("tensor.padded_size", "a tensor's byte size rounded up to the alignment", _solve_padded, DEFAULT_ALIGNMENT),
        Quantity("data.size", "the running sum of padded sizes (the data section)", _solve_sum, DEFAULT_ALIGNMENT, True),
        Quantity("tensor.end", "the last tensor's offset (a running sum) plus its byte size", _solve_end, 1, True),
        Quantity("string.alloc", "a string's length + 1 (room for the NUL)", _solve_string),
        Quantity("array.bytes", "an array's count × element size", _solve_array),
        Quantity(
            "count.n_tensors", "tensor_count itself (int64 in ggml: negative from 2**63)", _solve_count("tensor_count"), 1, False, True
        ),
        Quantity("count.n_kv", "metadata_kv_count itself", _solve_count("metadata_kv_count"), 1, False, True),
        Quantity("header.n_tensors", "tensor_count × the reader's per-tensor struct", _solve_count("tensor_count"), 1, True, False),
        Quantity("header.n_kv", "metadata_kv_count × the reader's per-key struct", _solve_count("metadata_kv_count"), 1, True, False),
        Quantity("array.strings", "a string array's count × the reader's per-string struct", _solve_count("strings"), 1, True, False),
    )
}
_COUNTS = ("header.n_tensors", "header.n_kv", "array.strings")


def _values(q: Quantity, bits: int) -> Iterator[tuple[str, int, int]]:
    """(side, value, margin) around ``2**bits`` for ``q``."""
    b = 2**bits
    if q.name in _COUNTS:  # a count times a record size the file does not say: one family per record size
        for size in MARGINS:
            yield "below", (b - 1) // size, size
            yield "at", -(-b // size), size
            if bits in (32, 64):
                yield "wrapped", -(-b // size) + 1, size
        return
    step = q.step
    yield "below", b - step, 0
    yield "at", b, 0
    yield "above", b + step, 0
    if q.margins:
        for m in MARGINS:
            yield "below", b - max(step, m - m % step), m
    if q.wraps and bits in (32, 64):
        for w in WRAPS:
            if w % step == 0 and w:
                yield "wrapped", b + w, 0


def targets(quantities: Sequence[str] | None = None) -> list[BoundaryTarget]:
    """Every target of ``quantities`` (default: all), in a fixed order."""
    out = []
    for name in quantities or QUANTITIES:
        q = QUANTITIES[name]
        for bits in BITS:
            seen = set()
            for side, value, margin in _values(q, bits):
                if value > 0 and (value, margin) not in seen:
                    seen.add((value, margin))
                    out.append(BoundaryTarget(name, bits, side, value, margin))
    return out


@functools.lru_cache(maxsize=16)
def _targets(quantities: tuple[str, ...]) -> list[BoundaryTarget]:
    return targets(quantities)


def make(target: BoundaryTarget, rng: random.Random, base: Base = DEFAULT_BASE) -> BoundaryFile | None:
    """The file for ``target`` planted in ``base``, or None when no field values give its value exactly."""
    q = QUANTITIES[target.quantity]
    plan = q.solve(target.value, rng, base)
    if plan is None:
        return None
    return BoundaryFile(target, plan.rule, build_plan(plan))


def boundary_files(seed: int = 0, quantities: Sequence[str] | None = None) -> Iterator[BoundaryFile]:
    """A file for every target that has a solution, in a fixed order."""
    rng = random.Random(seed)
    for t in targets(quantities):
        made = make(t, rng)
        if made is not None:
            yield made


def boundary_file(rng: random.Random, quantities: Sequence[str] | None = None, base: Base = DEFAULT_BASE) -> BoundaryFile:
    """One file for a target drawn at random, planted in ``base`` (drawn again until one has a solution): the
    quantity first, then its boundary, then the target, so that a quantity with many margins is not drawn more."""
    names = list(quantities or QUANTITIES)
    while True:
        pool = _targets((rng.choice(names),))
        bits = rng.choice(BITS)
        made = make(rng.choice([t for t in pool if t.bits == bits] or pool), rng, base)
        if made is not None:
            return made
