"""Hostile input: every class of crafted input, built the way an attacker builds it.

The catalogue ``gguf_construct.testing.strategies.hostile.HOSTILE`` holds one or more crafted inputs per class and format;
each must be rejected with a FormatError (the named rule where one is given) or handled, by the API and by every
command, within a CPU-time bound and, for the amplification class, a memory bound. The other tests cover what
needs a file tree or a special file: Ollama stores, FIFOs, writers, export, diff, the limits table.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import struct
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from docs_pages import page

import gguf_construct as gc
from gguf_construct.cli.main import main
from gguf_construct.core.limits import TABLE, limit, limits
from gguf_construct.data import example_path
from gguf_construct.errors import FormatError, LimitError
from gguf_construct.testing.strategies.hostile import HOSTILE, _s, gguf_raw, kv_f64, kv_nested, kv_str, kv_u32, safetensors_raw

ROOT = Path(__file__).resolve().parents[2]
SUFFIX = {"gguf": ".gguf", "safetensors": ".safetensors", "ggml": ".bin", "ggjt": ".bin", "rwkv": ".bin"}
BY_NAME = {h.name: h for h in HOSTILE}
#: CPU seconds any command may spend on one crafted input (process time: other processes on the machine do not count)
CPU_BOUND = 2.0


def write(tmp_path: Path, name: str) -> Path:
    h = BY_NAME[name]
    path = tmp_path / f"{h.name}{SUFFIX[h.format]}"
    path.write_bytes(h.make())
    return path


def run_main(*args: object) -> tuple[int, str, float]:
    """The CLI in this process: (exit code, stderr, CPU seconds). Any exception but SystemExit fails the test."""
    err = io.StringIO()
    start = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
    return rc, err.getvalue(), time.process_time() - start


def run_cli(*args: object, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gguf_construct.cli.main", *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


# -- the catalogue through the API ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(BY_NAME))
def test_load_rejects_or_reads_within_bounds(name, tmp_path):
    h = BY_NAME[name]
    path = write(tmp_path, name)
    bound = CPU_BOUND + path.stat().st_size / 1e6  # linear work: 1 more CPU second per MB of input
    for strict in (True, False):
        start = time.process_time()
        try:
            f = gc.load(path, strict=strict)
        except FormatError as e:
            assert not h.rules or e.rule in h.rules or not strict, (e.rule, h.rules)
            continue
        finally:
            assert time.process_time() - start < bound
        assert not (strict and h.rules), f"{name} loaded strictly; expected one of {h.rules}"
        for t in f.tensors.values():  # whatever loads must also give shapes and values, or a FormatError
            assert all(isinstance(d, int) for d in t.shape)
            with contextlib.suppress(FormatError):
                t.to_numpy()


SMALL = [h.name for h in HOSTILE if len(h.make()) < 300_000]
LARGE = [h.name for h in HOSTILE if h.name not in SMALL]


def commands(path: Path, out: Path) -> list[list[object]]:
    return [
        ["info", path],
        ["info", "--json", path],
        ["validate", path],
        ["validate", "--profile", "ggml", path],
        ["set", path, "general.name", "x", "-o", out / "s.gguf"],
        ["delete", path, "general.x", "--missing-ok", "-o", out / "d.gguf"],
        ["rename-tensor", path, "a", "b", "-o", out / "r.gguf"],
        ["diff", path, path],
        ["hash", path],
        ["split", path, "--max-tensors", "1", "--dry-run"],
        ["convert", path, out / "c.safetensors"],
        ["convert", path, out / "c.gguf", "--byte-order", "big"],
        ["migrate", path, out / "m.gguf"],
        ["export", path, out / "e.bin", "--to", "ggjt"],
        ["export", path, out / "e.bin", "--to", "rwkv"],
        ["dequant", path, out / "o.npz"],
    ]


@pytest.mark.parametrize("name", SMALL)
def test_every_command_exits_cleanly_on_small_crafted_inputs(name, tmp_path):
    path = write(tmp_path, name)
    before = path.read_bytes()
    for args in commands(path, tmp_path):
        rc, err, cpu = run_main(*args)
        assert rc in (0, 1, 2), (args[0], rc, err)
        assert "Traceback" not in err
        assert cpu < CPU_BOUND, (args[0], cpu)
    assert path.read_bytes() == before  # inputs are never modified
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind


@pytest.mark.parametrize("name", LARGE)
def test_large_crafted_inputs_are_refused_in_bounded_time(name, tmp_path):
    """Linear work: at most CPU_BOUND plus 1 CPU second per MB (``validate`` of 60k bad entries reports 60k
    issues; before, their messages rescanned the header: 15 s)."""
    path = write(tmp_path, name)
    h = BY_NAME[name]
    bound = CPU_BOUND + path.stat().st_size / 1e6
    for args in (["info", path], ["validate", path], ["hash", path]):
        rc, err, cpu = run_main(*args)
        assert rc in (0, 1), (args[0], rc, err)
        assert cpu < bound, (args[0], cpu)
        if h.rules and args[0] != "hash":
            assert any(r in err or args[0] == "validate" for r in h.rules), err


# -- amplification: Python memory per input byte ----------------------------------------------------------------------
#: Peak Python memory (tracemalloc) per input byte while a crafted input is refused or read. Before the record
#: budget, these inputs took 17-160x their size (docs/security.md, "Figures"). A header of 60k ordinary entries is
#: ordinary JSON: its objects cost what Python's json makes of them, about 20x.
MEMORY_RATIO = {
    "gguf-empty-arrays": 12,
    "gguf-empty-keys": 12,
    "gguf-tensor-infos": 12,
    "st-braces": 12,
    "st-short-strings": 12,
    "ggml-zeros": 12,
    "st-60k-bad-entries": 30,
}


@pytest.mark.parametrize("name", list(MEMORY_RATIO))
def test_memory_per_input_byte_is_bounded(name, tmp_path):
    data = BY_NAME[name].make()
    tracemalloc.start()
    try:
        try:
            f = gc.load(_save(tmp_path, name, data), strict=False)
            for _ in f.tensors:
                pass
        except FormatError:
            pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / len(data) < MEMORY_RATIO[name], f"{peak / len(data):.1f} bytes of Python objects per input byte"


def _save(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / f"{name}{SUFFIX[BY_NAME[name].format]}"
    path.write_bytes(data)
    return path


def test_the_record_budget_leaves_real_files_alone():
    """A file of realistic records (a 60-byte tensor info, a 40-byte key) far beyond objects_free still loads."""
    kvs = [kv_u32(f"general.key_{i:06d}", i) for i in range(5000)]
    tensors = [(f"blk.{i}.ffn_down.weight", [8], 0) for i in range(30_000)]
    data = gguf_raw(kvs, tensors, b"\0" * (32 * len(tensors)))
    f = gc.from_bytes(data, strict=False)
    assert len(f.tensors) == 30_000 and len(f.metadata) == 5000


# -- Python's own limits ----------------------------------------------------------------------------------------------
def test_digits_in_names_and_numbers(tmp_path):
    f = gc.load(write(tmp_path, "gguf-digit-tensor-name"), strict=False)  # strictly: a name over 64 bytes
    [t] = f.tensors.values()
    assert t.name.startswith("blk.9999") and t.to_numpy().shape == (4,)
    for name in ("st-digit-offset", "st-digit-shape", "st-digit-metadata"):
        with pytest.raises(LimitError) as e:
            gc.load(write(tmp_path, name))
        assert e.value.rule == "limit.number_digits"
    issues = gc.validate(write(tmp_path, "rwkv-superscript-block"))
    assert all(i.rule != "internal.ValueError" for i in issues)


def test_deep_json_everywhere(tmp_path):
    for name in ("st-deep-json", "st-deep-metadata"):
        with pytest.raises(LimitError) as e:
            gc.load(write(tmp_path, name))
        assert e.value.rule == "limit.nesting"
    example = tmp_path / "e.gguf"
    example.write_bytes(Path(example_path()).read_bytes())
    for value, extra in (("[" * 100_000 + "]" * 100_000, []), ("[" * 100_000, []), ("[" * 30 + "1" + "]" * 30, ["--type", "arr[arr]"])):
        rc, err, _ = run_main("set", example, "x.deep", value, *extra)
        assert rc == 2, err
    assert example.read_bytes() == Path(example_path()).read_bytes()


def test_json_strings_holding_brackets_do_not_count_as_nesting(tmp_path):
    header = json.dumps({"__metadata__": {"note": "[" * 1000 + '\\"{' * 500}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})
    path = tmp_path / "s.safetensors"
    path.write_bytes(safetensors_raw(header, b"\0" * 4))
    assert gc.load(path).metadata["note"].startswith("[[[")


# -- degenerate shapes ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "mlx-0d-quantized",
        "mlx-zero-rows",
        "mlx-1d-quantized",
        "st-zero-beside-huge",
        "st-65-dims",
        "gguf-65-dims",
        "ggjt-zero-and-huge",
        "rwkv-zero-and-huge",
    ],
)
def test_shapes_numpy_cannot_hold_are_refused_at_load(name, tmp_path):
    path = write(tmp_path, name)
    for strict in (True, False):
        with pytest.raises(FormatError) as e:
            gc.load(path, strict=strict)
        assert e.value.rule in BY_NAME[name].rules


def test_gguf_zero_beside_huge_is_an_error_in_every_command(tmp_path):
    path = write(tmp_path, "gguf-zero-beside-huge")
    with pytest.raises(FormatError):
        gc.load(path)
    f = gc.load(path, strict=False)
    [t] = f.tensors.values()
    assert t.shape == (0, 2**64 - 1, 2**64 - 1)
    with pytest.raises(FormatError):
        t.to_numpy()
    for args in (["info", path], ["convert", path, tmp_path / "o.safetensors"], ["dequant", path, tmp_path / "o.npz"]):
        rc, err, _ = run_main(*args)
        assert rc in (0, 1) and "Traceback" not in err


# -- Ollama ---------------------------------------------------------------------------------------------------------
def _store(tmp_path: Path, config: bytes = b'{"model_format":"safetensors"}') -> tuple[Path, Path, Path]:
    """A models root with one tensor blob and a config blob of ``config``; (root, manifest, tensor blob path)."""
    from gguf_construct.api import ollama_model as ollama
    from gguf_construct.formats.ollama.schema import MEDIA_CONFIG, MEDIA_TENSOR, Manifest

    root = tmp_path / "models"
    tensor = safetensors_raw('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', struct.pack("<2f", 1, 2))
    layer = ollama.write_blob(root, tensor, MEDIA_TENSOR, "w")
    cfg = ollama.write_blob(root, config, MEDIA_CONFIG)
    target = ollama.manifest_path(root, "m:latest")
    target.parent.mkdir(parents=True)
    target.write_bytes(Manifest(cfg, (layer,)).to_bytes())
    return root, target, ollama.blob_path(root, layer.digest)


def test_ollama_config_blob_that_is_a_list(tmp_path):
    _, manifest, _ = _store(tmp_path, b"[1, 2]")
    with pytest.raises(FormatError) as e:
        gc.load(manifest)
    assert e.value.rule == "blob.json"
    for cmd in ("info", "diff"):
        rc, err, _ = run_main(cmd, manifest, *([manifest] if cmd == "diff" else []))
        assert rc == 1 and "blob.json" in err


def test_ollama_manifest_outside_manifests_and_blob_that_is_a_directory(tmp_path):
    _, manifest, blob = _store(tmp_path)
    outside = tmp_path / "loose-manifest"
    outside.write_bytes(manifest.read_bytes())
    with pytest.raises(FormatError) as e:
        gc.load(outside)
    assert e.value.rule == "manifest.location"
    assert run_main("validate", outside)[0] == 1
    blob.unlink()
    blob.mkdir()
    with pytest.raises(FormatError) as e:
        gc.load(manifest)
    assert e.value.rule == "blob.not_regular"


@pytest.mark.parametrize("damage", ["missing", "corrupt", "short"])
def test_validate_manifest_checks_its_blobs(tmp_path, damage):
    _, manifest, blob = _store(tmp_path)
    assert run_main("validate", manifest)[0] == 0
    if damage == "missing":
        blob.unlink()
    elif damage == "corrupt":
        blob.write_bytes(blob.read_bytes()[:-1] + b"\xff")
    else:
        blob.write_bytes(blob.read_bytes()[:-4])
    rc, err, _ = run_main("validate", manifest)
    assert rc == 1


# -- special files ----------------------------------------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_before_it_is_opened(tmp_path):
    fifo = tmp_path / "model.gguf"
    os.mkfifo(fifo)
    for args in (
        ["info", fifo],
        ["validate", fifo],
        ["hash", fifo],
        ["set", fifo, "general.name", "x"],
        ["convert", fifo, tmp_path / "o.safetensors"],
    ):
        out = run_cli(*args, timeout=60)  # before the fix: blocked in open() until the timeout
        assert out.returncode == 2, (args[0], out.stderr)  # not a regular file: trouble, as grep says of a directory
        assert "not a regular file" in out.stderr or "file.not_regular" in out.stdout + out.stderr
    with pytest.raises(FormatError) as e:
        gc.load(fifo)
    assert e.value.rule == "file.not_regular"
    with pytest.raises(FormatError):
        gc.detect(fifo)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_at_a_blob_path_is_refused(tmp_path):
    _, manifest, blob = _store(tmp_path)
    blob.unlink()
    os.mkfifo(blob)
    out = run_cli("validate", manifest, timeout=60)
    assert out.returncode == 1 and "blob.not_regular" in out.stdout


# -- writers ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["Bad Key!", "a..b", "UPPER.case", "k" * 70_000, "", "é.x", ".lead", "trail."])
def test_set_refuses_keys_the_spec_forbids(tmp_path, key):
    path = tmp_path / "e.gguf"
    path.write_bytes(Path(example_path()).read_bytes())
    rc, err, _ = run_main("set", path, key, "1")
    assert rc == 2, err
    assert path.read_bytes() == Path(example_path()).read_bytes()


def test_a_twenty_deep_array_can_be_repaired(tmp_path):
    path = write(tmp_path, "gguf-deep-array")
    with pytest.raises(LimitError) as e:
        gc.load(path, strict=False)
    assert e.value.rule == "limit.nesting"
    assert run_main("info", path)[0] == 1
    assert gc.load(path, strict=False, limits={"nesting": 32}).metadata["general.alignment"] == 32
    # set --force opens it, but refuses to write a file that still breaks the default limits
    rc, err, _ = run_main("set", path, "general.name", "x", "--force")
    assert rc == 2 and "nest" in err
    # delete opens it leniently and writes the repaired file
    rc, err, _ = run_main("delete", path, "x.deep")
    assert rc == 0, err
    assert "x.deep" not in gc.load(path).metadata
    # and set --force can overwrite the deep key
    path2 = write(tmp_path, "gguf-deep-array")
    rc, err, _ = run_main("set", path2, "x.deep", "1", "--force", "--type", "u32")
    assert rc == 0, err
    assert gc.load(path2).metadata["x.deep"] == 1
    # --limit raises the limit for the process (before or after the command)
    path3 = write(tmp_path, "gguf-deep-array")
    assert run_main("info", path3, "--limit", "nesting=32")[0] == 0
    assert run_main("--limit", "nesting=32", "info", path3)[0] == 0


def test_a_failed_check_before_the_rename_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.gguf"
    target.write_bytes(b"the previous, good file")
    f = gc.load(example_path())

    def reject(tmp: str) -> None:
        assert Path(tmp).exists() and Path(tmp).parent == tmp_path
        raise gc.InvalidValueError("test.reject", "no")

    with pytest.raises(FormatError):
        f.save(target, verify=reject)
    assert target.read_bytes() == b"the previous, good file"
    assert [p.name for p in tmp_path.iterdir()] == ["out.gguf"]


def test_convert_checks_before_it_renames(tmp_path, monkeypatch):
    from gguf_construct.convert import files

    target = tmp_path / "out.gguf"
    target.write_bytes(b"good")

    def broken(dst, tensors, report):
        raise gc.InvalidValueError("convert.verify", "values differ")

    monkeypatch.setattr(files, "_check_gguf", broken)
    with pytest.raises(FormatError):
        files.convert(example_path(), target, byte_order="big")
    assert target.read_bytes() == b"good"
    assert [p.name for p in tmp_path.iterdir()] == ["out.gguf"]


def test_stale_temporaries_of_ours_are_cleaned_on_the_next_write(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".out.gguf.gcx{dead}.abcd1234.tmp"
    stale.write_bytes(b"\0" * 1000)
    foreign = tmp_path / ".notes.tmp"
    foreign.write_bytes(b"someone else's")
    live = tmp_path / f".other.gguf.gcx{os.getpid()}.zz.tmp"
    live.write_bytes(b"ours, still being written")
    gc.load(example_path()).save(tmp_path / "x.gguf")
    assert not stale.exists() and foreign.exists() and live.exists()


def test_merge_refuses_impossible_shard_names_and_its_own_shards(tmp_path):
    bad = tmp_path / "x-00001-of-00000.gguf"
    bad.write_bytes(Path(example_path()).read_bytes())
    rc, err, _ = run_main("merge", bad, tmp_path / "o.gguf")
    assert rc == 2, err
    f = gc.load(example_path())
    from gguf_construct.api.shard_set import split

    shards = split(f, tmp_path / "m", max_tensors=1)
    first = shards[0].read_bytes()
    rc, err, _ = run_main("merge", shards[0], shards[0])
    assert rc == 2 and "output.input" in err
    assert shards[0].read_bytes() == first
    assert run_main("merge", shards[0], tmp_path / "merged.gguf")[0] == 0


# -- export ----------------------------------------------------------------------------------------------------------
def _llama(tmp_path: Path, **keys: int) -> Path:
    f = gc.new()
    f.metadata.set("general.architecture", "llama", type="str")
    for k, v in keys.items():
        f.metadata.set(f"llama.{k}", v, type="u64" if v > 2**32 - 1 else "u32")
    f.tensors.add("token_embd.weight", np.zeros((4, 8), np.float32))
    path = tmp_path / "l.gguf"
    f.save(path)
    return path


@pytest.mark.parametrize(
    "keys,rule",
    [
        ({}, "export.hparams"),
        ({"embedding_length": 8, "attention.head_count": 0, "block_count": 1, "feed_forward_length": 8}, "export.hparams"),
        ({"embedding_length": 3_000_000_000, "attention.head_count": 1, "block_count": 1, "feed_forward_length": 8}, "export.hparams"),
    ],
)
def test_export_checks_what_ggjt_needs_up_front(tmp_path, keys, rule):
    path = _llama(tmp_path, **keys)
    rc, err, _ = run_main("export", path, tmp_path / "o.bin", "--to", "ggjt")
    assert rc == 2 and rule in err, err  # a refused export: trouble, not an invalid file
    assert not (tmp_path / "o.bin").exists()


def test_export_rwkv_needs_a_2d_embedding(tmp_path):
    f = gc.new()
    f.metadata.set("general.architecture", "rwkv", type="str")
    f.metadata.set("rwkv.architecture_version", 4, type="u32")
    f.metadata.set("general.file_type", 0, type="u32")
    for k in ("embedding_length", "block_count"):
        f.metadata.set(f"rwkv.{k}", 8, type="u32")
    f.tensors.add("token_embd.weight", np.zeros(8, np.float32))
    path = tmp_path / "r.gguf"
    f.save(path)
    rc, err, _ = run_main("export", path, tmp_path / "o.bin", "--to", "rwkv")
    assert rc == 2 and "export." in err, err


# -- diff, info, small ones --------------------------------------------------------------------------------------------
def test_diff_of_a_file_with_itself_is_identical_with_nested_arrays(tmp_path):
    nested = (
        _s("x.n")
        + struct.pack("<IIQ", 9, 9, 2)
        + struct.pack("<IQ", 0, 2)
        + b"\1\2"
        + struct.pack("<IQ", 6, 1)
        + struct.pack("<f", float("nan"))
    )
    path = tmp_path / "n.gguf"
    path.write_bytes(gguf_raw([nested, kv_nested("x.d", 5), kv_str("general.name", "n")]))
    rc, _, _ = run_main("diff", path, path)
    assert rc == 0
    out = run_cli("diff", "--json", path, path)
    assert json.loads(out.stdout)["same"] is True


def test_info_prints_f64_as_f64(tmp_path):
    path = tmp_path / "f.gguf"
    path.write_bytes(gguf_raw([kv_f64("general.big", 1e300), kv_f64("general.third", 1 / 3)]))
    lines = {line.split()[0]: line.split()[-1] for line in run_cli("info", path).stdout.splitlines() if line.startswith("  general.")}
    assert lines == {"general.big": "1e+300", "general.third": "0.3333333333333333"}


def test_complex_tensors_are_not_silently_real(tmp_path):
    path = write(tmp_path, "st-complex")
    [t] = gc.load(path).tensors.values()
    with pytest.raises(gc.UnsupportedTypeError):
        t.to_numpy()
    assert t.to_numpy(dtype=None).tolist() == [1 + 2j, 3 + 4j]
    assert run_main("convert", path, tmp_path / "o.gguf")[0] == 1


def test_usage_mistakes_exit_2(tmp_path):
    example = tmp_path / "e.gguf"
    example.write_bytes(Path(example_path()).read_bytes())
    for args in (
        ["set", example, "x.y", "1e400", "--type", "f32"],
        ["set", example, "x.y", "9" * 5000, "--type", "u64"],
        ["set", example, "general.alignment", "0"],
        ["convert", example, example, "--byte-order", "big"],
        ["--limit", "nesting", "info", example],
        ["--limit", "bogus=1", "info", example],
        ["info", example, "--limit", "nesting=-1"],
    ):
        rc, err, _ = run_main(*args)
        assert rc == 2, (args, err)


# -- the limits table ------------------------------------------------------------------------------------------------
def test_limits_table_is_documented_and_adjustable(tmp_path):
    documented = page("reference/limits.md")
    for name, lim in TABLE.items():
        assert f"| `{name}` | {lim.value:,} |" in documented, f"the limits page does not document limit {name} = {lim.value}"
        assert limit(name) == lim.value
    path = tmp_path / "s.gguf"
    path.write_bytes(gguf_raw([kv_str("general.name", "x" * 100)]))
    with pytest.raises(LimitError) as e:
        gc.load(path, limits={"string_length": 50})
    assert e.value.rule == "limit.string_length" and "string_length" in e.value.message
    assert gc.load(path).metadata["general.name"] == "x" * 100
    with limits({"array_length": 0}):
        assert limit("array_length") == 0
    assert limit("array_length") == TABLE["array_length"].value
    with pytest.raises(ValueError):
        gc.load(path, limits={"no_such_limit": 1})
    from gguf_construct.testing.strategies.hostile import ggjt_raw

    for data, suffix in (
        (ggjt_raw(tensors=[(b"a", [1], 0, b"\0" * 4)] * 3), ".bin"),
        (gguf_raw([], [("a", [1], 0)] * 3, b"\0" * 96), ".gguf"),
        (
            safetensors_raw(
                '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', b"\0" * 8
            ),
            ".safetensors",
        ),
    ):
        many = tmp_path / f"many{suffix}"
        many.write_bytes(data)
        with pytest.raises(LimitError) as e:
            gc.load(many, limits={"tensor_count": 1})
        assert e.value.rule == "limit.tensor_count"
        gc.load(many, strict=False)
    rc, err, _ = run_main("--limit", "string_length=50", "validate", path)
    assert rc == 1 and "limit.string_length" in err + _captured_stdout("--limit", "string_length=50", "validate", path)


def _captured_stdout(*args: object) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):
        main([str(a) for a in args])
    return out.getvalue()


@pytest.fixture(autouse=True)
def _default_limits():
    """``--limit`` changes the process's defaults: put them back after each test."""
    import gguf_construct.core.limits as lm

    saved = dict(lm._DEFAULTS)
    yield
    lm._DEFAULTS = saved
    lm._ACTIVE.set(saved)


