"""Bounds and refusals for inputs that used to pass silently: short JSON strings by the hundred thousand, a
validation report of 60,000 lines, an importance matrix holding NaN or infinity."""

from __future__ import annotations

import contextlib
import io
import json
import struct

import numpy as np
import pytest
from conftest import corpus_file

from gguf_construct.cli.main import main
from gguf_construct.convert.imatrix import read_imatrix, write_dat, write_gguf
from gguf_construct.core.untrusted import loads
from gguf_construct.errors import InvalidValueError, LimitError
from gguf_construct.testing.strategies.hostile import HOSTILE


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


# -- the strings budget ------------------------------------------------------------------------------------------------
def test_short_strings_by_the_hundred_thousand_are_refused_before_decoding():
    body = "{" + ",".join(f'"{i:x}":""' for i in range(200_000)) + "}"
    with pytest.raises(LimitError) as e:
        loads(body)
    assert e.value.rule == "limit.strings_per_kib"
    escaped = "[" + ",".join(['"\\""'] * 100_000) + "]"  # escaped quotes count once per string
    with pytest.raises(LimitError):
        loads(escaped)


def test_the_strings_budget_leaves_real_documents_alone():
    """A safetensors header of a 7B model (about 50 strings per KiB) and a minified tokenizer.json with short
    merges (about 100 per KiB) decode."""
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for layer in range(32):
        for part in (
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.o_proj",
            "mlp.gate_proj",
            "mlp.up_proj",
            "mlp.down_proj",
        ):
            header[f"model.layers.{layer}.{part}.weight"] = {
                "dtype": "BF16",
                "shape": [4096, 4096],
                "data_offsets": [offset, offset + 2**25],
            }
            offset += 2**25
    assert len(loads(json.dumps(header, separators=(",", ":")))) == 1 + 32 * 7
    vocab = {f"\u0120tok{i}": i for i in range(100_000)}
    merges = [f"\u0120 t{i % 50}" for i in range(100_000)]
    doc = json.dumps({"model": {"vocab": vocab, "merges": merges}}, separators=(",", ":"), ensure_ascii=False)
    assert len(loads(doc)["model"]["merges"]) == 100_000
    pairs = [
        [f"\u0120{chr(97 + i % 26)}", f"{chr(97 + i % 7)}{i % 10}"] for i in range(200_000)
    ]  # tokenizers >= 0.20: merges as pairs, the short ones
    doc = json.dumps({"model": {"vocab": vocab, "merges": pairs}}, separators=(",", ":"), ensure_ascii=False)
    assert len(loads(doc)["model"]["merges"]) == 200_000


def test_the_hostile_catalogue_holds_the_short_strings_case():
    [h] = [h for h in HOSTILE if h.name == "st-short-strings"]
    raw = h.make()
    (n,) = struct.unpack("<Q", raw[:8])
    with pytest.raises(LimitError):
        loads(raw[8 : 8 + n])


# -- validate's report ---------------------------------------------------------------------------------------------------
def test_validate_caps_the_printed_issues_and_json_keeps_all(tmp_path):
    header = "{" + ",".join(f'"t{i}":{{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}' for i in range(300)) + "}"  # 300 wrong sizes
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header.encode() + bytes(4))
    code, out, _ = cli("validate", str(path), "--json")
    issues = json.loads(out)[0]["issues"]
    errors = sum(i["severity"] == "error" for i in issues)
    assert code == 1 and len(issues) > 300 and errors >= 300
    code, out, _ = cli("validate", str(path))
    lines = out.splitlines()
    assert code == 1 and len(lines) == 51 and lines[:50] == [f"{path}: " + line.split(": ", 1)[1] for line in lines[:50]]
    assert (
        lines[-1] == f"{path}: ... and {len(issues) - 50} more issues ({errors - 50} errors, {len(issues) - errors} "
        "warnings; --max-issues 0 shows all, --json lists all)"
    )
    code, out, _ = cli("validate", str(path), "--max-issues", "3")
    assert code == 1 and len(out.splitlines()) == 4
    code, out, _ = cli("validate", str(path), "--max-issues", "0")
    assert code == 1 and len(out.splitlines()) == len(issues)
    code, out, _ = cli("validate", str(corpus_file("generated/gguf-py-le.gguf")))
    assert code == 0 and out.strip().endswith("ok (spec profile)")


# -- importance matrices -------------------------------------------------------------------------------------------------
#: (format, what is broken): a legacy .dat count is an int32 ncall, so only its sums can hold a NaN
CASES = [("gguf", "sums"), ("gguf", "counts"), ("dat", "sums")]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, -1.0])
@pytest.mark.parametrize(("kind", "where"), CASES)
def test_an_imatrix_with_nan_or_infinity_is_refused(bad, kind, where, tmp_path):
    sums = np.linspace(0.1, 3, 256, dtype=np.float32)[None].copy()
    counts = np.array([4], np.float32)
    if where == "sums":
        sums[0, 17] = bad
    else:
        counts[0] = bad
    path = tmp_path / f"m.{kind}"
    (write_gguf if kind == "gguf" else write_dat)(path, {"blk.0.ffn_up.weight": (sums, counts)})
    with pytest.raises(InvalidValueError) as e:
        read_imatrix(path)
    assert e.value.rule == "imatrix.finite" and e.value.path == "blk.0.ffn_up.weight"


def test_quantize_refuses_a_nan_imatrix(tmp_path):
    imatrix = tmp_path / "m.gguf"
    sums = np.ones((1, 32), np.float32)
    sums[0, 3] = np.nan
    write_gguf(imatrix, {"output.weight": (sums, np.array([2], np.float32))})
    out = tmp_path / "q.gguf"
    code, _, err = cli("quantize", str(corpus_file("generated/gguf-py-le.gguf")), str(out), "--type", "q8_0", "--imatrix", str(imatrix))
    assert code != 0 and "imatrix.finite" in err and not out.exists()
