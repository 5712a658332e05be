"""Forward compatibility: files with tensor types or value types newer than our tables, user type tables
(GGUF_CONSTRUCT_TYPES), GGUF v1 files with v2's 64-bit value types, and parameter counts a file cannot hold.

Every file here is built in the test from the schema (no corpus needed).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from construct import Container
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gguf_construct as gc
from gguf_construct.core.tables import GGML_TYPES, GGMLType, user_types
from gguf_construct.errors import LayoutError, UnsupportedTypeError
from gguf_construct.testing.strategies.gguf_broken import Layout
from gguf_construct.testing.strategies.valid_gguf import gguf_bytes
from gguf_construct.validation import densest_type, parameter_issue

ROOT = Path(__file__).resolve().parents[2]
UNKNOWN = 43  # one past the last id of today's table: what the next ggml type would get
A = np.arange(64, dtype=np.float32)
C = np.arange(16, dtype=np.float32) - 3
B_BYTES = bytes(range(64))  # 64 bytes of a type we cannot know


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "gguf_construct.cli.main", *map(str, args)], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env
    )


def build(tensors, kvs=(), *, version=3, data=b"", byte_order="little"):
    """A GGUF file from (name, dims, type, offset) and a raw data section, laid out as given."""
    infos = [Container(name=n, dimensions=list(d), type=t, offset=o) for n, d, t, o in tensors]
    kv = [Container(key=k, value_type=vt, value=v) for k, vt, v in kvs]
    return gc.GGUF.build(Container(version=version, byte_order=byte_order, metadata_kv=kv, tensor_infos=infos, tensor_data=data))


def unknown_type_file(last=False):
    """f32 a (256 bytes), b of type 43 (64 bytes), f32 c (64 bytes); ``last`` moves b to the end."""
    kvs = [("general.architecture", "str", "llama")]
    if last:
        return build(
            [("a.weight", [64], "f32", 0), ("c.weight", [16], "f32", 256), ("b.weight", [32], UNKNOWN, 320)],
            kvs,
            data=A.tobytes() + C.tobytes() + B_BYTES,
        )
    return build(
        [("a.weight", [64], "f32", 0), ("b.weight", [32], UNKNOWN, 256), ("c.weight", [16], "f32", 320)],
        kvs,
        data=A.tobytes() + B_BYTES + C.tobytes(),
    )


@pytest.fixture
def unknown_file(tmp_path):
    path = tmp_path / "new-type.gguf"
    path.write_bytes(unknown_type_file())
    return path


# -- unknown tensor types ---------------------------------------------------------------------------------
@pytest.mark.parametrize("last", [False, True], ids=["before-another", "last"])
def test_lenient_load_lists_an_unknown_tensor_type_with_its_byte_range(last):
    f = gc.from_bytes(unknown_type_file(last), strict=False)
    b = f.tensors["b.weight"]
    assert isinstance(b.type, GGMLType) and type(b.type) is type(f.tensors["a.weight"].type)
    assert (b.type.id, b.type.name, b.type.known, b.type.sized) == (UNKNOWN, f"unknown({UNKNOWN})", False, False)
    assert b.offset == (320 if last else 256)
    assert b.nbytes == 64 and bytes(b.data) == B_BYTES  # up to the next tensor, or to the end of the data
    assert b.shape == (32,)
    with pytest.raises(UnsupportedTypeError) as e:
        b.to_numpy()
    assert e.value.rule == "tensor.type"
    np.testing.assert_array_equal(f.tensors["a.weight"].to_numpy(), A)  # only that tensor is unreadable
    np.testing.assert_array_equal(f.tensors["c.weight"].to_numpy(), C)


def test_an_unknown_type_whose_range_cannot_be_derived_has_no_bytes():
    raw = build([("a.weight", [64], "f32", 0), ("b.weight", [32], UNKNOWN, 4096)], data=A.tobytes())
    b = gc.from_bytes(raw, strict=False).tensors["b.weight"]
    assert b.nbytes == 0 and len(b.data) == 0
    assert any(i.rule == "tensor.type" for i in gc.validate(raw))


def test_strict_load_and_validate_report_the_unknown_type(unknown_file):
    with pytest.raises(UnsupportedTypeError) as e:
        gc.load(unknown_file)
    assert e.value.rule == "tensor.type" and e.value.path == "tensor_infos[1].type"
    issues = gc.validate(unknown_file)
    assert [(i.rule, i.path, i.severity) for i in issues] == [("tensor.type", "tensor_infos[1].type", "error")]
    assert issues[0].offset is not None and str(UNKNOWN) in issues[0].message
    # forward-compatible strictness (what split uses): everything else is still checked
    relaxed = gc.validation.check(gc.GGUF.parse(unknown_file.read_bytes()), unknown_file.stat().st_size, unknown_types="warning")
    assert [(i.rule, i.severity) for i in relaxed] == [("tensor.type", "warning")]
    f = gc.api.gguf_file.load_gguf(unknown_file, unknown_types="warning")
    assert f.tensors["b.weight"].nbytes == 64


def test_a_removed_type_stays_an_error_when_unknown_types_are_tolerated():
    raw = build([("a.weight", [64], "f32", 0), ("b.weight", [32], 4, 256)], data=A.tobytes() + B_BYTES)  # q4_2
    relaxed = gc.validation.check(gc.GGUF.parse(raw), len(raw), unknown_types="warning")
    assert [(i.rule, i.severity) for i in relaxed] == [("tensor.type", "error")]


def test_info_lists_the_tensor_warns_and_exits_0(unknown_file):
    r = cli("info", unknown_file)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith("b.weight"))
    assert f"type {UNKNOWN} (unknown)" in line and "offset" in line and "256" in line and "64 bytes" in line
    assert f"warning: [tensor.type] 1 tensor(s) of type {UNKNOWN} (unknown)" in r.stderr
    j = cli("info", "--json", unknown_file)
    assert j.returncode == 0
    doc = json.loads(j.stdout)
    b = doc["tensors"]["b.weight"]
    assert (b["type"], b["offset"], b["nbytes"]) == (f"type {UNKNOWN} (unknown)", 256, 64)
    assert any("tensor.type" in w for w in doc["summary"]["warnings"])
    table = cli("info", "-j", "1", unknown_file, unknown_file.parent)
    assert table.returncode == 0 and "1 reading warnings" in table.stdout


def test_validate_cli_reports_the_rule_and_exits_1(unknown_file):
    r = cli("validate", unknown_file)
    assert r.returncode == 1
    assert "[tensor.type] tensor_infos[1].type" in r.stdout and f"ggml type {UNKNOWN} is unknown" in r.stdout


def test_diff_and_hash_work_by_byte_range(unknown_file, tmp_path):
    same = cli("diff", unknown_file, unknown_file)
    assert same.returncode == 0 and "3 identical" in same.stdout, same.stdout + same.stderr
    other = tmp_path / "other.gguf"
    other.write_bytes(unknown_type_file()[:-64] + unknown_type_file()[-64:][::-1])  # c.weight's bytes reversed
    d = cli("diff", unknown_file, other)
    assert d.returncode == 1 and "c.weight" in d.stdout and "b.weight" not in d.stdout.split("identical")[-1]
    changed = tmp_path / "changed.gguf"
    changed.write_bytes(unknown_type_file().replace(B_BYTES, B_BYTES[::-1]))  # the unknown tensor's bytes differ
    d = cli("diff", unknown_file, changed)
    assert d.returncode == 1 and "b.weight" in d.stdout and "values not compared" in d.stdout, d.stdout
    h = cli("hash", unknown_file)
    assert h.returncode == 0, h.stderr
    assert f"sha256    {hashlib.sha256(B_BYTES).hexdigest()}  {unknown_file}:b.weight" in h.stdout


def test_split_and_merge_carry_the_unknown_tensor_byte_for_byte(unknown_file, tmp_path):
    r = cli("split", unknown_file, tmp_path / "s", "--max-tensors", "1")
    assert r.returncode == 0, r.stderr
    shards = sorted(tmp_path.glob("s-0000*-of-00003.gguf"))
    assert len(shards) == 3
    assert bytes(gc.load(shards[1], strict=False).tensors["b.weight"].data) == B_BYTES
    m = cli("merge", shards[0], tmp_path / "merged.gguf")
    assert m.returncode == 0, m.stderr
    assert (tmp_path / "merged.gguf").read_bytes() == unknown_file.read_bytes()


def test_save_keeps_an_unknown_tensor(unknown_file, tmp_path):
    f = gc.load(unknown_file, strict=False)
    f.metadata["general.name"] = "kept"
    f.save(tmp_path / "edited.gguf")
    g = gc.load(tmp_path / "edited.gguf", strict=False)
    assert g.metadata["general.name"] == "kept" and bytes(g.tensors["b.weight"].data) == B_BYTES
    with pytest.raises(UnsupportedTypeError):  # its blocks cannot be byte-swapped: the layout is unknown
        f.save(tmp_path / "big.gguf", byte_order="big")
    assert not (tmp_path / "big.gguf").exists()


# -- unknown value types ----------------------------------------------------------------------------------
def unknown_value_file(version=3, byte_order="little"):
    kvs = [("general.architecture", "str", "llama"), ("general.name", "str", "x"), ("a.new", "u32", 7), ("a.after", "u8", 1)]
    order = "<" if byte_order == "little" else ">"
    raw = bytearray(
        build([("a.weight", [64], "f32", 0)], kvs, data=A.astype(order + "f4").tobytes(), version=version, byte_order=byte_order)
    )
    kv = gc.GGUF.parse(bytes(raw)).metadata_kv[2]
    at = kv._offset + (8 if version > 1 else 4) + len(kv.key)
    struct.pack_into(order + "I", raw, at, 13)  # a value type the spec does not (yet) define
    return bytes(raw), at


@pytest.mark.parametrize(("version", "byte_order"), [(1, "little"), (3, "big")])
def test_the_readable_prefix_of_every_layout(version, byte_order):
    raw, at = unknown_value_file(version, byte_order)
    with pytest.raises(UnsupportedTypeError) as e:
        gc.from_bytes(raw, strict=False)
    assert e.value.offset == at
    partial = e.value.partial
    assert (partial.version, partial.byte_order) == (version, byte_order)
    assert dict(partial.metadata) == {"general.architecture": "llama", "general.name": "x"}
    assert partial.declared == {"metadata_kv_count": 4, "tensor_count": 1}


def test_an_unknown_value_type_is_named_and_what_precedes_it_is_shown(tmp_path):
    raw, at = unknown_value_file()
    path = tmp_path / "new-value-type.gguf"
    path.write_bytes(raw)
    for strict in (True, False):
        with pytest.raises(UnsupportedTypeError) as e:
            gc.load(path, strict=strict)
        assert (e.value.rule, e.value.path, e.value.offset) == ("value.type", "metadata_kv[2].value", at)
        assert "value type 13 is unknown" in e.value.message
        partial = e.value.partial
        assert list(partial.metadata) == ["general.architecture", "general.name"] and len(partial.tensors) == 0
        assert partial.declared == {"metadata_kv_count": 4, "tensor_count": 1}
    r = cli("info", path)
    assert r.returncode == 1
    assert "PARTIAL, the header declares 4 keys and 1 tensors; readable: the first 2 keys" in r.stdout
    assert "general.name" in r.stdout and "a.after" not in r.stdout
    assert "value type 13 is unknown" in r.stderr and "the 2 keys before it" in r.stderr
    j = cli("info", "--json", path)
    assert j.returncode == 1
    doc = json.loads(j.stdout)
    assert doc["partial"] is True and list(doc["metadata"]) == ["general.architecture", "general.name"]


# -- user type tables -------------------------------------------------------------------------------------
MADE_UP = {"id": 200, "name": "q3_X", "block_size": 32, "type_size": 14}


def test_user_types_are_checked_against_the_table(tmp_path):
    known = list(GGML_TYPES.values())

    def load(records):
        p = tmp_path / "types.json"
        p.write_text(json.dumps({"types": records}))
        return user_types(p, known)

    assert [t.name for t in load([MADE_UP])] == ["q3_X"]
    assert load([{"id": 2, "name": "q4_0", "block_size": 32, "type_size": 18}]) == []  # the same record: no change
    for bad, where in [
        ({"id": 2, "name": "q4_0", "block_size": 32, "type_size": 20}, "types[0].id"),  # same id, other size
        ({"id": 2, "name": "q4_new", "block_size": 32, "type_size": 18}, "types[0].id"),  # same id, other name
        ({**MADE_UP, "name": "F32"}, "types[0].name"),  # a known name under another id
        ({**MADE_UP, "block_size": 0}, "types[0]"),
        ({**MADE_UP, "type_size": "14"}, "types[0].type_size"),
        ({**MADE_UP, "extra": 1}, "types[0]"),
    ]:
        with pytest.raises(gc.InvalidValueError) as e:
            load([bad])
        assert e.value.rule == "types.user" and e.value.path == where, (bad, e.value)
    with pytest.raises(gc.InvalidValueError):
        load([MADE_UP, {**MADE_UP, "id": 201}])  # a clash inside the file too


def test_a_user_type_is_sized_validated_and_dequantizes_as_unsupported(tmp_path):
    types = tmp_path / "types.json"
    types.write_text(json.dumps({"types": [MADE_UP]}))
    good = tmp_path / "good.gguf"
    bad = tmp_path / "bad.gguf"
    good.write_bytes(build([("a.weight", [64], "f32", 0), ("q.weight", [64], 200, 256)], data=A.tobytes() + bytes(28) + bytes(4)))
    bad.write_bytes(build([("q.weight", [40], 200, 0)], data=bytes(32)))
    env = {**os.environ, "GGUF_CONSTRUCT_TYPES": str(types)}
    script = f"""
