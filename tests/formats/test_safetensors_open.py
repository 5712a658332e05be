"""The fast safetensors open decides exactly what the per-entry path decides.

Three shortcuts, each checked against the slow path it replaces: the JSON guard's counts on the bytes (against a
walk of the parsed value), the duplicate-key test by counting pairs (against ``object_pairs_hook``), the
vectorised entry and placement checks (against ``entry_problems`` and ``check_safetensors``'s loop); and the
lazy tensor mapping behaves like the eager one.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gguf_construct as gc
from gguf_construct.api.safetensors_file import from_bytes, save_safetensors
from gguf_construct.core.untrusted import loads, loads_counted
from gguf_construct.errors import LimitError
from gguf_construct.formats.safetensors.schema import SAFETENSORS, entry_problems, sound_table
from gguf_construct.validation.safetensors_checks import check_safetensors

TRICKY_TEXT = st.text(alphabet=st.sampled_from('ab:{}[]"\\,é\u2028 \n0'), max_size=8)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | TRICKY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TRICKY_TEXT, inner, max_size=4),
    max_leaves=20,
)


def file_of(header: str | bytes, data: bytes = b"") -> bytes:
    raw = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(raw)) + raw + data


def walk(value) -> tuple[int, int, int]:
    """(objects, arrays, pairs) of a parsed JSON value, the reference for the counts on the bytes."""
    if isinstance(value, dict):
        inner = [walk(v) for v in value.values()]
        return 1 + sum(i[0] for i in inner), sum(i[1] for i in inner), len(value) + sum(i[2] for i in inner)
    if isinstance(value, list):
        inner = [walk(v) for v in value]
        return sum(i[0] for i in inner), 1 + sum(i[1] for i in inner), sum(i[2] for i in inner)
    return 0, 0, 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON_VALUES, st.booleans())
def test_counts_on_the_bytes_match_the_parsed_value(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    parsed, counted = loads_counted(text)
    assert parsed == value
    assert (counted.objects, counted.arrays, counted.pairs) == walk(value)


@pytest.mark.parametrize(
    "text",
    [
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":"\\u003a"}',
        '{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
        '{"__metadata__":{"k":"v","k":"w"},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":7,"x":":::"}',
        '{"a":{"dtype":"U8","shape":[{"n":1}],"data_offsets":[0,1]}}',
        '{"__metadata__":{"k":"v"},"__metadata__":{"k":"w"},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
    ],
)
def test_every_duplicate_key_is_kept_in_pairs(text):
    """Escaped colons, duplicates inside entries or metadata, objects deeper than entries: ``pairs`` is what the
    pairs hook sees, and validation reports the same duplicates."""
    header = SAFETENSORS.parse(file_of(text, b"\0")).header
    assert [k for k, _ in header.json.pairs] == [k for k, _ in json.loads(text, object_pairs_hook=list)]
    assert dict(header.json) == json.loads(text)


def test_a_repeated_tensor_is_still_reported():
    text = '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":"\\u003a"}'
    issues = check_safetensors(SAFETENSORS.parse(file_of(text, b"\0")))
    assert "tensor.duplicate" in [i.rule for i in issues]


DTYPE_NAMES = st.sampled_from(["F32", "BF16", "U8", "F4", "F6_E2M3", "I64", "f32", "X", 3, None, ["F32"]])
DIMS = st.integers(-2, 6) | st.sampled_from([True, 1.0, "2", None, 2**40, 2**63, 2**70, [1]])
SHAPES = st.lists(DIMS, max_size=4) | st.sampled_from([None, "4", 4, {"n": 1}, [1] * 65])
OFFSET = st.integers(-3, 64) | st.sampled_from([True, 2.0, None, 2**64])
OFFSETS = st.lists(OFFSET, min_size=2, max_size=2) | st.lists(OFFSET, max_size=3) | st.sampled_from([None, 5])
ENTRIES = st.fixed_dictionaries({"dtype": DTYPE_NAMES, "shape": SHAPES, "data_offsets": OFFSETS}) | st.sampled_from([None, 1, [], "x"])


@st.composite
def sound_entries(draw):
    """An entry that is sound on its own: a known dtype, a small shape, offsets spanning its bytes."""
    dtype = draw(st.sampled_from(["F32", "BF16", "U8", "F4", "F6_E2M3", "I64", "F8_E5M2", "C64"]))
    shape = draw(st.lists(st.integers(0, 6), max_size=3))
    bits = {"F32": 32, "BF16": 16, "U8": 8, "F4": 4, "F6_E2M3": 6, "I64": 64, "F8_E5M2": 8, "C64": 64}[dtype]
    n = int(np.prod(shape, dtype=np.int64))
    begin = draw(st.integers(0, 100))
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, begin + n * bits // 8 + (n * bits % 8 != 0 and draw(st.booleans()))]}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ENTRIES | sound_entries(), max_size=5))
def test_the_vectorised_entry_check_agrees_with_the_per_entry_one(entries):
    top = {f"t{i}": e for i, e in enumerate(entries)}
    table = sound_table(top)
    every_sound = all(not entry_problems(n, e) for n, e in top.items())
    assert (table is not None) == every_sound
    if table is not None:
        for i, (name, e) in enumerate(top.items()):
            assert table.entry(i) == (name, e["dtype"], tuple(e["shape"]), *e["data_offsets"])


def test_offsets_past_u64_are_refused_by_both_checks():
    """The safetensors library reads data_offsets as u64: an end of 2**64 is no offset, on either path."""
    top = {"t": {"dtype": "U8", "shape": [1], "data_offsets": [2**64 - 1, 2**64]}}
    assert sound_table(top) is None
    assert [rule for rule, _ in entry_problems("t", top["t"])] == ["tensor.data_offsets"]


def test_huge_sound_tensors_take_the_exact_path():
    """Past 2**56 elements the vectorised check steps aside (its int64 products could overflow); the per-entry
    check still accepts what is sound."""
    top = {"big": {"dtype": "U8", "shape": [2**29, 2**28], "data_offsets": [0, 2**57]}}
    assert sound_table(top) is None and entry_problems("big", top["big"]) == []


@st.composite
def layouts(draw):
    """U8 tensors at drawn offsets (overlaps, gaps, empty ones, some past the end) and a region length."""
    spans = draw(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 5)), max_size=6))
    region = draw(st.integers(0, 20))
    return {f"t{i}": {"dtype": "U8", "shape": [size], "data_offsets": [b, b + size]} for i, (b, size) in enumerate(spans)}, region


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts(), st.sampled_from(["spec", "hf"]))
def test_the_placement_shortcut_agrees_with_the_loop(layout, profile):
    header, region = layout
    data = file_of(json.dumps(header), b"\0" * region)
    fast = check_safetensors(SAFETENSORS.parse(data), profile)
    slow_container = SAFETENSORS.parse(data)
    slow_container.header._sound = None  # as if the vectorised check had declined: the loop decides
    slow = check_safetensors(slow_container, profile)
    assert [(i.rule, i.message, i.offset, i.severity) for i in fast] == [(i.rule, i.message, i.offset, i.severity) for i in slow]


def test_tensors_are_made_on_first_access_and_kept(tmp_path):
    arrays = {f"layers.{i}.w": np.arange(i, i + 3, dtype=np.float32) for i in range(5)}
    path = tmp_path / "m.safetensors"
    save_safetensors(path, arrays)
    f = gc.load(path)
    assert "layers.3.w" in f.tensors and "nope" not in f.tensors and not f.tensors._t  # membership makes nothing
    t = f.tensors["layers.3.w"]
    assert f.tensors["layers.3.w"] is t and len(f.tensors._t) == 1
    assert list(f.tensors) == sorted(arrays) == [n for n, _ in f.tensors.items()] == [v.name for v in f.tensors.values()]
    assert t.entry == f.header.entries["layers.3.w"] and t.offset == t.entry.begin
    for name, want in arrays.items():
        got = f.tensors[name]
        assert np.array_equal(got.to_numpy(), want) and got.data.tobytes() == want.tobytes() and got.shape == (3,)
    with pytest.raises(KeyError):
        f.tensors["nope"]
    assert len(f.tensors.values()) == len(f.tensors.items()) == 5 and ("layers.1.w", f.tensors["layers.1.w"]) in f.tensors.items()
    assert f.tensors["layers.2.w"] in f.tensors.values() and dict(f.tensors.items()) == {n: f.tensors[n] for n in f.tensors}


def test_a_run_of_digits_one_past_the_limit_is_found_anywhere():
    from gguf_construct.core.limits import limit

    most = limit("number_digits")
    assert loads('{"n": ' + "7" * most + "}") == {"n": int("7" * most)}
    assert loads('{"n": "' + "7" * (most + 1) + '"}') == {"n": "7" * (most + 1)}  # in a string: no number
    with pytest.raises(LimitError) as e:
        loads('{"s": "x", "n": -' + "7" * (most + 1) + "}")
    assert e.value.rule == "limit.number_digits"


def test_a_sound_file_opens_without_the_per_entry_path(monkeypatch):
    """The common case (the benchmark's file) never calls ``entry_problems``."""
    import gguf_construct.formats.safetensors.schema as fs

    arrays = {f"w{i}": np.full(4, i, np.float32) for i in range(50)}
    from safetensors.numpy import save

    data = save(arrays)
    monkeypatch.setattr(fs, "entry_problems", lambda *a: pytest.fail("per-entry path taken"))
    f = from_bytes(data)
    assert {t.name: float(t.to_numpy()[0]) for t in f.tensors.values()} == {f"w{i}": i for i in range(50)}
