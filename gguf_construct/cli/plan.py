"""``plan``: will it fit? llama.cpp's buffers for a model at a context, from the header alone (``planning``)."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from fractions import Fraction

from ..core.tables import load_table
from .shared import EXIT_BAD, EXIT_OK, EXIT_TROUBLE, command, whole

_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_MOST_BYTES = 2**63 - 1  # a size past this is no memory a machine has


def size(text: str) -> int:
    """A byte count: 123, 512M, 8G, 8GiB, 1.5T (binary units), at most 2**63 - 1 bytes (exact: no float)."""
    m = re.fullmatch(r"\s*(\d{1,30}(?:\.\d{1,30})?)\s*([kmgt]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a size (e.g. 8G, 512M, 123456)")
    n = int(Fraction(m.group(1)) * _UNITS[m.group(2).lower()])
    if n > _MOST_BYTES:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is more than {_MOST_BYTES} bytes")
    return n


def sizes(text: str) -> list[int]:
    """A comma-separated list of sizes (``24G,24G``), at most 16."""
    parts = text.split(",")
    if len(parts) > 16:
        raise argparse.ArgumentTypeError(f"{len(parts)} sizes: at most 16 devices")
    return [size(part) for part in parts]


def device(text: str) -> tuple[str, int]:
    """``NAME=SIZE``: a device (as llama.cpp names it: CUDA0, Vulkan1, RPC0[host:port]) and its free memory."""
    name, sep, amount = text.rpartition("=")
    if not sep or not name or len(name) > 200 or any(ord(c) < 32 for c in name):
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not NAME=SIZE (e.g. CUDA0=24G)")
    return name, size(amount)


def overrides(text: str) -> list[tuple[str, str]]:
    """``PATTERN=DEVICE[,PATTERN=DEVICE...]`` as llama.cpp's --override-tensor takes them."""
    out = []
    for part in text.split(","):
        pattern, sep, where = part.rpartition("=")
        if not sep or not pattern or not where:
            raise argparse.ArgumentTypeError(f"{part[:60]!r} is not PATTERN=DEVICE (e.g. exps=CPU)")
        out.append((pattern, where))
    return out


def proportions(text: str) -> tuple[float, ...]:
    """llama.cpp's --tensor-split: comma- or slash-separated non-negative numbers, at most 16."""
    parts = re.split(r"[,/]+", text)
    if len(parts) > 16 or not all(re.fullmatch(r"\d{1,20}(\.\d{1,20})?", p) for p in parts):
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not a list of at most 16 non-negative numbers (e.g. 3,1)")
    return tuple(float(p) for p in parts)


def _adapters(args: argparse.Namespace) -> list[str | tuple[str, float]]:
    """``--lora FILE`` (scale 1) and ``--lora-scaled FILE SCALE`` as ``plan``'s ``lora`` list."""
    listed: list[str | tuple[str, float]] = list(args.lora or [])
    for name, scale in args.lora_scaled or []:
        try:
            value = float(scale) if len(scale) <= 40 else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            usage_error(f"--lora-scaled {name[:60]!r} {scale[:40]!r}: the scale is not a finite number (e.g. 0.5)")
        listed.append((name, value))
    return listed


def layers(text: str) -> int | str:
    return "auto" if text == "auto" else whole(0, 2**31 - 1)(text)


def mib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 2**20:10.2f} MiB"