import json, gguf_construct as gc
from gguf_construct.errors import UnsupportedTypeError
f = gc.load({str(good)!r})  # strict: the type is known now
t = f.tensors["q.weight"]
try:
    t.to_numpy()
    raised = None
except UnsupportedTypeError as e:
    raised = e.rule
print(json.dumps([t.type.name, t.type.origin, t.nbytes, raised, [i.rule for i in gc.validate({str(bad)!r})]]))
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == ["q3_X", "user", 28, "tensor.type", ["tensor.block"]]  # 64 / 32 * 14 bytes; ne0 40
    info = cli("info", good, env=env)
    assert info.returncode == 0 and "q3_X" in info.stdout and "warning" not in info.stderr
    assert cli("validate", good, env=env).returncode == 0
    assert cli("validate", good).returncode == 1  # without the table: unknown
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"types": [{**MADE_UP, "id": 0}]}))
    for table in (broken, tmp_path / "missing.json"):  # a table that cannot be used: a warning, then the built-in table
        r = cli("info", good, env={**os.environ, "GGUF_CONSTRUCT_TYPES": str(table)})
        assert r.returncode == 0 and "types.user" in r.stderr and "built-in type table" in r.stderr and "Traceback" not in r.stderr
        assert "type 200 (unknown)" in r.stdout
        assert cli("validate", good, env={**os.environ, "GGUF_CONSTRUCT_TYPES": str(table)}).returncode == 1


