"""``--fit``: the largest context and the most offloaded layers that fit in the devices' memory, from the header
alone, printed as the llama.cpp arguments that reproduce them.

llama.cpp's own ``--fit`` (common/arg.cpp, on by default since 2025-12) answers the same question on the devices
it runs on; this one answers it for any devices, before downloading the model. The search follows its order:
with every layer offloaded, the largest context from the training context down to ``min_ctx`` (its
``--fit-ctx``, 4096) that fits; if none does, the most layers that fit at ``min_ctx``. A device fits when its
planned bytes plus ``margin`` (its ``--fit-target``, 1 GiB) are at most its size; the CPU's share must fit in
``ram`` when given. Without devices, the largest context whose whole plan fits in ``ram``. Contexts move in steps
of llama.cpp's context padding (256 cells); each step's plan is monotone in the context and, layer by layer, in
the offload, so both searches are binary (about log2 of the range plans, not the range).

The plans are made by the ``plan_shape`` the planner passes in (this module sits below the planner, which
calls it for ``plan(..., fit=True)`` and ``n_gpu_layers="auto"`` with devices).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from .context import ContextRequest, request_refused
from .devices import DeviceRequest
from .shape import ModelShape, memory_table

__all__ = ["DEFAULT_MARGIN", "DEFAULT_MIN_CTX", "Fit", "fit_shape", "llama_cpp_arguments"]

#: llama.cpp's --fit-target default: 1024 MiB left free on each device
DEFAULT_MARGIN = int(memory_table().devices["fit_margin"])
#: llama.cpp's --fit-ctx default: the smallest context --fit sets
DEFAULT_MIN_CTX = int(memory_table().devices["fit_min_ctx"])


Plan = Any  # planner.Plan: the planner imports this module, not the other way round


@dataclass
class Fit:
    """The fitted context and offload, the plan at them, and whether it fits at all (False: even the smallest
    context with no layer offloaded needs more than ``ram``; ``plan`` is then that smallest plan)."""

    n_ctx: int
    n_gpu_layers: int
    plan: Plan
    margin: int
    ram: int | None
    fits: bool
    arguments: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "fits": self.fits,
            "n_ctx": self.n_ctx,
            "n_gpu_layers": self.n_gpu_layers,
            "margin": self.margin,
            "ram": self.ram,
            "llama_cpp_arguments": self.arguments,
        }


def _fits(p: Plan, devices: DeviceRequest, ram: int | None, margin: int) -> bool:
    if p.compute_bytes is None:
        raise request_refused(f"the compute buffer of {p.architecture!r} is not modelled: its fit cannot be planned", "fit")
    if p.devices:
        sizes = {d.name: d.size for d in devices.devices}
        if any(row["total_bytes"] + margin > sizes[row["name"]] for row in p.devices[1:] if row["total_bytes"]):
            return False
        cpu = p.devices[0]["total_bytes"]
    else:
        cpu = p.total_bytes or 0
    return ram is None or cpu + margin <= ram


def _largest(lo: int, hi: int, ok: Callable[[int], bool]) -> int | None:
    """The largest n in [lo, hi] with ok(n), for ok true up to some n and false after; None if not ok(lo)."""
    if not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def fit_shape(
    plan_shape: Callable[..., Plan],
    shape: ModelShape,
    request: ContextRequest,
    devices: DeviceRequest,
    *,
    ram: int | None = None,
    margin: int = DEFAULT_MARGIN,
    min_ctx: int = DEFAULT_MIN_CTX,
    features: tuple[str, ...] | frozenset[str] | None = None,
    use_mmap: bool = True,
    checkpoint: Callable[[], None] = lambda: None,
) -> Fit:
    """The largest context (unless ``request.n_ctx`` fixes it) and the most layers on ``devices`` that fit, each
    candidate planned by ``plan_shape`` (the planner's)."""
    if not devices.devices and ram is None:
        raise request_refused("fitting needs devices (--device, --gpu-mem) or the CPU's memory (--ram)", "fit")
    for name, value in (("margin", margin), ("min_ctx", min_ctx)) + ((("ram", ram),) if ram is not None else ()):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
            raise request_refused(f"{name} is {str(value)[:40]!r}, not a whole number of bytes below 2**63", name)
    devices.check()
    pad = int(memory_table().context["pad"])
    # the training context, but no more than the largest padded context a uint32 holds (llama.cpp's n_ctx)
    top = min(max(1, shape.n_ctx_train), (2**32 - 1) // pad * pad) if request.n_ctx == 0 else request.n_ctx
    bottom = min(top, max(1, min_ctx)) if request.n_ctx == 0 else request.n_ctx
    plans: dict[tuple[int, int], Plan] = {}

    def plan_at(steps: int, layers: int) -> Plan:
        n_ctx = min(top, steps * pad) if steps * pad >= bottom else bottom
        key = (n_ctx, layers)
        if key not in plans:
            checkpoint()
            req = replace(devices, n_gpu_layers=layers)
            plans[key] = plan_shape(
                shape, replace(request, n_ctx=n_ctx), features=features, use_mmap=use_mmap, devices=req, checkpoint=checkpoint
            )
        return plans[key]

    lo_steps, hi_steps = -(-bottom // pad), -(-top // pad)
    all_layers = shape.n_layer + 1 if devices.devices else 0
    steps = _largest(lo_steps, hi_steps, lambda s: _fits(plan_at(s, all_layers), devices, ram, margin))
    layers = all_layers
    if steps is None:
        steps = lo_steps
        most = _largest(0, all_layers, lambda n: _fits(plan_at(lo_steps, n), devices, ram, margin))
        layers = 0 if most is None else most
        fits = most is not None
    else:
        fits = True
    p = plan_at(steps, layers)
    return Fit(
        p.context.n_ctx, layers, p, margin, ram, fits, llama_cpp_arguments(p, request, replace(devices, n_gpu_layers=layers), use_mmap)
    )


def llama_cpp_arguments(p: Plan, request: ContextRequest, devices: DeviceRequest, use_mmap: bool = True) -> list[str]:
    """The llama.cpp command-line arguments (llama-server, llama-cli) that load the model as planned."""
    c = p.context
    args = ["--ctx-size", str(c.n_ctx), "--n-gpu-layers", str(devices.n_gpu_layers), "--fit", "off"]
    if request.n_batch:
        args += ["--batch-size", str(request.n_batch)]
    if request.n_ubatch:
        args += ["--ubatch-size", str(request.n_ubatch)]
    if request.n_seq_max != 1:
        args += ["--parallel", str(request.n_seq_max)]
    args += ["--cache-type-k", request.type_k, "--cache-type-v", request.type_v, "--flash-attn", request.flash_attn]
    if request.kv_unified:
        args.append("--kv-unified")
    if request.swa_full:
        args.append("--swa-full")
    if not use_mmap:
        args.append("--no-mmap")
    if devices.devices:
        args += ["--device", ",".join(d.name for d in devices.devices), "--split-mode", devices.split_mode]
        split = devices.tensor_split or tuple(float(d.size) for d in devices.devices)
        args += ["--tensor-split", ",".join(_number(x) for x in split)]
        if devices.main_gpu:
            args += ["--main-gpu", str(devices.main_gpu)]
    for pattern, where in devices.overrides:
        args += ["--override-tensor", f"{pattern}={where}"]
    if devices.cpu_moe:
        args.append("--cpu-moe")
    if devices.n_cpu_moe:
        args += ["--n-cpu-moe", str(devices.n_cpu_moe)]
    return args


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))
