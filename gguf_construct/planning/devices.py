"""Several devices: which device holds each layer, each weight and each layer's cache, as llama.cpp places them
(src/llama-model.cpp ``load_tensors``, src/llama.cpp ``llama_model_load_from_file_impl``,
src/llama-model-loader.cpp ``create_tensor``, common/common.h for ``--cpu-moe``).

The input layer stays on the CPU. With ``n_gpu_layers`` = g over devices d0..dk, layers from
``i_gpu_start = max(n_layer + 1 - g, 0)`` on (the output layer counting as layer ``n_layer``) go to the device
``upper_bound(splits, float(il - i_gpu_start) / act_gpu_layers)``, where ``splits`` are the cumulative,
normalised tensor split (by default each device's free memory), summed in float32 as llama.cpp does. Split mode
``none`` keeps only the main device. A tensor override (``-ot PATTERN=DEVICE``, a regular expression searched in
the tensor's name, first match wins) moves one weight to another device or back to the CPU, where the CPU's
rules (repacking, mapping) apply. A layer's KV cache and recurrent state live on the layer's device.

Each backend's compute buffer comes from ggml's scheduler splitting the graph over the devices
(:mod:`.compute.splits`); ``compute_placement`` tells it where each weight and cache is, which layer's norms
llama.cpp pins, and whether pipeline parallelism (four copies of the inputs) is on.

Split mode ``row`` needs a row-split buffer type on every device (src/llama-model.cpp ``make_gpu_buft_list``):
only SYCL and Hexagon devices have one in the llama.cpp followed, so row is refused for any other device name, as
llama.cpp refuses it ("does not support split buffers"); on SYCL/HTP devices the layers are placed as with
``layer`` and the split buffer (each matrix's rows over all devices) is not modelled. A device's weights and
caches are sized by its backend (``planning.backends``: CUDA, SYCL, Metal and Vulkan from ggml's source); only CPU
and RPC devices (an ``rpc-server`` runs the CPU backend) are checked against llama.cpp, and a GPU backend's
offload of large-batch ops on CPU weights is not modelled.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from .compute.ggml_ir import GgmlTensor
from .compute.llama_blocks import Batch
from .compute.splits import MAX_COPIES, Placement
from .context import request_refused
from .shape import ModelShape, memory_table
from .weights import INPUT, OUTPUT, layer_of

__all__ = [
    "CPU",
    "Device",
    "DeviceRequest",
    "compute_placement",
    "cpu_moe_overrides",
    "layer_devices",
    "pipeline_parallel",
    "tensor_device",
]

#: the CPU's name in overrides and in the plan's devices list
CPU = "CPU"
#: llama.cpp's LLM_FFN_EXPS_REGEX (common/common.h): the experts' weights that --cpu-moe keeps on the CPU
FFN_EXPS: str = memory_table().devices["ffn_exps_regex"]
#: the backends whose devices have a row-split buffer type: split mode row is refused on any other device
ROW_SPLIT_BACKENDS: tuple[str, ...] = tuple(memory_table().devices["row_split_backends"])
_ROW_SPLIT_DEVICE = re.compile("(?:" + "|".join(map(re.escape, ROW_SPLIT_BACKENDS)) + r")\d+")
#: the most devices llama.cpp takes (GGML_RPC_MAX_SERVERS for RPC; llama.cpp's own lists are of this order)
MAX_DEVICES = int(memory_table().devices["max_devices"])
SplitMode = Literal["layer", "row", "none"]
#: the longest override pattern taken, and the most overrides
MAX_PATTERN = 1000
MAX_OVERRIDES = 256
#: a quantified group that itself holds a quantifier: the shape of patterns whose search can backtrack
#: exponentially (llama.cpp's std::regex as well as Python's re)
_NESTED = re.compile(r"\((?:[^()\\]|\\.)*[*+?}](?:[^()\\]|\\.)*\)[*+?{]")
_ANY_EXPS = re.compile(FFN_EXPS)
_EXPS = re.compile(r"blk\.(\d+)" + FFN_EXPS)
#: a layer's KV cache or recurrent state in the compute graph (planning.compute names them cache_<kind>_l<layer>)
_CACHE = re.compile(r"cache_[a-z]+_l(\d+)$")
#: llama.cpp pins each layer's norms to the layer's device for batches below this many tokens
#: (llama_context::graph_get_cb), and for every batch when the whole model is offloaded
_PIN_BELOW_TOKENS = 32


@dataclass(frozen=True)
class Device:
    """A device other than the CPU: its name (as the plan reports it) and its free memory in bytes."""

    name: str
    size: int


@dataclass(frozen=True)
class DeviceRequest:
    """How llama.cpp is asked to spread a model over devices (its model parameters and common options)."""

    devices: tuple[Device, ...] = ()
    n_gpu_layers: int = 0
    split_mode: SplitMode = "layer"
    #: the proportions of the layers per device (llama.cpp's --tensor-split); empty: by the devices' free memory
    tensor_split: tuple[float, ...] = ()
    main_gpu: int = 0
    #: (pattern, device name or "CPU"), first match wins (--override-tensor)
    overrides: tuple[tuple[str, str], ...] = field(default=())
    #: --cpu-moe: every layer's experts on the CPU; --n-cpu-moe N: the first N layers' (after the overrides)
    cpu_moe: bool = False
    n_cpu_moe: int = 0

    def check(self) -> None:
        """Refuse what llama.cpp refuses: an unknown device in an override, a main GPU past the list, a tensor
        split of another length or with a negative or non-finite part, more devices than it takes."""
        for d in self.devices:
            if not isinstance(d, Device) or not isinstance(d.name, str) or not 0 < len(d.name) <= 200:
                raise request_refused(f"device {str(d)[:60]!r} is not a Device with a name of 1 to 200 characters", "devices")
            if isinstance(d.size, bool) or not isinstance(d.size, int) or not 0 <= d.size < 2**63:
                raise request_refused(f"device {d.name[:40]!r} has size {str(d.size)[:40]!r}, not a byte count below 2**63", "devices")
        for name in ("n_gpu_layers", "main_gpu", "n_cpu_moe"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
                raise request_refused(f"{name} is {str(value)[:40]!r}, not a whole number below 2**31", name)
        if any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in self.tensor_split):
            raise request_refused(f"tensor split {str(self.tensor_split)[:80]} is not a list of numbers", "tensor_split")
        if len(self.devices) > MAX_DEVICES:
            raise request_refused(f"{len(self.devices)} devices: llama.cpp takes at most {MAX_DEVICES}", "devices")
        names = [d.name for d in self.devices]
        if len(set(names)) != len(names) or CPU in names:
            raise request_refused(f"device names must be unique and not {CPU!r}: {names[:MAX_DEVICES]}", "devices")
        if self.split_mode not in ("layer", "row", "none"):
            raise request_refused(f"split mode {str(self.split_mode)[:20]!r} is not layer, row or none", "split_mode")
        if self.split_mode == "row":
            for d in self.devices:
                if not _ROW_SPLIT_DEVICE.fullmatch(d.name):
                    raise request_refused(
                        f"split mode row: llama.cpp refuses device {d.name[:40]!r} ('does not support split buffers'): only "
                        f"{' and '.join(ROW_SPLIT_BACKENDS)} devices (named like {ROW_SPLIT_BACKENDS[0]}0) have a row-split buffer "
                        "in the llama.cpp followed; CUDA, RPC, Vulkan and Metal devices do not",
                        "split_mode",
                    )
        if self.devices and not 0 <= self.main_gpu < len(self.devices):
            raise request_refused(f"main_gpu {self.main_gpu} is not one of the {len(self.devices)} devices", "main_gpu")
        if self.tensor_split:
            if len(self.tensor_split) > len(self.devices):
                raise request_refused(f"a tensor split of {len(self.tensor_split)} parts for {len(self.devices)} devices", "tensor_split")
            if any(not np.isfinite(x) or x < 0 for x in self.tensor_split) or not any(self.tensor_split):
                raise request_refused(
                    f"tensor split {self.tensor_split[:MAX_DEVICES]} must be non-negative and not all zero", "tensor_split"
                )
        if not isinstance(self.cpu_moe, bool):
            raise request_refused(f"cpu_moe is {type(self.cpu_moe).__name__}, not a bool", "cpu_moe")
        if len(self.overrides) > MAX_OVERRIDES:
            raise request_refused(
                f"{len(self.overrides)} overrides: at most {MAX_OVERRIDES} (each is searched in every weight's name)", "overrides"
            )
        for pattern, where in self.overrides:
            if not isinstance(pattern, str) or not isinstance(where, str) or not 0 < len(pattern) <= MAX_PATTERN:
                raise request_refused(
                    f"override {str(pattern)[:60]!r}: a pattern of 1 to {MAX_PATTERN} characters and a device name", "overrides"
                )
            if _NESTED.search(pattern):
                raise request_refused(
                    f"override pattern {pattern[:60]!r} repeats a repeated group (such as (a+)+), which can take exponential time "
                    "to search: write it without the nesting",
                    "overrides",
                )
            if where != CPU and where not in names:
                raise request_refused(f"override {pattern[:60]!r}={where[:40]!r}: no such device (the devices: {names})", "overrides")
            if self.split_mode == "none" and where != CPU and where != names[self.main_gpu]:
                raise request_refused(
                    f"override {pattern[:60]!r}={where[:40]!r}: split mode none keeps only the main device "
                    f"{names[self.main_gpu][:40]!r}, and llama.cpp aborts on a weight in a dropped device's buffer "
                    "('pre-allocated tensor in a buffer that cannot run the operation')",
                    "overrides",
                )
            try:
                re.compile(pattern)
            except (re.error, RecursionError, OverflowError) as e:
                raise request_refused(f"override pattern {pattern[:60]!r} is not a regular expression: {e}", "overrides") from None


def cpu_moe_overrides(n_layers: int | None) -> tuple[tuple[str, str], ...]:
    """``--cpu-moe`` (None: every layer's experts) or ``--n-cpu-moe N`` (the first N layers'), as overrides."""
    if n_layers is None:
        return ((FFN_EXPS, CPU),)
    return tuple((rf"blk\.{i}{FFN_EXPS}", CPU) for i in range(n_layers))


def _splits(req: DeviceRequest, devices: Sequence[Device]) -> list[np.float32]:
    """llama.cpp's split points: the tensor split (or the free memory) summed and normalised in float32."""
    parts = list(req.tensor_split) + [0.0] * (len(devices) - len(req.tensor_split))
    if not req.tensor_split or not any(parts):
        parts = [float(d.size) for d in devices]
    out, total = [], np.float32(0)
    for p in parts:
        total = np.float32(total + np.float32(p))
        out.append(total)
    if total == 0:  # every device reports no memory: llama.cpp would divide by zero; the first device takes all
        return [np.float32(1)] * len(out)
    return [np.float32(x / total) for x in out]


