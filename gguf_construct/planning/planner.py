"""``plan`` and ``Plan``: llama.cpp's memory for a model, planned from the GGUF header alone.

``plan(path, n_ctx=..., ...)`` returns a ``Plan``: the model buffers (mapped, repacked, per device), the KV
cache and recurrent state per layer, the compute buffer, and the context llama.cpp actually uses, each as
llama.cpp sizes it (the rules are data in ``schema/memory.json``; the compute buffer is ggml's graph allocator
run over the graph llama.cpp builds, in ``planning.compute``). Totals follow llama.cpp's own memory breakdown
(``llama_get_memory_breakdown``): model + context (KV and recurrent state) + compute; the small logits buffer
(4 bytes per vocabulary entry per sequence) is not in it. With ``n_gpu_layers`` the output layer and the last
layers go to one GPU, as llama.cpp places them; ``n_gpu_layers="auto"`` finds the most that fit in ``gpu_mem``.

A remote plan honours the command's time budget (``--max-seconds``) between its steps, not only while fetching.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Any, Literal

from ..api.registry import load
from ..errors import FormatError
from ..sources.options import options
from .additions import adding, attach, llama_cpp_arguments
from .backends import Backend, backend_of
from .cache import CacheLayer, kv_cache, recurrent_state
from .compute import compute_buffers, compute_bytes
from .compute import supported as compute_supported
from .compute.builds import DEFAULT as DEFAULT_BUILD
from .compute.builds import KNOWN as KNOWN_BUILDS
from .compute.builds import following
from .context import ContextRequest, ResolvedContext, request_refused, resolve
from .devices import CPU, DeviceRequest, compute_placement, device_notes, layer_devices, scheduled_compute, tensor_device
from .draft import DraftOptions, mtp_note, mtp_request, read_draft
from .fit import DEFAULT_MARGIN, DEFAULT_MIN_CTX, fit_shape
from .loaded import refuse_unloaded_tensors
from .lora_adapters import check_against, read_adapter, requested
from .mmproj import ProjectorPlan, plan_projector
from .shape import ModelShape, memory_table, refused, shown
from .weights import INPUT, OUTPUT, WeightBuffers, cpu_features, on_gpu, weight_buffers

__all__ = ["Plan", "plan", "plan_shape"]

#: the most n_gpu_layers llama.cpp's int32 parameter holds
_MAX_GPU_LAYERS = 2**31 - 1


@dataclass
class Plan:
    """llama.cpp's buffers for one model and context, in bytes. ``compute_bytes`` is None where the compute
    graph of the architecture is not modelled (with devices, every device's and the CPU's compute buffer summed);
    ``notes`` say what could not be planned and why."""

    architecture: str
    context: ResolvedContext
    weights: WeightBuffers
    kv_layers: list[CacheLayer]
    recurrent_layers: list[CacheLayer]
    compute_bytes: int | None
    n_gpu_layers: int = 0
    #: the GPU's part (model, cache, compute and total bytes); empty when nothing is offloaded and no
    #: ``gpu_mem`` was given
    gpu: dict[str, int] = field(default_factory=dict)
    #: the GPU memory ``n_gpu_layers="auto"`` fitted the layers in, or None
    gpu_mem: int | None = None
    #: the model's repeating layers (n_gpu_layers counts them and the output layer)
    n_layer: int = 0
    notes: list[str] = field(default_factory=list)
    features: tuple[str, ...] = ()
    #: per device, the CPU first: name, size (None for the CPU), model, KV, state, compute and total bytes and
    #: the layers it holds; empty unless devices were given
    devices: list[dict[str, Any]] = field(default_factory=list)
    #: with ``fit``: whether it fits, the fitted context and layers, the margin and the llama.cpp arguments
    fit: dict[str, Any] | None = None
    #: the llama.cpp build whose compute graph was followed (schema/memory.json ``builds``)
    llama_cpp: str = DEFAULT_BUILD
    #: per LoRA adapter: file, kind, scale, alpha, tensors, bytes by buffer type and in all (``planning.lora_adapters``)
    adapters: list[dict[str, Any]] = field(default_factory=list)
    #: the draft model's plan (``planning.draft``), or None
    draft: dict[str, Any] | None = None
    #: the multimodal projector loaded beside the model (``mmproj``), on its device, or None
    mmproj: ProjectorPlan | None = None

    @property
    def model_bytes(self) -> int:
        return self.weights.total

    @property
    def kv_bytes(self) -> int:
        return sum(layer.nbytes for layer in self.kv_layers)

    @property
    def recurrent_bytes(self) -> int:
        return sum(layer.nbytes for layer in self.recurrent_layers)

    @property
    def adapter_bytes(self) -> int:
        return sum(a["bytes"] for a in self.adapters)

    @property
    def total_bytes(self) -> int | None:
        """Everything llama.cpp's memory breakdown counts, with what it leaves out: the LoRA adapters, the draft
        model, and the projector's weights and compute buffer when one is loaded; None when a compute buffer is
        unknown."""
        if self.compute_bytes is None or (self.draft is not None and self.draft["total_bytes"] is None):
            return None
        draft = self.draft["total_bytes"] if self.draft is not None else 0
        projector = self.mmproj.total_bytes if self.mmproj else 0
        return self.model_bytes + self.kv_bytes + self.recurrent_bytes + self.compute_bytes + self.adapter_bytes + draft + projector

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON-ready data: byte counts as integers (None where unknown)."""
        layer_names = {INPUT: "input", OUTPUT: "output"}
        return {
            "architecture": self.architecture,
            "n_ctx": self.context.n_ctx,
            "context": asdict(self.context),
            "model_bytes": self.model_bytes,
            "kv_bytes": self.kv_bytes,
            "recurrent_bytes": self.recurrent_bytes,
            "compute_bytes": self.compute_bytes,
            "total_bytes": self.total_bytes,
            "model_buffers": dict(self.weights.by_buffer),
            "repacked_tensors": list(self.weights.repacked),
            "model_bytes_by_layer": {layer_names.get(k, str(k)): v for k, v in sorted(self.weights.by_layer.items())},
            "kv_layers": [asdict(layer) for layer in self.kv_layers],
            "recurrent_layers": [asdict(layer) for layer in self.recurrent_layers],
            "n_gpu_layers": self.n_gpu_layers,
            "gpu": self.gpu,
            "gpu_mem": self.gpu_mem,
            "n_layer": self.n_layer,
            "cpu_features": list(self.features),
            "devices": self.devices,
            "fit": self.fit,
            "llama_cpp": self.llama_cpp,
            "adapter_bytes": self.adapter_bytes,
            "adapters": self.adapters,
            "draft": self.draft,
            "mmproj": self.mmproj.to_json() if self.mmproj else None,
            "notes": self.notes,
        }


