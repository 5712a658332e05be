"""``plan --svg``: the picture parsed back with xml.etree: one stacked bar per device whose segments carry the
plan's bytes per kind and whose heights are those bytes on the picture's one scale, each device's size drawn as a
line at its height; names that are markup stay text; the file is written whole or not at all."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gguf_construct.planning import plan
from gguf_construct.planning.devices import Device, DeviceRequest
from gguf_construct.planning.svg import KINDS, plan_svg
from gguf_construct.planning.svg import bars as bars_of
from tests.tiny_models import llama, rwkv7

ROOT = Path(__file__).resolve().parents[2]
NS = "{http://www.w3.org/2000/svg}"


def _bars(svg: str) -> tuple[ET.Element, dict[str, dict[str, tuple[int, float, float]]], dict[str, tuple[int, float]]]:
    root = ET.fromstring(svg)
    bars: dict[str, dict[str, tuple[int, float, float]]] = {}
    for rect in root.iter(f"{NS}rect"):
        if "data-device" in rect.attrib:
            bars.setdefault(rect.attrib["data-device"], {})[rect.attrib["data-kind"]] = (
                int(rect.attrib["data-bytes"]),
                float(rect.attrib["y"]),
                float(rect.attrib["height"]),
            )
    sizes = {
        line.attrib["data-device"]: (int(line.attrib["data-size"]), float(line.attrib["y1"]))
        for line in root.iter(f"{NS}line")
        if "data-size" in line.attrib
    }
    return root, bars, sizes


def _check(p, svg: str) -> dict[str, dict[str, tuple[int, float, float]]]:
    root, bars, sizes = _bars(svg)
    scale, height = int(root.attrib["data-scale-bytes"]), float(root.attrib["data-chart-height"])
    labels = {key: label for key, label, _ in KINDS}
    rows = p.devices or [
        {
            "name": "CPU",
            "size": None,
            "model_bytes": p.model_bytes,
            "kv_bytes": p.kv_bytes,
            "state_bytes": p.recurrent_bytes,
            "compute_bytes": p.compute_bytes,
        }
    ]
    assert set(bars) == {row["name"] for row in rows if any(row.get(k, 0) for k in labels)}
    for row in rows:
        segments = bars.get(row["name"], {})
        assert {labels[k]: row.get(k, 0) for k in labels if row.get(k, 0)} == {kind: n for kind, (n, _, _) in segments.items()}
        stacked = sorted(segments.values(), key=lambda s: -s[1])  # bottom first
        if stacked:
            assert stacked[0][1] + stacked[0][2] == pytest.approx(float(root.attrib["data-baseline"]), abs=1e-5)
        for n, _y, h in stacked:
            assert h == pytest.approx(n / scale * height, rel=1e-6, abs=1e-5)
        for (_, y_low, _), (_, y_up, h_up) in zip(stacked, stacked[1:], strict=False):  # touching, no gap
            assert y_up + h_up == pytest.approx(y_low, abs=1e-5)
        if row["size"] is not None:
            size, y = sizes[row["name"]]
            assert size == row["size"]
            base = float(root.attrib["data-baseline"])
            assert base - y == pytest.approx(size / scale * height, rel=1e-6)
    assert scale == max([sum(row.get(k, 0) for k in labels) for row in rows] + [row["size"] or 0 for row in rows])
    return bars


def test_devices_bars_are_the_plan(tmp_path):
    path = tmp_path / "m.gguf"
    llama(n_layer=5).save(path)
    devices = DeviceRequest((Device("CUDA0", 12 * 2**20), Device("RPC0[127.0.0.1:50052]", 3 * 2**20)), n_gpu_layers=4)
    p = plan(path, n_ctx=1024, devices=devices)
    bars = _check(p, plan_svg(p, "m.gguf"))
    assert set(bars["CUDA0"]) == {"weights", "KV cache", "compute"}


def test_cpu_plan_and_recurrent_state(tmp_path):
    path = tmp_path / "r.gguf"
    rwkv7(n_layer=2, n_embd=256).save(path)
    p = plan(path, n_ctx=256, n_seq_max=3)
    bars = _check(p, plan_svg(p))
    assert bars["CPU"]["recurrent state"][0] == p.recurrent_bytes > 0


def test_names_that_are_markup_stay_text(tmp_path):
    path = tmp_path / "m.gguf"
    llama().save(path)
    name = '<svg onload="x()">&amp;\'"'
    p = plan(path, n_ctx=256, devices=DeviceRequest((Device(name, 2**30),), n_gpu_layers=3))
    root, bars, _ = _bars(plan_svg(p, "<title>&"))
    assert name in bars and not list(root.iter(f"{NS}script"))
    assert len([e for e in root.iter() if e.tag == f"{NS}svg"]) == 1
    odd = "a\x00b\x1b\ud800\ufffe"  # characters XML 1.0 cannot hold, in a name and in the title
    q = plan(path, n_ctx=256, devices=DeviceRequest((Device(odd, 2**30),), n_gpu_layers=3))
    _, bars, _ = _bars(plan_svg(q, odd))
    assert list(bars) == ["CPU", "a\ufffdb\ufffd\ufffd\ufffd"]


def test_cli_writes_the_svg(tmp_path):
    path = tmp_path / "m.gguf"
    llama(n_layer=3).save(path)
    out = tmp_path / "plan.svg"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gguf_construct.cli.main",
            "plan",
            str(path),
            "--ctx",
            "512",
            "--gpu-mem",
            "64M,64M",
            "--n-gpu-layers",
            "4",
            "--svg",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr
    p = plan(path, n_ctx=512, devices=DeviceRequest((Device("GPU0", 64 * 2**20), Device("GPU1", 64 * 2**20)), n_gpu_layers=4))
    _check(p, out.read_text())
    r = subprocess.run(
        [sys.executable, "-m", "gguf_construct.cli.main", "plan", str(path), "--svg", str(tmp_path / "missing" / "x.svg")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr and not (tmp_path / "missing").exists()
    before = path.read_bytes()
    link = tmp_path / "link.gguf"
    link.hardlink_to(path)
    for target in (path, link):  # the model itself, by its name or another: refused, the model untouched
        r = subprocess.run(
            [sys.executable, "-m", "gguf_construct.cli.main", "plan", str(path), "--svg", str(target)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        assert r.returncode == 2 and "is an input of this command" in r.stderr, r.stderr
        assert path.read_bytes() == before


def test_the_projector_is_drawn_on_its_device():
    from tests.planning.tiny_mmproj import mmproj_path, text_model_path

    devices = DeviceRequest((Device("RPC0", 2**30),), 2)
    p = plan(text_model_path(), n_ctx=256, devices=devices, mmproj=mmproj_path("gemma3"))
    bars = _check(p, plan_svg(p, "model"))
    assert bars["RPC0"]["projector"][0] == p.mmproj.total_bytes
    alone = plan(text_model_path(), n_ctx=256, mmproj=mmproj_path("gemma3"))
    assert bars_of(alone)[0]["mmproj_bytes"] == alone.mmproj.total_bytes
