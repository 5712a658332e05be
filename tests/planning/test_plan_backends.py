"""A device's backend sizes what it holds (``planning.backends``, modelled from ggml's source, not verified here:
no GPU): CUDA, ROCm, MUSA and SYCL pad a quantized tensor's last row to 512 elements and align to 128 bytes;
Metal aligns to 32 and Vulkan to 64; an RPC server (the CPU backend) follows the CPU's rules, which the RPC tier
checks against llama.cpp."""

from __future__ import annotations

import pytest

from gguf_construct.api.gguf_file import load_gguf
from gguf_construct.planning import plan
from gguf_construct.planning.backends import CPU_RULES, backend_of
from gguf_construct.planning.devices import Device, DeviceRequest
from tests.tiny_models import llama


@pytest.mark.parametrize(
    ("name", "kind"),
    [("CUDA0", "CUDA"), ("ROCm1", "CUDA"), ("MUSA0", "CUDA"), ("SYCL0", "SYCL"), ("MTL0", "Metal"), ("Vulkan2", "Vulkan"),
     ("RPC0[127.0.0.1:50052]", "CPU"), ("gpu", "CPU"), (None, "CPU")],
)  # fmt: skip
def test_device_names_map_to_their_backend_as_llama_cpp_names_devices(name, kind):
    assert backend_of(name).kind == kind


def test_a_quantized_last_row_is_padded_to_512_elements_on_cuda():
    cuda = backend_of("CUDA0")
    assert CPU_RULES.nbytes((512, 7), "q4_0") == 7 * 16 * 18 == 2016  # rows of 512: no padding, 32-byte aligned
    assert cuda.nbytes((512, 7), "q4_0") == 2048  # the same bytes, 128-byte aligned
    assert cuda.nbytes((96, 3), "q4_0") == 512  # 3 * 3 * 18 = 162, 416 more elements (13 blocks, 234 bytes): 396
    assert cuda.nbytes((96, 3), "f16") == 640  # not quantized: 576 bytes, only aligned
    assert backend_of("MTL0").nbytes((96, 3), "q4_0") == CPU_RULES.nbytes((96, 3), "q4_0") == 192


def _padded_on_cuda(ne: tuple[int, ...], ggml_type: str, nbytes: int) -> int:
    """An independent reading of ggml_backend_cuda_buffer_type_get_alloc_size, then the 128-byte alignment."""
    from gguf_construct.core.tables import GGML_TYPES

    t = GGML_TYPES.lookup(ggml_type)
    if t.block_size > 1 and ne[0] % 512:
        nbytes += (512 - ne[0] % 512) // t.block_size * t.type_size
    return -(-nbytes // 128) * 128


def test_weights_offloaded_to_cuda_are_sized_by_cudas_rules(tmp_path):
    path = tmp_path / "q4.gguf"
    llama(n_embd=96, n_ff=160, n_head=3, n_head_kv=1, wtype="q4_0").save(path)
    f = load_gguf(path)
    by = {}
    for name in ("CUDA0", "RPC0[127.0.0.1:1]", "Vulkan0"):
        p = plan(path, n_ctx=256, devices=DeviceRequest((Device(name, 8 << 30),), n_gpu_layers=99))
        by[name] = next(d for d in p.devices if d["name"] == name)["model_bytes"]
    offloaded = [t for t in f.tensors.values() if t.name != "token_embd.weight"]  # the input layer stays on the CPU
    assert by["CUDA0"] == sum(_padded_on_cuda(tuple(t.shape), t.type.name.lower(), t.nbytes) for t in offloaded)
    assert by["RPC0[127.0.0.1:1]"] == sum(-(-t.nbytes // 32) * 32 for t in offloaded)
    assert by["Vulkan0"] == sum(-(-t.nbytes // 64) * 64 for t in offloaded)
    assert by["CUDA0"] > by["Vulkan0"] >= by["RPC0[127.0.0.1:1]"]


def test_a_quantized_cache_on_cuda_pads_its_rows_and_a_cpu_layer_keeps_the_cpus_rules(tmp_path):
    path = tmp_path / "kv.gguf"
    llama(n_layer=2, n_embd=96, n_ff=160, n_head=3, n_head_kv=1).save(path)  # K and V rows of 32 elements
    cells = 256
    p = plan(path, n_ctx=cells, type_k="q8_0", type_v="q8_0", flash_attn="on",
             devices=DeviceRequest((Device("CUDA0", 8 << 30),), n_gpu_layers=2))  # fmt: skip
    cuda = next(d for d in p.devices if d["name"] == "CUDA0")
    cpu = next(d for d in p.devices if d["name"] == "CPU")
    row = 34  # one q8_0 block of 32 elements
    on_cuda = -(-(cells * row + (512 - 32) // 32 * 34) // 128) * 128  # the last row padded to 512, 128-aligned
    assert cuda["layers"] == [1, "output"] and cuda["kv_bytes"] == 2 * on_cuda  # layer 1 K and V
    assert cpu["kv_bytes"] == 2 * -(-(cells * row) // 32) * 32
    assert p.kv_bytes == cuda["kv_bytes"] + cpu["kv_bytes"]
