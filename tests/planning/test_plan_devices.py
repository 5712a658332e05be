"""Several devices: the plan's per-device model, KV cache, recurrent state and compute buffer against llama.cpp's
own memory breakdown with RPC devices (``rpc-server`` processes on 127.0.0.1, the ``rpc_tier``), byte for byte,
over two and three devices, layer and none split modes, tensor splits, partial and full offload (pipeline
parallelism), small batches, tensor overrides, --cpu-moe / --n-cpu-moe, several architectures and mmap on and
off; split mode row refused as llama.cpp refuses it; llama.cpp's float32 layer split worked by hand; and what
llama.cpp refuses (or cannot mean) refused, through the API and the command line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from gguf_construct.api.gguf_file import load_gguf  # noqa: E402
from gguf_construct.planning import ModelShape, PlanError, plan  # noqa: E402
from gguf_construct.planning.cache import aligned  # noqa: E402
from gguf_construct.planning.devices import CPU, FFN_EXPS, Device, DeviceRequest, cpu_moe_overrides, layer_devices, tensor_device  # noqa: E402
from gguf_construct.planning.weights import layer_of  # noqa: E402
from tests.llama_memory import cpu_features  # noqa: E402
from tests.planning.rpc_devices import measure_on_devices, rpc_library, rpc_servers  # noqa: E402
from tests.tiny_models import deepseek2, gemma3, glm4moe, gpt_oss, llama, mamba2, phi3, qwen3, qwen3moe, rwkv7  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CPU_BUFFERS = ("CPU", "CPU_Mapped", "CPU_REPACK")
MODELS = {
    "llama5": lambda: llama(n_layer=5),
    "llama5-q4_0": lambda: llama(n_layer=5, wtype="q4_0"),
    "qwen3moe": lambda: qwen3moe(n_layer=3),
    "qwen3moe12": lambda: qwen3moe(n_layer=12),
    "qwen3moe-q4_0": lambda: qwen3moe(n_layer=3, wtype="q4_0"),
    "gemma3": lambda: gemma3(n_layer=4),
    "rwkv7": lambda: rwkv7(n_layer=3, n_embd=256),
    "deepseek2": lambda: deepseek2(n_layer=3),
    "mamba2": lambda: mamba2(n_layer=3),
    "gpt_oss": lambda: gpt_oss(n_layer=4),
    "glm4moe": lambda: glm4moe(n_layer=3),
    "phi3": lambda: phi3(n_layer=3),
    "qwen3": lambda: qwen3(n_layer=4),
}
# (model, number of devices, request, context settings)
SETUPS = [
    ("llama5", 2, dict(n_gpu_layers=6, tensor_split=(1, 1)), dict(n_ctx=512)),
    ("llama5", 2, dict(n_gpu_layers=4, tensor_split=(3, 1)), dict(n_ctx=1024, type_k="q8_0", type_v="q8_0")),
    ("llama5", 3, dict(n_gpu_layers=6, tensor_split=(1, 2, 1)), dict(n_ctx=512, use_mmap=False)),
    ("llama5", 2, dict(n_gpu_layers=6, split_mode="none", main_gpu=1), dict(n_ctx=512)),
    ("llama5", 2, dict(n_gpu_layers=3, tensor_split=(1, 1)), dict(n_ctx=768, flash_attn="off")),
    (
        "llama5-q4_0",
        2,
        dict(n_gpu_layers=3, tensor_split=(1, 1), overrides=((r"blk\.4\.ffn_up", CPU), (r"blk\.0\.attn_q", "d1"))),
        dict(n_ctx=512),
    ),
    ("qwen3moe", 2, dict(n_gpu_layers=4, tensor_split=(1, 1), cpu_moe=True), dict(n_ctx=512)),
    ("qwen3moe-q4_0", 2, dict(n_gpu_layers=4, tensor_split=(2, 1), n_cpu_moe=2), dict(n_ctx=512)),
    ("gemma3", 2, dict(n_gpu_layers=5, tensor_split=(1, 1)), dict(n_ctx=2048, n_ubatch=64)),
    ("rwkv7", 2, dict(n_gpu_layers=4, tensor_split=(1, 1)), dict(n_ctx=256, n_seq_max=2)),
    ("qwen3moe", 3, dict(n_gpu_layers=99, tensor_split=(1, 1, 1)), dict(n_ctx=1024, flash_attn="off")),
    ("llama5", 3, dict(n_gpu_layers=3, tensor_split=(1, 0, 2)), dict(n_ctx=512, n_ubatch=16)),
    (
        "gemma3",
        3,
        dict(n_gpu_layers=99, tensor_split=(2, 1, 1)),
        dict(n_ctx=768, type_k="q8_0", type_v="q8_0", kv_unified=True, n_seq_max=2),
    ),
    ("rwkv7", 3, dict(n_gpu_layers=99, split_mode="none", main_gpu=2), dict(n_ctx=512, n_ubatch=8)),
    ("deepseek2", 3, dict(n_gpu_layers=99, tensor_split=(1, 1, 1)), dict(n_ctx=512)),
    ("mamba2", 2, dict(n_gpu_layers=2, tensor_split=(1, 1)), dict(n_ctx=512, n_seq_max=2)),
    ("gpt_oss", 2, dict(n_gpu_layers=99, tensor_split=(1, 1)), dict(n_ctx=1024, flash_attn="off")),
    ("glm4moe", 3, dict(n_gpu_layers=3, tensor_split=(1, 0, 2)), dict(n_ctx=512, n_ubatch=16)),
    ("phi3", 2, dict(n_gpu_layers=99, split_mode="none", main_gpu=1), dict(n_ctx=512)),
    ("qwen3", 3, dict(n_gpu_layers=99, tensor_split=(2, 1, 1)), dict(n_ctx=512, n_seq_max=3, n_ubatch=64)),
]


def _id(setup) -> str:
    model, n, req, ctx = setup
    return (
        f"{model}-{n}dev-"
        + "-".join(f"{k}={v}" for k, v in {**req, **ctx}.items() if k != "overrides")
        + ("-ot" if "overrides" in req else "")
    )


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("devices")
    out = {}
    for name, build in MODELS.items():
        out[name] = folder / f"{name}.gguf"
        build().save(out[name])
    return out


@pytest.fixture(scope="module")
def servers():
    """Three RPC servers for the module's tests (a setup with fewer devices uses the first ones)."""
    library = rpc_library()
    assert library is not None
    with rpc_servers(3, library) as endpoints:
        yield library, endpoints