def _compute(
    shape: ModelShape, ctx: ResolvedContext, checkpoint: Callable[[], None], devices: DeviceRequest | None = None
) -> tuple[Any, str | None]:
    """The CPU's compute buffer, or with ``devices`` each backend's (the devices', then the CPU's); None and why
    where the graph is not modelled."""
    try:
        if devices is not None:
            return compute_buffers(shape, ctx, compute_placement(shape, devices), checkpoint), None
        return compute_bytes(shape, ctx, checkpoint), None
    except NotImplementedError as e:
        return None, f"the compute buffer is not modelled for {shape.arch!r}: {e}"
    except (TypeError, ValueError, ArithmeticError, LookupError) as e:
        if isinstance(e, FormatError):  # a refusal already, or the deadline
            raise
        # an optional key the graph reads (expert gating, scales, flags) of a type or value no converter writes:
        # llama.cpp's get_key refuses such a file, and so does the plan
        raise refused("", f"{shape.arch}: a key the compute graph reads has a type or value llama.cpp refuses ({e})") from None


def _checkpoint(source: object) -> Callable[[], None]:
    """A check of the command's remote deadline (``--max-seconds``) to call between steps; nothing without one."""
    budget = options().budget
    if budget is None or budget.deadline is None:
        return lambda: None
    return lambda: budget.check_time(str(source))


