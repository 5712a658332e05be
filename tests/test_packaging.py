"""The built wheel carries the schema tables and works from any directory; the sdist carries the tests and their data."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from conftest import ROOT, shipped_manifest


def test_wheel_contains_schema_and_example(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        timeout=300,
    )
    wheel = next(tmp_path.glob("gguf_construct-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for table in ("ggml_types.json", "value_types.json", "file_types.json", "keys.json"):
        assert f"gguf_construct/schema/{table}" in names
    assert "gguf_construct/data/gguf-construct-example-21K-v1.0-F16.gguf" in names
    assert "gguf_construct/py.typed" in names  # PEP 561: type checkers read the package's annotations
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "the wheel carries the MIT licence text"
    # the installed package finds its tables without the source tree
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)], check=True, timeout=300
    )
    code = (
        "import gguf_construct, gguf_construct.core.tables as t; assert "
        f"t.schema_dir().is_relative_to(r'{target}'); print(len(t.GGML_TYPES))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(target)}, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "43"


def test_sdist_carries_the_tests_and_their_data(tmp_path):
    """`pip download` + the sdist's own tests work: every file tests/data/MANIFEST.json lists is in the sdist,
    and the unpacked sdist (nothing beside it) finds and checks them."""
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(tmp_path)],
        cwd=ROOT,
        check=True,
        timeout=300,
        capture_output=True,
    )
    sdist = next(tmp_path.glob("gguf_construct-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        tar.extractall(tmp_path / "unpacked", filter="data")
    listed = {f"tests/data/{e['file']}" for e in shipped_manifest()}
    assert listed | {"tests/data/MANIFEST.json", "tests/data/README.md", "tests/conftest.py"} <= names
    # the documentation sources, so the sdist's own tests of the docs run and the site builds from it
    assert {"LICENSE", "CHANGELOG.md", "mkdocs.yml", "docs/index.md", "docs/hooks/generated.py"} <= names
    root = next((tmp_path / "unpacked").iterdir())
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/formats/test_corpus.py", "-k", "sha256 or damaged_slice"],
        cwd=root,
        env={**os.environ, "GGUF_CONSTRUCT_CORPUS": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert re.search(r"^(\d+) passed", out.stdout.splitlines()[-1]) and "skipped" not in out.stdout


def test_mypy_passes_without_the_optional_modules():
    """Every third-party module the package imports besides its two dependencies is an extra or a test oracle a
    development venv may lack: pyproject's mypy overrides make each one's absence an Any, not an error."""
    import ast
    import json

    root = Path(ROOT)
    sections = re.findall(
        r"\[\[tool\.mypy\.overrides\]\]\nmodule = (\[.*?\])\nignore_missing_imports = true", (root / "pyproject.toml").read_text()
    )
    tolerated = {m for listed in sections for m in json.loads(listed)}
    imported: set[str] = set()
    for path in (root / "gguf_construct").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"gguf_construct", "numpy", "construct", "__future__"}
    assert third_party, "the walk found no optional import"
    assert sorted(third_party - tolerated) == []


def test_a_plain_install_compiles_nothing():
    """``pip install .`` takes two pure-Python or binary-wheel dependencies; the oracles pip compiles from source
    (llama-cpp-python, ggml-python) are in extras only."""
    text = (Path(ROOT) / "pyproject.toml").read_text()
    dependencies = re.search(r"^dependencies = (\[.*\])$", text, re.M)
    assert dependencies is not None
    names = {re.split(r"[<>=\[ ;]", d)[0] for d in __import__("json").loads(dependencies.group(1))}
    assert names == {"construct", "numpy"}
