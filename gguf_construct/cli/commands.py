"""The command list: each command's name, the module under ``cli`` whose ``register`` adds its parser, and the
one line the top-level help shows for it. One table, so that ``gguf-construct --help`` and ``--version`` import
no command module, and a command imports only its own (``main.parser``)."""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    module: str  #: the module of ``gguf_construct.cli`` that registers the command (``register(sub)``)
    help: str  #: the command's line in ``gguf-construct --help``


COMMANDS: dict[str, Command] = {
    "info": Command("info", "show a file's model summary, metadata and tensors (or a table over many files)"),
    "validate": Command("validate", "check files against the spec or ggml's reader"),
    "set": Command("edit", "set a metadata key (any type or size; the file is rewritten atomically)"),
    "delete": Command("edit", "remove metadata keys (the file is rewritten atomically)"),
    "rename-tensor": Command("edit", "rename a tensor (the file is rewritten atomically)"),
    "diff": Command("diff", "compare two model files: header, metadata, tensor infos and values"),
    "hash": Command("hash", "sha1/sha256 per tensor and of all tensor data (gguf_hash's output)"),
    "plan": Command("plan", "llama.cpp's memory for a model: weights, KV cache, recurrent state, compute buffer"),
    "split": Command("split", "split a GGUF file into gguf-split shards"),
    "merge": Command("split", "merge a gguf-split shard set into one file"),
    "convert": Command("convert", "GGUF byte order/version; safetensors, Ollama blobs and manifests to and from GGUF"),
    "quantize": Command("quantize", "quantize a model (GGUF, safetensors/Ollama blob, legacy) to a ggml type, bit-exact with ggml"),
    "scan": Command("scan", "info --json and validate over many paths or URLs, one JSON line each (resumable; threads or Dask)"),
    "migrate": Command(
        "migrate",
        "turn a GGML/GGMF/GGJT, whisper.cpp or rwkv.cpp file (or GGUF v1/v2) into GGUF v3 (RWKV v6/v7: llama.cpp's rwkv6/rwkv7)",
    ),
    "export": Command("migrate", "write a GGUF file as GGJT v3 (llama) or rwkv.cpp v101 (rwkv, rwkv6, rwkv7) for old tools"),
    "fuzz": Command("fuzz", "run generated and mutated files through another reader and ours, report crashes, hangs and disagreements"),
    "dequant": Command("arrays", "write tensors as float32 numpy arrays"),
    "example": Command("arrays", "print the path of a small GGUF file shipped with the package"),
}