def _check_gpu(n_gpu_layers: object, gpu_mem: object) -> None:
    """Refuse GPU parameters llama.cpp cannot take, and a ``gpu_mem`` that would be ignored."""
    if n_gpu_layers != "auto" and (
        isinstance(n_gpu_layers, bool) or not isinstance(n_gpu_layers, int) or not 0 <= n_gpu_layers <= _MAX_GPU_LAYERS
    ):
        raise request_refused(
            f"n_gpu_layers is {shown(n_gpu_layers)}, not 'auto' or a whole number up to {_MAX_GPU_LAYERS}", "n_gpu_layers"
        )
    if gpu_mem is not None and (isinstance(gpu_mem, bool) or not isinstance(gpu_mem, int) or not 0 <= gpu_mem < 2**64):
        raise request_refused(f"gpu_mem is {shown(gpu_mem)}, not a byte count below 2**64", "gpu_mem")
    if n_gpu_layers == "auto" and gpu_mem is None:
        raise request_refused("n_gpu_layers='auto' needs gpu_mem (the GPU memory to fit layers in)", "gpu_mem")
    if n_gpu_layers != "auto" and gpu_mem is not None:
        raise request_refused("gpu_mem is used only to find n_gpu_layers='auto'; with a number of layers it would be ignored", "gpu_mem")


def plan_shape(
    shape: ModelShape,
    request: ContextRequest | None = None,
    *,
    features: tuple[str, ...] | frozenset[str] | None = None,
    use_mmap: bool = True,
    n_gpu_layers: int | Literal["auto"] = 0,
    gpu_mem: int | None = None,
    devices: DeviceRequest | None = None,
    checkpoint: Callable[[], None] = lambda: None,
    llama_cpp: str | None = None,
    mmproj: ProjectorPlan | None = None,
    mmproj_offload: bool = True,
) -> Plan:
    """The plan for a model whose shape is known (see ``plan`` for the parameters); ``checkpoint`` is called
    between steps (it raises to stop the plan: a deadline). ``mmproj`` is a projector planned with
    ``planning.mmproj.plan_projector``, placed on the plan's first device unless ``mmproj_offload`` is False."""
    refuse_unloaded_tensors(shape)
    with following(_build(llama_cpp)):
        p = _plan_shape(
            shape,
            request,
            features=features,
            use_mmap=use_mmap,
            n_gpu_layers=n_gpu_layers,
            gpu_mem=gpu_mem,
            devices=devices,
            checkpoint=checkpoint,
        )
    p.llama_cpp = _build(llama_cpp)
    if mmproj is not None:
        with_projector(p, mmproj, mmproj_offload)
    req = request or ContextRequest()
    return attach(p, shape, req, plan_shape=plan_shape, features=features, use_mmap=use_mmap, devices=devices, checkpoint=checkpoint)


def with_projector(p: Plan, projector: ProjectorPlan, offload: bool) -> None:
    """Place the projector as libmtmd does: on the first device (the first GPU) unless ``offload`` is False or the
    plan has no device, else on the CPU; its bytes join that device's row and the plan's total."""
    devices = [row["name"] for row in p.devices[1:]]
    device = CPU
    if offload and devices:
        device = devices[0]
    elif offload and (p.n_gpu_layers or p.gpu_mem is not None):
        device = "GPU"
    p.mmproj = replace(projector, device=device, notes=list(projector.notes))
    total = p.mmproj.total_bytes
    for row in p.devices:
        row["mmproj_bytes"] = total if row["name"] == device else 0
        row["total_bytes"] += row["mmproj_bytes"]
    if device == "GPU" and p.gpu:
        p.gpu = {**p.gpu, "mmproj_bytes": total, "total_bytes": p.gpu["total_bytes"] + total}
    if device != CPU:
        p.mmproj.notes.append(
            f"the projector on {device} is sized by the CPU's rules (32-byte alignment, the CPU's compute graph): "
            "a GPU backend may pad more, and keeps a small CPU compute buffer beside its own"
        )


def _build(llama_cpp: str | None) -> str:
    """The llama.cpp build to follow: ``llama_cpp``, else the one being followed (the default outside a plan)."""
    from .compute.builds import current

    if llama_cpp is None:
        return current()
    if llama_cpp not in KNOWN_BUILDS:
        raise request_refused(f"llama.cpp build {str(llama_cpp)[:40]!r} is not one of {', '.join(KNOWN_BUILDS)}", "llama_cpp")
    return llama_cpp


