"""Where the tests find real files: two tiers behind one set of helpers.

- ``tests/data/`` ships with the project (see tests/data/README.md and MANIFEST.json): a compact copy of the
  corpus's layout, enough for every test module to run on a fresh clone.
- The full corpus, when ``GGUF_CONSTRUCT_CORPUS=DIR`` names one or ``../shared/corpus`` sits beside the project,
  adds the corpus-wide tier: ``corpus_files(pattern)`` then also yields every file there.

Paths are always relative to the corpus root (``gguf/v3-llama-vocab.gguf``). ``corpus_file(rel)`` prefers the
shipped copy (the same bytes: MANIFEST.json's sha256 is checked), so a test naming one file behaves the same in
both tiers; ``corpus_files(pattern)`` is the union of both tiers, deduplicated by relative path, and fails when
it matches nothing, so an empty parametrisation can never pass silently.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
VECTORS = DATA / "vectors" / "ggml"  # all of ../shared/vectors/ggml is shipped


def _full_corpus() -> Path | None:
    named = os.environ.get("GGUF_CONSTRUCT_CORPUS")
    if named:
        path = Path(named).resolve()
        assert (path / "manifest.json").is_file(), f"GGUF_CONSTRUCT_CORPUS={named} has no manifest.json: not a corpus"
        return path
    beside = ROOT.parent / "shared" / "corpus"
    return beside if (beside / "manifest.json").is_file() else None


def _isolate_llama_cpp() -> None:
    """Load llama-cpp-python's libraries bound to their own ggml (RTLD_DEEPBIND, RTLD_LOCAL) before anything
    imports llama_cpp: ggml-python (the quantization oracle) puts its older ggml's symbols in the process's
    global scope, and llama.cpp's own calls into ggml would otherwise resolve there first, running llama.cpp's
    graphs on the other ggml (its op numbers, its op names). Local, so ggml-python keeps its own ggml too; later
    loads of the same files by llama_cpp get these handles."""
    import ctypes
    import importlib.util

    from llama_memory import lib_dir  # llama-cpp-python's libraries, or GGUF_CONSTRUCT_LLAMA_CPP_BUILD's (tests/ is on sys.path)

    if importlib.util.find_spec("llama_cpp") is None or not hasattr(os, "RTLD_DEEPBIND"):
        return
    lib = lib_dir()
    # libllama and its ggml, and the ggml files the tests' ctypes helpers open by these names (llama_memory.py,
    # wkv7_kernel.py): each bound to itself first, whatever the process loads later
    for name in ("libllama.so", "libggml-base.so", "libggml-cpu.so", "libggml.so"):
        if (lib / name).is_file():
            ctypes.CDLL(str(lib / name), mode=os.RTLD_LOCAL | os.RTLD_DEEPBIND)


_isolate_llama_cpp()


def _follow_the_oracles_build() -> None:
    """Plan compute graphs as the oracle's llama.cpp builds them (GGUF_CONSTRUCT_LLAMA_CPP_VERSION, with
    GGUF_CONSTRUCT_LLAMA_CPP_BUILD naming a newer build; docs/howto/plan.md), for the whole session."""
    version = os.environ.get("GGUF_CONSTRUCT_LLAMA_CPP_VERSION")
    if version:
        from gguf_construct.planning.compute.builds import follow

        follow(version)


_follow_the_oracles_build()
FULL_CORPUS: Path | None = _full_corpus()
TIERS: tuple[Path, ...] = (DATA,) if FULL_CORPUS is None else (DATA, FULL_CORPUS)
#: kept for older imports; read files through corpus_file / corpus_files, which work without it
SHARED = FULL_CORPUS.parent if FULL_CORPUS is not None else ROOT.parent / "shared"


def _where() -> str:
    return "tests/data" + (f" and {FULL_CORPUS}" if FULL_CORPUS else " (no full corpus: set GGUF_CONSTRUCT_CORPUS or put ../shared beside)")


def corpus_file(rel_path: str) -> Path:
    """One file by its path relative to the corpus root: the shipped copy when there is one, else the full corpus's."""
    for tier in TIERS:
        path = tier / rel_path
        if path.is_file():
            return path
    raise AssertionError(f"{rel_path} is in neither {_where()}")


