"""The built wheel carries the schema tables and works from any directory."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from conftest import ROOT


def test_wheel_contains_schema_and_example(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)], check=True, timeout=300)
    wheel = next(tmp_path.glob("gguf_construct-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for table in ("ggml_types.json", "value_types.json", "file_types.json", "keys.json"):
        assert f"gguf_construct/schema/{table}" in names
    assert "gguf_construct/data/example.gguf" in names
    # the installed package finds its tables without the source tree
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)], check=True, timeout=300)
    code = f"import gguf_construct, gguf_construct.tables as t; assert t.schema_dir().is_relative_to(r'{target}'); print(len(t.GGML_TYPES))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(target)}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "43"
