"""llama.cpp's memory with LoRA adapters, through llama-cpp-python: the oracle of the adapters' plan.

:func:`measure_with_adapters` loads a model, makes a context, loads each adapter (``llama_adapter_lora_init``)
and sets them with their scales (``llama_set_adapters_lora``), then has the context re-reserve its compute
buffer as its next decode would (``llama_context::sched_reserve``). llama.cpp's memory breakdown leaves the
adapters' buffers out, so these are read from the adapters themselves: for each adapted weight,
``llama_adapter_lora::get_weight`` (looked up by the weight's name, given in a zeroed ``ggml_tensor``) gives the
pair of tensors, whose ``buffer`` field names the buffer; each distinct buffer's type name and size is summed.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

from gguf import GGUFReader

from tests import llama_memory as lm

__all__ = ["AdapterRefused", "adapter_pairs", "measure_adapters_on_devices", "measure_with_adapters"]

_DEFAULTS = dict(n_ctx=512, n_batch=2048, n_ubatch=512, n_seq_max=1, type_k="f16", type_v="f16", flash_attn="auto")
_BUFFER_OFFSET = 8  # struct ggml_tensor: type (int32, padded), then the buffer pointer
_NAME_OFFSET = 256  # struct ggml_tensor's name[64]


class AdapterRefused(RuntimeError):
    """llama_adapter_lora_init returned NULL; the message holds llama.cpp's log."""


def adapter_pairs(path: Path) -> list[str]:
    """The names of the weights an adapter file adapts (read with gguf-py, not the library under test)."""
    names = set()
    for t in GGUFReader(path).tensors:
        for suffix in (".lora_a", ".lora_b"):
            if t.name.endswith(suffix):
                names.add(t.name.replace(suffix, ""))  # every occurrence, as llama.cpp cuts them
    return sorted(names)


def _bind(lib: lm._Lib) -> tuple:
    get_weight = lib.handle._ZN18llama_adapter_lora10get_weightEP11ggml_tensor
    get_weight.restype, get_weight.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_void_p]
    reserve = lib.handle._ZN13llama_context13sched_reserveEv
    reserve.restype, reserve.argtypes = None, [ctypes.c_void_p]
    for name, res in (("ggml_backend_buffer_get_size", ctypes.c_size_t), ("ggml_backend_buffer_name", ctypes.c_char_p)):
        fn = getattr(lib.base, name)
        fn.restype, fn.argtypes = res, [ctypes.c_void_p]
    return get_weight, reserve


def _buffers(lib: lm._Lib, get_weight, adapter: int, names: list[str]) -> dict[str, int]:
    """The adapter's buffers by type name, found through its weights' tensors."""
    fake = (ctypes.c_uint8 * lm._TENSOR)()
    seen: dict[int, str] = {}
    for name in names:
        ctypes.memset(ctypes.addressof(fake), 0, lm._TENSOR)
        raw = name.encode()[:63]
        ctypes.memmove(ctypes.addressof(fake) + _NAME_OFFSET, raw, len(raw))
        weight = get_weight(adapter, ctypes.addressof(fake))
        assert weight, f"llama.cpp has no pair for {name}"
        for tensor in ctypes.cast(weight, ctypes.POINTER(ctypes.c_void_p * 2)).contents:
            buffer = ctypes.c_void_p.from_address(tensor + _BUFFER_OFFSET).value
            seen[buffer] = lib.base.ggml_backend_buffer_name(buffer).decode()
    out: dict[str, int] = {}
    for buffer, kind in seen.items():
        out[kind] = out.get(kind, 0) + lib.base.ggml_backend_buffer_get_size(buffer)
    return out


def _address(lib: lm._Lib, pointer) -> int:
    """An adapter's address from either bindings' pointer."""
    return lib.address(pointer) if lib.cffi else ctypes.cast(pointer, ctypes.c_void_p).value


