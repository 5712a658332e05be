"""The structure-aware mutator for coverage-guided engines: the shapes atheris and AFL++ call, reproducible,
bounded, and laying out what it edits with the offsets readers check."""

from __future__ import annotations

import importlib.util
import random

from conftest import DATA

from gguf_construct.formats.gguf.schema import GGUF
from gguf_construct.testing.fuzzing import structured
from gguf_construct.testing.strategies import padded_offsets

SEED = (DATA / "generated/gguf-py-le.gguf").read_bytes()
ROOT = DATA.parent.parent


def test_mutate_is_reproducible_bounded_and_changes_the_file():
    outs = [structured.mutate(SEED, 4096, s) for s in range(40)]
    assert outs == [structured.mutate(SEED, 4096, s) for s in range(40)]
    assert all(len(o) <= 4096 for o in outs)
    assert sum(o != SEED for o in outs) >= 35
    assert structured.mutate(b"", 100, 1) is not None


def test_edits_keep_offsets_the_running_sum_of_padded_sizes():
    rng, consistent = random.Random(3), 0
    structured.GENERATE_P, saved = 0.0, structured.GENERATE_P
    structured.BOUNDARY_P, saved_boundary = 0.0, structured.BOUNDARY_P  # the edits alone (boundaries: test_boundaries.py)
    structured.OVERRUN_P, saved_overrun = 0.0, structured.OVERRUN_P  # (overruns: test_overruns.py)
    try:
        for _ in range(40):
            out, what = structured.mutate_structured(SEED, rng, 1 << 20)
            if what.startswith(("flip", "byte", "u32", "u64", "truncate", "delete", "repeat")):
                continue  # a byte-level fallback
            c = GGUF.parse(out)
            tensors = [(t.name, list(t.dimensions), str(t.type)) for t in c.tensor_infos]
            assert [int(t.offset) for t in c.tensor_infos] == padded_offsets(tensors, int(c.alignment))[0], what
            consistent += 1
    finally:
        structured.GENERATE_P, structured.BOUNDARY_P, structured.OVERRUN_P = saved, saved_boundary, saved_overrun
    assert consistent >= 25


def test_crossover_mixes_metadata_and_tensors():
    other = (DATA / "generated/ggml-writer-kquants.gguf").read_bytes()
    a, b = GGUF.parse(SEED), GGUF.parse(other)
    seen = set()
    for s in range(10):
        c = GGUF.parse(structured.crossover(SEED, other, 1 << 20, s))
        seen.add((len(c.metadata_kv), len(c.tensor_infos)))
    assert seen <= {(len(a.metadata_kv), len(b.tensor_infos)), (len(b.metadata_kv), len(a.tensor_infos))} and len(seen) == 2


def test_afl_module_has_the_custom_mutator_api():
    spec = importlib.util.spec_from_file_location("afl_gguf_mutator", ROOT / "fuzz/native/afl_gguf_mutator.py")
    afl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(afl)
    afl.init(7)
    out = afl.fuzz(bytearray(SEED), bytearray(SEED), 2048)
    assert isinstance(out, bytearray) and 0 < len(out) <= 2048
    assert isinstance(afl.describe(40), bytes) and len(afl.describe(40)) <= 40
    afl.deinit()
