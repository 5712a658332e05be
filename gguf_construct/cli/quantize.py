"""``gguf-construct quantize IN OUT --type TYPE [--imatrix FILE] [--keep PATTERN ...]``: a model quantized with
the numpy quantizers (bit-exact with ggml), tensor by tensor, with llama-quantize's defaults for which tensors
keep their precision; prints each tensor's RMSE against its input as ``llama-quantize`` does."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import NamedTuple

import numpy as np

from ..errors import FormatError
from ..migration import migrate
from .shared import EXIT_OK, EXIT_TROUBLE, add_in_out, command

DESCRIPTION = (
    "Quantize a model (GGUF, safetensors or an Ollama blob, a legacy file) to a ggml type with numpy quantizers that "
    "are bit-exact with ggml's, tensor by tensor, choosing which tensors keep their precision as llama-quantize does. "
    "Each tensor's RMSE against its input is printed as llama-quantize prints it."
)


class Written(NamedTuple):
    """One tensor of a quantized file: its name, the type written ("kept": as it was), its RMSE against the input
    (None when kept) and why it has that type (``policy.choice_reason``)."""

    name: str
    type: str
    rmse: float | None
    reason: str


def quantize_file(
    src: str, dst: str, target: str, *, imatrix: str | None = None, keep: list[str] | None = None, log=print
) -> list[Written]:
    """Quantize every tensor of ``src`` (GGUF, safetensors/Ollama blob, legacy) into the GGUF ``dst``.

    ``target`` is a ggml type (``q4_K``: every quantizable tensor gets it, the output tensor llama-quantize's
    choice) or one of llama-quantize's mixes (``Q4_K_M``, ``IQ2_M``: :func:`..quants.quantize.policy.mixes`), whose
    per-tensor choices follow ``llama_tensor_get_type``. The output carries the keys llama-quantize writes:
    ``general.file_type`` (the mix's, or the type's llama_ftype; removed when no llama_ftype describes the type) and
    ``general.quantization_version``; split keys are dropped. A legacy input is migrated to GGUF first (its
    metadata becomes GGUF keys), a safetensors input gets the keys ``convert`` writes.

    Returns a :class:`Written` per tensor. The input stays memory-mapped; each
    quantized tensor is made when the (atomic) writer reaches it and dropped once written, so memory stays at about
    one tensor's values.
    """
    from ..api.fileio import check_output, files_of, reading
    from ..api.gguf_file import GGUFFile, new
    from ..api.registry import detect, load
    from ..convert.imatrix import read_imatrix
    from ..core.progress import progress
    from ..quants import dequantize, swap_byte_order
    from ..quants.blocks import resolve
    from ..quants.quantize import REQUIRES_IMATRIX, policy, quantize, supported

    check_output(dst, [src, imatrix])  # before any work: refused at once, the input never replaced
    mix = target if policy.is_mix(target) else None
    if mix is None:
        target = resolve(target).name
        if target not in supported():
            raise ValueError(f"quantizing to {target} is not implemented (supported: {', '.join(sorted(supported()))})")
    weights = read_imatrix(imatrix) if imatrix else {}
    if mix is None and target in REQUIRES_IMATRIX and not weights:
        raise ValueError(f"{target} needs --imatrix")
    if detect(src) not in ("gguf", "safetensors", "ollama"):  # legacy: migrated to GGUF v3 beside dst, then quantized
        import tempfile

        fd, migrated = tempfile.mkstemp(suffix=".gguf", prefix=".migrated-", dir=os.path.dirname(os.path.abspath(dst)))
        os.close(fd)
        try:
            migrate(src, migrated)
            return quantize_file(migrated, dst, mix or target, imatrix=imatrix, keep=keep, log=log)
        finally:
            os.unlink(migrated)
    model = load(src)
    out = new()
    if isinstance(model, GGUFFile):
        for key in model.metadata:
            if not key.startswith("split."):
                out.metadata.set(key, model.metadata[key], type=model.metadata.type_of(key))
    else:
        from ..convert.gguf_keys_json import is_gguf_entry, restore_keys
        from ..convert.safetensors_gguf import metadata_keys

        strings = {k: v for k, v in getattr(model, "metadata", {}).items() if isinstance(v, str)}
        if not restore_keys(out.metadata, strings):  # a file written from GGUF: its keys as they were
            out.metadata.set("general.architecture", "unknown")
            for key, value in metadata_keys({k: v for k, v in strings.items() if not is_gguf_entry(k)}, model.tensors).items():
                out.metadata.set(key, value)
    names = list(model.tensors)
    shapes = {name: tuple(int(d) for d in model.tensors[name].shape) for name in names}  # ggml order for every format
    if mix is not None:
        facts = policy.ModelFacts.from_metadata(out.metadata)
        chosen = policy.plan([(n, shapes[n]) for n in names], mix, facts, has_imatrix=bool(weights), keep=keep)
        lacking = [n for n, t in chosen.items() if t is not None and policy.needs_imatrix(n, t, mix) and n not in weights]
        if lacking:
            raise ValueError(f"{mix} quantizes {lacking[0]} to {chosen[lacking[0]]}, which needs an importance matrix: give --imatrix")
    else:
        has_output = "output.weight" in names
        chosen = {n: policy.tensor_type(n, shapes[n], target, has_output=has_output, keep=keep) for n in names}
    report: list[Written] = []
    asked = mix or target

    def produce(name: str, new_type: str, shape: tuple[int, ...]):
        """The tensor's quantized bytes, made when the writer reaches it (so one tensor is in memory at a time)."""

        def make() -> bytes:
            next(bar[0], None)
            rows = model.tensors[name].to_numpy().reshape(-1, shape[0])
            qw = weights.get(name)
            if qw is None:
                data = quantize(rows, new_type)
            else:  # one weight row per matrix: an expert tensor (ne2 = n_mat) gets its expert's, as llama-quantize
                qw = qw.reshape(-1, shape[0])
                mats = np.array_split(rows, len(qw)) if len(shape) == 3 and shape[2] == len(qw) else [rows]
                data = b"".join(quantize(m, new_type, imatrix=w) for m, w in zip(mats, qw))
            back = dequantize(data, new_type).reshape(rows.shape)
            rmse = float(np.sqrt(np.mean((back.astype(np.float64) - rows) ** 2))) if rows.size else 0.0
            report.append(Written(name, new_type, rmse, policy.choice_reason(name, shape, asked, new_type, keep=keep)))
            log(f"[{len(report):4}/{len(names)}] {name:<40} {str(shape):<20} -> {new_type:<7} rmse {rmse:.6g}")
            return data

        return make

    bar: list = [iter(())]
    n_quantized = 0
    for name in names:
        t = model.tensors[name]
        shape = shapes[name]
        new_type = chosen[name]
        if new_type is None:
            if isinstance(model, GGUFFile) and model.byte_order == "little":
                out.tensors.add(name, t.data, t.type.name, shape)  # the mapped bytes, as they are
            elif isinstance(model, GGUFFile):
                out.tensors.add(name, lambda t=t: swap_byte_order(t.data, t.type.name, "big", "little"), t.type.name, shape)
            else:
                out.tensors.add(name, lambda t=t: np.ascontiguousarray(t.to_numpy(), "<f4"), "f32", shape)
            report.append(Written(name, "kept", None, policy.choice_reason(name, shape, asked, None, keep=keep)))
            log(f"[{len(report):4}/{len(names)}] {name:<40} {str(shape):<20} kept")
            continue
        n_quantized += 1
        out.tensors.add(name, produce(name, new_type, shape), new_type, shape)
    file_type = policy.file_type_of(mix or target)
    if file_type is None:
        out.metadata.pop("general.file_type", None)
    else:
        out.metadata.set("general.file_type", file_type, type="u32")
    out.metadata.set("general.quantization_version", policy.quantization_version(), type="u32")
    bar[0] = iter(progress(range(n_quantized), n_quantized, "quantize", unit="tensor"))
    with reading([*files_of(model), imatrix]):
        out.save(dst)
    return report