# -- GGUF v1 with v2's 64-bit value types -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("kv", "path"),
    [
        (("a.x", "u64", 2**40), "metadata_kv[1].value_type"),
        (("a.x", "f64", 0.5), "metadata_kv[1].value_type"),
        (("a.x", "arr", Container(type="i64", len=2, array=np.array([1, -1], "<i8"))), "metadata_kv[1].value.type"),
        (
            (
                "a.x",
                "arr",
                Container(
                    type="arr",
                    len=2,
                    array=[Container(type="u8", len=0, array=np.array([], "u1")), Container(type="u64", len=1, array=np.array([3], "<u8"))],
                ),
            ),
            "metadata_kv[1].value.array[1].type",
        ),
    ],
    ids=["u64", "f64", "arr-i64", "nested-u64"],
)
def test_v1_with_64_bit_value_types_is_read_and_reported(kv, path):
    raw = build([], [("general.architecture", "str", "llama"), kv], version=1)
    issues = gc.validate(raw)
    assert [(i.rule, i.path) for i in issues] == [("value.type_v1", path)]
    assert issues[0].offset == gc.GGUF.parse(raw).metadata_kv[1]._offset
    with pytest.raises(UnsupportedTypeError):
        gc.from_bytes(raw)
    assert "a.x" in gc.from_bytes(raw, strict=False).metadata
    assert gc.GGUF.build(gc.GGUF.parse(raw)) == raw
    v2 = bytearray(build([], [("general.architecture", "str", "llama"), kv], version=2))
    assert gc.validate(bytes(v2)) == []


