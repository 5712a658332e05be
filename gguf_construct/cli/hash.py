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
import queue
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from .shared import EXIT_BAD, EXIT_OK, command

#: llama.cpp's UUID namespace: uuid5(NAMESPACE_URL, 'en.wikipedia.org/wiki/Llama.cpp') (gguf-py's gguf_hash).
UUID_NAMESPACE_LLAMA_CPP = uuid.UUID("ef001206-dadc-5f6d-a15f-3359e577d4e5")
#: Tensors gguf_hash leaves out (buffers some converters keep, not weights).
SKIPPED_SUFFIXES = (".attention.masked_bias", ".attention.bias", ".rotary_emb.inv_freq")


def hash_file(f: Any, *, include_all: bool = False) -> dict[str, Any]:
    """``{"tensors": {name: {"sha1", "sha256"}}, "sha1", "sha256", "uuid"}`` of a loaded file's tensor data.

    Five digests run over every byte (per tensor sha1 and sha256, the model's sha1 and sha256, the UUID's sha1),
    each on its own thread (hashlib releases the GIL on large buffers, so they share the cores), while this
    thread reads the next chunks: tensor bytes are read in bounded chunks into a few reused buffers
    (:func:`..formats.streaming.read_chunks`), so memory stays flat whatever the file's size.
    """
    hashed = [t for t in f.tensors.values() if include_all or not t.name.endswith(SKIPPED_SUFFIXES)]
    names = [t.name for t in hashed]
    hashes = _HashPipeline(max((t.nbytes for t in hashed), default=0))
    try:
        for t in hashed:
            hashes.tensor(t.data)
    finally:
        digests = hashes.close()
    tensor_sha1, tensor_sha256, (model_sha1,), (model_sha256,), (uuid_digest,) = digests
    model_uuid = uuid.UUID(bytes=uuid_digest[:16], version=5)
    tensors = {n: {"sha1": a.hex(), "sha256": b.hex()} for n, a, b in zip(names, tensor_sha1, tensor_sha256)}
    return {"tensors": tensors, "sha1": model_sha1.hex(), "sha256": model_sha256.hex(), "uuid": str(model_uuid)}


#: Chunk buffers in flight: the reader fills one while the hash threads work through the others.
BUFFERS = 4


class _Digest(threading.Thread):
    """One running digest: takes (chunk, tensor ends here) items in order, keeps one digest per tensor (or one
    for everything), and hands each chunk's buffer back when done with it."""

    def __init__(self, make: Callable[[], Any], per_tensor: bool, release: Callable[[int], None]):
        super().__init__(daemon=True)
        self.make, self.per_tensor, self.release = make, per_tensor, release
        self.todo: queue.SimpleQueue[tuple[int, memoryview, bool] | None] = queue.SimpleQueue()
        self.digests: list[bytes] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        h = self.make()
        while (item := self.todo.get()) is not None:
            slot, chunk, last = item
            try:
                if self.error is None:
                    h.update(chunk)
                    if last and self.per_tensor:
                        self.digests.append(h.digest())
                        h = self.make()
            except BaseException as e:  # reported by close()
                self.error = e
            finally:
                self.release(slot)
        if self.error is None and not self.per_tensor:
            self.digests.append(h.digest())


class _HashPipeline:
    """Reads tensors chunk by chunk into at most :data:`BUFFERS` reused buffers and feeds every chunk to five
    digest threads; a buffer is reused once all five are done with it. ``largest``: the largest tensor's size in
    bytes; the buffers are made when first needed, no larger than it (zeroing 32 MiB of buffers would cost a
    small file's hash more than the hashing)."""

    def __init__(self, largest: int) -> None:
        from ..formats.streaming import CHUNK

        self.size = max(1, min(CHUNK, largest))
        self.buffers: list[bytearray] = []
        self.free: queue.SimpleQueue[int] = queue.SimpleQueue()
        self.pending = [0] * BUFFERS
        self.lock = threading.Lock()

        def uuid_digest() -> Any:  # the UUIDv5 is a sha1 over llama.cpp's namespace, then the data
            return hashlib.sha1(UUID_NAMESPACE_LLAMA_CPP.bytes)

        makers: list[tuple[Callable[[], Any], bool]] = [
            (hashlib.sha1, True),
            (hashlib.sha256, True),
            (hashlib.sha1, False),
            (hashlib.sha256, False),
        ]
        makers.append((uuid_digest, False))
        self.threads = [_Digest(make, per_tensor, self._release) for make, per_tensor in makers]
        for t in self.threads:
            t.start()

    def _release(self, slot: int) -> None:
        if slot < 0:
            return
        with self.lock:
            self.pending[slot] -= 1
            done = self.pending[slot] == 0
        if done:
            self.free.put(slot)

    def _buffers(self) -> Iterator[bytearray]:
        while True:
            if self.free.empty() and len(self.buffers) < BUFFERS:
                self.buffers.append(bytearray(self.size))
                self.free.put(len(self.buffers) - 1)
            slot = self.free.get()
            self.current = slot
            yield self.buffers[slot]

    def _feed(self, slot: int, chunk: memoryview, last: bool) -> None:
        with self.lock:
            self.pending[slot] = len(self.threads) if slot >= 0 else 0
        for t in self.threads:
            t.todo.put((slot, chunk, last))

    def tensor(self, data: Any) -> None:
        """Hash one tensor's bytes (an empty tensor still gets its own digests)."""
        from ..formats.streaming import read_chunks

        self.current = -1  # a chunk that is a slice of ``data`` itself, in no buffer
        previous: tuple[int, memoryview] | None = None
        for chunk in read_chunks(data, self._buffers()):
            if previous is not None:
                self._feed(*previous, False)
            previous = (self.current, chunk)
            self.current = -1
        self._feed(*(previous or (-1, memoryview(b""))), True)

    def close(self) -> list[list[bytes]]:
        for t in self.threads:
            t.todo.put(None)
        for t in self.threads:
            t.join()
        for t in self.threads:
            if t.error is not None:
                raise t.error
        return [t.digests for t in self.threads]


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
    from ..api.registry import load

    h = hash_file(load(args.file, strict=False), include_all=args.all)
    if args.against is None:
        if args.json:
            shown = {k: v for k, v in h.items() if not (args.no_layer and k == "tensors")}
            json.dump({"file": args.file, **shown}, sys.stdout, indent=1)
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
        print(
            f"{len(c['identical'])} tensors identical, {len(c['different'])} different, {len(c['only_a'])} "
            f"only in {args.file}, {len(c['only_b'])} only in {args.against}"
        )
    return EXIT_OK if same else EXIT_BAD


def register(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "hash",
        _cmd_hash,
        description=(
            "Print sha1 and sha256 of every tensor and of all tensor data, and llama.cpp's UUIDv5, as gguf-py's "
            "gguf_hash prints them. With --against OTHER: compare tensor by tensor (exit 1 when any differs or is "
            "missing)."
        ),
    )
    p.add_argument("file", metavar="FILE", help="a model file or URL (any format gguf-construct reads)")
    p.add_argument("--against", metavar="OTHER", help="compare FILE's tensors with OTHER's by name")
    p.add_argument("--no-layer", action="store_true", help="only the whole-model hashes (text and --json)")
    p.add_argument("--all", action="store_true", help="also hash the buffers gguf_hash skips (*.attention.bias, ...)")
    p.add_argument("--json", action="store_true", help="print JSON")
