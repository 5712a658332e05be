"""``gguf-construct convert IN OUT``: GGUF byte order and version, safetensors / Ollama blobs / manifests ↔ GGUF."""

from __future__ import annotations

import argparse
import sys

from ..errors import FormatError, VerificationError
from .shared import EXIT_OK, EXIT_TROUBLE, add_in_out, command

DESCRIPTION = """\
Convert a model file; the input kind is detected, the output kind comes from its name.
  GGUF -> GGUF            --byte-order converts every tensor block by block (any ggml type); --version writes v1, v2 or v3
  safetensors -> GGUF     an Ollama blob, an MLX or HF file, or an Ollama manifest (blobs checked against their sha256):
                          mxfp4 -> MXFP4, nvfp4 -> NVFP4, int4 -> Q4_1 when lossless (checked per group), plain floats
                          and integers as they are; otherwise BF16 or F32, whichever holds every value exactly (a notice)
  GGUF -> OUT.safetensors one file in the combined layout: MXFP4 -> mxfp4, NVFP4 -> nvfp4, Q4_1 -> int4; others as floats
  GGUF -> OUT/            an Ollama models folder: one blob per tensor and a manifest for --model
  any -> GGUF --type T    quantized to ggml type T, bit-exact with ggml (see the quantize command)
Every conversion is verified: input and output are dequantized and compared value by value."""


def quant_hint(value: str) -> str:
    """An affine quant type of schema/mlx_quant_types.json (int4, int8 or an alias): a typo is a usage error."""
    from ..quants.mlx import quant_types

    qt = quant_types().get(value.lower())
    if qt is None or qt.mode != "affine":
        names = sorted(k for k, t in quant_types().items() if t.mode == "affine")
        raise argparse.ArgumentTypeError(f"{value[:40]!r} is not an affine quant type ({', '.join(names)})")
    return value


def _model_name(value: str) -> str:
    """An argparse ``type``: an Ollama model name, each part by Ollama's grammar (it becomes a path under
    OUT/manifests): ``m:/abs/file`` and ``m:../../x`` are usage errors before anything is read."""
    from ..formats.ollama.schema import split_name

    try:
        split_name(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def _run(args: argparse.Namespace) -> int:
    from ..convert import convert

    if args.type:  # quantization is lossy: the quantize command's path, with its per-tensor RMSE instead of a check
        from .quantize import _run as quantize_run

        return quantize_run(args)

    def notice(line: str) -> None:
        print(f"notice: {line}", file=sys.stderr)

    try:
        report = convert(
            args.input,
            args.output,
            byte_order=args.byte_order,
            version=args.version,
            style=args.style,
            model=args.model,
            hint=args.quant_hint,
            log=notice,
        )
    except VerificationError as e:  # nothing was written: the conversion, not the input, failed
        print(f"{args.input}: error: {e}", file=sys.stderr)
        return EXIT_TROUBLE
    except FormatError:
        raise  # the input's fault (exit 1) or a refused request (2): main reports it with the file's name
    except ValueError as e:
        print(f"gguf-construct convert: {e}", file=sys.stderr)
        return EXIT_TROUBLE
    if args.byte_order or args.version:
        changes = [f"{args.byte_order}-endian"] if args.byte_order else []
        changes += [f"GGUF v{args.version}"] if args.version else []
        print(f"{args.output}: {', '.join(changes)}; {report.summary()}")
    else:
        print(f"{args.output}: {report.summary()}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    from .quantize import add_quantize_options

    conv = command(
        sub,
        "convert",
        _run,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_in_out(conv, "*.gguf, *.safetensors, or a folder (ending in /) for an Ollama models root")
    conv.add_argument("--byte-order", choices=("little", "big"), help="GGUF output byte order")
    conv.add_argument("--version", type=int, choices=(1, 2, 3), help="GGUF output version")
    conv.add_argument(
        "--style",
        choices=("safetensors", "mlx", "ollama"),
        help="safetensors header layout: the HF library's, MLX's or Ollama's Go writer's",
    )
    conv.add_argument(
        "--model", default="converted", type=_model_name, help="model name[:tag] for an Ollama models folder (default: converted)"
    )
    conv.add_argument(
        "--quant-hint",
        metavar="TYPE",
        type=quant_hint,
        help="quant type (int4, int8) to assume for blobs without quant metadata whose shapes are ambiguous",
    )
    add_quantize_options(conv, required=False)