def _report(p, source: str) -> str:
    c = p.context
    lines = [f"{source}: {p.architecture}"]
    lines.append(
        f"  context: n_ctx {c.n_ctx} ({c.n_ctx_seq} per sequence x {c.n_stream} stream(s)), n_batch {c.n_batch}, "
        f"n_ubatch {c.n_ubatch}, flash attention {'on' if c.flash_attn else 'off'}, K {c.type_k}, V {c.type_v}"
        + (f", sliding-window cache {c.n_ctx_swa} cells" if c.n_ctx_swa else "")
    )
    lines.append(f"  model      {mib(p.model_bytes)}")
    for name, n in sorted(p.weights.by_buffer.items()):
        lines.append(f"    {name:<12}{mib(n)}")
    if p.weights.repacked:
        lines.append(f"    ({len(p.weights.repacked)} tensors repacked for this CPU: {', '.join(p.features) or 'none'})")
    lines.append(f"  KV cache   {mib(p.kv_bytes)}" + (f"  ({len(p.kv_layers)} layers)" if p.kv_layers else ""))
    lines.append(f"  recurrent  {mib(p.recurrent_bytes)}")
    lines.append(f"  compute    {mib(p.compute_bytes)}")
    from ..planning.additions import report_lines

    lines += report_lines(p)
    if p.mmproj is not None:
        m = p.mmproj
        lines.append(
            f"  mmproj     {mib(m.total_bytes)}  (weights {mib(m.weights_bytes).strip()}, compute {mib(m.compute_bytes).strip()}, "
            f"on {m.device}: " + ", ".join(f"{e.projector} {e.modality}" for e in m.encoders) + ")"
        )
    lines.append(f"  total      {mib(p.total_bytes)}")
    if p.gpu and not p.devices:
        fit = f", the most of {p.n_layer + 1} that fit in {mib(p.gpu_mem).strip()}" if p.gpu_mem is not None else ""
        lines.append(f"  GPU ({p.n_gpu_layers} layers offloaded{fit}): " + ", ".join(f"{k} {mib(v).strip()}" for k, v in p.gpu.items()))
    for d in p.devices:
        size_text = f" of {mib(d['size']).strip()}" if d["size"] is not None else ""
        held = f", layers {_ranges(d['layers'])}" if d["layers"] else ""
        lines.append(
            f"  {d['name']}: {mib(d['total_bytes']).strip()}{size_text} "
            f"(model {mib(d['model_bytes']).strip()}, KV {mib(d['kv_bytes']).strip()}, "
            f"state {mib(d['state_bytes']).strip()}, compute {mib(d['compute_bytes']).strip()}"
            + "".join(
                f", {label} {mib(d[key]).strip()}" for key, label in (("adapter_bytes", "LoRA"), ("draft_bytes", "draft")) if d.get(key)
            )
            + (f", mmproj {mib(d['mmproj_bytes']).strip()}" if d.get("mmproj_bytes") else "")
            + f"{held})"
        )
    if p.fit is not None:
        f = p.fit
        verdict = "fits" if f["fits"] else "does not fit, even with no layer offloaded at the smallest context"
        lines.append(f"  fit: {verdict}: n_ctx {f['n_ctx']}, {f['n_gpu_layers']} layers offloaded, margin {mib(f['margin']).strip()}")
        lines.append("  llama.cpp: " + " ".join(_quote(a) for a in f["llama_cpp_arguments"]))
    lines += [f"  note: {n}" for n in p.notes + (p.mmproj.notes if p.mmproj else [])]
    return "\n".join(lines)


def _ranges(held: list) -> str:
    """Layer numbers as ranges (0-31, output)."""
    numbers = [x for x in held if isinstance(x, int)]
    parts, start = [], None
    for i, n in enumerate(numbers):
        if start is None:
            start = n
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            parts.append(str(start) if start == n else f"{start}-{n}")
            start = None
    return ", ".join(parts + [x for x in held if not isinstance(x, int)])


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def _cmd_plan(args: argparse.Namespace) -> int:
    """A refusal is a ``PlanError`` that ``main`` reports: exit 1 for a model llama.cpp refuses, 2 for a request.
    With ``--fit``, exit 1 when nothing fits."""
    from ..planning import plan

    devices = _devices(args)
    single_gpu = args.gpu_mem is not None and len(args.gpu_mem) == 1 and devices is None and not args.fit
    if args.n_gpu_layers == "auto" and not single_gpu and devices is None:
        print("gguf-construct plan: --n-gpu-layers auto needs --gpu-mem SIZE or --device NAME=SIZE", file=sys.stderr)
        return EXIT_TROUBLE
    if single_gpu and args.n_gpu_layers != "auto":
        print("gguf-construct plan: --gpu-mem is used with --n-gpu-layers auto only (it finds the layers that fit)", file=sys.stderr)
        return EXIT_TROUBLE
    if not args.fit and (args.ram is not None or args.margin is not None or args.fit_ctx is not None):
        print("gguf-construct plan: --ram, --margin and --fit-ctx are used with --fit only", file=sys.stderr)
        return EXIT_TROUBLE
    if args.svg:
        from ..api.fileio import check_output

        check_output(
            args.svg, [args.file] + ([args.mmproj] if args.mmproj else []), what="the picture"
        )  # before planning: a model is never its own picture
    p = _plan(plan, args, devices, single_gpu)
    print(json.dumps({"file": args.file, **p.to_json()}, indent=2) if args.json else _report(p, args.file))
    if args.svg:
        _write_svg(args.svg, p, args.file)
    return EXIT_BAD if p.fit is not None and not p.fit["fits"] else EXIT_OK


def _write_svg(path: str, p, source: str) -> None:
    from ..api.fileio import write_atomic
    from ..planning.svg import plan_svg

    text = plan_svg(p, source).encode()
    write_atomic(path, lambda f: f.write(text), inputs=[source])