def layer_devices(n_layer: int, req: DeviceRequest) -> list[str | None]:
    """The device of each layer 0..n_layer (the last being the output layer), None for the CPU."""
    devices = list(req.devices)
    if req.split_mode == "none" and devices:
        devices = [devices[req.main_gpu]]
        req = replace(req, devices=tuple(devices), tensor_split=(), main_gpu=0)
    i_gpu_start = max(n_layer + 1 - req.n_gpu_layers, 0)
    act = 0 if not devices else min(req.n_gpu_layers, n_layer + 1)
    splits = _splits(req, devices) if devices else []
    out: list[str | None] = []
    for il in range(n_layer + 1):
        if il < i_gpu_start or il - i_gpu_start >= act:
            out.append(None)
            continue
        x = np.float32(np.float32(il - i_gpu_start) / np.float32(act))
        index = int(np.searchsorted(np.array(splits, dtype=np.float32), x, side="right"))
        out.append(devices[min(index, len(devices) - 1)].name)
    return out


def tensor_device(shape: ModelShape, req: DeviceRequest) -> Callable[[str, int], str | None]:
    """``device_of(tensor name, layer)`` for ``weights.weight_buffers``: an override's device, else the layer's."""
    per_layer = layer_devices(shape.n_layer, req)
    compiled = [(re.compile(p), where) for p, where in req.overrides]

    def device_of(name: str, layer: int) -> str | None:
        for pattern, where in compiled:
            if pattern.search(name):
                return None if where == CPU else where
        if req.cpu_moe and _ANY_EXPS.search(name):
            return None
        if req.n_cpu_moe:
            m = _EXPS.search(name)  # llama.cpp's blk\.N<LLM_FFN_EXPS_REGEX> for each N below n_cpu_moe, as one search
            if m and m.group(1) == str(int(m.group(1))) and int(m.group(1)) < req.n_cpu_moe:
                return None
        if layer == INPUT:
            return None
        return per_layer[shape.n_layer if layer == OUTPUT else layer]

    return device_of


