"""Variants of the hostile-input classes: the same classes reached by other inputs, formats and commands, each
generated small. Each asserts the FormatError rule or the exit code, no traceback, and a CPU-time bound:

- digits: a ``blk.<n>`` tensor name with thousands of digits (ASCII or another script's) in a file that has a
  ``block_count``: the block-index rule must not parse it with ``int()`` (ValueError beyond 4,300 digits);
- numbers on the command line: ``--max-size`` with 60 digits (float inf, OverflowError), ``--context-length -1``
  (a writer's ValueError), ``--seconds 1e99999`` (a fuzz run without end), ``-j 0``: usage errors (exit 2);
- special files: a symlink loop as input or output (``Path.resolve()`` raises RuntimeError) in convert, export,
  migrate and merge;
- writers: no rewrite and no in-place edit (``set general.alignment 7``, ...) may add a rule violation its source
  did not have (``--force`` still may);
- usage: ``dequant --tensor NOPE`` is a usage error (exit 2).
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
import time
from pathlib import Path

import pytest

import gguf_construct as gc
from gguf_construct.cli.main import main
from gguf_construct.data import example_path
from gguf_construct.errors import FormatError
from gguf_construct.testing.strategies.hostile import gguf_raw, kv_str, kv_u32, safetensors_raw

#: CPU seconds one command may spend on one of these small inputs.
CPU_BOUND = 2.0


def run(*argv: str | os.PathLike[str]) -> tuple[int, str, str]:
    """The CLI in-process: (exit code, stdout, stderr); a traceback would propagate and fail the test."""
    out, err = io.StringIO(), io.StringIO()
    start = time.process_time()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([os.fspath(a) for a in argv])
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
    assert time.process_time() - start < CPU_BOUND, argv
    return rc, out.getvalue(), err.getvalue()


def llama(tmp_path: Path, *names: str, block_count: int = 2) -> Path:
    kvs = [kv_str("general.architecture", "llama"), kv_u32("llama.block_count", block_count)]
    p = tmp_path / "f.gguf"
    p.write_bytes(gguf_raw(kvs, [(n, [4], 0) for n in names], b"\0" * 32 * len(names)))
    return p


# -- digits ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("digits", ["9" * 5000, "\u0663" * 5000, "\u0e51" * 5000, "\u00b2", "1_0", "\uff11" * 45])
def test_block_index_of_any_length_and_script_is_never_int_converted(tmp_path, digits):
    p = llama(tmp_path, f"blk.{digits}.attn_q.weight")
    with contextlib.suppress(FormatError):  # the name's length or its index
        gc.load(p)
    rules = {i.rule for i in gc.validate(p)}  # every rule runs, the block index's included
    ascii_index = digits.isascii() and digits.isdigit()
    assert ("tensor.block_index" in rules) == ascii_index  # other scripts' digits: not a block name at all
    rc, _, err = run("validate", p)
    assert rc in (0, 1) and "Traceback" not in err


def test_block_index_rule_still_fires_for_short_indices(tmp_path):
    with pytest.raises(FormatError) as e:
        gc.load(llama(tmp_path, "blk.0.attn_q.weight", "blk.2.attn_q.weight"))
    assert e.value.rule == "tensor.block_index"


# -- numbers on the command line ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["split", "{f}", "{d}/sp", "--max-size", "9" * 60 + "G"],
        ["split", "{f}", "{d}/sp", "--max-size", "1e99999"],
        ["split", "{f}", "{d}/sp", "--max-size", "\u0663G"],
        ["split", "{f}", "{d}/sp", "--max-tensors", "\u0663"],
        ["split", "{f}", "{d}/sp", "--max-tensors", "9" * 5000],
        ["migrate", "{f}", "{d}/m.gguf", "--context-length", "-1"],
        ["migrate", "{f}", "{d}/m.gguf", "--eps", "nan"],
        ["migrate", "{f}", "{d}/m.gguf", "--eps", "1e99999"],
        ["migrate", "{f}", "{d}/m.gguf", "--gqa", "0"],
        ["info", "-j", "0", "{f}"],
        ["validate", "-j", "-1", "{f}"],
        ["fuzz", "--against", "gguf-py", "--seconds", "1e99999"],
        ["fuzz", "--against", "gguf-py", "--count", "0"],
        ["fuzz", "--against", "gguf-py", "--count", "9" * 5000],
        ["dequant", "{f}", "--tensor", "nope", "{d}/o.npz"],
    ],
)
def test_numbers_and_names_on_the_command_line_are_usage_errors(tmp_path, argv):
    f = example_path()
    rc, _, err = run(*[a.format(f=f, d=tmp_path) for a in argv])
    assert rc == 2, err
    assert "Traceback" not in err and err.strip()


# -- special files ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["convert", "{loop}", "{d}/c.gguf", "--version", "2"],
        ["convert", "{loop}", "{d}/c.safetensors"],
        ["export", "{loop}", "{d}/e.bin", "--to", "ggjt"],
        ["migrate", "{loop}", "{d}/m.gguf"],
        ["merge", "{d}/x-00001-of-00002.gguf", "{loop}"],
        ["info", "{loop}"],
        ["validate", "{loop}"],
        ["hash", "{loop}"],
    ],
)
def test_a_symlink_loop_is_a_one_line_error(tmp_path, argv):
    loop = tmp_path / "loop.gguf"
    loop.symlink_to(loop)
    rc, out, err = run(*[a.format(loop=loop, d=tmp_path) for a in argv])
    assert rc in (1, 2) and "Traceback" not in err and "RuntimeError" not in err
    assert len((err if err.strip() else out).strip().splitlines()) == 1


def test_the_api_gives_an_os_error_for_a_symlink_loop(tmp_path):
    loop = tmp_path / "loop.gguf"
    loop.symlink_to(loop)
    with pytest.raises(OSError):
        gc.load(loop)
    assert [i.rule for i in gc.validate(loop)] == ["file.read"]


# -- writers add no rule violation ----------------------------------------------------------------------------------
def _aligned(tmp_path: Path) -> Path:
    p = tmp_path / "a.gguf"
    p.write_bytes(gguf_raw([kv_u32("general.alignment", 32), kv_str("general.architecture", "llama")], [("t", [8], 0)], b"\0" * 32))
    return p


@pytest.mark.parametrize("value", ["7", "0", "12"])
def test_set_refuses_a_value_that_breaks_a_rule_and_writes_nothing(tmp_path, value):
    src = _aligned(tmp_path)
    before = src.read_bytes()
    rc, _, err = run("set", src, "general.alignment", value, "-o", tmp_path / "o.gguf")
    assert rc == 2 and "alignment" in err
    assert not (tmp_path / "o.gguf").exists() and not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    rc, _, err = run("set", src, "general.alignment", value, "--in-place")
    assert rc == 2 and src.read_bytes() == before


def test_force_still_writes_and_a_broken_file_can_still_be_repaired(tmp_path):
    src = _aligned(tmp_path)
    bad = tmp_path / "bad.gguf"
    assert run("set", src, "general.alignment", "7", "--force", "-o", bad)[0] == 0
    assert gc.validate(bad) and gc.validate(bad)[0].rule == "alignment.value"
    # an edit that keeps the old violation is allowed (repairs go one step at a time) ...
    assert run("set", bad, "general.name", "x", "-o", tmp_path / "keep.gguf")[0] == 0
    # ... and the repair itself
    assert run("set", bad, "general.alignment", "32", "-o", tmp_path / "fixed.gguf")[0] == 0
    assert not [i for i in gc.validate(tmp_path / "fixed.gguf") if i.severity == "error"]


def test_the_api_save_checks_the_same_rule(tmp_path):
    f = gc.load(_aligned(tmp_path))
    f.metadata.set("general.alignment", 3, type="u32")
    with pytest.raises(FormatError) as e:
        f.save(tmp_path / "o.gguf")
    assert e.value.rule == "alignment.value" and "nothing was written" in e.value.message
    assert not (tmp_path / "o.gguf").exists() and not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    f.save(tmp_path / "forced.gguf", keep_valid=False)
    assert struct.unpack_from("<I", (tmp_path / "forced.gguf").read_bytes(), 4)[0] == 3


def test_an_ollama_blob_that_is_a_symlink_loop_is_a_layout_error(tmp_path):
    from gguf_construct.api.ollama_model import write_model

    tensor = safetensors_raw('{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4)
    manifest = write_model(tmp_path, "m", [("w", tensor)], {"model_format": "safetensors"})
    blob = next(p for p in (tmp_path / "blobs").iterdir() if p.stat().st_size == len(tensor))
    blob.unlink()
    blob.symlink_to(blob)
    with pytest.raises(FormatError) as e:
        gc.load(manifest)
    assert e.value.rule == "blob.unreadable"
    rc, out, err = run("validate", manifest)
    assert rc == 1 and "Traceback" not in err


@pytest.mark.parametrize("hint", ["bogus", "nvfp4", "9" * 5000])
def test_convert_quant_hint_must_name_an_affine_type(tmp_path, hint):
    """``--quant-hint`` takes the affine types of schema/mlx_quant_types.json; anything else is a usage error (exit 2)
    before any file is read, not a silently ignored option."""
    rc, _, err = run("convert", tmp_path / "in.safetensors", tmp_path / "out.gguf", "--quant-hint", hint)
    assert rc == 2 and "affine" in err, err
    assert not (tmp_path / "out.gguf").exists()
