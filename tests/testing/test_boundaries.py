"""The arithmetic-boundary generator: every file is valid except for the one quantity it targets (our validator
names exactly that rule), the quantity really sits where the target says, and the rest is consistent the way
ggml's reader checks it (offsets the running sums of padded sizes, the data section as long as the wrapped sum)."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings

from gguf_construct.core.tables import GGML_TYPES
from gguf_construct.formats.gguf.offsets import ggml_nbytes, padded_offsets
from gguf_construct.formats.gguf.schema import GGUF
from gguf_construct.testing.boundaries import BITS, MARGINS, QUANTITIES, Base, BoundaryFile, boundary_file, boundary_files, make, targets
from gguf_construct.testing.fuzzing.mutators import MUTATORS
from gguf_construct.testing.fuzzing.structured import mutate_structured
from gguf_construct.testing.strategies import boundary_gguf
from gguf_construct.validation.gguf_checks import validate_gguf_bytes

#: A tensor claiming more than the file holds is implausible as well as out of bounds: the one rule that any
#: size past the file brings along.
CONSEQUENCE = "model.parameters"
ALL = list(boundary_files(seed=0))
#: The quantities of the tensor table (the others are a length or count patched past the bytes present).
LAID_OUT = [f for f in ALL if f.target.quantity.startswith(("tensor.", "data."))]


def error_rules(data: bytes) -> set[str]:
    return {str(i.rule) for i in validate_gguf_bytes(data) if i.severity == "error"}


def tensors(c):
    return [(t.name, [int(d) for d in t.dimensions], str(t.type)) for t in c.tensor_infos]


def exact_nbytes(dims, ggml_type):
    t = GGML_TYPES.lookup(ggml_type)
    n = 1
    for d in dims:
        n *= d
    return n * t.type_size // t.block_size


def test_most_targets_have_a_solution_and_every_quantity_is_reached():
    assert len(ALL) >= 0.9 * len(targets())
    assert {f.target.quantity for f in ALL} == set(QUANTITIES)
    for q in QUANTITIES:  # each quantity on both sides of a boundary of each width
        sides = {(f.target.bits, f.target.side) for f in ALL if f.target.quantity == q}
        assert {b for b, _ in sides} == set(BITS), q
        assert {"below", "at"} <= {s for _, s in sides}, q


@pytest.mark.parametrize("made", ALL, ids=lambda f: f.label)
def test_only_the_targeted_rule_is_broken(made: BoundaryFile):
    rules = error_rules(made.data)
    assert made.rule in rules
    assert rules - {made.rule, CONSEQUENCE} == set()


def test_offsets_are_ggml_running_sums_and_the_data_holds_the_wrapped_sum():
    for made in LAID_OUT:
        c = GGUF.parse(made.data)
        infos = tensors(c)
        offsets, total = padded_offsets(infos)
        assert [int(t.offset) for t in c.tensor_infos] == offsets, made.label
        assert all(o % 32 == 0 for o in offsets)
        if made.target.side == "wrapped" and made.target.quantity in ("data.size", "tensor.end"):
            exact = sum(n + (-n % 32) for n in (exact_nbytes(d, t) for _, d, t in infos))
            assert exact >= 2**made.target.bits and len(c.tensor_data) >= exact % 2**made.target.bits


def test_each_tensor_quantity_is_exactly_its_target():
    for made in LAID_OUT:
        q, value = made.target.quantity, made.target.value
        c = GGUF.parse(made.data)
        infos = tensors(c)
        if q in ("tensor.elements", "tensor.nbytes", "tensor.row_size", "tensor.padded_size"):
            name, dims, t = infos[-1]
            assert name.startswith("blk.0.boundary")
            n = 1
            for d in dims:
                assert 1 <= d < 2**63  # every dimension is a valid int64 on its own
                n *= d
            nbytes = exact_nbytes(dims, t)
            got = {"tensor.elements": n, "tensor.nbytes": nbytes, "tensor.row_size": nbytes, "tensor.padded_size": nbytes + (-nbytes % 32)}
            assert got[q] == value, made.label
        elif q == "tensor.leading_elements":  # the product up to the first 0, the tensor empty and four-dimensional
            dims = infos[-1][1]
            zero = dims.index(0)
            n = 1
            for d in dims[:zero]:
                assert 1 <= d < 2**63
                n *= d
            assert n == value and len(dims) == 4 and all(d == 1 for d in dims[zero + 1 :]), made.label
        elif q == "data.size":
            assert sum(n + (-n % 32) for n in (exact_nbytes(d, t) for _, d, t in infos)) == value
        elif q == "tensor.end":
            _, last_total = padded_offsets(infos[:-1])
            assert last_total + exact_nbytes(infos[-1][1], infos[-1][2]) == value
            assert sum(n + (-n % 32) for n in (exact_nbytes(d, t) for _, d, t in infos[:-1])) < 2**64


def test_the_live_ggml_case_is_among_the_targets():
    """ggml d99724f2 accepts an f16 tensor of 2**63 - 2 elements: its padded size wraps to 0. The padded-size
    target at 2**64 gives such a tensor: its byte size just under 2**64, ggml's padded size 0."""
    at = [f for f in ALL if f.target.quantity == "tensor.padded_size" and f.target.bits == 64 and f.target.side == "at"]
    assert at
    for seed in range(20):
        made = make(at[0].target, random.Random(seed))
        assert made is not None
        _, dims, t = tensors(GGUF.parse(made.data))[-1]
        size = ggml_nbytes(dims, t)
        assert 2**64 - 32 < exact_nbytes(dims, t) < 2**64 and (size + 31) // 32 * 32 % 2**64 == 0
    f16 = [(d, t) for seed in range(200) for _, d, t in [tensors(GGUF.parse(make(at[0].target, random.Random(seed)).data))[-1]]]
    assert any(t == "f16" for _, t in f16)  # the f16 shape of the live case comes up