@pytest.mark.rpc_tier
@pytest.mark.parametrize("setup", SETUPS, ids=[_id(s) for s in SETUPS])
def test_devices_are_llama_cpps_over_rpc(models, servers, setup):
    """Per device (each an rpc-server) and for the CPU: the model bytes, the context bytes (KV cache and
    recurrent state) and the compute buffer llama.cpp allocates, equal to the plan's."""
    model, n, req, ctx = setup[0], setup[1], setup[2], dict(setup[3])
    library, endpoints = servers[0], servers[1][:n]
    names = [f"d{i}" for i in range(n)]
    use_mmap = ctx.pop("use_mmap", True)
    devices = DeviceRequest(tuple(Device(name, 8 * 2**30) for name in names), **req)
    p = plan(models[model], features=cpu_features(), use_mmap=use_mmap, devices=devices, **ctx)
    measured = measure_on_devices(
        models[model],
        library,
        endpoints,
        names,
        n_gpu_layers=req["n_gpu_layers"],
        split_mode=req.get("split_mode", "layer"),
        tensor_split=req.get("tensor_split", ()),
        main_gpu=req.get("main_gpu", 0),
        overrides=tuple(req.get("overrides", ())) + _moe(req),
        use_mmap=use_mmap,
        **ctx,
    )
    assert "refused" not in measured, measured
    buffers = measured["buffers"]
    rows = {row["name"]: row for row in p.devices}
    for name, endpoint in zip(names, endpoints, strict=True):
        got = buffers.get(f"RPC0[{endpoint}]", {"model": 0, "context": 0, "compute": 0})
        row = rows[name]
        planned = (row["model_bytes"], row["kv_bytes"] + row["state_bytes"], row["compute_bytes"])
        assert planned == (got["model"], got["context"], got["compute"]), name
    cpu_model = {k: v["model"] for k, v in buffers.items() if k in CPU_BUFFERS and v["model"]}
    assert cpu_model == {k: v for k, v in p.weights.by_buffer.items() if k in CPU_BUFFERS}
    cpu = rows[CPU]
    assert cpu["kv_bytes"] + cpu["state_bytes"] == sum(v["context"] for k, v in buffers.items() if k in CPU_BUFFERS)
    assert cpu["compute_bytes"] == sum(v["compute"] for k, v in buffers.items() if k in CPU_BUFFERS)
    assert p.compute_bytes == sum(v["compute"] for v in buffers.values())
    assert sum(row["model_bytes"] for row in p.devices) == p.model_bytes
    assert any(rows[name]["model_bytes"] for name in names)  # something was offloaded: the setups mean to