def _plan_shape(
    shape: ModelShape,
    request: ContextRequest | None = None,
    *,
    features: tuple[str, ...] | frozenset[str] | None = None,
    use_mmap: bool = True,
    n_gpu_layers: int | Literal["auto"] = 0,
    gpu_mem: int | None = None,
    devices: DeviceRequest | None = None,
    checkpoint: Callable[[], None] = lambda: None,
) -> Plan:
    request = request or ContextRequest()
    if devices is not None and devices.devices:
        if gpu_mem is not None:
            raise request_refused("gpu_mem is for one GPU; with devices, each device's size is its own", "gpu_mem")
        if n_gpu_layers == "auto":
            found = fit_shape(plan_shape, shape, request, devices, margin=0, features=features, use_mmap=use_mmap, checkpoint=checkpoint)
            return found.plan
        _check_gpu(n_gpu_layers, None)
        layers = n_gpu_layers if n_gpu_layers else devices.n_gpu_layers
        return _plan_on_devices(shape, request, replace(devices, n_gpu_layers=layers), features, use_mmap, checkpoint)
    _check_gpu(n_gpu_layers, gpu_mem)
    feats = frozenset(cpu_features() if features is None else features)
    ctx = resolve(shape, request)
    checkpoint()
    notes = []
    if not shape.known:
        notes.append(
            f"architecture {shown(shape.arch)} is not in schema/memory.json: its weights are planned, "
            "its KV cache, recurrent state and compute buffer are not"
        )
    compute, why = _compute(shape, ctx, checkpoint) if shape.known else (None, None)
    if why:
        notes.append(why)
    kv, rs = kv_cache(shape, ctx), recurrent_state(shape, ctx)
    checkpoint()
    if n_gpu_layers == "auto":
        assert gpu_mem is not None  # _check_gpu
        n_gpu_layers = _most_layers(shape, kv, rs, compute, gpu_mem, feats, use_mmap, checkpoint)
        if n_gpu_layers == 0:
            one = weight_buffers(shape, features=feats, use_mmap=use_mmap, n_gpu_layers=1)
            need = _gpu_share(shape, kv, rs, compute, one, 1)["total_bytes"]
            notes.append(f"no layer fits in gpu_mem ({gpu_mem} bytes): offloading the output layer alone needs {need} bytes")
    weights = weight_buffers(shape, features=feats, use_mmap=use_mmap, n_gpu_layers=n_gpu_layers)
    gpu = _gpu_share(shape, kv, rs, compute, weights, n_gpu_layers) if n_gpu_layers or gpu_mem is not None else {}
    if n_gpu_layers:
        notes.append(
            "GPU sizes follow the CPU's rules (tensor sizes padded to 32 bytes; the GPU's compute buffer taken "
            "as the CPU's): a GPU backend may pad more; only CPU sizes are checked against llama.cpp"
        )
    return Plan(shape.arch, ctx, weights, kv, rs, compute, n_gpu_layers, gpu, gpu_mem, shape.n_layer, notes, tuple(sorted(feats)))


def _plan_on_devices(
    shape: ModelShape,
    request: ContextRequest,
    req: DeviceRequest,
    features: tuple[str, ...] | frozenset[str] | None,
    use_mmap: bool,
    checkpoint: Callable[[], None],
) -> Plan:
    """The plan over several devices (``planning.devices``): weights placed by layer, split and overrides, each
    layer's cache on its device, and a per-device breakdown."""
    req.check()
    feats = frozenset(cpu_features() if features is None else features)
    ctx = resolve(shape, request)
    checkpoint()
    notes = [] if shape.known else [f"architecture {shape.arch!r} is not in schema/memory.json: only its weights are planned"]
    buffers, why = _compute(shape, ctx, checkpoint, req) if shape.known else (None, None)
    notes += [why] if why else []
    per_layer = layer_devices(shape.n_layer, req)
    kv, rs = _by_layer_device(kv_cache, shape, ctx, per_layer), _by_layer_device(recurrent_state, shape, ctx, per_layer)
    checkpoint()
    weights = weight_buffers(shape, features=feats, use_mmap=use_mmap, device_of=tensor_device(shape, req))
    shares = device_shares(shape, weights, kv, rs, buffers, req)
    notes += device_notes(shape, req)
    n_gpu = sum(1 for d in layer_devices(shape.n_layer, req) if d is not None)
    gpu = {k: sum(d[k] for d in shares[1:]) for k in ("model_bytes", "kv_bytes", "state_bytes", "compute_bytes", "total_bytes")}
    compute = None if buffers is None else sum(buffers)
    return Plan(shape.arch, ctx, weights, kv, rs, compute, n_gpu, gpu, None, shape.n_layer, notes, tuple(sorted(feats)), shares)