def test_the_padded_sum_of_two_valid_tensors_reaches_2_64_exactly():
    """The data-section sum at 2**64 (CVE-2025-53630's shape) is one target among the others: each big tensor
    valid on its own, their padded sum exactly 2**64, the offsets ggml's wrapped running sums."""
    made = next(f for f in ALL if f.target.quantity == "data.size" and f.target.bits == 64 and f.target.side == "at")
    infos = tensors(GGUF.parse(made.data))
    big = [(d, t) for n, d, t in infos if n.startswith("blk.0.boundary")]
    assert len(big) >= 2 and all(exact_nbytes(d, t) < 2**63 - 64 for d, t in big)
    assert padded_offsets(infos)[1] == 0


def test_margins_cover_an_unknown_overhead_log_spaced():
    assert MARGINS[0] == 1 and MARGINS[-1] == 1 << 20
    assert all(b == a * 16 for a, b in zip(MARGINS, MARGINS[1:]))
    sums = {f.target.value for f in ALL if f.target.quantity == "data.size" and f.target.bits == 64 and f.target.margin}
    assert {2**64 - v for v in sums} >= {32, 256, 4096, 65536, 1 << 20}


def test_counts_reach_each_boundary_for_every_record_size():
    for made in ALL:
        if made.target.quantity == "header.n_kv":
            n_kv = struct.unpack_from("<Q", made.data, 16)[0]
            assert n_kv == made.target.value
            size = made.target.margin
            b = 2**made.target.bits
            assert (n_kv * size < b) == (made.target.side == "below")


def test_planted_in_another_file_keeps_its_keys_and_tensors():
    kvs = [GGUF.parse(ALL[0].data).metadata_kv[0]]
    base = Base.of(kvs, [("a.weight", [64], "q8_0"), ("huge", [2**40], "f32"), ("a.weight", [8], "f32")])
    assert [t[0] for t in base.tensors()] == ["a.weight"]  # the huge one left out, one per name
    rng = random.Random(3)
    for _ in range(30):
        made = boundary_file(rng, ["tensor.padded_size", "data.size", "tensor.elements"], base=base)
        assert made.rule in error_rules(made.data)
        assert tensors(GGUF.parse(made.data))[0][0] == "a.weight"


@settings(max_examples=30, deadline=None)
@given(boundary_gguf(["tensor.nbytes", "string.alloc", "array.bytes"]))
def test_strategy_draws_consistent_files(made):
    assert made.rule in error_rules(made.data) and made.data[:4] == b"GGUF"


def test_mutators_plant_boundaries_in_parsed_files():
    seed_file = ALL[0].data
    plain = GGUF.build(GGUF.parse(seed_file))  # any parsed file
    rng = random.Random(0)
    labels = [MUTATORS["boundary"](plain, rng)[1] for _ in range(20)]
    assert all(label.startswith("boundary ") for label in labels)
    assert MUTATORS["boundary"](b"not a gguf file", rng)[0] != b""  # falls back to a field mutation
    notes = [mutate_structured(plain, random.Random(s))[1] for s in range(60)]
    assert any(n.startswith("boundary ") for n in notes)
