"""What a plan adds beside the model: LoRA adapters (:mod:`.lora_adapters`), a draft model or llama-server's
MTP speculation (:mod:`.draft`).

``adding(adapters, draft, mtp)`` makes them part of every plan made inside it (the planner's, each candidate of a
fit's): the compute graphs carry the applied adapters' products (``compute.lora``), and ``attach`` gives each
plan its adapters' buffers and the draft's (or MTP context's) plan, added to the devices they land on and to the
totals, so that ``--fit`` accounts for them. Attaching happens once per plan.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from .compute.lora import applying
from .context import ContextRequest, request_refused
from .devices import DeviceRequest, tensor_device
from .draft import DraftModel, DraftOptions, draft_request, mtp_plan
from .lora_adapters import LoraAdapter, adapter_buffers, buffer_placement, on_cpu
from .shape import ModelShape

__all__ = ["Additions", "adding", "attach", "current", "llama_cpp_arguments", "report_lines"]


@dataclass(frozen=True)
class Additions:
    adapters: tuple[LoraAdapter, ...] = ()
    draft: DraftModel | None = None
    #: llama-server's MTP speculation (its draft options), or None
    mtp: DraftOptions | None = None

    def __bool__(self) -> bool:
        return bool(self.adapters) or self.draft is not None or self.mtp is not None


_ADDITIONS: ContextVar[Additions | None] = ContextVar("plan_additions", default=None)


def current() -> Additions:
    return _ADDITIONS.get() or Additions()


@contextmanager
def adding(adapters: Sequence[LoraAdapter] = (), draft: DraftModel | None = None, mtp: DraftOptions | None = None) -> Iterator[None]:
    """Plan with ``adapters`` (applied in the graph unless their scale is 0), ``draft`` and ``mtp`` inside the block."""
    token = _ADDITIONS.set(Additions(tuple(adapters), draft, mtp))
    try:
        with applying([a.graph_pairs() for a in adapters if a.scale != 0]):
            yield
    finally:
        _ADDITIONS.reset(token)


def attach(
    p: Any,
    shape: ModelShape,
    request: ContextRequest,
    *,
    plan_shape: Callable[..., Any],
    features: tuple[str, ...] | frozenset[str] | None,
    use_mmap: bool,
    devices: DeviceRequest | None,
    checkpoint: Callable[[], None],
) -> Any:
    """``p`` with the current additions' memory: each adapter's buffers, the draft's plan or the MTP heads and
    context (at this plan's context), each added to the device rows and GPU share it lands on. A plan attached
    already is returned as is."""
    extra = current()
    if not extra or p.adapters or p.draft is not None:
        return p
    listed = devices is not None and bool(devices.devices)
    device_of = tensor_device(shape, replace(devices, n_gpu_layers=p.n_gpu_layers)) if listed and devices is not None else None
    placement = buffer_placement(shape, features=p.features, use_mmap=use_mmap, n_gpu_layers=p.n_gpu_layers, device_of=device_of)
    for adapter in extra.adapters:
        checkpoint()
        buffers = adapter_buffers(adapter, shape, placement)
        p.adapters.append(
            {
                "file": adapter.source,
                "kind": adapter.kind,
                "scale": adapter.scale,
                "alpha": adapter.alpha,
                "tensors": 2 * len(adapter.pairs),
                "skipped_tensors": list(adapter.skipped),
                "buffers": buffers,
                "bytes": sum(buffers.values()),
            }
        )
        _add_to_devices(p, "adapter_bytes", functools.partial(_on_device, buffers))
    if extra.draft is not None:
        draft = extra.draft
        req = draft_request(request, p.context.n_ctx, draft.options)
        layers = p.n_gpu_layers if draft.options.n_gpu_layers is None else draft.options.n_gpu_layers
        with adding():  # the draft's own plan takes no adapter and has no draft
            if listed and devices is not None:
                dp = plan_shape(
                    draft.shape,
                    req,
                    features=features,
                    use_mmap=use_mmap,
                    devices=replace(devices, n_gpu_layers=layers),
                    checkpoint=checkpoint,
                )
            else:
                dp = plan_shape(draft.shape, req, features=features, use_mmap=use_mmap, n_gpu_layers=layers, checkpoint=checkpoint)
        p.draft = {"file": draft.source, "kind": "draft", **dp.to_json()}
        rows = {row["name"]: row["total_bytes"] for row in dp.devices}
        gpu_total = dp.gpu.get("total_bytes", 0)
        _add_to_devices(p, "draft_bytes", lambda name: rows.get(name, 0) if rows else (gpu_total if name == "GPU" else 0))
    if extra.mtp is not None:
        if listed or p.n_gpu_layers:
            raise request_refused("MTP speculation is planned on the CPU only (no devices, no offloaded layers)", "mtp")
        feats = frozenset(p.features)
        p.draft = {
            "file": "MTP",
            **mtp_plan(shape, request, p.context.n_ctx, extra.mtp, features=feats, use_mmap=use_mmap, checkpoint=checkpoint),
        }
        _add_to_devices(p, "draft_bytes", lambda name: (p.draft or {}).get("total_bytes") or 0 if name == "CPU" else 0)
    return p


def _on_device(buffers: dict[str, int], name: str) -> int:
    """An adapter's bytes on device ``name`` (CPU: its CPU_Mapped and CPU buffers)."""
    if name == "CPU":
        return sum(v for k, v in buffers.items() if on_cpu(k))
    return buffers.get(name, 0)


def _add_to_devices(p: Any, key: str, part: Callable[[str], int]) -> None:
    """Add ``part(device name)`` to each device row's ``key`` and total, and the GPU's to the GPU share."""
    for row in p.devices:
        n = part(row["name"])
        row[key] = row.get(key, 0) + n
        row["total_bytes"] += n
    if p.gpu:
        n = part("GPU")
        p.gpu[key] = p.gpu.get(key, 0) + n
        p.gpu["total_bytes"] += n


def llama_cpp_arguments(p: Any) -> list[str]:
    """The llama.cpp (llama-server) arguments that load the plan's adapters and draft model as planned."""
    args: list[str] = []
    for a in p.adapters:
        args += ["--lora", a["file"]] if a["scale"] == 1 else ["--lora-scaled", a["file"], repr(a["scale"])]
    draft = current().draft
    mtp = current().mtp
    if mtp is not None:
        args += ["--spec-type", "draft-mtp", "--cache-type-k-draft", mtp.type_k, "--cache-type-v-draft", mtp.type_v]
    if draft is not None and p.draft is not None:
        o = draft.options
        args += ["--model-draft", draft.source, "--n-gpu-layers-draft", str(p.draft["n_gpu_layers"])]
        args += ["--cache-type-k-draft", o.type_k, "--cache-type-v-draft", o.type_v]
    return args


def report_lines(p: Any) -> list[str]:
    """The text report's lines for the adapters and the draft."""

    def mib(n: int | None) -> str:
        return "unknown" if n is None else f"{n / 2**20:.2f} MiB"

    lines = []
    for a in p.adapters:
        where = ", ".join(f"{k} {mib(v)}" for k, v in sorted(a["buffers"].items()))
        lines.append(f"  LoRA {a['file']}: {mib(a['bytes'])} ({a['tensors']} tensors, scale {a['scale']:g}{': ' + where if where else ''})")
    if p.draft is not None:
        d = p.draft
        lines.append(
            f"  draft {d['file']}: {d['architecture']}, n_ctx {d['n_ctx']}: model {mib(d['model_bytes'])}, KV {mib(d['kv_bytes'])}, "
            f"state {mib(d['recurrent_bytes'])}, compute {mib(d['compute_bytes'])}, total {mib(d['total_bytes'])}"
        )
    return lines
