"""``dequant``: tensors as float32 numpy arrays (.npz or .npy); ``example``: the path of the shipped example file."""

from __future__ import annotations

import argparse
import os
import zipfile
from typing import Any

import numpy as np

from ..api.fileio import check_output, files_of, reading, write_atomic
from ..api.registry import load
from ..core import rules
from ..core.progress import progress
from .shared import EXIT_OK, command, usage


def _cmd_dequant(args: argparse.Namespace) -> int:
    kind = os.path.splitext(args.output)[1].lower()
    if kind not in (".npy", ".npz"):  # np.save/np.savez would add their suffix: the file written is the one named
        raise rules.OUTPUT_SUFFIX.error(f"{args.output}: name an .npz file (any number of tensors) or an .npy file (one tensor)")
    check_output(args.output, [args.file])
    f = load(args.file)
    names = args.tensor or list(f.tensors)
    missing = [n for n in names if n not in f.tensors]
    if missing:
        usage(f"gguf-construct dequant: no tensor {missing[0]!r} in {args.file}")
    if kind == ".npy" and len(names) != 1:
        usage("gguf-construct dequant: .npy holds one tensor: name it with --tensor")
    if kind == ".npz":
        for n in names:
            check_member_name(n)
    with reading(files_of(f)):
        write_arrays(args.output, f, names)
    print(f"{args.output}: {len(names)} tensors as float32")
    return EXIT_OK


def check_member_name(name: str) -> None:
    """Refuse (``output.name``) a tensor name that would leave the folder an ``.npz`` is unpacked into: its members
    are named after the tensors (``NAME.npy``, as ``np.savez`` names them), and a hostile file's names may be
    absolute, hold ``..`` segments, backslashes or NUL bytes."""
    parts = name.replace("\\", "/").split("/")
    if name.startswith("/") or "\\" in name or "\0" in name or ".." in parts or (name[:1].isalpha() and name[1:2] == ":"):
        raise rules.OUTPUT_NAME.error(
            f"tensor name {name[:80]!r} would be a path out of the folder the .npz is unpacked into; dequantize the others with --tensor",
            path=name[:80],
        )


def write_arrays(path: str, f: Any, names: list[str]) -> None:
    """Dequantize ``names`` of ``f`` into ``path`` (.npy: the one tensor; else an .npz), atomically and at exactly
    that path: numpy writes into the temporary file object, so it adds no suffix of its own."""

    def write(out: Any) -> None:
        if path.lower().endswith(".npy"):
            np.save(out, f.tensors[names[0]].to_numpy())
            return
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as z:  # np.savez's layout, one array at a time
            for n in progress(names, len(names), "dequantizing", unit="tensor", minimum=8):
                with z.open(n + ".npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, f.tensors[n].to_numpy(), allow_pickle=False)

    write_atomic(path, write)


def _cmd_example(args: argparse.Namespace) -> int:
    from ..data import example_path

    print(example_path())
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    deq = command(
        sub,
        "dequant",
        _cmd_dequant,
        description="Dequantize tensors (bit-exact with ggml) into an .npz (any number of "
        "tensors) or .npy (one tensor), shaped in numpy order.",
    )
    deq.add_argument("file", metavar="FILE", help="a model file or URL (any format gguf-construct reads)")
    deq.add_argument("output", metavar="OUT", help="OUT.npz (any number of tensors) or OUT.npy (one tensor)")
    deq.add_argument("--tensor", action="append", metavar="NAME", help="a tensor to write (repeatable; default: all)")
    command(sub, "example", _cmd_example)