@pytest.mark.rpc_tier
def test_split_mode_row_is_refused_as_llama_cpp_refuses_it_over_rpc(models, servers):
    """llama.cpp refuses split mode row on RPC devices (no split buffer type); so does the plan, naming them as
    llama.cpp does."""
    library, endpoints = servers[0], servers[1][:2]
    names = [f"RPC0[{e}]" for e in endpoints]
    measured = measure_on_devices(models["llama5"], library, endpoints, names, n_gpu_layers=6, split_mode="row", tensor_split=(1, 1))
    assert "does not support split buffers" in measured.get("refused", ""), measured
    with pytest.raises(PlanError, match="does not support split buffers"):
        plan(models["llama5"], n_ctx=512, devices=DeviceRequest(tuple(Device(n, 2**30) for n in names), n_gpu_layers=6, split_mode="row"))


@pytest.mark.rpc_tier
def test_an_override_to_a_device_split_mode_none_drops_is_refused_where_llama_cpp_aborts(models, servers):
    library, endpoints = servers[0], servers[1][:2]
    overrides = ((r"blk\.0\.attn_q", "d0"),)
    with pytest.raises(RuntimeError, match="pre-allocated tensor"):
        measure_on_devices(
            models["llama5"], library, endpoints, ["d0", "d1"], n_gpu_layers=6, split_mode="none", main_gpu=1, overrides=overrides
        )
    devices = DeviceRequest((Device("d0", 2**30), Device("d1", 2**30)), n_gpu_layers=6, split_mode="none", main_gpu=1, overrides=overrides)
    with pytest.raises(PlanError, match="aborts"):
        plan(models["llama5"], n_ctx=512, devices=devices)


def _moe(req: dict) -> tuple[tuple[str, str], ...]:
    """llama.cpp's own overrides for --cpu-moe / --n-cpu-moe (common/arg.cpp), for the measuring process."""
    if req.get("cpu_moe"):
        return cpu_moe_overrides(None)
    return cpu_moe_overrides(req["n_cpu_moe"]) if req.get("n_cpu_moe") else ()


def _split(n_layer: int, **req) -> list[str | None]:
    return layer_devices(n_layer, DeviceRequest(tuple(Device(f"d{i}", 2**30) for i in range(3)), **req))


def test_layer_split_is_llama_cpps_arithmetic():
    """llama.cpp's upper_bound over float32 split points, worked by hand: with splits 3,1 over 6 offloaded layers
    (points 0.75, 1) the layers at 0/6 .. 4/6 go to d0 and 5/6 to d1; the input layer is never offloaded."""
    assert _split(5, n_gpu_layers=6, tensor_split=(3, 1)) == ["d0"] * 5 + ["d1"]
    # 4 of 6 offloaded: i_gpu_start = 2; x = 0, 1/4, 2/4, 3/4 against points 1/3, 2/3, 1 -> d0 d0 d1 d2
    assert _split(5, n_gpu_layers=4, tensor_split=(1, 1, 1)) == [None, None, "d0", "d0", "d1", "d2"]
    # x = 1/3 equals the first point (float32 of 1/3 both ways): upper_bound moves past it -> d1
    assert _split(2, n_gpu_layers=3, tensor_split=(1, 1, 1)) == ["d0", "d1", "d2"]
    # by default the devices' sizes; a device of size 0 takes nothing
    sized = DeviceRequest((Device("a", 3 * 2**30), Device("b", 0), Device("c", 2**30)), n_gpu_layers=8)
    assert layer_devices(7, sized) == ["a"] * 6 + ["c"] * 2
    assert _split(5, n_gpu_layers=99, split_mode="none", main_gpu=2) == ["d2"] * 6
    assert _split(5, n_gpu_layers=0, tensor_split=(1, 1)) == [None] * 6


def test_cpu_moe_patterns_are_llama_cpps():
    """--cpu-moe is LLM_FFN_EXPS_REGEX; --n-cpu-moe N the same per block 0..N-1 (common/common.h)."""
    assert cpu_moe_overrides(None) == ((FFN_EXPS, CPU),)
    assert [p for p, _ in cpu_moe_overrides(2)] == [r"blk\.0" + FFN_EXPS, r"blk\.1" + FFN_EXPS]


