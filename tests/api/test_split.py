"""``split``/``merge`` and shard sets: gguf-split's conventions, gguf-py reading the shards, byte-exact merges."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import corpus_file
from gguf import GGUFReader

import gguf_construct as gc
from gguf_construct.api.shard_set import load_shards, merge, plan, shard_paths, split
from gguf_construct.cli.split import parse_size
from gguf_construct.errors import FormatError

SOURCES = [
    corpus_file("generated/gguf-py-le.gguf"),
    corpus_file("generated/gguf-py-be.gguf"),
    corpus_file("generated/gguf-py-align64.gguf"),
    corpus_file("generated/ggml-writer-kquants.gguf"),
]


def run(*args):
    return subprocess.run([sys.executable, "-m", "gguf_construct.cli.main", *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_merge_of_split_is_byte_identical(src, tmp_path):
    f = gc.load(src)
    paths = split(f, tmp_path / "m", max_tensors=4)
    assert [p.name for p in paths] == [f"m-{i:05d}-of-{len(paths):05d}.gguf" for i in range(1, len(paths) + 1)]
    merge(paths[0], tmp_path / "merged.gguf")
    assert (tmp_path / "merged.gguf").read_bytes() == src.read_bytes()


def test_shards_follow_gguf_split_and_gguf_py_reads_them(tmp_path):
    src = corpus_file("generated/gguf-py-le.gguf")
    f = gc.load(src)
    paths = split(f, tmp_path / "m", max_tensors=4)
    assert len(paths) == 3
    all_names = []
    for i, p in enumerate(paths):
        r = GGUFReader(p)
        assert r.fields["split.no"].contents() == i and r.fields["split.no"].types[0].name == "UINT16"
        assert r.fields["split.count"].contents() == 3 and r.fields["split.count"].types[0].name == "UINT16"
        assert r.fields["split.tensors.count"].contents() == 9 and r.fields["split.tensors.count"].types[0].name == "INT32"
        keys = [k for k in r.fields if not k.startswith("GGUF.")]
        if i == 0:  # all metadata in the first shard, the split keys appended after it
            assert keys == [*f.metadata, "split.no", "split.count", "split.tensors.count"]
        else:
            assert keys == ["split.no", "split.count", "split.tensors.count"]
        all_names += [t.name for t in r.tensors]
        assert [i for i in gc.validate(p, "ggml") if i.severity == "error"] == [], p
    assert all_names == list(f.tensors)


def test_load_opens_a_set_as_one_model(tmp_path):
    src = corpus_file("generated/gguf-py-le.gguf")
    paths = split(gc.load(src), tmp_path / "m", max_tensors=2)
    whole = gc.load(paths[0])
    one = gc.load(src)
    assert list(whole.tensors) == list(one.tensors) and dict(whole.metadata.items()).keys() == dict(one.metadata.items()).keys()
    for name in one.tensors:
        assert bytes(whole.tensors[name].data) == bytes(one.tensors[name].data)
    assert (whole.tensors[name].to_numpy() == one.tensors[name].to_numpy()).all()
    assert whole.meta.general.architecture == "llama" and "split.no" not in whole.metadata
    assert len(gc.api.gguf_file.load_gguf(paths[0]).tensors) == 2  # load_gguf opens the shard alone
    assert shard_paths(paths[1]) == paths


def test_broken_sets_are_refused(tmp_path):
    src = corpus_file("generated/gguf-py-le.gguf")
    paths = split(gc.load(src), tmp_path / "m", max_tensors=4)
    paths[2].unlink()
    with pytest.raises(FormatError) as e:
        load_shards(paths[0])
    assert e.value.rule == "split.missing"
    paths = split(gc.load(src), tmp_path / "n", max_tensors=4)
    shutil.copy(paths[0], paths[1])  # shard 2 is a copy of shard 1: split.no disagrees with its name
    with pytest.raises(FormatError) as e:
        load_shards(paths[0])
    assert e.value.rule == "split.no"


def test_plan_by_size_and_first_shard_without_tensors(tmp_path):
    f = gc.load(corpus_file("generated/gguf-py-le.gguf"))
    sizes = [-(-t.nbytes // 32) * 32 for t in f.tensors.values()]
    groups = plan(f, max_size=4096)
    assert sum(len(g) for g in groups) == 9 and all(g for g in groups)
    for g in groups:
        padded = sum(sizes[list(f.tensors).index(n)] for n in g)
        assert padded <= 4096 or len(g) == 1
    assert plan(f, max_tensors=100, no_tensor_first_split=True)[0] == []
    paths = split(f, tmp_path / "x", max_tensors=100, no_tensor_first_split=True)
    assert len(paths) == 2 and len(GGUFReader(paths[0]).tensors) == 0
    merge(paths[0], tmp_path / "merged.gguf")
    assert (tmp_path / "merged.gguf").read_bytes() == (corpus_file("generated/gguf-py-le.gguf")).read_bytes()


def test_cli_split_merge_and_usage(tmp_path):
    src = tmp_path / "model.gguf"
    shutil.copy(corpus_file("generated/ggml-writer-kquants.gguf"), src)
    r = run("split", src, "--max-size", "4K")
    assert r.returncode == 0
    first = tmp_path / r.stdout.split()[0]
    assert first.name.startswith("model-00001-of-")
    assert run("merge", first, tmp_path / "back.gguf").returncode == 0
    assert (tmp_path / "back.gguf").read_bytes() == src.read_bytes()
    assert run("split", src).returncode == 2  # neither --max-size nor --max-tensors
    assert run("split", src, "--max-size", "lots").returncode == 2
    assert run("merge", src, tmp_path / "x.gguf").returncode == 2  # not a shard name
    assert run("split", tmp_path / "model-00001-of-00002.gguf", "--max-tensors", "1").returncode == 2  # a missing file is trouble


def test_parse_size():
    assert parse_size("500M") == 500_000_000 and parse_size("2G") == 2_000_000_000
    assert parse_size("1.5GiB") == int(1.5 * 2**30) and parse_size("4096") == 4096