def _by_layer_device(
    build: Callable[[ModelShape, ResolvedContext, Backend], list[CacheLayer]],
    shape: ModelShape,
    ctx: ResolvedContext,
    per_layer: list[str | None],
) -> list[CacheLayer]:
    """A cache's layers (``kv_cache`` or ``recurrent_state``), each sized by the backend of the device holding
    its layer (``planning.backends``)."""
    sized = {where: build(shape, ctx, backend_of(where)) for where in set(per_layer)}
    layers = next(iter(sized.values()))  # the same layers in every sizing
    return [sized[per_layer[layer.layer]][i] for i, layer in enumerate(layers)]


def device_shares(
    shape: ModelShape, weights: WeightBuffers, kv: list[CacheLayer], rs: list[CacheLayer], buffers: list[int] | None, req: DeviceRequest
) -> list[dict[str, Any]]:
    """Per device (the CPU first): its size, model, KV, state and compute bytes, their total, and its layers.
    ``buffers``: each scheduled backend's compute buffer (the devices', then the CPU's), None when unknown."""
    per_layer = layer_devices(shape.n_layer, req)
    compute = scheduled_compute(req, buffers)
    rows: list[dict[str, Any]] = []
    for name, size in [(CPU, None)] + [(d.name, d.size) for d in req.devices]:
        where = None if name == CPU else name
        layers = [il for il in range(shape.n_layer) if per_layer[il] == where]
        model = weights.cpu if name == CPU else weights.by_buffer.get(name, 0)
        kv_bytes = sum(layer.nbytes for layer in kv if per_layer[layer.layer] == where)
        state = sum(layer.nbytes for layer in rs if per_layer[layer.layer] == where)
        compute_here = compute.get(name, 0)
        held: list[int | str] = [*layers, *(["output"] if per_layer[shape.n_layer] == where else [])]
        rows.append(
            {
                "name": name,
                "size": size,
                "model_bytes": model,
                "kv_bytes": kv_bytes,
                "state_bytes": state,
                "compute_bytes": compute_here,
                "total_bytes": model + kv_bytes + state + compute_here,
                "layers": held,
            }
        )
    return rows


def _gpu_share(shape, kv, rs, compute, weights: WeightBuffers, n_gpu_layers: int) -> dict[str, int]:
    """The GPU's part: offloaded weights, the KV cache and state of offloaded layers, and a compute buffer."""
    if not n_gpu_layers:
        return {"model_bytes": 0, "cache_bytes": 0, "compute_bytes": 0, "total_bytes": 0}
    cache = sum(layer.nbytes for layer in kv + rs if on_gpu(layer.layer, shape.n_layer, n_gpu_layers))
    out = {"model_bytes": weights.gpu, "cache_bytes": cache, "compute_bytes": compute or 0}
    out["total_bytes"] = sum(out.values())
    return out


def _most_layers(shape, kv, rs, compute, gpu_mem: int, feats, use_mmap: bool, checkpoint: Callable[[], None]) -> int:
    """The largest n_gpu_layers (0 to n_layer + 1) whose GPU share fits in ``gpu_mem`` bytes: a binary search
    over ``gpu_total``, as each more layer offloaded only adds to the share."""
    everything = weight_buffers(shape, features=feats, use_mmap=use_mmap, n_gpu_layers=shape.n_layer + 1)
    fits, too_many = 0, shape.n_layer + 2
    while too_many - fits > 1:
        checkpoint()
        n = (fits + too_many) // 2
        if gpu_total(shape, kv, rs, compute, everything, n) > gpu_mem:
            too_many = n
        else:
            fits = n
    return fits


