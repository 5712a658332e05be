"""``hash``: sha1 and sha256 of every tensor's bytes and of all tensor data, with gguf-py's ``gguf_hash``
conventions, so the two tools' outputs can be compared line for line.

Like ``gguf_hash``: tensors are hashed in file order; names ending in ``.attention.masked_bias``,
``.attention.bias`` or ``.rotary_emb.inv_freq`` are left out (``--all`` keeps them); the whole-model hashes run
over the remaining tensors' bytes one after another; the UUID is a UUIDv5 (sha1) in llama.cpp's namespace.
A gguf-split set hashes as the one model it is, so ``hash`` of a set and of the merged file agree.
``--against OTHER`` compares two files tensor by tensor (by name): proof that a migration kept every tensor.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import uuid
from typing import Any

from .common import EXIT_BAD, EXIT_OK

#: llama.cpp's UUID namespace: uuid5(NAMESPACE_URL, 'en.wikipedia.org/wiki/Llama.cpp') (gguf-py's gguf_hash).
UUID_NAMESPACE_LLAMA_CPP = uuid.UUID("ef001206-dadc-5f6d-a15f-3359e577d4e5")
#: Tensors gguf_hash leaves out (buffers some converters keep, not weights).
SKIPPED_SUFFIXES = (".attention.masked_bias", ".attention.bias", ".rotary_emb.inv_freq")


def hash_file(f: Any, *, include_all: bool = False) -> dict[str, Any]:
    """``{"tensors": {name: {"sha1", "sha256"}}, "sha1", "sha256", "uuid"}`` of a loaded file's tensor data."""
    sha1, sha256, uuid_sha1 = hashlib.sha1(), hashlib.sha256(), hashlib.sha1(UUID_NAMESPACE_LLAMA_CPP.bytes)
    tensors: dict[str, dict[str, str]] = {}
    for t in f.tensors.values():
        if not include_all and t.name.endswith(SKIPPED_SUFFIXES):
            continue
        data = t.data
        tensors[t.name] = {"sha1": hashlib.sha1(data).hexdigest(), "sha256": hashlib.sha256(data).hexdigest()}
        for h in (sha1, sha256, uuid_sha1):
            h.update(data)
    model_uuid = uuid.UUID(bytes=uuid_sha1.digest()[:16], version=5)
    return {"tensors": tensors, "sha1": sha1.hexdigest(), "sha256": sha256.hexdigest(), "uuid": str(model_uuid)}


def hash_lines(h: dict[str, Any], name: str, per_tensor: bool = True) -> list[str]:
    """The lines gguf_hash prints (``sha256    <hex>  <file>:<tensor>``, then the whole-model lines)."""
    lines = []
    if per_tensor:
        for tensor, d in h["tensors"].items():
            lines.append(f"sha1      {d['sha1']}  {name}:{tensor}")
            lines.append(f"sha256    {d['sha256']}  {name}:{tensor}")
    lines += [f"sha1      {h['sha1']}  {name}", f"sha256    {h['sha256']}  {name}", f"uuid      {h['uuid']}  {name}"]
    return lines


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, list[str]]:
    """Tensors by name: identical, different, only in a, only in b."""
    ta, tb = a["tensors"], b["tensors"]
    return {
        "identical": [n for n in ta if n in tb and ta[n]["sha256"] == tb[n]["sha256"]],
        "different": [n for n in ta if n in tb and ta[n]["sha256"] != tb[n]["sha256"]],
        "only_a": [n for n in ta if n not in tb],
        "only_b": [n for n in tb if n not in ta],
    }


def _cmd_hash(args: argparse.Namespace) -> int:
    from ..api.file import load

    h = hash_file(load(args.file, strict=False), include_all=args.all)
    if args.against is None:
        if args.json:
            json.dump({"file": args.file, **h}, sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            print("\n".join(hash_lines(h, args.file, not args.no_layer)))
        return EXIT_OK
    other = hash_file(load(args.against, strict=False), include_all=args.all)
    c = compare(h, other)
    same = not (c["different"] or c["only_a"] or c["only_b"])
    if args.json:
        json.dump({"a": args.file, "b": args.against, "same": same, **c}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for n in c["different"]:
            print(f"different  {n}")
        for n in c["only_a"]:
            print(f"only in {args.file}  {n}")
        for n in c["only_b"]:
            print(f"only in {args.against}  {n}")
        print(f"{len(c['identical'])} tensors identical, {len(c['different'])} different, {len(c['only_a'])} only in {args.file}, {len(c['only_b'])} only in {args.against}")
    return EXIT_OK if same else EXIT_BAD


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "hash",
        help="sha1/sha256 per tensor and of all tensor data (gguf_hash's output)",
        description=(
            "Print sha1 and sha256 of every tensor and of all tensor data, and llama.cpp's UUIDv5, as gguf-py's "
            "gguf_hash prints them. With --against OTHER: compare tensor by tensor (exit 1 when any differs or is "
            "missing)."
        ),
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--against", metavar="OTHER", help="compare FILE's tensors with OTHER's by name")
    p.add_argument("--no-layer", action="store_true", help="only the whole-model hashes")
    p.add_argument("--all", action="store_true", help="also hash the buffers gguf_hash skips (*.attention.bias, ...)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=_cmd_hash)
