"""``quantize``'s report: what was written, per type, with the tensors that fell back and why, in text and JSON,
agreeing with the file written."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import gguf_construct as gc
from gguf_construct.cli.main import main
from gguf_construct.core.tables import GGML_TYPES
from gguf_construct.data import example_path


def quantize(tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, *flags: str) -> tuple[str, Path]:
    out = tmp_path / f"{target}.gguf"
    assert main(["quantize", str(example_path()), str(out), "--type", target, *flags]) == 0
    return capsys.readouterr().out, out


def written_types(path: Path) -> Counter[str]:
    """The types of the tensors ``path`` holds that the example holds in another type ("kept" otherwise)."""
    source = gc.load(example_path())
    got = gc.load(path)
    return Counter("kept" if got.tensors[n].type == source.tensors[n].type else got.tensors[n].type.name for n in got.tensors)


def test_json_groups_are_the_file_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, out = quantize(tmp_path, capsys, "q4_K", "--json")
    report = json.loads(text)
    groups = Counter()
    for g in report["written"]:
        groups[g["type"]] += g["tensors"]
    assert groups == written_types(out)
    assert sum(groups.values()) == len(report["tensors"]) == len(gc.load(out).tensors)
    block = GGML_TYPES.lookup("q4_K").block_size
    for t in report["tensors"]:
        shape = gc.load(out).tensors[t["name"]].shape
        if t["type"] not in ("kept", "q4_K"):  # a fallback names the row length that forced it
            assert shape[0] % block and t["reason"] == f"rows of {shape[0]} are not a multiple of {block}"
        assert (t["rmse"] is None) == (t["type"] == "kept")


def test_text_says_what_was_written_and_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, out = quantize(tmp_path, capsys, "q4_K")
    types = written_types(out)
    line = text.strip()
    if types["q4_K"] == 0:
        assert "no tensor q4_K" in line
    for name, n in types.items():
        if name == "kept":
            assert f"{n} tensor{'s' if n > 1 else ''} kept: " in line
        elif name != "q4_K":
            assert f"fell back to {name}: rows of " in line
    assert sum(int(part.split()[0]) for part in line.split(": ", 1)[1].split("; ") if part.split()[0].isdigit()) == sum(types.values())


def test_a_type_every_row_takes_is_written_as_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, out = quantize(tmp_path, capsys, "q8_0")
    types = written_types(out)
    assert types["q8_0"] > 0
    assert f"{types['q8_0']} tensors q8_0" in text and "fell back" not in text