def test_moe_flags_are_llama_cpps_patterns(models):
    """--n-cpu-moe N (one numeric test per weight) places every weight as llama.cpp's N patterns do; --cpu-moe as
    its one pattern: for every N, on a 12-layer MoE header."""
    shape = ModelShape.of(load_gguf(models["qwen3moe12"]))
    devices = (Device("d0", 2**30), Device("d1", 2**30))
    for n in range(0, 14, 3):
        flags = tensor_device(shape, DeviceRequest(devices, n_gpu_layers=13, n_cpu_moe=n))
        patterns = tensor_device(shape, DeviceRequest(devices, n_gpu_layers=13, overrides=cpu_moe_overrides(n)))
        assert [flags(t.name, layer_of(t.name, 12)) for t in shape.tensors] == [
            patterns(t.name, layer_of(t.name, 12)) for t in shape.tensors
        ]
    flags = tensor_device(shape, DeviceRequest(devices, n_gpu_layers=13, cpu_moe=True))
    patterns = tensor_device(shape, DeviceRequest(devices, n_gpu_layers=13, overrides=cpu_moe_overrides(None)))
    placed = [flags(t.name, layer_of(t.name, 12)) for t in shape.tensors]
    assert placed == [patterns(t.name, layer_of(t.name, 12)) for t in shape.tensors] and None in placed and "d1" in placed


def test_overrides_and_moe_move_exactly_the_matching_weights(models):
    devices = tuple(Device(f"d{i}", 2**30) for i in range(2))
    p = plan(models["qwen3moe"], n_ctx=512, devices=DeviceRequest(devices, n_gpu_layers=4, cpu_moe=True))
    q = plan(models["qwen3moe"], n_ctx=512, devices=DeviceRequest(devices, n_gpu_layers=4))
    moved = p.devices[0]["model_bytes"] - q.devices[0]["model_bytes"]
    shape = ModelShape.of(load_gguf(models["qwen3moe"]))
    experts = sum(aligned(t.nbytes) for t in shape.tensors if "_exps" in t.name)
    assert moved > 0  # the CPU's mapped span grows by at least the experts' bytes (it spans first to last)
    assert sum(row["model_bytes"] for row in q.devices[1:]) - sum(row["model_bytes"] for row in p.devices[1:]) == experts


HOSTILE = [
    (dict(devices=tuple(Device(f"d{i}", 1) for i in range(17)), n_gpu_layers=1), "at most 16"),
    (dict(devices=(Device("a", 1), Device("a", 1)), n_gpu_layers=1), "unique"),
    (dict(devices=(Device("CPU", 1),), n_gpu_layers=1), "unique and not 'CPU'"),
    (dict(devices=(Device("a", -1),), n_gpu_layers=1), "byte count"),
    (dict(devices=(Device("a", 2**70),), n_gpu_layers=1), "byte count"),
    (dict(devices=(Device("", 1),), n_gpu_layers=1), "name of 1 to 200"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, main_gpu=1), "main_gpu 1"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, tensor_split=(math.nan,)), "non-negative"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, tensor_split=(math.inf,)), "non-negative"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, tensor_split=(0.0,)), "not all zero"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, tensor_split=(1, 1)), "2 parts for 1 devices"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, overrides=(("x", "b"),)), "no such device"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, overrides=(("(", "CPU"),)), "not a regular expression"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, split_mode="diagonal"), "split mode"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=-1), "n_gpu_layers"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, overrides=(("(a+)+$", "CPU"),)), "exponential"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, overrides=(("(x|\\w*)*b", "CPU"),)), "exponential"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, overrides=(("a" * 1001, "CPU"),)), "1 to 1000"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, n_cpu_moe=-2), "n_cpu_moe"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, overrides=(("x", "CPU"),) * 257), "at most 256"),
    (dict(devices=(Device("a", 1),), n_gpu_layers=1, cpu_moe=1), "cpu_moe"),
    (dict(devices=(Device("a", 1), Device("b", 1)), n_gpu_layers=1, split_mode="none", overrides=(("x", "b"),)), "aborts"),
]


