"""Hypothesis-generated files of every shape (NaN payloads included) round-trip both ways, pass validation,
load strictly and dequantize to finite values."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings

from gguf_construct import GGUF, from_bytes
from gguf_construct import validate as validate_bytes
from gguf_construct.api.metadata import array_content
from gguf_construct.formats.gguf.schema import tensor_nbytes
from gguf_construct.testing.fuzzing.adapters import array_values, scalar_value
from gguf_construct.testing.strategies import gguf_files

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def plain(value, vtype):
    """A container value as comparable Python data."""
    if vtype == "arr":
        items = array_content(value)
        etype = str(value["type"])
        if etype == "arr":
            return ("arr", [plain(inner, "arr") for inner in value["array"]])
        return (etype, array_values(items, etype))
    return scalar_value(value, vtype)


def semantics(c):
    kvs = [(kv["key"], str(kv["value_type"]), plain(kv["value"], str(kv["value_type"]))) for kv in c["metadata_kv"]]
    tensors = [(t["name"], list(t["dimensions"]), str(t["type"])) for t in c["tensor_infos"]]
    return kvs, tensors


@SETTINGS
@given(gguf_files(allow_nan=True))
def test_build_then_parse_gives_the_object_back(obj):
    data = GGUF.build(obj)
    back = GGUF.parse(data)
    assert semantics(back) == semantics(obj)
    assert (back["version"], back["byte_order"]) == (obj["version"], obj["byte_order"])
    for ti, orig in zip(back["tensor_infos"], obj["tensor_infos"]):
        start = int(ti["offset"])
        assert start % back["alignment"] == 0
        assert bytes(back["tensor_data"][start : start + tensor_nbytes(ti["dimensions"], ti["type"])]) == bytes(orig["data"])


@SETTINGS
@given(gguf_files(allow_nan=True))
def test_parse_then_build_gives_the_bytes_back(obj):
    data = GGUF.build(obj)
    assert GGUF.build(GGUF.parse(data)) == data


@SETTINGS
@given(gguf_files())
def test_generated_files_are_valid_and_load_strictly(obj):
    data = GGUF.build(obj)
    assert [i for i in validate_bytes(data, "spec") if i.severity == "error"] == []
    f = from_bytes(data)
    for t in f.tensors.values():
        assert np.isfinite(t.to_numpy()).all()


@SETTINGS
@given(gguf_files(profile="ggml"))
def test_generated_files_pass_ggml_profile_when_ggml_could_read_them(obj):
    data = GGUF.build(obj)
    assert [i for i in validate_bytes(data, "ggml") if i.severity == "error"] == []
