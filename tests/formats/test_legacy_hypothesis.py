"""Hypothesis-drawn legacy files of every variant (container, version, hyper-parameter profile, era's types) and
rwkv.cpp files round-trip byte for byte, and every tensor decodes."""

from __future__ import annotations

import contextlib

import numpy as np
from hypothesis import HealthCheck, given, settings

import gguf_construct as gc
from gguf_construct.api.legacy_file import from_container, rwkv_from_container
from gguf_construct.testing.strategies.valid_legacy import legacy_containers, rwkv_containers

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FAST
@given(legacy_containers())
def test_legacy_files_round_trip(c):
    data = gc.GGML.build(c)
    assert gc.detect(data) == c.format
    parsed = gc.GGML.parse(data, profile=c.profile)
    assert gc.GGML.build(parsed) == data
    assert (parsed.format, parsed.version, parsed.profile) == (c.format, c.version, c.profile)
    assert [bytes(t.data) for t in parsed.tensors] == [bytes(t.data) for t in c.tensors]
    if c.format == "ggjt":
        assert all(t.data_offset % 32 == 0 for t in parsed.tensors)
    for t in from_container(parsed).tensors.records():
        assert t.to_numpy().size == max(1, int(np.prod(t.shape)))


@FAST
@given(rwkv_containers())
def test_rwkv_files_round_trip(c):
    data = gc.RWKV.build(c)
    assert gc.detect(data) == "rwkv"
    parsed = gc.RWKV.parse(data)
    assert gc.RWKV.build(parsed) == data and parsed.version == c.version
    for t in rwkv_from_container(parsed).tensors.records():
        assert t.to_numpy().size == int(np.prod(t.shape))


@FAST
@given(legacy_containers())
def test_truncated_legacy_files_fail_cleanly(c):
    data = gc.GGML.build(c)
    for cut in (1, 3, len(data) // 2):
        if 0 < cut < len(data):
            with contextlib.suppress(gc.FormatError):  # anything else escaping fails the test
                gc.GGML.parse(data[:-cut], profile=c.profile)