# -- parameter counts a file cannot hold -------------------------------------------------------------------
def test_the_bound_is_the_densest_type_of_the_table():
    dense = densest_type()
    assert all(dense.block_size * t.type_size >= t.block_size * dense.type_size for t in GGML_TYPES.values() if t.sized)
    cap = 256 * dense.block_size // dense.type_size
    assert parameter_issue([[cap]], 256) is None
    issue = parameter_issue([[cap + 1]], 256)
    assert issue.rule == "model.parameters" and issue.severity == "error"
    summed = parameter_issue([[cap // 2], [cap - cap // 2 + 1]], 256, places=[("a", 1), ("b", 2)])
    assert (summed.path, summed.offset) == ("b", 2)  # the sum counts; the tensor that crosses the bound is named
    assert parameter_issue([[cap + 1]], 256, all_sized=False).severity == "warning"
    assert parameter_issue([[2**64 - 1, 0]], 256) is None  # no elements at all
    assert "7" not in parameter_issue([[10**40, 10**40, 10**40, 10**40]], 0).message.split("claim")[0]


def crafted_huge_claim():
    """A file of under 100 bytes whose one tensor claims (2^40)^4 ≈ 1.5e48 parameters (the kind of file
    @huggingface/gguf was fed: 70 bytes claiming 7e159)."""
    return build([("t", [2**40] * 4, "f32", 0)])


def test_a_crafted_parameter_claim_is_an_error_and_info_warns(tmp_path):
    raw = crafted_huge_claim()
    issues = gc.validate(raw)
    assert "model.parameters" in {i.rule for i in issues}
    hit = next(i for i in issues if i.rule == "model.parameters")
    assert hit.severity == "error" and isinstance(hit.error(), LayoutError)
    assert (hit.path, hit.offset) == ("tensor_infos[0].dimensions", gc.GGUF.parse(raw).tensor_infos[0]._offset)
    path = tmp_path / "claim.gguf"
    path.write_bytes(raw)
    r = cli("info", path)
    assert "[model.parameters]" in r.stderr, r.stderr
    assert r.returncode == 1 and "parameters        ~10^48 (implausible)" in r.stdout, r.stdout  # 1: its tensor points past the end
    assert "[tensor.bounds] the file is cut short: 1 of 1 tensors point past its end, 2^162 (implausible) bytes" in r.stderr
    doc = json.loads(cli("info", "--json", path).stdout)
    assert doc["summary"]["parameters_plausible"] is False and doc["summary"]["parameters"] == 2**160
    assert cli("validate", path).returncode == 1


def test_a_plausible_file_gets_no_parameter_warning(unknown_file, tmp_path):
    f = gc.new()
    f.tensors.add("w", np.zeros((64, 64), np.float32))
    f.save(tmp_path / "ok.gguf")
    assert gc.validate(tmp_path / "ok.gguf") == []
    assert "model.parameters" not in cli("info", tmp_path / "ok.gguf").stderr
    assert "model.parameters" not in cli("info", unknown_file).stderr
    # an unknown type claiming more than any known type could hold: a warning (a newer type could be denser)
    huge = build([("b.weight", [10**12], UNKNOWN, 0)], data=bytes(64))
    issues = gc.validate(huge)
    assert ("model.parameters", "warning") in {(i.rule, i.severity) for i in issues}


# -- every layout: a generated file with one tensor retyped to an unknown id ------------------------------
@st.composite
def retyped(draw):
    """A valid generated file (any version, byte order, alignment) with one tensor's type id replaced by one
    no table knows: (original bytes, retyped bytes, the tensor's name, the new id)."""
    files = gguf_bytes(max_kv=3, max_tensors=4, tensor_types=("f32", "f16", "q4_0", "q8_0", "q4_K"))
    data = draw(files.filter(lambda b: len(gc.GGUF.parse(b).tensor_infos) >= 1))
    layout = Layout(data)
    i = draw(st.integers(0, len(layout.c.tensor_infos) - 1))
    new_id = draw(st.integers(max(GGML_TYPES) + 1, 2**32 - 1))
    return data, layout.patch(layout.tensor(i)["type"], "I", new_id), layout.c.tensor_infos[i].name, new_id


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(retyped())
def test_an_unknown_type_in_any_layout_keeps_everything_else(case):
    original, data, name, new_id = case
    before = gc.from_bytes(original)
    f = gc.from_bytes(data, strict=False)
    t = f.tensors[name]
    assert (t.type.id, t.type.name, t.type.known) == (new_id, f"unknown({new_id})", False)
    c = gc.GGUF.parse(data)
    later = [int(ti.offset) for ti in c.tensor_infos if int(ti.offset) > t.offset]
    end = min(later) if later else len(c.tensor_data)
    assert bytes(t.data) == bytes(c.tensor_data[t.offset : end])  # up to the next tensor, or the end of the data
    assert bytes(t.data)[: before.tensors[name].nbytes] == bytes(before.tensors[name].data)
    assert [i.rule for i in gc.validate(data) if i.severity == "error"] == ["tensor.type"]
    for other in f.tensors:
        if other != name:
            np.testing.assert_array_equal(f.tensors[other].to_numpy(), before.tensors[other].to_numpy())
    assert gc.GGUF.build(c) == data
    with pytest.raises(UnsupportedTypeError):
        t.to_numpy()


def test_the_references_refuse_what_we_read_leniently(unknown_file, tmp_path):
    """ggml's C reader refuses a tensor type it does not know, gguf-py raises ValueError: our strict load
    agrees. Leniently, we see what ggml sees in the same file with a known type there (the same names, types
    of the other tensors, offsets and sizes: the unknown one's byte range is its f16 size here)."""
    from oracles import ggml_read, gguf_py_read, ours

    assert ggml_read(unknown_file) is None
    with pytest.raises(ValueError):
        gguf_py_read(unknown_file)
    known = tmp_path / "known.gguf"
    known.write_bytes(
        build(
            [("a.weight", [64], "f32", 0), ("b.weight", [32], "f16", 256), ("c.weight", [16], "f32", 320)],
            [("general.architecture", "str", "llama")],
            data=A.tobytes() + B_BYTES + C.tobytes(),
        )
    )
    reference = ggml_read(known)["tensors"]
    seen = ours(unknown_file)["tensors"]
    assert [[n, o, b] for n, _, _, o, b in seen] == [[n, o, b] for n, _, _, o, b in reference]
    assert [t for _, t, _, _, _ in seen] == ["f32", f"unknown({UNKNOWN})", "f32"]


def test_a_remote_file_with_an_unknown_type_and_one_with_an_unknown_value_type(tmp_path):
    """Over HTTP (the remote loader is the same code path): info as for the local file; the unknown tensor's
    size comes without fetching its bytes; the readable prefix of a value of unknown type is shown."""
    import contextlib
    import io

    from http_testserver import TestServer

    from gguf_construct.cli.main import main

    def run(*argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
        return code, out.getvalue(), err.getvalue()

    local = tmp_path / "new-type.gguf"
    local.write_bytes(unknown_type_file())
    with TestServer() as server:
        url = server.add("/new-type.gguf", local.read_bytes())
        code, out, err = run("info", "--json", url)
        assert code == 0 and json.loads(out) == json.loads(run("info", "--json", str(local))[1])
        assert "type 43 (unknown)" in err
        f = gc.load(url, strict=False)
        server.reset_counts()
        assert f.tensors["b.weight"].nbytes == 64 and server.counts.requests == 0
        assert bytes(f.tensors["b.weight"].data) == B_BYTES
        url2 = server.add("/new-value-type.gguf", unknown_value_file()[0])
        code, out, err = run("info", url2)
        assert code == 1 and "general.name" in out and "value type 13 is unknown" in err