def _scheduled_devices(req: DeviceRequest) -> list[Device]:
    """The devices llama.cpp's model keeps (split mode none: the main device alone), in the scheduler's order."""
    if req.split_mode == "none" and req.devices:
        return [req.devices[req.main_gpu]]
    return list(req.devices)


def pipeline_parallel(shape: ModelShape, req: DeviceRequest) -> bool:
    """Whether llama.cpp's context enables pipeline parallelism (llama_context's constructor): several devices,
    every layer offloaded, split by layer, the KV cache offloaded and no tensor overrides; every device must also
    run asynchronously with events, as RPC and CUDA devices do."""
    has_overrides = bool(req.overrides) or req.cpu_moe or req.n_cpu_moe > 0
    return len(_scheduled_devices(req)) > 1 and req.n_gpu_layers > shape.n_layer and req.split_mode == "layer" and not has_overrides


def compute_placement(shape: ModelShape, req: DeviceRequest) -> Callable[[Batch], Placement]:
    """Where ggml's scheduler finds each weight, cache and pinned norm of the compute graph, per reserved batch:
    the backends are the model's devices in order, then the CPU."""
    devices = _scheduled_devices(req)
    index = {d.name: i for i, d in enumerate(devices)}
    cpu = len(devices)
    device_of = tensor_device(shape, req)
    per_layer = layer_devices(shape.n_layer, req)
    homes: dict[str, tuple[int, bool]] = {}

    def backend(name: str | None) -> int:
        return cpu if name is None else index[name]

    def home(t: GgmlTensor) -> tuple[int, bool] | None:
        if not t.external:
            return None
        found = homes.get(t.name)
        if found is None:
            cache = _CACHE.match(t.name)
            if cache and int(cache.group(1)) < shape.n_layer:
                found = (backend(per_layer[int(cache.group(1))]), False)
            else:
                found = (backend(device_of(t.name, layer_of(t.name, shape.n_layer))), True)
            homes[t.name] = found
        return found

    full_offload = req.n_gpu_layers > shape.n_layer
    copies = MAX_COPIES if pipeline_parallel(shape, req) else 1

    def placement(batch: Batch) -> Placement:
        pinned = batch.n_tokens < _PIN_BELOW_TOKENS or full_offload

        def pin(layer: int) -> int | None:
            return backend(per_layer[layer]) if pinned and 0 <= layer < shape.n_layer else None

        return Placement(cpu + 1, home, pin, copies)

    return placement


