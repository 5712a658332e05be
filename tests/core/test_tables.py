"""schema/ tables against the oracles: ggml's type traits (ggml-python) and gguf-py's constants."""

from __future__ import annotations

import ggml
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType, LlamaFileType

from gguf_construct.core.tables import FILE_TYPES, GGML_TYPES, VALUE_TYPES, standard_key, standard_keys


def test_ggml_types_match_ggml_type_traits():
    for i in range(ggml.GGML_TYPE_COUNT):
        t = GGML_TYPES[i]
        assert (t.block_size, t.type_size) == (ggml.ggml_blck_size(i), ggml.ggml_type_size(i)), t
        if not t.removed:
            assert t.name == ggml.ggml_type_name(i).decode()
    assert {t.id for t in GGML_TYPES.values()} == set(range(43))  # ggml-python 0.0.45 stops at 41; q2_0 (42) is newer


def test_ggml_types_match_gguf_py():
    for q, (block, size) in GGML_QUANT_SIZES.items():
        t = GGML_TYPES[q.value]
        if q == GGMLQuantizationType.Q8_1:
            # gguf-py still says 40 (two f32); ggml's block_q8_1 is {ggml_half d, s; int8 qs[32]} = 36 bytes
            assert (block, size, t.type_size) == (32, 40, 36)
            continue
        assert (t.name.lower(), t.block_size, t.type_size) == (q.name.lower(), block, size)


def test_value_types_match_gguf_py():
    assert {vt.id: vt.spec_name for vt in VALUE_TYPES.values()} == {v.value: v.name for v in GGUFValueType}


def test_file_types_include_gguf_py_ones():
    for ft in LlamaFileType:
        assert FILE_TYPES[ft.value] == ft.name, ft


def test_standard_keys_resolve():
    assert standard_key("llama.context_length", "llama").types == ("u32", "u64")
    assert standard_key("general.base_model.3.name").type == "str"
    assert standard_key("nothing.here") is None
    assert len({k.key for k in standard_keys()}) == len(standard_keys())