def quant_type(text: str) -> str:
    """An argparse ``type``: a llama-quantize mix as llama-quantize spells it (``Q4_K_M``, ``IQ4_XS``: a type per
    tensor), or a ggml type the quantizers write in ggml's spelling (``q4_K``: every tensor); else a usage error
    that lists both."""
    from ..quants.blocks import resolve
    from ..quants.quantize import mixes, supported

    text = text.strip()
    if text in mixes():
        return text
    try:
        name = resolve(text).name
    except FormatError:
        name = ""
    if name in supported():
        return name
    listed = ", ".join(sorted(supported(), key=str.lower))
    mix_names = ", ".join(sorted(mixes()))
    raise argparse.ArgumentTypeError(
        f"{text[:40]!r} is neither a llama-quantize mix ({mix_names}) nor a ggml type the quantizers write ({listed})"
    )


def _run(args: argparse.Namespace) -> int:
    def log(line: str) -> None:
        print(line, file=sys.stderr)

    try:
        report = quantize_file(args.input, args.output, args.type, imatrix=args.imatrix, keep=args.keep, log=log)
    except FormatError:
        raise  # the input's fault (exit 1) or a refused request (2): main reports it with the file's name
    except ValueError as e:
        print(f"gguf-construct {args.command}: {e}", file=sys.stderr)
        return EXIT_TROUBLE
    groups = summary(report)
    if getattr(args, "json", False):  # convert --type runs this command without a --json of its own
        json.dump(
            {"output": args.output, "type": args.type, "written": groups, "tensors": [w._asdict() for w in report]}, sys.stdout, indent=1
        )
        sys.stdout.write("\n")
    else:
        print(f"{args.output}: {summary_line(groups, args.type)}")
    return EXIT_OK