def corpus_files(pattern: str) -> list[Path]:
    """Every file matching a glob relative to the corpus root, over both tiers (one path per relative name,
    the full corpus's when it has it). Fails when nothing matches."""
    found: dict[str, Path] = {}
    for tier in TIERS:  # later tiers (the full corpus) win
        for path in tier.glob(pattern):
            if path.is_file() and path.name not in ("MANIFEST.json", "README.md"):
                found[path.relative_to(tier).as_posix()] = path
    assert found, f"no files match {pattern} in {_where()}"
    return [found[k] for k in sorted(found)]


def corpus_tier_files(pattern: str) -> list:
    """Files only the full corpus has, too big for tests/data (rwkv-v6-v7's models): every match there. Without
    the full corpus: one placeholder parameter marked ``corpus_tier``, which collection deselects and the summary
    reports, so a corpus-tier test is never run (or passed) without its files, and never hidden."""
    if FULL_CORPUS is None:
        return [pytest.param(None, id="needs-full-corpus", marks=pytest.mark.corpus_tier)]
    return corpus_files(pattern)


_NOT_RUN: list[str] = []
_NO_HF_GGUF: list[str] = []


@cache
def hf_gguf_missing() -> str | None:
    """Why the tests marked ``hf_gguf`` cannot run here (None when node resolves ``@huggingface/gguf``)."""
    import shutil
    import subprocess

    if shutil.which("node") is None:
        return "node is not installed"
    found = subprocess.run(["node", "-e", "require.resolve('@huggingface/gguf')"], capture_output=True, timeout=60)
    return None if found.returncode == 0 else "node does not find @huggingface/gguf"


def pytest_collection_modifyitems(config, items):
    """Deselect, and report at the end, the tests that need what is not here: ``corpus_tier`` without the full
    corpus (their files are not in tests/data), ``hf_gguf`` without node and ``@huggingface/gguf``, ``rpc_tier``
    without the ggml-rpc backend."""
    _deselect_rpc_tier(config, items)
    absent = [item for item in items if item.get_closest_marker("corpus_tier")] if FULL_CORPUS is None else []
    node = [item for item in items if item.get_closest_marker("hf_gguf")]
    no_node = node if node and hf_gguf_missing() else []
    if absent or no_node:
        config.hook.pytest_deselected(items=absent + no_node)
        gone = {id(item) for item in absent + no_node}
        items[:] = [item for item in items if id(item) not in gone]
        _NOT_RUN.extend(item.nodeid for item in absent)
        _NO_HF_GGUF.extend(item.nodeid for item in no_node)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "rpc_tier: needs llama.cpp's ggml-rpc backend (GGUF_CONSTRUCT_GGML_RPC; deselected, and reported, without it)"
    )


def _deselect_rpc_tier(config, items) -> None:
    """Without ``GGUF_CONSTRUCT_GGML_RPC``, deselect the tests marked ``rpc_tier`` (RPC devices need the ggml-rpc
    backend built from llama-cpp-python's llama.cpp: tests/planning/rpc_devices.py)."""
    if os.environ.get("GGUF_CONSTRUCT_GGML_RPC"):
        return
    absent = [item for item in items if item.get_closest_marker("rpc_tier")]
    if absent:
        config.hook.pytest_deselected(items=absent)
        items[:] = [item for item in items if not item.get_closest_marker("rpc_tier")]
        _NOT_RUN_RPC.extend(item.nodeid for item in absent)


_NOT_RUN_RPC: list[str] = []


