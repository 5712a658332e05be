"""The public strategies: valid files of every shape pass validation, every labelled broken file is rejected with
its rule by validation and by the strict loader (never with an internal rule or another exception)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import drawn
from hypothesis import HealthCheck, given, settings

import gguf_construct.testing.strategies as strategies
from gguf_construct import GGUF, FormatError, dequantize, from_bytes
from gguf_construct import validate as validate_bytes
from gguf_construct.core.tables import GGML_TYPES
from gguf_construct.testing.strategies import (
    INVALID_CLASSES,
    TENSOR_TYPES,
    draw_examples,
    gguf_bytes,
    gguf_files,
    invalid_gguf,
    tensor_data,
)

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


def test_public_names():
    for name in ("gguf_files", "gguf_bytes", "invalid_gguf", "InvalidFile", "INVALID_CLASSES", "tensor_data", "draw_examples"):
        assert hasattr(strategies, name), name


def test_every_security_class_has_a_breaker():
    """The security classes S1–S17 are all covered, each label names the rules that reject it."""
    covered = {label.split(".")[0] for label in INVALID_CLASSES}
    assert {f"S{i}" for i in range(1, 18)} <= covered, covered
    for label, (rules, profile) in INVALID_CLASSES.items():
        assert rules and profile in ("spec", "ggml"), label


def test_every_active_tensor_type_is_drawn():
    active = {t.name for t in GGML_TYPES.values() if not t.removed}
    assert set(TENSOR_TYPES) == active


@pytest.mark.parametrize("name", TENSOR_TYPES)
@pytest.mark.parametrize("order", ["little", "big"])
def test_tensor_data_dequantizes_to_finite_values(name, order):
    for data in drawn(tensor_data(name, 6, order), 4, seed_value=len(name)):
        values = dequantize(data, name, byte_order=order)
        assert np.isfinite(values).all(), name


@SETTINGS
@given(gguf_bytes(versions=(1,)), gguf_bytes(versions=(2, 3), orders=("big",)))
def test_v1_and_big_endian_files_are_valid(v1, big):
    for data in (v1, big):
        assert [i for i in validate_bytes(data) if i.severity == "error"] == []
    assert GGUF.parse(v1).version == 1 and GGUF.parse(big).byte_order == "big"


@SETTINGS
@given(gguf_files(allow_nan=True))
def test_nan_values_survive_the_build(obj):
    data = GGUF.build(obj)
    assert GGUF.build(GGUF.parse(data)) == data


@pytest.mark.parametrize("label", sorted(INVALID_CLASSES))
def test_each_broken_file_is_rejected_with_its_rule(label):
    """Three files per class: validation reports one of the class's rules, the strict loader raises a
    FormatError subclass, and no internal.* rule (a missing check) appears."""
    for case in drawn(invalid_gguf(label), 3, seed_value=label):
        assert case.label == label
        issues = validate_bytes(case.data, case.profile)
        assert not [i for i in issues if i.rule.startswith("internal.")], issues
        errors = {i.rule for i in issues if i.severity == "error"}
        assert errors & set(case.rules), (label, errors, case.data[:64])
        with pytest.raises(FormatError) as info:
            from_bytes(case.data, profile=case.profile)
        assert type(info.value) is not FormatError and not info.value.rule.startswith("internal."), info.value


def test_invalid_gguf_accepts_prefixes_and_rejects_unknown_labels():
    labels = {x.label for x in drawn(invalid_gguf("S11"), 12, seed_value=3)}
    assert labels and all(label.startswith("S11.") for label in labels)
    with pytest.raises(ValueError):
        invalid_gguf("S99")


def test_draw_examples_is_reproducible():
    strategy = gguf_bytes(max_kv=2, max_tensors=1)
    assert len(draw_examples(strategy, 5, seed_value=11)) == 5
    assert draw_examples(strategy, 5, seed_value=11) == draw_examples(strategy, 5, seed_value=11)
    assert draw_examples(strategy, 5, seed_value=11) != draw_examples(strategy, 5, seed_value=12)