def summary(report: list[Written]) -> list[dict[str, object]]:
    """The tensors written grouped by (type, reason), most first: what the output holds and why."""
    counts: dict[tuple[str, str], int] = {}
    for w in report:
        counts[(w.type, w.reason)] = counts.get((w.type, w.reason), 0) + 1
    return [
        {"type": t, "tensors": n, "reason": r} for (t, r), n in sorted(counts.items(), key=lambda item: (item[0][0] == "kept", -item[1]))
    ]


def summary_line(groups: list[dict[str, object]], target: str) -> str:
    """One line: "3 tensors q4_K; 2 fell back to q5_0: rows of 64 are not a multiple of 256; 2 kept: ..."."""
    parts = []
    for g in groups:
        n, t, why = g["tensors"], g["type"], g["reason"]
        noun = "tensor" if n == 1 else "tensors"
        if t == "kept":
            parts.append(f"{n} {noun} kept: {why}")
        elif why == "as asked":
            parts.append(f"{n} {noun} {t}")
        elif str(why).startswith("rows of"):
            parts.append(f"{n} fell back to {t}: {why}")
        else:
            parts.append(f"{n} {noun} {t}: {why}")
    if not any(g["reason"] == "as asked" for g in groups):
        parts.insert(0, f"no tensor {target}")
    return "; ".join(parts)


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "quantize",
        _run,
        description=DESCRIPTION,
    )
    add_in_out(p, "the GGUF file to write")
    add_quantize_options(p, required=True)
    p.add_argument("--json", action="store_true", help="print what was written as JSON: per type, with the reason, and per tensor")


def add_quantize_options(p: argparse.ArgumentParser, *, required: bool) -> None:
    """``--type``, ``--imatrix``, ``--keep``: this command's, and convert's, where ``--type`` is optional and the
    others apply with it (convert hands them to this command)."""
    with_type = "" if required else "with --type: "
    type_help = (
        "a llama-quantize mix (Q4_K_M, Q5_K_S, IQ4_XS, ...: a type per tensor) or a ggml type (q4_K, q8_0: every tensor)"
        if required
        else "quantize to this ggml type (as the quantize command: GGUF output, llama-quantize's tensor choices)"
    )
    p.add_argument("--type", metavar="TYPE", type=quant_type, required=required, help=type_help)
    p.add_argument("--imatrix", metavar="FILE", help=f"{with_type}importance matrix: llama.cpp's GGUF imatrix or legacy imatrix.dat")
    p.add_argument("--keep", metavar="PATTERN", nargs="+", default=[], help=f"{with_type}tensor names (glob) to keep as they are")
