"""Count overruns: one count or length set past what the file holds, in place, every other byte as it was; the
family covers each kind of count (record counts, array counts, lengths, n_dims past GGML_MAX_DIMS), and our reader
refuses every such file with a rule, never another exception."""

from __future__ import annotations

import random
import struct

import pytest

from gguf_construct.errors import FormatError
from gguf_construct.formats.gguf.offsets import GGML_MAX_DIMS, Layout
from gguf_construct.formats.gguf.schema import GGUF
from gguf_construct.testing.fuzzing.mutators import MUTATORS
from gguf_construct.testing.fuzzing.structured import mutate_structured
from gguf_construct.testing.overruns import OVERRUNS, CountField, count_fields, count_overrun, count_overruns, overrun_values
from gguf_construct.testing.strategies import count_overrun_gguf
from gguf_construct.validation.gguf_checks import validate_gguf_bytes

POOL = count_overrun_gguf().elements  # type: ignore[attr-defined]


def field_name(note: str) -> str:
    """The field an overrun's description names (``overrun NAME PRESENT -> VALUE``)."""
    return note.removeprefix("overrun ").rsplit(" ", 3)[0]


def base_file() -> bytes:
    from construct import Container

    from gguf_construct.testing.boundaries import DEFAULT_BASE, FieldPlan, build_plan

    tokens = Container(key="tokenizer.ggml.tokens", value_type="arr", value=Container(type="str", len=2, array=["a", "b"]))
    return build_plan(FieldPlan([*DEFAULT_BASE.kvs(), tokens], DEFAULT_BASE.tensors(), ""))


def test_every_kind_of_count_is_overrun_past_what_is_present_and_past_its_limit():
    fields = {f.name: f for f in count_fields(Layout(base_file()))}
    assert {"tensor_count", "metadata_kv_count"} <= set(fields)
    assert {"key length", "value length", "value.len", "name length", "n_dimensions"} <= {name.rsplit("].", 1)[-1] for name in fields}
    n_dims = fields["tensor_infos[0].n_dimensions"]
    assert n_dims.present == 2 and n_dims.limit == GGML_MAX_DIMS
    assert {GGML_MAX_DIMS + 1, 3, 2**32 - 1} <= set(overrun_values(n_dims))
    n_tensors = fields["tensor_count"]
    assert {n_tensors.present + 1, n_tensors.present + 2**28, 2**63, 2**64 - 1} <= set(overrun_values(n_tensors))
    assert fields["metadata_kv_count"].present + 1 in overrun_values(fields["metadata_kv_count"])


def test_values_stay_in_the_field_and_never_repeat_the_present_count():
    field = CountField("x", 0, "<I", 7, 4)
    values = overrun_values(field)
    assert values == sorted(set(values)) and 7 not in values and max(values) == 2**32 - 1 and min(values) == 5
    assert {7 + k for k in OVERRUNS if 7 + k < 2**32} <= set(values)


@pytest.mark.parametrize("label,data", POOL[:: max(1, len(POOL) // 60)], ids=lambda x: x if isinstance(x, str) else "")
def test_only_the_count_changes_and_our_reader_refuses_it_with_a_rule(label, data):
    base = base_file()
    assert len(data) == len(base)
    differing = [i for i in range(len(base)) if base[i] != data[i]]
    field = next(f for f in count_fields(Layout(base)) if label.startswith(f"overrun {f.name} "))
    width = struct.calcsize(field.fmt)
    assert differing and field.at <= min(differing) and max(differing) < field.at + width
    assert struct.unpack_from(field.fmt, data, field.at)[0] == int(label.rsplit(" ", 1)[1])
    assert any(i.severity == "error" for i in validate_gguf_bytes(data))


def test_the_whole_family_is_refused_with_rules():
    for label, data in POOL:
        assert any(i.severity == "error" for i in validate_gguf_bytes(data)), label


def test_every_overrun_of_a_file_is_listed_once():
    listed = [(f.name, v) for f, v, _ in count_overruns(base_file())]
    assert len(listed) == len(set(listed)) == len(POOL)
    assert list(count_overruns(b"not a gguf file")) == []


def test_the_mutators_use_it_and_fall_back_on_other_bytes():
    rng = random.Random(3)
    data, note = MUTATORS["overrun"](base_file(), rng)
    assert note.startswith("overrun ") and data != base_file()
    assert count_overrun(b"\x00" * 40, rng) is None
    other, note = MUTATORS["overrun"](b"\x00" * 40, rng)
    assert not note.startswith("overrun") and len(other) == 40
    notes = [mutate_structured(base_file(), random.Random(seed))[1] for seed in range(200)]
    assert sum(n.startswith("overrun ") for n in notes) >= 5


def test_an_overrun_can_keep_to_the_record_a_generator_planted():
    from gguf_construct.testing.boundaries import boundary_files

    rng, overrun = random.Random(5), 0
    for made in list(boundary_files(seed=1))[::10]:
        over = count_overrun(made.data, rng, made.record)
        if over is None:  # a length patched past the file: not a file we parse, so no count to find
            with pytest.raises(FormatError):
                GGUF.parse(made.data)
            continue
        overrun += 1
        layout = Layout(made.data)
        last = {"tensor": f"tensor_infos[{len(layout.c.tensor_infos) - 1}].", "kv": f"metadata_kv[{len(layout.c.metadata_kv) - 1}]."}
        name = field_name(over[1])
        assert name.startswith(last[made.record]) if made.record in last else "[" not in name, (made.label, over[1])
    assert overrun >= 10


def test_each_kind_of_count_is_drawn_alike_however_many_records_there_are():
    rng = random.Random(0)
    names = [field_name(count_overrun(base_file(), rng)[1]) for _ in range(600)]  # type: ignore[index]
    n_dims = sum(n.endswith("n_dimensions") for n in names)
    key_lengths = sum(n.endswith("key length") for n in names)
    assert 60 <= n_dims <= 140 and 60 <= key_lengths <= 140  # 7 kinds: about 86 each, though keys outnumber tensors


@pytest.mark.parametrize("name", ["gguf-py-be.gguf", "gguf-py-nested-array.gguf", "ggml-writer-all-types.gguf"])
def test_big_endian_nested_and_many_typed_files_overrun_in_their_own_byte_order(name):
    from conftest import DATA

    data = (DATA / "generated" / name).read_bytes()
    layout = Layout(data)
    rng = random.Random(7)
    fields = count_fields(layout)
    assert fields and all(f.fmt[0] == layout.order for f in fields)
    for _ in range(20):
        out, note = count_overrun(data, rng)  # type: ignore[misc]
        field = next(f for f in fields if f.name == field_name(note))
        assert struct.unpack_from(field.fmt, out, field.at)[0] == int(note.rsplit(" ", 1)[1])
        assert any(i.severity == "error" for i in validate_gguf_bytes(out)), note