def gpu_total(shape: ModelShape, kv, rs, compute: int | None, everything: WeightBuffers, n_gpu_layers: int) -> int:
    """The GPU share's total bytes with ``n_gpu_layers`` offloaded, from the weights planned with every layer
    offloaded (``everything``): a layer's weights are on the GPU whole or not at all, so the GPU's weights are the
    offloaded layers' part of ``everything.by_layer`` (the bytes ``weight_buffers`` counts for them)."""
    if not n_gpu_layers:
        return 0
    model = sum(v for layer, v in everything.by_layer.items() if on_gpu(layer, shape.n_layer, n_gpu_layers))
    cache = sum(layer.nbytes for layer in kv + rs if on_gpu(layer.layer, shape.n_layer, n_gpu_layers))
    return model + cache + (compute or 0)


def plan(
    source: str | os.PathLike[str] | Any,
    *,
    n_ctx: int = 0,
    n_batch: int = 0,
    n_ubatch: int = 0,
    n_seq_max: int = 1,
    type_k: str = "f16",
    type_v: str = "f16",
    flash_attn: Literal["auto", "on", "off"] = "auto",
    kv_unified: bool = False,
    swa_full: bool = False,
    use_mmap: bool = True,
    n_gpu_layers: int | Literal["auto"] = 0,
    gpu_mem: int | None = None,
    features: tuple[str, ...] | frozenset[str] | None = None,
    devices: DeviceRequest | None = None,
    fit: bool = False,
    ram: int | None = None,
    margin: int | None = None,
    min_ctx: int | None = None,
    llama_cpp: str | None = None,
    lora: Sequence[str | os.PathLike[str] | tuple[str | os.PathLike[str], float]] = (),
    draft: str | os.PathLike[str] | Any | None = None,
    draft_options: DraftOptions | None = None,
    mtp: bool = False,
    mmproj: str | os.PathLike[str] | Any | None = None,
    mmproj_offload: bool = True,
) -> Plan:
    """llama.cpp's memory for the GGUF model at ``source`` (a path, the first shard of a split set, a URL, or an
    opened ``GGUFFile``), with llama.cpp's context parameters (0: its defaults; ``n_ctx`` 0 is the training
    context). ``features`` are the CPU's ('avx2', 'avx512'; default: this machine's), which decide the weights
    llama.cpp repacks. ``devices`` spreads the model over several devices (``DeviceRequest``: devices, layers,
    split, overrides); the plan's ``devices`` list then gives each device's part. ``fit=True`` plans the largest
    context (unless ``n_ctx`` is given) and the most layers that fit the devices and ``ram`` with ``margin`` bytes
    free on each (``planning.fit``); the plan's ``fit`` then says what fitted and the llama.cpp arguments.
    ``llama_cpp`` names the llama.cpp build whose compute graph to follow (``schema/memory.json`` ``builds``;
    default llama-cpp-python 0.3.36's). ``lora`` lists LoRA adapters (a source, or a source and its scale) and
    ``draft`` a draft model with its ``draft_options`` (``planning.lora_adapters``, ``planning.draft``): their
    memory is in the plan's ``adapters`` and ``draft``, on the devices and in the totals, and ``fit`` accounts
    for them. ``mtp=True`` plans llama-server's MTP speculation (``--spec-type draft-mtp``) in ``draft``
    instead, on the CPU. ``mmproj`` is a multimodal projector file loaded beside the model
    (llama.cpp's ``--mmproj``; ``planning.mmproj``): its weights and compute buffer go on the first device, or on
    the CPU with ``mmproj_offload=False`` (``--no-mmproj-offload``), and count in the totals and in ``fit``."""
    build = _build(llama_cpp)
    request = ContextRequest(n_ctx, n_batch, n_ubatch, n_seq_max, type_k, type_v, flash_attn, kv_unified, swa_full)
    if devices is None or not devices.devices:
        _check_gpu(n_gpu_layers, gpu_mem)
    checkpoint = _checkpoint(source)
    if hasattr(source, "metadata") and hasattr(source, "tensors"):
        shape = ModelShape.of(source)
    else:
        f = load(source, format="gguf", strict=False)
        try:
            checkpoint()
            shape = ModelShape.of(f)
        finally:
            f.close()
    checkpoint()
    if shape.arch == memory_table().clip["architecture"]:
        raise refused("general.architecture", "the model is a multimodal projector (architecture 'clip'): give it as mmproj (--mmproj)")
    adapters = [read_adapter(source, scale) for source, scale in requested(lora)]
    for adapter in adapters:
        check_against(adapter, shape)
    drafted = read_draft(draft, draft_options) if draft is not None else None
    mtp_options = mtp_request(mtp, drafted, draft_options)
    if (adapters or drafted or mtp_options) and n_gpu_layers == "auto" and (devices is None or not devices.devices):
        raise request_refused("with adapters or a draft model, fit the layers over devices (devices=..., fit=True)", "n_gpu_layers")
    if drafted is not None and (fit or n_gpu_layers == "auto") and not (drafted.shape.known and compute_supported(drafted.shape.arch)):
        raise request_refused(
            f"the draft's compute buffer ({shown(drafted.shape.arch)}) is not modelled: its fit cannot be planned", "draft"
        )
    projector = None
    if mmproj is not None:
        projector = plan_projector(mmproj, flash_attn=flash_attn, n_embd_text=shape.n_embd, checkpoint=checkpoint)
    with adding(adapters, drafted, mtp_options):
        p = _plan_model(
            shape, request, build, checkpoint, fit, ram, margin, min_ctx, features, use_mmap, devices, n_gpu_layers, gpu_mem,
            projector, mmproj_offload,
        )  # fmt: skip
        if p.fit is not None:
            p.fit["llama_cpp_arguments"] += llama_cpp_arguments(p)
    note = mtp_note(shape) if mtp_options is None else None
    if note:
        p.notes.append(note)
    return p


