"""``gguf-construct fuzz`` as a user runs it: the built wheel installed in a fresh virtualenv, started from an
empty folder, with and without hypothesis, and without a corpus (the seed files ship in the wheel)."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

pytest.importorskip("gguf")
pytest.importorskip("hatchling")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv holding the wheel; its dependencies (numpy, construct, gguf, hypothesis) come from this
    interpreter's site-packages through a .pth line, so that the test needs no network and no index. That line adds
    the folder only: the editable install of the source tree there (a .pth of its own) is not processed."""
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp)], cwd=ROOT, check=True, timeout=300, capture_output=True
    )
    wheel = next(tmp.glob("gguf_construct-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    seeds = [n for n in names if n.startswith("gguf_construct/testing/fuzzing/seeds/")]
    assert any(n.endswith(".gguf") for n in seeds) and any(n.endswith(".safetensors") for n in seeds), seeds
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    own = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    deps = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), *site.getsitepackages()}
    (own / "zz_dependencies.pth").write_text("\n".join(sorted(deps)) + "\n")
    blocked = tmp / "no-hypothesis" / "hypothesis"  # shadows hypothesis when put first on the path
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('hypothesis is not installed here')\n")
    return env_dir, own, blocked.parent


def fuzz(env_dir: Path, cwd: Path, *args: str, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    if path is not None:
        env["PYTHONPATH"] = str(path)
    return subprocess.run(
        [str(env_dir / "bin" / "gguf-construct"), "fuzz", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )


def test_the_wheel_fuzzes_gguf_py_for_ten_seconds_from_any_folder(installed, tmp_path):
    env_dir, own, _ = installed
    where = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", "import gguf_construct; print(gguf_construct.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
    )
    assert where.stdout.strip().startswith(str(own)), where  # the wheel's copy, not the source tree
    done = fuzz(env_dir, tmp_path, "--against", "gguf-py", "--seconds", "10", "--out", "found")
    assert done.returncode in (0, 1), done.stderr[-3000:]
    first = done.stdout.splitlines()[0]
    files, secs = int(first.split()[0]), float(first.split()[3])
    assert files > 10 and secs < 40, first  # it starts at once and stops near --seconds (the last minimizations finish)
    assert (tmp_path / "found" / "findings.tsv").exists() == (done.returncode == 1)
    assert [p.name for p in tmp_path.iterdir()] == ["found"]  # no .hypothesis/ or other litter in the working folder


def test_without_hypothesis_the_seed_files_are_mutated(installed, tmp_path):
    env_dir, _, blocked = installed
    done = fuzz(env_dir, tmp_path, "--against", "gguf-py", "--count", "30", path=blocked)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert done.stdout.startswith("30 files in"), done.stdout
    assert "pip install 'gguf-construct[fuzz]'" in done.stderr  # one line saying what generated files need


def test_a_missing_reader_is_one_line_naming_the_package(installed, tmp_path):
    env_dir, _, _ = installed
    done = fuzz(env_dir, tmp_path, "--against", "llama.cpp", "--count", "3", path=tmp_path / "nothing")
    if done.returncode == 2:  # llama-cpp-python is not importable from the fresh venv's dependency folders
        assert done.stderr.count("\n") == 1 and "llama-cpp-python" in done.stderr, done.stderr
    else:
        assert done.returncode in (0, 1), done.stderr[-3000:]