@pytest.mark.parametrize(("request_fields", "message"), HOSTILE, ids=[m for _, m in HOSTILE])
def test_device_requests_llama_cpp_cannot_take_are_refused(models, request_fields, message):
    with pytest.raises(PlanError, match=message) as e:
        plan(models["llama5"], n_ctx=256, devices=DeviceRequest(**request_fields))
    assert e.value.rule == "plan.request"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gguf_construct.cli.main", "plan", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_cli_devices_json_is_the_api_plan(models):
    r = _cli(
        str(models["llama5"]),
        "--ctx",
        "512",
        "--device",
        "CUDA0=8G",
        "--device",
        "RPC0[127.0.0.1:50052]=4G",
        "--n-gpu-layers",
        "6",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["devices"]
    devices = DeviceRequest((Device("CUDA0", 8 * 2**30), Device("RPC0[127.0.0.1:50052]", 4 * 2**30)), n_gpu_layers=6)
    assert got == plan(models["llama5"], n_ctx=512, devices=devices).devices
    assert [d["name"] for d in got] == ["CPU", "CUDA0", "RPC0[127.0.0.1:50052]"] and got[1]["layers"][:2] == [0, 1]
    r = _cli(str(models["llama5"]), "--ctx", "512", "--gpu-mem", "8G,4G", "--n-gpu-layers", "6", "--json")
    assert [d["size"] for d in json.loads(r.stdout)["devices"][1:]] == [8 * 2**30, 4 * 2**30]


def test_cli_moe_flags_and_row_split(models):
    """--cpu-moe / --n-cpu-moe reach the plan (and come back as llama.cpp's flags from --fit); split mode row is
    refused on devices without a row-split buffer (llama.cpp refuses them), planned as layer on SYCL devices with
    a note."""
    path = str(models["qwen3moe"])
    plain = json.loads(_cli(path, "--ctx", "512", "--gpu-mem", "1G,1G", "--n-gpu-layers", "4", "--json").stdout)
    moe = json.loads(_cli(path, "--ctx", "512", "--gpu-mem", "1G,1G", "--n-gpu-layers", "4", "--n-cpu-moe", "1", "--json").stdout)
    assert moe["devices"][0]["model_bytes"] > plain["devices"][0]["model_bytes"]
    r = _cli(path, "--fit", "--gpu-mem", "1G,1G", "--margin", "0", "--cpu-moe", "--json")
    assert r.returncode == 0 and "--cpu-moe" in json.loads(r.stdout)["fit"]["llama_cpp_arguments"]
    r = _cli(path, "--ctx", "512", "--gpu-mem", "1G,1G", "--n-gpu-layers", "4", "--split-mode", "row", "--json")
    assert r.returncode == 2 and "does not support split buffers" in r.stderr and "GPU0" in r.stderr, r.stderr
    sycl = ["--device", "SYCL0=1G", "--device", "SYCL1=1G", "--n-gpu-layers", "4", "--json"]
    layer = json.loads(_cli(path, "--ctx", "512", *sycl).stdout)
    row = json.loads(_cli(path, "--ctx", "512", *sycl, "--split-mode", "row").stdout)
    placed = [{k: d[k] for k in ("name", "model_bytes", "kv_bytes", "state_bytes", "layers")} for d in layer["devices"]]
    assert [{k: d[k] for k in placed[0]} for d in row["devices"]] == placed and any("split mode row" in n for n in row["notes"])
    # without pipeline parallelism (llama.cpp enables it for split mode layer only) each device's copies are single
    assert sum(d["compute_bytes"] for d in row["devices"]) < sum(d["compute_bytes"] for d in layer["devices"])


@pytest.mark.parametrize(
    "args",
    [
        ["--device", "noequals"],
        ["--device", "a=8Q"],
        ["--device", "a=1G", "--gpu-mem", "1G,1G"],
        ["--device", "a=1G", "-ot", "(=CPU", "--n-gpu-layers", "1"],
        ["--device", "a=1G", "-ot", "x=b", "--n-gpu-layers", "1"],
        ["--device", "a=1G", "--tensor-split", "1,-1"],
        ["--device", "a=1G", "--tensor-split", "nan"],
        ["--gpu-mem", ",".join(["1G"] * 17)],
        ["--device", "a=1G", "--main-gpu", "3", "--n-gpu-layers", "1"],
        ["--margin", "1G"],
    ],
)
def test_cli_refuses_device_requests_with_exit_2(models, args):
    r = _cli(str(models["llama5"]), "--ctx", "256", *args)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.strip() and "Traceback" not in r.stderr
