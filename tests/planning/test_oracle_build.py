"""``GGUF_CONSTRUCT_LLAMA_CPP_BUILD``: the planning tests' oracle loads the llama.cpp build a directory names, so
that following a newer llama.cpp is a rerun. Checked with a copy of the installed build in another directory: the
process maps that copy's libraries, not the installed ones, and measures the same bytes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from tests.llama_memory import BUILD_VARIABLE, lib_dir  # noqa: E402
from tests.tiny_models import llama  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
from tests.llama_memory import measure
m = measure(sys.argv[1], n_ctx=512)
maps = open("/proc/self/maps").read()
print(json.dumps({"compute": m.total("compute"), "model": m.total("model"),
                  "libs": sorted({line.split()[-1] for line in maps.splitlines() if "libllama" in line or "libggml-base" in line})}))
"""


def _probe(model: Path, env: dict[str, str]) -> dict:
    r = subprocess.run([sys.executable, "-c", PROBE, str(model)], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.splitlines()[-1])


def test_the_oracle_loads_the_named_build(tmp_path):
    installed = lib_dir()
    build = tmp_path / "build" / "bin"
    shutil.copytree(installed, build, symlinks=True)
    model = tmp_path / "m.gguf"
    llama().save(model)
    env = {k: v for k, v in os.environ.items() if k not in (BUILD_VARIABLE, "LLAMA_CPP_LIB_PATH")}
    env["PYTHONPATH"] = str(ROOT)
    default = _probe(model, env)
    named = _probe(model, {**env, BUILD_VARIABLE: str(build)})
    assert default["libs"] and all(str(installed.resolve()) in p for p in default["libs"]), default["libs"]
    assert named["libs"] and all(str(build.resolve()) in p for p in named["libs"]), named["libs"]
    assert (named["compute"], named["model"]) == (default["compute"], default["model"]) and named["compute"] > 0


def test_a_directory_without_llama_cpp_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv(BUILD_VARIABLE, str(tmp_path))
    monkeypatch.delenv("LLAMA_CPP_LIB_PATH", raising=False)
    with pytest.raises(RuntimeError, match="no libllama.so"):
        lib_dir()