def pytest_terminal_summary(terminalreporter):
    if _NOT_RUN_RPC:
        terminalreporter.write_line(
            f"{len(_NOT_RUN_RPC)} RPC-tier tests deselected: they need llama.cpp's ggml-rpc backend "
            "(python -m tests.planning.rpc_devices build DIR, then GGUF_CONSTRUCT_GGML_RPC=DIR/build/bin/libggml-rpc.so): "
            f"{', '.join(sorted({n.split('::')[0] for n in _NOT_RUN_RPC}))}"
        )
    if _NOT_RUN:
        terminalreporter.write_line(
            f"{len(_NOT_RUN)} corpus-tier tests deselected: their files are only in the full corpus "
            f"(put ../shared beside the project or set GGUF_CONSTRUCT_CORPUS): {', '.join(sorted({n.split('::')[0] for n in _NOT_RUN}))}"
        )
    if _NO_HF_GGUF:
        terminalreporter.write_line(
            f"{len(_NO_HF_GGUF)} @huggingface/gguf tests deselected: {hf_gguf_missing()} (npm install @huggingface/gguf@0.4.6, "
            f"then NODE_PATH=.../node_modules python -m pytest -m hf_gguf; .ci/run does it where npm is): {', '.join(sorted(_NO_HF_GGUF))}"
        )


def rel(path: Path) -> str:
    """A path's name relative to the corpus root, whichever tier it is in (also the test ids)."""
    for tier in TIERS:
        if path.is_relative_to(tier):
            return path.relative_to(tier).as_posix()
    raise AssertionError(f"{path} is in neither {_where()}")


def is_shipped(path: Path) -> bool:
    return path.is_relative_to(DATA)


@cache
def shipped_manifest() -> list[dict]:
    """tests/data/MANIFEST.json: origin, commit, license, sha256 and size of every shipped file."""
    with open(DATA / "MANIFEST.json", encoding="utf-8") as f:
        return json.load(f)


@cache
def _manifest() -> dict[str, dict]:
    entries = {e["file"]: e for e in shipped_manifest()}
    if FULL_CORPUS is not None:
        with open(FULL_CORPUS / "manifest.json", encoding="utf-8") as f:
            entries.update({e["file"]: e for e in json.load(f)})
        real = FULL_CORPUS / "legacy-real" / "manifest.json"
        if real.is_file():
            with open(real, encoding="utf-8") as f:
                for e in json.load(f):
                    key = f"legacy-real/{e['file']}"
                    entries[key] = {**entries.get(key, {}), "legacy_real": e, "sha256": e["sha256"], "size": e["size"]}
    return entries


def manifest() -> dict[str, dict]:
    """The corpus manifest by relative path: the shipped files' records (tests/data/MANIFEST.json carries the
    corpus manifest's fields for each, e.g. ``ggml_c_reader``) and, with the full corpus, corpus/manifest.json."""
    return dict(_manifest())


def drawn(strategy, n: int, *, seed_value) -> list:
    """``draw_examples`` that fails unless it drew all ``n`` values (hypothesis stops early on a small space)."""
    from gguf_construct.testing.strategies import draw_examples

    values = draw_examples(strategy, n, seed_value=seed_value)
    assert len(values) == n, f"drew {len(values)} of {n} examples from {strategy!r}"
    return values


class _TieredCorpus:
    """``CORPUS / "gguf/x.gguf"`` and ``CORPUS.glob(pattern)`` for tests written against the old Path constant:
    the same resolution as corpus_file / corpus_files."""

    def __init__(self, prefix: str = "") -> None:
        self._prefix = prefix

    def __truediv__(self, part: str | os.PathLike) -> Path | _TieredCorpus:
        rel_path = f"{self._prefix}{os.fspath(part)}"
        if any((tier / rel_path).is_file() for tier in TIERS):
            return corpus_file(rel_path)
        if any((tier / rel_path).is_dir() for tier in TIERS):
            return _TieredCorpus(rel_path.rstrip("/") + "/")
        return corpus_file(rel_path)  # fails, naming the file

    def glob(self, pattern: str) -> Iterator[Path]:
        return iter(corpus_files(self._prefix + pattern))

    def __repr__(self) -> str:
        return f"<corpus {self._prefix or '/'} in {_where()}>"


CORPUS = _TieredCorpus()

VALID_GGUF = [p for p in corpus_files("gguf/*.gguf") + corpus_files("generated/*.gguf") if "inconsistent" not in p.name]
INVALID_GGUF = corpus_files("corrupt/*.gguf") + corpus_files("generated/*inconsistent*.gguf")


@pytest.fixture(scope="session")
def corpus_manifest() -> dict[str, dict]:
    return manifest()
