"""The spec-readable GGUF declaration (``formats/gguf/reference.py``) and the fast one (``formats/gguf/schema.py``) are
the same format: on every generated file and every real one, both parse to the same container (after the
documented ``comparable`` normalisation) and build the same bytes, their own parse and each other's."""

from __future__ import annotations

import pytest
from conftest import corpus_files
from hypothesis import HealthCheck, given, settings

from gguf_construct.errors import FormatError
from gguf_construct.formats.gguf.reference import GGUF_REFERENCE, comparable
from gguf_construct.formats.gguf.schema import GGUF
from gguf_construct.testing.strategies import gguf_bytes, gguf_files

# Small files: the reference reads every array element through Switch, so sizes stay those of the strategy's
# defaults (at most 6 keys, arrays of 8, 4 tensors); the real files below bring the big vocabularies.
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def assert_same_format(data: bytes) -> None:
    """Both declarations parse ``data`` alike and build it back exactly, from their own parse and the other's."""
    fast, ref = GGUF.parse(data), GGUF_REFERENCE.parse(data)
    assert comparable(fast) == comparable(ref)
    assert GGUF_REFERENCE.build(ref) == data
    assert GGUF.build(ref) == data
    assert GGUF_REFERENCE.build(fast) == data
    assert GGUF.build(fast) == data


@SETTINGS
@given(gguf_bytes())
def test_generated_files_parse_and_build_alike(data):
    """Every version (v1 with u32 counts), both byte orders, every value type, nested arrays, any alignment."""
    assert_same_format(data)


@SETTINGS
@given(gguf_bytes(nested=False, standard=False, max_kv=3, max_tensors=0))
def test_generated_metadata_only_files_parse_and_build_alike(data):
    """Files without tensors end after the tensor infos: neither declaration reads or writes padding."""
    assert_same_format(data)


@SETTINGS
@given(gguf_files(allow_nan=True, max_tensors=1))
def test_nan_values_parse_alike(container):
    """f32/f64 NaNs (any payload): the two parse to the same bits; the fast schema builds them back exactly
    (the reference's Float32 may quiet a signalling NaN, the documented exception to byte identity)."""
    data = GGUF.build(container)
    fast, ref = GGUF.parse(data), GGUF_REFERENCE.parse(data)
    assert comparable(fast) == comparable(ref)
    assert GGUF.build(fast) == data


@pytest.mark.parametrize("path", corpus_files("gguf/*.gguf") + corpus_files("generated/*.gguf"), ids=lambda p: p.name)
def test_real_files_parse_and_build_alike(path):
    """Real vocabularies (up to 65,024 tokens and 64,784 merges, read in full), and files written by gguf-py
    and ggml's own writer (big-endian, 64-byte alignment, nested arrays, every value type)."""
    assert_same_format(path.read_bytes())


@pytest.mark.parametrize("path", corpus_files("corrupt/*.gguf"), ids=lambda p: p.name)
def test_damaged_files_are_rejected_by_both(path):
    """A damaged vocabulary (a key length of 73 GB, a value type that does not exist) is no GGUF file for
    either declaration: the fast one says why in a FormatError, the reference fails in construct."""
    data = path.read_bytes()
    with pytest.raises(FormatError):
        GGUF.parse(data)
    with pytest.raises(Exception) as caught:
        GGUF_REFERENCE.parse(data)
    assert not isinstance(caught.value, FormatError)


def test_reference_declaration_reads_like_the_spec():
    """The reference is stock construct: a Switch over the value types of schema/value_types.json."""
    from construct import Switch

    from gguf_construct.core.tables import VALUE_TYPES
    from gguf_construct.formats.gguf.reference import reference_layout

    kv = reference_layout("<").subcons[4].subcon.subcon  # metadata_kv: Array of gguf_metadata_kv_t
    value = kv.subcons[2].subcon
    assert isinstance(value, Switch)
    assert set(value.cases) == {vt.name for vt in VALUE_TYPES.values()}