def _devices(args: argparse.Namespace):
    """The DeviceRequest the options describe, or None for the single-GPU/CPU plan."""
    from ..planning.devices import Device, DeviceRequest

    listed = [Device(name, amount) for name, amount in args.device or []]
    if args.gpu_mem is not None and (len(args.gpu_mem) > 1 or args.fit or listed):
        if listed:
            usage_error("use --device NAME=SIZE or --gpu-mem SIZE,SIZE, not both")
        listed = [Device(f"GPU{i}", amount) for i, amount in enumerate(args.gpu_mem)]
    ot = tuple(o for group in args.override_tensor or [] for o in group)
    if not listed and not (args.cpu_moe or args.n_cpu_moe or ot or args.tensor_split or args.main_gpu) and args.split_mode == "layer":
        return None
    return DeviceRequest(
        tuple(listed),
        0,
        args.split_mode,
        args.tensor_split or (),
        args.main_gpu,
        ot,
        cpu_moe=args.cpu_moe,
        n_cpu_moe=args.n_cpu_moe,
    )


def usage_error(message: str):
    from .shared import usage

    usage(f"gguf-construct plan: {message}")


def _plan(plan, args: argparse.Namespace, devices, single_gpu: bool):
    from ..planning.draft import DraftOptions

    return plan(
        args.file,
        n_ctx=args.ctx,
        n_batch=args.batch,
        n_ubatch=args.ubatch,
        n_seq_max=args.parallel,
        type_k=args.cache_type_k,
        type_v=args.cache_type_v,
        flash_attn=args.flash_attn,
        kv_unified=args.kv_unified,
        swa_full=args.swa_full,
        use_mmap=not args.no_mmap,
        n_gpu_layers=args.n_gpu_layers,
        gpu_mem=args.gpu_mem[0] if single_gpu else None,
        features=None if args.cpu == "native" else tuple(f for f in args.cpu.split(",") if f and f != "none"),
        devices=devices,
        fit=args.fit,
        ram=args.ram,
        margin=args.margin,
        min_ctx=args.fit_ctx,
        llama_cpp=args.llama_cpp,
        lora=_adapters(args),
        draft=args.draft,
        mtp=args.mtp,
        draft_options=DraftOptions(args.draft_gpu_layers, args.cache_type_k_draft, args.cache_type_v_draft),
        mmproj=args.mmproj,
        mmproj_offload=not args.no_mmproj_offload,
    )