def _plan_model(
    shape: ModelShape,
    request: ContextRequest,
    build: str,
    checkpoint: Callable[[], None],
    fit: bool,
    ram: int | None,
    margin: int | None,
    min_ctx: int | None,
    features: tuple[str, ...] | frozenset[str] | None,
    use_mmap: bool,
    devices: DeviceRequest | None,
    n_gpu_layers: int | Literal["auto"],
    gpu_mem: int | None,
    projector: ProjectorPlan | None,
    mmproj_offload: bool,
) -> Plan:
    """``plan``'s plan for the model's ``shape``, fitted or not (with the additions being made and the projector
    beside it)."""
    with_mmproj = partial(plan_shape, mmproj=projector, mmproj_offload=mmproj_offload)
    if fit:
        margin = DEFAULT_MARGIN if margin is None else margin
        min_ctx = DEFAULT_MIN_CTX if min_ctx is None else min_ctx
        with following(build):  # every candidate's plan follows it
            found = fit_shape(
                with_mmproj,
                shape,
                request,
                devices or DeviceRequest(),
                ram=ram,
                margin=margin,
                min_ctx=min_ctx,
                features=features,
                use_mmap=use_mmap,
                checkpoint=checkpoint,
            )
        found.plan.fit = found.to_json()
        if projector is not None:
            found.plan.fit["llama_cpp_arguments"] += ["--mmproj", projector.source] + ([] if mmproj_offload else ["--no-mmproj-offload"])
        return found.plan
    if ram is not None or margin is not None or min_ctx is not None:
        raise request_refused("ram, margin and min_ctx are used with fit=True only", "fit")
    # the projector goes on the GPU first: n_gpu_layers="auto" fits the layers in what it leaves
    beside = projector.total_bytes if projector is not None and mmproj_offload and gpu_mem is not None else 0
    layers_mem = None if gpu_mem is None else max(0, gpu_mem - beside)
    kwargs: dict[str, Any] = {"n_gpu_layers": n_gpu_layers, "gpu_mem": layers_mem, "devices": devices, "llama_cpp": build}
    p = with_mmproj(shape, request, features=features, use_mmap=use_mmap, checkpoint=checkpoint, **kwargs)
    p.gpu_mem = gpu_mem
    return p
