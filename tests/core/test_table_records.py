"""load_table's typed records, and the values code takes from schema/ instead of typing them again."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from gguf_construct.api import metadata, tensors
from gguf_construct.core import tables
from gguf_construct.core.tables import load_table
from gguf_construct.formats import fields
from gguf_construct.formats.gguf import schema as gguf
from gguf_construct.formats.legacy import legacy_fields
from gguf_construct.testing.fuzzing import adapters

PACKAGE = Path(tables.__file__).resolve().parents[1]


def _schema_files() -> list[str]:
    return sorted(p.stem for p in tables.schema_dir().glob("*.json"))


def test_every_schema_file_has_a_frozen_typed_record():
    assert _schema_files() == sorted(tables.TABLE_NAMES)
    for name in _schema_files():
        record = load_table(name)
        assert dataclasses.is_dataclass(record) and record.__dataclass_params__.frozen, name
        assert load_table(name + ".json") is record  # cached: read once
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.source = "changed"  # type: ignore[misc]


def test_records_hold_what_the_json_says():
    raw = json.loads((tables.schema_dir() / "limits.json").read_text())
    assert [(r.name, r.value) for r in load_table("limits").limits] == [(r["name"], r["value"]) for r in raw["limits"]]
    legacy = load_table("legacy")
    assert legacy.rwkv.types[101][0] == "f32" and legacy.rwkv.ids(101)["f32"] == 0
    assert legacy.magics["ggjt"].versions == (1, 2, 3)
    assert load_table("mlx_quant_types").quant_types[0].name == "int4"
    assert load_table("safetensors_dtypes").dtypes[0].order == 0
    assert load_table("quantize").output_type.default == "q6_K"
    assert load_table("migrate").examples["whisper"].arch == "whisper"
    assert load_table("template_rules").max_template_bytes == 262144


def test_nested_parts_cannot_be_changed_by_a_caller():
    profiles = load_table("legacy").profiles
    with pytest.raises(TypeError):
        profiles["llama"]["max_dims"] = 99  # type: ignore[index]
    assert isinstance(load_table("rwkv_llama").tensors["common"], tuple)


def test_unknown_table_is_a_key_error():
    with pytest.raises(KeyError):
        load_table("nothing")


def test_integer_ranges_come_from_value_types():
    for vt in load_table("value_types").types:
        if vt.numpy and np.dtype(vt.numpy).kind in "iu":
            info = np.iinfo(np.dtype(vt.numpy))
            assert tables.INT_RANGES[vt.name] == (int(info.min), int(info.max))
    assert metadata._INT_RANGES is tables.INT_RANGES
    from gguf_construct.testing.strategies import valid_gguf as strategies

    assert strategies.INT_RANGES is tables.INT_RANGES


def test_struct_codes_and_dtype_codes_come_from_the_tables():
    for vt in load_table("value_types").types:
        if vt.struct:
            assert np.dtype("<" + vt.numpy).itemsize == vt.size == __import__("struct").calcsize("<" + vt.struct)
    value = fields.MetadataValue("value_type", "<", True)
    assert {i: s.format for i, s in value.scalars.items()} == {vt.id: "<" + vt.struct for vt in tables.VALUE_TYPES.values() if vt.struct}
    assert {t.numpy: t.name for t in tables.GGML_TYPES.values() if t.numpy} == tensors._DTYPE_TYPES
    for code, name in tensors._DTYPE_TYPES.items():
        assert np.dtype(code).itemsize == tables.GGML_TYPES.lookup(name).type_size
    assert {k: v for k, v in adapters._NUMPY.items() if k != "bool"} == {
        vt.name: vt.numpy for vt in tables.VALUE_TYPES.values() if vt.numpy and vt.name != "bool"
    }


def test_defaults_and_dimension_limits_come_from_the_schema():
    assert gguf.DEFAULT_ALIGNMENT == tables.DEFAULT_ALIGNMENT == tables.standard_key("general.alignment").default == 32
    from gguf_construct.validation import gguf_checks as validation
    from gguf_construct.validation import legacy_checks as validation_legacy

    assert validation.GGML_MAX_DIMS == load_table("ggml_types").max_dims == 4
    assert load_table("legacy").llama_loader_types == validation_legacy.LLAMA_LOADER_TYPES
    assert load_table("legacy").max_n_dims == legacy_fields.MAX_DIMS
    assert gguf.GGUF.parse(gguf.GGUF.build(_empty())).alignment == tables.DEFAULT_ALIGNMENT


def _empty():
    from construct import Container

    return Container(version=3, byte_order="little", metadata_kv=[], tensor_infos=[], tensor_data=None)


def _is_data(node: ast.AST | None) -> bool:
    """A value built of constants only (``255``, ``"u1"``, ``(0, 2**8 - 1)``), not a dispatch to code."""
    return node is not None and all(
        isinstance(n, (ast.Constant, ast.Tuple, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.Load)) for n in ast.walk(node)
    )


def _literal_tables(tree: ast.AST) -> list[int]:
    """Lines of dict literals keyed by three or more value type names or numpy dtype codes, with constant values:
    a table of ``schema/`` typed again (dispatch tables from a name to code are fine)."""
    names = {vt.name for vt in tables.VALUE_TYPES.values()} | {"f2", "f4", "f8", "i1", "i2", "i4", "u1", "u2", "u4"}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if len(keys & names) >= 3 and all(_is_data(v) for v in node.values):
                out.append(node.lineno)
    return out


def test_no_module_types_a_table_again():
    found = {}
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(PACKAGE).as_posix()
        if rel != "tables.py" and "tables import _load" in text or "tables._load" in text:
            found[rel] = "imports tables._load"
        lines = _literal_tables(ast.parse(text))
        if lines:
            found[rel] = f"dict literal of type codes at lines {lines}"
        # the raw writers of hostile inputs and rule breakers write bytes without the package's help: 32 is data there
        raw_writers = ("testing/strategies/hostile.py", "testing/strategies/rule_breakers.py")
        for i, line in enumerate(text.splitlines() if rel not in raw_writers else (), 1):
            if "alignment" in line.lower() and any(tok in line for tok in ("= 32", ", 32)", "alignment=32")):
                found[f"{rel}:{i}"] = "alignment 32 as a literal"
    assert found == {}