def scheduled_compute(req: DeviceRequest, buffers: Sequence[int] | None) -> dict[str, int]:
    """Each device's and the CPU's compute buffer by name, from the scheduler's buffers (the scheduled devices',
    then the CPU's); a device llama.cpp's model does not keep (split mode none) has none."""
    if buffers is None:
        return {}
    names = [d.name for d in _scheduled_devices(req)] + [CPU]
    return dict(zip(names, buffers, strict=True))


def device_notes(shape: ModelShape, req: DeviceRequest) -> list[str]:
    """What the per-device plan assumes about the devices' backends, pipeline parallelism and the split mode."""
    notes = [
        "each backend's compute buffer comes from ggml's scheduler splitting the graph over the devices, as RPC devices "
        "(the CPU backend behind rpc-server) do it, and their weights and caches follow the CPU's rules: checked against "
        "llama.cpp; CUDA, ROCm, MUSA and SYCL devices pad quantized rows to 512 elements and align to 128 bytes, Metal to 32, "
        "Vulkan to 64 (planning.backends, from ggml's source: not verified); their compute buffers are the CPU backend's "
        "graph split, and op offload and pinned host memory are not modelled"
    ]
    if pipeline_parallel(shape, req):
        notes.append(
            f"pipeline parallelism (several devices, every layer offloaded, no overrides): llama.cpp keeps {MAX_COPIES} copies "
            "of every graph input and of every tensor crossing devices in the compute buffers"
        )
    if req.split_mode == "row":
        notes.append("split mode row: layers placed as with layer; the row-split buffer of SYCL and Hexagon devices is not modelled")
    return notes