# -- the breakers as hypothesis strategies ------------------------------------------------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402

from gguf_construct.core.untrusted import decimal, loads  # noqa: E402
from gguf_construct.testing.strategies import (  # noqa: E402
    SPECIAL_FILES,
    deep_json,
    hostile_bytes,
    huge_digit_strings,
    make_special_file,
    zero_and_huge_shapes,
)  # noqa: E402


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(hostile_bytes(max_len=1 << 16))
def test_drawn_hostile_inputs_are_format_errors_or_read(data):
    import tempfile

    from gguf_construct.api.registry import detect

    try:
        fmt = detect(data)
    except FormatError:
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"x{SUFFIX.get(fmt, '.bin')}"
        path.write_bytes(data)
        start = time.process_time()
        try:
            f = gc.load(path, strict=False)
            for t in f.tensors.values():
                with contextlib.suppress(FormatError):
                    t.to_numpy()
        except FormatError:
            pass
        assert time.process_time() - start < CPU_BOUND


@settings(max_examples=40, deadline=None)
@given(huge_digit_strings())
def test_huge_digit_strings_never_reach_int(text):
    assert decimal(text) is None
    if text.lstrip("-").isascii():
        with pytest.raises(LimitError) as e:
            loads('{"n": ' + text + "}")
        assert e.value.rule == "limit.number_digits"


@settings(max_examples=40, deadline=None)
@given(deep_json())
def test_deep_json_is_a_limit_error(text):
    with pytest.raises(FormatError) as e:
        loads(text)
    assert e.value.rule in ("limit.nesting", "json.syntax")


@settings(max_examples=40, deadline=None)
@given(zero_and_huge_shapes())
def test_zero_and_huge_shapes_are_refused_by_safetensors(shape):
    data = safetensors_raw(json.dumps({"a": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}}))
    with pytest.raises(FormatError):
        gc.load(_tmp_file(data, ".safetensors"))


def _tmp_file(data: bytes, suffix: str) -> Path:
    import tempfile

    fd, name = tempfile.mkstemp(suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return Path(name)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
@pytest.mark.parametrize("kind", SPECIAL_FILES)
def test_special_files_are_refused_by_load_and_validate(tmp_path, kind):
    path = tmp_path / "model.gguf"
    make_special_file(path, kind)
    with pytest.raises(FormatError) as e:
        gc.load(path)
    assert e.value.rule == "file.not_regular"
    assert [i.rule for i in gc.validate(path)] == ["file.not_regular"]
