"""The fault-injection benchmark's variants: each removes one check, found exactly once in the source it patches;
and the fuzz command's --compare needs the reproducers of --output."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_faults", ROOT / "benchmarks/bench_faults.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_faults"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules["bench_faults"]


def test_at_least_twelve_distinct_checks(bench):
    names = [v.name for v in bench.VARIANTS]
    assert len(names) == len(set(names)) >= 12
    assert len({v.needle for v in bench.VARIANTS}) == len(names)
    assert {"size-sum", "padded-size", "ne-product", "offset-running-sum", "alignment-pow2", "type-range"} <= set(names)


def test_a_patch_removes_its_check_once_or_refuses(bench):
    variant = next(v for v in bench.VARIANTS if v.name == "size-sum")
    source = "if (SIZE_MAX - ctx->size < padded_size) {\n    return nullptr;\n}\n"
    assert bench.patched(source, variant) == "if (false) {\n    return nullptr;\n}\n"
    with pytest.raises(ValueError, match="0 times"):
        bench.patched("no such check", variant)
    with pytest.raises(ValueError, match="2 times"):
        bench.patched(source * 2, variant)


def test_compare_needs_the_output_folder():
    r = subprocess.run(
        [sys.executable, "-m", "gguf_construct.cli.main", "fuzz", "--against", f"{sys.executable} x.py {{}}", "--compare", "true {}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 2 and "--compare" in r.stderr and "--output" in r.stderr


def fake_reader(tmp_path: Path, name: str, stderr: str, status: int) -> Path:
    exe = tmp_path / name
    exe.write_text(f"#!/bin/sh\ncat >&2 <<'EOF'\n{stderr}\nEOF\nexit {status}\n")
    exe.chmod(0o755)
    return exe


OOM = """==1==ERROR: AddressSanitizer: out of memory: allocator is trying to allocate 0x10000009 bytes
    #0 0x55 in operator new(unsigned long)
    #1 0x56 in gguf_reader::read(std::string&) const gguf.cpp:356:13
SUMMARY: AddressSanitizer: out-of-memory in operator new(unsigned long)"""


def test_an_allocation_past_the_budget_tells_a_variant_apart_only_when_the_unmodified_build_refuses_cheaply(bench, tmp_path):
    assert f"max_allocation_size_mb={bench.BUDGET_MB}" in bench.SAN_ENV["ASAN_OPTIONS"]
    variant, unmodified = tmp_path / "variant", tmp_path / "unmodified"
    variant.mkdir()
    unmodified.mkdir()
    fake_reader(variant, "gguf_load", OOM, 1)
    fake_reader(unmodified, "gguf_load", "gguf_init_from_reader: failed to read key-value pairs", 0)
    found = bench.tells_apart(variant, unmodified, b"GGUF", tmp_path)
    assert found is not None and found.startswith("memory/ggml/AddressSanitizer:out-of-memory@")
    fake_reader(unmodified, "gguf_load", OOM, 1)  # the unmodified build asks as much: nothing told apart
    assert bench.tells_apart(variant, unmodified, b"GGUF", tmp_path) is None
