"""GGUF → GGJT v3 for users of old tools: the inverse of :func:`.llama.migrate_llama` for GGJT v3 content.

Every tensor must be of a type GGJT v3 knows (F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, the k-quants Q2_K–Q6_K)
and carry a llama.cpp legacy name; the vocabulary is written back in the GGMF/GGJT text convention. ``n_mult``
and ``n_rot`` come from ``llama.legacy.*`` when the file came from a legacy file, else ``n_rot`` is
``n_embd / n_head`` and ``n_mult`` the largest of 256, 128, … that reproduces ``feed_forward_length``.
"""

from __future__ import annotations

import os

import numpy as np
from construct import Container

from ..api.fileio import write_atomic
from ..api.gguf_file import GGUFFile
from ..core import rules
from ..formats.legacy.legacy_fields import LegacyVocab
from ..formats.legacy.schema import GGML
from .llama import legacy_texts, llama_names
from .steps import MigrationReport, required_int

GGJT_V3_TYPES = {
    "f32": 0,
    "f16": 1,
    "q4_0": 2,
    "q4_1": 3,
    "q5_0": 6,
    "q5_1": 7,
    "q8_0": 8,
    "q2_K": 10,
    "q3_K": 11,
    "q4_K": 12,
    "q5_K": 13,
    "q6_K": 14,
}


def _n_mult(n_embd: int, n_ff: int) -> int:
    for m in (256, 128, 64, 32, 16, 8, 4, 2, 1):
        if (2 * (4 * n_embd) // 3 + m - 1) // m * m == n_ff:
            return m
    raise rules.EXPORT_N_MULT.error(f"no n_mult gives feed_forward_length {n_ff} for n_embd {n_embd}: legacy loaders could not size it")


def export_ggjt(g: GGUFFile, dst: str | os.PathLike[str]) -> MigrationReport:
    md = g.metadata
    if md.get("general.architecture") != "llama":
        raise rules.EXPORT_ARCHITECTURE.error("only architecture 'llama' exports to GGJT")
    if md.get("llama.attention.head_count_kv", md.get("llama.attention.head_count")) != md.get("llama.attention.head_count"):
        raise rules.EXPORT_GQA.error("GGJT has no field for grouped-query attention (head_count_kv != head_count)")
    i32 = 2**31 - 1  # GGJT's hyper-parameters are i32
    n_embd = required_int(md, "llama.embedding_length", 1, i32, rules.EXPORT_HPARAMS, "GGJT")
    n_head = required_int(md, "llama.attention.head_count", 1, i32, rules.EXPORT_HPARAMS, "GGJT")
    n_layer = required_int(md, "llama.block_count", 0, i32, rules.EXPORT_HPARAMS, "GGJT")
    if "llama.legacy.n_mult" in md:
        n_mult = required_int(md, "llama.legacy.n_mult", 1, i32, rules.EXPORT_HPARAMS, "GGJT")
    else:
        n_mult = _n_mult(n_embd, required_int(md, "llama.feed_forward_length", 1, i32, rules.EXPORT_HPARAMS, "GGJT"))
    n_rot = required_int(md, "llama.legacy.n_rot", 0, i32, rules.EXPORT_HPARAMS, "GGJT") if "llama.legacy.n_rot" in md else n_embd // n_head
    ftype = required_int(md, "general.file_type", 0, i32, rules.EXPORT_HPARAMS, "GGJT") if "general.file_type" in md else 0
    tokens = list(md.get("tokenizer.ggml.tokens", []))
    types = [int(x) for x in md.get("tokenizer.ggml.token_type", [1] * len(tokens))]
    scores = md.get("tokenizer.ggml.scores")
    empty = [int(i) for i in md.get("llama.legacy.empty_tokens", [])]
    vocab = LegacyVocab(legacy_texts(tokens, types, empty), np.zeros(len(tokens), "<f4") if scores is None else scores.astype("<f4"))
    names, records = llama_names(), []
    for t in g.tensors.values():
        legacy = names.backward(t.name)
        if legacy is None:
            raise rules.EXPORT_TENSOR_NAME.error(f"tensor {t.name!r} has no legacy llama name")
        if t.type.name not in GGJT_V3_TYPES or len(t.shape) > 2:
            raise rules.EXPORT_TYPE.error(f"tensor {t.name!r} ({t.type.name}, {len(t.shape)} dims) cannot be stored in GGJT v3")
        if any(d > i32 for d in t.shape):
            raise rules.EXPORT_SHAPE.error(f"tensor {t.name!r} shape {list(t.shape)}: GGJT stores extents as i32")
        records.append(Container(name=legacy, type=GGJT_V3_TYPES[t.type.name], ne=list(t.shape), data=t.data, _padding=None))
    emb = g.tensors.get("token_embd.weight")
    n_vocab = len(tokens) if tokens else (emb.shape[1] if emb is not None and len(emb.shape) == 2 else 0)
    hparams = Container(n_vocab=n_vocab, n_embd=n_embd, n_mult=n_mult, n_head=n_head, n_layer=n_layer, n_rot=n_rot, ftype=ftype)
    obj = Container(format="ggjt", version=3, profile="llama", hparams=hparams, vocab=vocab, tensors=records)

    def verify(tmp: str) -> None:
        back = GGML.parse_file(tmp, profile="llama")
        if len(back["tensors"]) != len(records) or len(back["vocab"]) != len(tokens):
            raise rules.EXPORT_VERIFY.error("the exported file reads back differently")

    write_atomic(dst, lambda out: GGML.build_stream(obj, out), verify)
    return MigrationReport(os.fspath(dst), "GGJT v3 (llama)", tensors=len(records), copied=len(records))
