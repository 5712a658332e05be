"""Every code block of README.md and the documentation pages runs as written: the Python blocks of a page one after
the other in one namespace (as a reader types them into one session), each shell block in bash, all in a folder
holding the tiny real files the blocks name (``model.gguf`` is the shipped example). A block that cannot run here
(an install, the network, an hour-long campaign, a synopsis of a command's forms) says so in the Markdown, on the
line before it: ``<!-- not run: REASON -->``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, ROOT
from docs_pages import pages

from gguf_construct.data import example_path

BLOCK = re.compile(r"^(?P<marker><!-- not run: (?P<reason>.*?) -->\n)?```(?P<lang>python|sh)\n(?P<code>.*?)^```", re.M | re.S)
FILES = [ROOT / "README.md", *pages()]


def blocks(path: Path) -> list[tuple[int, str, str, str | None]]:
    """(line, language, code, reason it is not run or None) of every python and sh block of ``path``."""
    text = path.read_text(encoding="utf-8")
    return [(text[: m.start("lang")].count("\n") + 1, m["lang"], m["code"], m["reason"]) for m in BLOCK.finditer(text)]


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with the files the blocks name, made from the shipped example and tests/data."""
    from safetensors.numpy import save_file

    for name in ("model.gguf", "model-f16.gguf", "deep.gguf"):
        shutil.copyfile(example_path(), tmp_path / name)
    shutil.copyfile(DATA / "legacy-real" / "ggjt-v3" / "t256-ggjt-v3-Q4_0.bin", tmp_path / "old-ggjt-q4_0.bin")
    shutil.copyfile(DATA / "legacy" / "ggmf-v1-llama-vocab.bin", tmp_path / "model.bin")
    save_file({"w": np.arange(8, dtype=np.float16).reshape(2, 4)}, str(tmp_path / "model.safetensors"), {"format": "np"})
    save_file({"blk.0.w": np.ones((4, 32), dtype=np.float32)}, str(tmp_path / "blob.safetensors"))
    for folder in ("gguf_construct", "tests", "benchmarks"):  # commands written for the project's root
        (tmp_path / folder).symlink_to(ROOT / folder, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def python_pages() -> list[Path]:
    return [p for p in FILES if any(lang == "python" and reason is None for _, lang, _, reason in blocks(p))]


def sh_blocks() -> list[tuple[Path, int, str]]:
    return [(p, line, code) for p in FILES for line, lang, code, reason in blocks(p) if lang == "sh" and reason is None]


def label(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", python_pages(), ids=label)
def test_the_python_blocks_of_a_page_run(path: Path, workspace: Path) -> None:
    namespace: dict[str, object] = {"__name__": "doc_snippet"}
    for line, lang, code, reason in blocks(path):
        if lang != "python" or reason is not None:
            continue
        try:
            exec(compile(code, f"{label(path)}:{line}", "exec"), namespace)
        except Exception as e:  # the block and its line, not this test's
            pytest.fail(f"{label(path)}:{line}: {type(e).__name__}: {e}")
    from hypothesis import HealthCheck, settings

    for name, value in list(namespace.items()):  # the tests a block defines (hypothesis examples) pass too
        if name.startswith("test_") and callable(value):
            if hasattr(value, "hypothesis"):  # a few examples, however loaded the machine
                value = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)(value)
            value()


@pytest.mark.parametrize("path, line, code", sh_blocks(), ids=[f"{label(p)}:{n}" for p, n, _ in sh_blocks()])
def test_a_shell_block_runs(path: Path, line: int, code: str, workspace: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=workspace, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{label(path)}:{line}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def test_every_block_that_is_not_run_says_why() -> None:
    skipped = [(label(p), line, reason) for p in FILES for line, _, _, reason in blocks(p) if reason is not None]
    assert all(reason.strip() for _, _, reason in skipped), skipped
    ran = sum(len(blocks(p)) for p in FILES) - len(skipped)
    assert ran >= 27 and python_pages() and sh_blocks(), ran  # a block marked without need lowers this count
