"""``plan --fit``: the largest context and the most layers that fit, checked with llama.cpp: on the CPU, the fitted
context's buffers fit the budget and one more step of the context (256 cells) would not, in llama.cpp's own
accounting; with RPC devices (the ``rpc_tier``), llama.cpp loads the model with the printed arguments and
allocates on each device the model and cache bytes the fit planned; and the requests a fit cannot answer are
refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from gguf_construct.planning import PlanError, plan  # noqa: E402
from gguf_construct.planning.devices import Device, DeviceRequest  # noqa: E402
from tests.llama_memory import cpu_features, measure  # noqa: E402
from tests.planning.rpc_devices import measure_on_devices, rpc_library, rpc_servers  # noqa: E402
from tests.tiny_models import gemma3, llama, qwen3moe  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _total(m) -> int:
    return m.total("model") + m.total("context") + m.total("compute")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("fit")
    out = {}
    for name, build in {
        "llama": lambda: llama(n_layer=4, context_length=8192),
        "gemma3": lambda: gemma3(n_layer=4, context_length=8192),
        "qwen3moe": lambda: qwen3moe(n_layer=3, context_length=8192),
    }.items():
        out[name] = folder / f"{name}.gguf"
        build().save(out[name])
    return out


@pytest.mark.parametrize("arch", ["llama", "gemma3", "qwen3moe"])
@pytest.mark.parametrize("budget_ctx", [700, 3000, 6000])
def test_cpu_fit_is_the_largest_context_llama_cpp_holds(models, arch, budget_ctx):
    """A RAM budget between two context steps: the fitted context fits it in llama.cpp's accounting, the next
    step (256 more cells) does not; a margin is taken off the budget."""
    feats = cpu_features()
    path = models[arch]
    ram = plan(path, n_ctx=budget_ctx, features=feats).total_bytes
    assert ram is not None
    p = plan(path, fit=True, ram=ram, margin=0, min_ctx=256, features=feats)
    assert p.fit is not None and p.fit["fits"]
    n = p.fit["n_ctx"]
    assert n == p.context.n_ctx and n % 256 == 0 and n <= 8192
    assert _total(measure(path, n_ctx=n)) <= ram
    if n < 8192:
        assert _total(measure(path, n_ctx=n + 256)) > ram
    args = p.fit["llama_cpp_arguments"]
    assert args[args.index("--ctx-size") + 1] == str(n) and args[args.index("--n-gpu-layers") + 1] == "0"
    margin = 3 * 2**20
    with_margin = plan(path, fit=True, ram=ram + margin, margin=margin, min_ctx=256, features=feats)
    assert with_margin.fit is not None and with_margin.fit["n_ctx"] == n


def test_training_context_when_everything_fits_and_refusal_when_nothing_does(models):
    path = models["llama"]
    p = plan(path, fit=True, ram=2**40, margin=0)
    assert p.fit is not None and p.fit["fits"] and p.fit["n_ctx"] == 8192
    tight = plan(path, fit=True, ram=2**20, margin=0, min_ctx=256)
    assert tight.fit is not None and not tight.fit["fits"] and tight.fit["n_ctx"] == 256
    fixed = plan(path, fit=True, n_ctx=2048, ram=2**40, margin=0)
    assert fixed.fit is not None and fixed.fit["n_ctx"] == 2048


def test_a_training_context_past_uint32_fits_as_the_largest_context_llama_cpp_takes(tmp_path):
    """A header claiming 2**32 - 1 tokens: the fit never goes past the largest padded context a uint32 holds."""
    path = tmp_path / "huge.gguf"
    llama(context_length=2**32 - 1).save(path)
    p = plan(path, fit=True, ram=2**63 - 1, margin=0)
    assert p.fit is not None and p.fit["n_ctx"] == 2**32 - 256
    q = plan(path, fit=True, ram=2**26, margin=0)
    assert q.fit is not None and q.fit["fits"] and 4096 <= q.fit["n_ctx"] < 2**20


def test_device_fit_offloads_all_layers_at_the_largest_context_or_the_most_layers_at_the_smallest(models):
    path = models["llama"]
    feats = cpu_features()
    two = (Device("d0", 2**30), Device("d1", 2**30))
    p = plan(path, fit=True, devices=DeviceRequest(two), margin=0, features=feats)
    assert p.fit is not None and p.fit["n_gpu_layers"] == 5 and p.fit["n_ctx"] == 8192
    # devices that hold everything at 4096 but not at 4352 cells
    full = plan(path, n_ctx=4096, devices=DeviceRequest(two, n_gpu_layers=5), features=feats)
    sizes = [row["total_bytes"] for row in full.devices[1:]]
    tight = tuple(Device(f"d{i}", s) for i, s in enumerate(sizes))
    q = plan(path, fit=True, devices=DeviceRequest(tight, tensor_split=(1, 1)), margin=0, min_ctx=256, features=feats)
    assert q.fit is not None and (q.fit["n_ctx"], q.fit["n_gpu_layers"]) == (4096, 5)
    # smaller devices: fewer layers at the smallest context; one more layer would not fit
    at_256 = plan(path, n_ctx=256, devices=DeviceRequest(two, n_gpu_layers=5), features=feats)
    small = tuple(Device(f"d{i}", row["total_bytes"] // 2) for i, row in enumerate(at_256.devices[1:]))
    r = plan(path, fit=True, devices=DeviceRequest(small, tensor_split=(1, 1)), margin=0, min_ctx=256, features=feats)
    assert r.fit is not None and r.fit["n_ctx"] == 256 and 0 <= r.fit["n_gpu_layers"] < 5
    more = plan(path, n_ctx=256, devices=DeviceRequest(small, n_gpu_layers=r.fit["n_gpu_layers"] + 1, tensor_split=(1, 1)), features=feats)
    assert any(row["total_bytes"] > row["size"] for row in more.devices[1:])


@pytest.mark.parametrize(
    "kwargs",
    [dict(), dict(ram=-1), dict(ram=2**40, margin=True), dict(ram=2**40, min_ctx="4096")],
    ids=["nothing-to-fit", "negative-ram", "bool-margin", "string-min-ctx"],
)
def test_fit_requests_without_an_answer_are_refused(models, kwargs):
    with pytest.raises(PlanError) as e:
        plan(models["llama"], fit=True, **kwargs)
    assert e.value.rule == "plan.request"
    with pytest.raises(PlanError, match="fit=True only"):
        plan(models["llama"], ram=2**30)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gguf_construct.cli.main", "plan", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_cli_fit_prints_llama_cpp_arguments_and_exits_1_when_nothing_fits(models):
    path = str(models["llama"])
    r = _cli(path, "--fit", "--ram", "64M", "--margin", "0", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["fit"]["fits"] and out["fit"]["llama_cpp_arguments"][:2] == ["--ctx-size", str(out["n_ctx"])]
    r = _cli(path, "--fit", "--ram", "1M", "--margin", "0", "--fit-ctx", "256")
    assert r.returncode == 1 and "does not fit" in r.stdout
    r = _cli(path, "--fit", "--gpu-mem", "1G,1G", "--margin", "0")
    assert r.returncode == 0 and "--device GPU0,GPU1" in r.stdout and "--tensor-split 1073741824,1073741824" in r.stdout
    assert _cli(path, "--fit").returncode == 2  # nothing to fit in


@pytest.mark.rpc_tier
def test_device_fit_loads_in_llama_cpp_with_the_printed_arguments(models):
    """Two RPC devices too small for every layer: llama.cpp loads the model with the printed context, layers and
    tensor split, and allocates on each device the model, cache and compute bytes the fit planned, within its size."""
    library = rpc_library()
    assert library is not None
    path = models["qwen3moe"]
    feats = cpu_features()
    full = plan(path, n_ctx=256, devices=DeviceRequest((Device("d0", 2**30), Device("d1", 2**30)), n_gpu_layers=4), features=feats)
    small = tuple(Device(f"d{i}", row["total_bytes"] // 2) for i, row in enumerate(full.devices[1:]))
    p = plan(path, fit=True, devices=DeviceRequest(small), margin=0, min_ctx=256, features=feats)
    assert p.fit is not None and p.fit["fits"] and 0 < p.fit["n_gpu_layers"] < 4
    args = p.fit["llama_cpp_arguments"]
    n_ctx, layers = int(args[args.index("--ctx-size") + 1]), int(args[args.index("--n-gpu-layers") + 1])
    split = [float(x) for x in args[args.index("--tensor-split") + 1].split(",")]
    with rpc_servers(2, library) as endpoints:
        measured = measure_on_devices(path, library, endpoints, ["d0", "d1"], n_gpu_layers=layers, tensor_split=split, n_ctx=n_ctx)
    assert "refused" not in measured, measured
    for row, endpoint in zip(p.devices[1:], endpoints, strict=True):
        got = measured["buffers"].get(f"RPC0[{endpoint}]", {"model": 0, "context": 0, "compute": 0})
        assert (got["model"], got["context"], got["compute"]) == (
            row["model_bytes"],
            row["kv_bytes"] + row["state_bytes"],
            row["compute_bytes"],
        )
        assert got["model"] + got["context"] + got["compute"] <= row["size"]  # fits in llama.cpp's own accounting
