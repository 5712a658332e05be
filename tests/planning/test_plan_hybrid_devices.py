"""Hybrid models over several devices and with ``fit``: each layer's KV cache or recurrent state on its layer's
device, LFM2's final norm (token_embd_norm) with the output layer. Checked against llama.cpp's memory breakdown
with RPC devices (``rpc-server`` processes on 127.0.0.1, the ``rpc_tier``, as in test_plan_devices.py), and the
fitted plan against the plan of the arguments it prints."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_cpp")

from llama_memory import cpu_features  # noqa: E402

from gguf_construct.planning import plan  # noqa: E402
from gguf_construct.planning.devices import CPU, Device, DeviceRequest  # noqa: E402
from gguf_construct.planning.weights import OUTPUT, layer_of  # noqa: E402
from tests.planning.rpc_devices import measure_on_devices, rpc_library, rpc_servers  # noqa: E402
from tests.planning.tiny_hybrid import HYBRID_BUILDERS  # noqa: E402

CPU_BUFFERS = ("CPU", "CPU_Mapped", "CPU_REPACK")
MODELS = {
    "jamba": dict(n_layer=5, attention=(1, 4), expert_layers=(2,)),
    "granitehybrid": dict(n_layer=4, attention=(0, 3)),
    "lfm2": dict(n_layer=5, attention=(1, 3)),
    "qwen3next": dict(n_layer=6, full_attention_interval=3),
    "falcon-h1": dict(n_layer=3),
    "nemotron_h": dict(n_layer=5),
    "plamo2": dict(n_layer=4),
    "lfm2moe": dict(n_layer=4),
    "qwen35": dict(n_layer=4),
    "qwen35moe": dict(n_layer=8),
    "nemotron_h_moe": dict(n_layer=5),
}
# (model, number of devices, request, context settings)
SETUPS = [
    ("jamba", 2, dict(n_gpu_layers=6, tensor_split=(1, 1)), dict(n_ctx=512, n_seq_max=2)),
    ("jamba", 2, dict(n_gpu_layers=3, tensor_split=(2, 1)), dict(n_ctx=1024, type_k="q8_0", type_v="q8_0")),
    ("granitehybrid", 2, dict(n_gpu_layers=5, tensor_split=(1, 3)), dict(n_ctx=512)),
    ("lfm2", 2, dict(n_gpu_layers=6, tensor_split=(1, 1)), dict(n_ctx=512)),
    ("lfm2", 2, dict(n_gpu_layers=1), dict(n_ctx=512)),  # the output layer alone: its norm goes with it
    ("qwen3next", 3, dict(n_gpu_layers=7, tensor_split=(1, 1, 1)), dict(n_ctx=768, n_seq_max=3)),
    ("falcon-h1", 2, dict(n_gpu_layers=3, tensor_split=(1, 1)), dict(n_ctx=512)),
    ("nemotron_h", 2, dict(n_gpu_layers=6, tensor_split=(2, 3)), dict(n_ctx=512, n_seq_max=2)),
    ("plamo2", 2, dict(n_gpu_layers=4, tensor_split=(1, 1)), dict(n_ctx=512)),
    ("lfm2moe", 2, dict(n_gpu_layers=5, tensor_split=(1, 1)), dict(n_ctx=512)),
    ("qwen35moe", 2, dict(n_gpu_layers=7, tensor_split=(1, 3)), dict(n_ctx=512, n_seq_max=2)),
    ("nemotron_h_moe", 2, dict(n_gpu_layers=6, tensor_split=(1, 1)), dict(n_ctx=512)),
]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hybrid-devices")
    out = {}
    for arch, kw in MODELS.items():
        out[arch] = folder / f"{arch}.gguf"
        HYBRID_BUILDERS[arch](**kw).save(out[arch], keep_valid=False)
    return out


def test_lfm2_final_norm_is_the_output_layers():
    assert layer_of("token_embd_norm.weight", 4, ("token_embd_norm.",)) == OUTPUT
    assert layer_of("token_embd_norm.weight", 4) == 0  # rwkv's embeddings norm is created with block 0


@pytest.mark.parametrize("arch", MODELS)
def test_each_layers_cache_is_on_its_device(arch, models):
    devices = DeviceRequest((Device("d0", 2**30), Device("d1", 2**30)), n_gpu_layers=99, tensor_split=(1, 1))
    p = plan(models[arch], features=cpu_features(), n_ctx=512, devices=devices)
    rows = {row["name"]: row for row in p.devices}
    assert sum(r["kv_bytes"] for r in rows.values()) == p.kv_bytes
    assert sum(r["state_bytes"] for r in rows.values()) == p.recurrent_bytes
    for name in ("d0", "d1"):
        held = {il for il in rows[name]["layers"] if il != "output"}
        assert rows[name]["kv_bytes"] == sum(c.nbytes for c in p.kv_layers if c.layer in held)
        assert rows[name]["state_bytes"] == sum(c.nbytes for c in p.recurrent_layers if c.layer in held)
    assert rows[CPU]["kv_bytes"] == rows[CPU]["state_bytes"] == 0


@pytest.mark.parametrize("arch", MODELS)
def test_fit_prints_arguments_whose_plan_fits(arch, models):
    """The fitted context and layers for two small devices: the plan of those settings fits each device with the
    margin, and the fitted plan is that plan."""
    devices = DeviceRequest((Device("d0", 24 * 2**20), Device("d1", 24 * 2**20)))
    fitted = plan(models[arch], features=cpu_features(), devices=devices, fit=True, margin=2**20, min_ctx=256)
    assert fitted.fit is not None and fitted.fit["fits"], fitted.fit
    for row in fitted.devices[1:]:
        assert row["total_bytes"] + 2**20 <= row["size"], row
    again = plan(
        models[arch],
        features=cpu_features(),
        n_ctx=fitted.context.n_ctx,
        devices=DeviceRequest(devices.devices, n_gpu_layers=fitted.n_gpu_layers),
    )
    assert [r["total_bytes"] for r in again.devices] == [r["total_bytes"] for r in fitted.devices]
    assert again.kv_bytes > 0 and again.recurrent_bytes > 0


@pytest.mark.rpc_tier
@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"{s[0]}-{s[1]}dev-" + "-".join(f"{k}={v}" for k, v in {**s[2], **s[3]}.items()))
def test_devices_are_llama_cpps_over_rpc(models, setup):
    """Per device (each an rpc-server) and for the CPU: the model bytes and the context bytes (the KV cache of its
    attention layers, the state of its recurrent ones) llama.cpp allocates, equal to the plan's."""
    arch, n, req, ctx = setup
    library = rpc_library()
    assert library is not None
    names = [f"d{i}" for i in range(n)]
    devices = DeviceRequest(tuple(Device(name, 8 * 2**30) for name in names), **req)
    p = plan(models[arch], features=cpu_features(), devices=devices, **ctx)
    with rpc_servers(n, library) as endpoints:
        measured = measure_on_devices(
            models[arch], library, endpoints, names, n_gpu_layers=req["n_gpu_layers"], tensor_split=req.get("tensor_split", ()), **ctx
        )
    assert "refused" not in measured, measured
    buffers = measured["buffers"]
    rows = {row["name"]: row for row in p.devices}
    for name, endpoint in zip(names, endpoints, strict=True):
        got = buffers.get(f"RPC0[{endpoint}]", {"model": 0, "context": 0})
        assert (rows[name]["model_bytes"], rows[name]["kv_bytes"] + rows[name]["state_bytes"]) == (got["model"], got["context"]), name
    cpu_model = {k: v["model"] for k, v in buffers.items() if k in CPU_BUFFERS and v["model"]}
    assert cpu_model == {k: v for k, v in p.weights.by_buffer.items() if k in CPU_BUFFERS}
    cpu = rows[CPU]
    assert cpu["kv_bytes"] + cpu["state_bytes"] == sum(v["context"] for k, v in buffers.items() if k in CPU_BUFFERS)