#: the K/V cache types llama.cpp's options accept (schema/memory.json)
CACHE_TYPES: tuple[str, ...] = tuple(load_table("memory").context["cache_types"])
#: the llama.cpp builds whose compute graphs the plan follows, the default first (schema/memory.json builds)
LLAMA_CPP_BUILDS: tuple[str, ...] = (load_table("memory").builds["default"],) + tuple(
    b for b in load_table("memory").builds["versions"] if b != load_table("memory").builds["default"]
)


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "plan",
        _cmd_plan,
        description=(
            "Plan the memory llama.cpp allocates for a GGUF model (a path, the first shard of a split set, or a "
            "URL: only the header is fetched): the model buffers (memory-mapped, repacked for this CPU, "
            "offloaded), the KV cache, the recurrent state, the compute buffer and the context llama.cpp really "
            "uses. Byte counts follow llama.cpp's own memory breakdown."
        ),
    )
    p.add_argument("file", metavar="FILE", help="a GGUF model file or URL")
    p.add_argument("--ctx", type=whole(0, 2**32 - 1), default=0, help="context size (0: the model's training context)")
    p.add_argument("--batch", type=whole(0, 2**32 - 1), default=0, help="logical batch size (llama.cpp's default 2048)")
    p.add_argument("--ubatch", type=whole(0, 2**32 - 1), default=0, help="physical batch size (llama.cpp's default 512)")
    p.add_argument("--parallel", type=whole(1, 2**32 - 1), default=1, help="sequences (llama.cpp's n_seq_max, at most 256)")
    p.add_argument("--cache-type-k", choices=CACHE_TYPES, default="f16", help="K cache type (default f16)")
    p.add_argument("--cache-type-v", choices=CACHE_TYPES, default="f16", help="V cache type (default f16)")
    p.add_argument("--flash-attn", choices=("auto", "on", "off"), default="auto", help="flash attention (default auto)")
    p.add_argument("--kv-unified", action="store_true", help="one KV buffer shared by all sequences")
    p.add_argument("--swa-full", action="store_true", help="a full-size sliding-window cache")
    p.add_argument("--no-mmap", action="store_true", help="plan for loading without mmap (weights copied to RAM)")
    p.add_argument("--n-gpu-layers", type=layers, default=0, metavar="N|auto", help="layers offloaded to a GPU, or auto with --gpu-mem")
    p.add_argument(
        "--gpu-mem",
        type=sizes,
        metavar="SIZE[,SIZE...]",
        help="GPU memory for --n-gpu-layers auto (e.g. 8G); a list (24G,24G) is several devices GPU0, GPU1, ...",
    )
    p.add_argument(
        "--device",
        type=device,
        action="append",
        metavar="NAME=SIZE",
        help="a device and its free memory, as llama.cpp names it (CUDA0=24G, RPC0[10.0.0.2:50052]=16G); repeat for several",
    )
    p.add_argument(
        "--split-mode", choices=("layer", "row", "none"), default="layer", help="how layers spread over the devices (default layer)"
    )
    p.add_argument("--tensor-split", type=proportions, metavar="N,N,...", help="the devices' proportions of the layers (default: by size)")
    p.add_argument("--main-gpu", type=whole(0, 15), default=0, help="the device used with --split-mode none (default 0)")
    p.add_argument(
        "-ot",
        "--override-tensor",
        type=overrides,
        action="append",
        metavar="PATTERN=DEVICE",
        help="weights whose name matches the regular expression go to DEVICE (a device's name or CPU); repeatable",
    )
    p.add_argument("--cpu-moe", action="store_true", help="keep every expert weight on the CPU (llama.cpp's --cpu-moe)")
    p.add_argument("--n-cpu-moe", type=whole(0, 4096), default=0, metavar="N", help="keep the first N layers' experts on the CPU")
    p.add_argument(
        "--fit",
        action="store_true",
        help="find the largest context (unless --ctx) and the most layers that fit the devices (and --ram), printed as llama.cpp arguments",
    )
    p.add_argument(
        "--margin",
        type=size,
        metavar="SIZE",
        help="memory --fit leaves free on each device and in --ram (default 1G, as llama.cpp's --fit-target)",
    )
    p.add_argument("--ram", type=size, metavar="SIZE", help="the CPU's memory for --fit (without devices: the budget for the whole plan)")
    p.add_argument(
        "--fit-ctx", type=whole(1, 2**32 - 1), metavar="N", help="the smallest context --fit sets (default 4096, as llama.cpp's)"
    )
    p.add_argument(
        "--llama-cpp",
        choices=LLAMA_CPP_BUILDS,
        default=LLAMA_CPP_BUILDS[0],
        help="the llama.cpp build whose compute graph to follow (default: llama-cpp-python 0.3.36's)",
    )
    p.add_argument("--lora", action="append", metavar="FILE", help="a LoRA adapter (GGUF, a path or URL) applied with scale 1; repeatable")
    p.add_argument(
        "--lora-scaled",
        nargs=2,
        action="append",
        metavar=("FILE", "SCALE"),
        help="a LoRA adapter and its scale (0: loaded, not applied); repeatable",
    )
    p.add_argument("--draft", "--model-draft", "-md", metavar="FILE", help="a draft model for speculative decoding (a path or URL)")
    p.add_argument(
        "--mtp",
        action="store_true",
        help="plan llama-server's MTP speculation (--spec-type draft-mtp): the model's next-token-prediction heads and their context",
    )
    p.add_argument(
        "--draft-gpu-layers",
        "--n-gpu-layers-draft",
        "-ngld",
        type=whole(0, 2**31 - 1),
        default=None,
        help="the draft's offloaded layers (default: as many as the main model's; llama-server's own default is its fit)",
    )
    p.add_argument("--cache-type-k-draft", "-ctkd", choices=CACHE_TYPES, default="f16", help="the draft's K cache type (default f16)")
    p.add_argument("--cache-type-v-draft", "-ctvd", choices=CACHE_TYPES, default="f16", help="the draft's V cache type (default f16)")
    p.add_argument(
        "--mmproj",
        metavar="FILE",
        help="a multimodal projector (vision or audio encoder) loaded beside the model, as llama.cpp's --mmproj: its weights "
        "and compute buffer join the plan, on the first device",
    )
    p.add_argument("--no-mmproj-offload", action="store_true", help="keep the projector on the CPU (llama.cpp's --no-mmproj-offload)")
    p.add_argument("--svg", metavar="FILE", help="also draw the memory per device, stacked by kind, as an SVG picture in FILE")
    p.add_argument(
        "--cpu",
        default="native",
        metavar="FEATURES",
        help="the CPU llama.cpp runs on, which decides weight repacking: native (this machine), none, or a list "
        "such as avx2 or avx2,avx512",
    )
    p.add_argument("--json", action="store_true", help="print JSON (byte counts as integers)")