def measure_with_adapters(
    path: Path, adapters: list[tuple[Path, float]], *, use_mmap: bool = True, **context
) -> tuple[lm.Measured, list[dict[str, int]]]:
    """llama.cpp's breakdown (model, context, compute re-reserved with the adapters set) and each adapter's
    buffers by type name. Raises AdapterRefused when llama.cpp refuses an adapter."""
    lib = lm._lib()
    lib.log.clear()
    get_weight, reserve = _bind(lib)
    L = lib.L
    settings = dict(n_ctx=512, n_batch=2048, n_ubatch=512, n_seq_max=1, type_k="f16", type_v="f16", flash_attn="auto")
    settings.update(swa_full=False, kv_unified=False)
    settings.update(context)
    model = lm._load(lib, path, use_mmap)
    loaded = []
    try:
        ctx = lm._context(lib, model, **settings)
        try:
            for adapter_path, _ in adapters:
                adapter = L.llama_adapter_lora_init(model, str(adapter_path).encode())
                if not adapter:
                    raise AdapterRefused("".join(lib.log[-10:]))
                loaded.append(adapter)
            scales = [float(scale) for _, scale in adapters]
            set_adapters(lib, ctx, loaded, scales)
            reserve(lib.address(ctx))
            buffers = [_buffers(lib, get_weight, _address(lib, a), adapter_pairs(p)) for a, (p, _) in zip(loaded, adapters, strict=True)]
            return lm.Measured(L.llama_n_ctx(ctx), lib.breakdown(ctx), list(lib.log)), buffers
        finally:
            L.llama_free(ctx)
    finally:
        for adapter in loaded:
            L.llama_adapter_lora_free(adapter)
        L.llama_model_free(model)


def set_adapters(lib: lm._Lib, ctx: Any, loaded: list[Any], scales: list[float]) -> None:
    """llama_set_adapters_lora through either bindings of the oracle."""
    L = lib.L
    if lib.cffi:  # llama-cpp-py-sync's declarations (a newer llama.cpp's)
        array = lib.ffi.new("struct llama_adapter_lora *[]", loaded)
        assert L.llama_set_adapters_lora(ctx, array, len(loaded), lib.ffi.new("float[]", scales)) == 0
    else:
        array = (L.llama_adapter_lora_p_ctypes * len(loaded))(*loaded)
        assert L.llama_set_adapters_lora(ctx, array, len(loaded), (ctypes.c_float * len(loaded))(*scales)) == 0


_MEASURE_ON_DEVICES = """
import json, sys
from pathlib import Path
from tests.llama_memory import _lib, _context
from tests.planning.llama_adapters import _address, _bind, _buffers, adapter_pairs, set_adapters
from tests.planning.rpc_devices import rpc_model_params
spec = json.loads(sys.argv[1])
lib = _lib()
L = lib.L
mp, keep = rpc_model_params(lib, spec)
model = L.llama_model_load_from_file(spec["path"].encode(), mp)
ctx = _context(lib, model, **spec["context"])
get_weight, reserve = _bind(lib)
loaded = [L.llama_adapter_lora_init(model, a.encode()) for a in spec["adapters"]]
assert all(loaded), "".join(lib.log[-10:])
set_adapters(lib, ctx, loaded, [1.0] * len(loaded))
reserve(lib.address(ctx))
adapters = [_buffers(lib, get_weight, _address(lib, a), adapter_pairs(Path(p))) for a, p in zip(loaded, spec["adapters"])]
print(json.dumps({"buffers": lib.breakdown(ctx), "adapters": adapters}))
"""


def measure_adapters_on_devices(
    path: Path, adapters: list[Path], library: Path, endpoints: list[str], n_gpu_layers: int, **context
) -> dict:
    """llama.cpp's breakdown and each adapter's buffers by type name with ``path`` spread over RPC devices
    (``tests.planning.rpc_devices``: each endpoint an rpc-server), in a fresh process."""
    import json
    import subprocess
    import sys

    from tests.planning.rpc_devices import ROOT, _env

    settings = {**_DEFAULTS, "swa_full": False, "kv_unified": False, **context}
    spec = {"path": str(path), "rpc": str(library), "endpoints": endpoints, "n_gpu_layers": n_gpu_layers}
    spec.update(context=settings, adapters=[str(a) for a in adapters])
    r = subprocess.run(
        [sys.executable, "-c", _MEASURE_ON_DEVICES, json.dumps(spec)], capture_output=True, text=True, timeout=300, cwd=ROOT, env=_env()
    )
    if r.returncode != 0:
        raise RuntimeError(f"the measuring process failed ({r.returncode}): {r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])
