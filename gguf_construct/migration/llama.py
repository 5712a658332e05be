"""GGML / GGMF / GGJT → GGUF v3 (as ggml-org/llama.cpp's convert_llama_ggml_to_gguf.py), and the ggml-example and whisper.cpp profiles.

llama files become architecture ``llama`` exactly as llama.cpp's own migrator lays them out (its keys, its
vocabulary rewrite, its tensor names), with three differences: ``ne`` is taken from the file
(llama.cpp's script divides it by the type size since gguf-py's writer changed in b83bab15a); quantized files of every era are accepted
(retired
layouts are re-encoded, see :mod:`.common`); vocab-only files are accepted (``n_ff`` then comes from ``n_mult``).
``n_mult`` and ``n_rot``, which GGUF has no key for, are kept as ``llama.legacy.n_mult``/``llama.legacy.n_rot``
so that nothing is lost and :mod:`.export` can write the file back; so is ``llama.legacy.empty_tokens`` when the
NUL byte token that ``train-text-from-scratch`` wrote empty is restored (:func:`lost_nul`).

Other profiles keep their tensor names; hyper-parameters with a GGUF key go there, the rest to
``{arch}.{name}``; byte-level BPE tokens are written in GPT-2's byte-to-unicode form.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..api.legacy_file import LegacyFile
from ..api.metadata import Metadata
from ..core import rules
from ..core.tables import FILE_TYPES, standard_key
from ..formats.legacy.schema import hparams
from .steps import MigrationReport, NameMap, PlannedTensor, finish_gguf, migrate_tables, plan_tensor

SPIECE_SPACE = "\u2581"
UNK_TEXT = b" \xe2\x81\x87 "  # the unknown token's text in GGMF/GGJT files: space, U+2047, space


def llama_names() -> NameMap:
    return NameMap(migrate_tables().llama.tensor_names)


def n_ff_of(f: LegacyFile) -> int:
    """``n_ff`` from ``layers.0.feed_forward.w1``'s ``ne[1]`` (what llama.cpp's migrator does), or from ``n_mult``
    by the legacy loader's rule when the file has no tensors."""
    w1 = f.tensors.get("layers.0.feed_forward.w1.weight")
    if w1 is not None and len(w1.shape) == 2:
        return int(w1.shape[1])
    md = f.metadata
    n_mult = md["n_mult"]
    if n_mult <= 0:
        raise rules.MIGRATE_N_FF.error(f"n_mult is {n_mult}: no feed-forward length can be derived")
    return (2 * (4 * md["n_embd"]) // 3 + n_mult - 1) // n_mult * n_mult


def lost_nul(texts: list[bytes]) -> bool:
    """Whether token 3 is LLaMA's byte token 0x00 whose text a C-string writer dropped: ``train-text-from-scratch``
    (2023) wrote it as an empty string, while the byte tokens around it (4 = 0x01, …) are intact. llama.cpp's
    tokenizer of that era mapped byte ``b`` to id ``b + 3`` whatever the text; today's looks ``<0x00>`` up and
    aborts (``std::out_of_range``) on a NUL in the input when no token has that text."""
    return len(texts) > 4 and texts[3] == b"" and texts[4] == b"\x01"


def llama_vocab(texts: list[bytes], scored: bool) -> tuple[list[str], list[int]]:
    """Legacy token texts → GGUF tokens and token types (convert_llama_ggml_to_gguf.py's); a dropped NUL byte token (:func:`lost_nul`)
    becomes ``<0x00>`` again."""
    tt = migrate_tables().llama.token_types
    nul = lost_nul(texts)
    tokens, types = [], []
    for i, raw in enumerate(texts):
        if i < 3:
            token, kind = ("<unk>", "<s>", "</s>")[i], ("unknown", "control", "control")[i]
        elif i == 3 and nul:
            token, kind = "<0x00>", "byte"
        elif not raw:
            token, kind = "", "control"
        elif i <= 258 and len(raw) == 1:
            token, kind = f"<0x{raw[0]:02X}>", "byte"
        else:
            try:
                token, kind = raw.decode("utf-8").replace(" ", SPIECE_SPACE), "normal"
            except UnicodeDecodeError:
                raise rules.MIGRATE_TOKEN.error(f"token {i} ({raw!r}) is not UTF-8 and not a byte token: GGUF cannot hold it") from None
        tokens.append(token)
        types.append(tt[kind])
    return tokens, types


def legacy_texts(tokens: list[str], types: list[int], empty: Sequence[int] = ()) -> list[bytes]:
    """The inverse of :func:`llama_vocab` for files that follow the GGMF/GGJT convention (llama.cpp commit 074bea2eb on); the ids
    in ``empty`` (``llama.legacy.empty_tokens``: restored byte tokens) are written empty as the source had them."""
    tt = migrate_tables().llama.token_types
    blank = set(int(i) for i in empty)
    out = []
    for i, (tok, kind) in enumerate(zip(tokens, types)):
        if i in blank:
            out.append(b"")
        elif i == 0 and kind == tt["unknown"]:
            out.append(UNK_TEXT)
        elif kind == tt["control"]:
            out.append(b"")
        elif kind == tt["byte"] and len(tok) == 6 and tok.startswith("<0x"):
            out.append(bytes([int(tok[3:5], 16)]))
        else:
            out.append(tok.replace(SPIECE_SPACE, " ").encode("utf-8"))
    return out


def llama_metadata(f: LegacyFile, *, context_length: int, eps: float, gqa: int, name: str | None) -> Metadata:
    md, out = f.metadata, Metadata([])
    n_head = md["n_head"]
    if n_head <= 0 or md["n_embd"] % n_head:
        raise rules.MIGRATE_HPARAMS.error(f"n_embd {md['n_embd']} is not a multiple of n_head {n_head}")
    if gqa < 1 or n_head % gqa:
        raise rules.MIGRATE_GQA.error(f"--gqa {gqa} does not divide n_head {n_head}")
    out.set("general.architecture", "llama")
    if name:
        out.set("general.name", name)
    out.set("general.file_type", md["ftype"])
    out.set("llama.context_length", context_length)
    out.set("llama.embedding_length", md["n_embd"])
    out.set("llama.block_count", md["n_layer"])
    out.set("llama.feed_forward_length", n_ff_of(f))
    out.set("llama.rope.dimension_count", md["n_embd"] // n_head)
    out.set("llama.attention.head_count", n_head)
    out.set("llama.attention.head_count_kv", n_head // gqa)
    out.set("llama.attention.layer_norm_rms_epsilon", eps)
    out.set("llama.legacy.n_mult", md["n_mult"], type="i32")
    out.set("llama.legacy.n_rot", md["n_rot"], type="i32")
    texts = md.get("vocab.tokens", [])
    if texts:
        tokens, types = llama_vocab(texts, "vocab.scores" in md)
        scores = md.get("vocab.scores")
        out.set("tokenizer.ggml.model", "llama")
        out.set("tokenizer.ggml.tokens", tokens)
        out.set("tokenizer.ggml.scores", np.zeros(len(tokens), np.float32) if scores is None else np.asarray(scores, np.float32))
        out.set("tokenizer.ggml.token_type", np.array(types, np.int32))
        for i, key in enumerate(("unknown", "bos", "eos")):
            if i < len(tokens):  # a vocabulary of fewer than 3 tokens has no id for the rest
                out.set(f"tokenizer.ggml.{key}_token_id", i)
        if lost_nul(texts):
            out.set("llama.legacy.empty_tokens", np.array([3], np.int32))
    return out


def written_file_type(planned: list[PlannedTensor], header: int) -> int:
    """llama.cpp's ``general.file_type`` for the tensors as written: that of the type holding the most elements
    (``ALL_F32``, ``MOSTLY_F16``, ``MOSTLY_Q4_0``, …), or the header's when llama.cpp has no name for it."""
    counts: dict[str, int] = {}
    for p in planned:
        counts[p.type] = counts.get(p.type, 0) + int(np.prod(p.shape, dtype=np.int64))
    main = max(counts, key=counts.__getitem__)
    ids = {v: k for k, v in FILE_TYPES.items()}
    return ids.get("ALL_F32" if main == "f32" else f"MOSTLY_{main.upper()}", header)


def migrate_llama(
    f: LegacyFile,
    dst: str | os.PathLike[str],
    *,
    context_length: int | None = None,
    eps: float | None = None,
    gqa: int | None = None,
    name: str | None = None,
    progress: bool = False,
) -> MigrationReport:
    d = migrate_tables().llama.defaults
    report = MigrationReport(os.fspath(dst), "GGUF v3 (llama)")
    if "vocab.scores" not in f.metadata and f.metadata.get("vocab.tokens"):
        report.notices.append("unversioned GGML files have no token scores: written as 0.0")
    if lost_nul(f.metadata.get("vocab.tokens", [])):
        report.notices.append("token 3 (byte 0x00, written empty by train-text-from-scratch) restored as <0x00>")
    metadata = llama_metadata(
        f,
        context_length=context_length or int(d["context_length"]),
        eps=d["eps"] if eps is None else eps,
        gqa=gqa or int(d["gqa"]),
        name=name,
    )
    names = llama_names()
    planned: list[PlannedTensor] = []
    for t in f.tensors.records():
        target = names.forward(t.name)
        if target is None:
            raise rules.MIGRATE_TENSOR_NAME.error(f"tensor {t.name!r} has no GGUF name (gguf-py's TensorNameMap for llama)")
        planned.append(plan_tensor(t, target, report))
    header = f.metadata["ftype"]
    if report.widened and written_file_type(planned, header) != header:
        ftype = written_file_type(planned, header)
        metadata.set("general.file_type", ftype)
        report.notices.append(
            f"general.file_type {ftype} ({FILE_TYPES[ftype]}): the header's ftype {header} no longer describes the tensors"
        )
    return finish_gguf(dst, metadata, planned, report, progress=progress)


# -- ggml examples and whisper.cpp --------------------------------------------------------------------------------
@cache
def byte_encoder() -> tuple[str, ...]:
    """GPT-2's byte-to-unicode table: printable Latin-1 bytes stand for themselves, the other 68 bytes for code
    points from U+0100 on, in byte order. GGUF's 'gpt2' tokenizer stores byte-level tokens in this form."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return tuple(table[b] for b in range(256))


def bytes_to_unicode(raw: bytes) -> str:
    enc = byte_encoder()
    return "".join(enc[b] for b in raw)


def unicode_to_bytes(text: str) -> bytes:
    dec = {c: b for b, c in enumerate(byte_encoder())}
    return bytes(dec[c] for c in text)


def example_metadata(f: LegacyFile, name: str | None) -> Metadata:
    spec = migrate_tables().examples[f.profile]
    arch, out, md = spec.arch, Metadata([]), f.metadata
    out.set("general.architecture", arch)
    if name:
        out.set("general.name", name)
    if "ftype" in md:
        out.set("general.file_type", md["ftype"] % 1000)
        if md["ftype"] // 1000:
            out.set("general.quantization_version", md["ftype"] // 1000)
    hp = f.container
    for k, v in hparams(hp).items():
        if k == "ftype":
            continue
        key = spec.keys.get(k, f"{arch}.{k}")
        std = standard_key(key, arch)
        if std is not None and std.type == "bool":
            v = bool(v)
        out.set(key, v, type=std.type if std else ("f32" if isinstance(v, float) else "i32"))
    for key, v in spec.defaults.items():
        if key not in out:
            std = standard_key(key, arch)
            out.set(key, v, type=std.type if std else None)
    if "model_type" in md:
        out.set(f"{arch}.model_type", md["model_type"])
    if "tdt_durations" in md:
        out.set(f"{arch}.tdt_durations", np.asarray(md["tdt_durations"], np.uint32))
    if "encoder" in md:
        out.set(f"{arch}.encoder", np.asarray(md["encoder"], np.int32).reshape(-1))
    texts = md.get("vocab.tokens")
    if texts:
        out.set("tokenizer.ggml.model", spec.tokenizer)
        out.set("tokenizer.ggml.tokens", [bytes_to_unicode(t) for t in texts])
        if "vocab.scores" in md:
            out.set("tokenizer.ggml.scores", np.asarray(md["vocab.scores"], np.float32))
    return out


def _array_tensor(name: str, values: np.ndarray) -> PlannedTensor:
    values = np.ascontiguousarray(values, "<f4")
    return PlannedTensor(name, list(values.shape[::-1]), "f32", values, lambda: values, "copied")


def migrate_example(
    f: LegacyFile, dst: str | os.PathLike[str], *, name: str | None = None, progress: bool = False, **_: Any
) -> MigrationReport:
    report = MigrationReport(os.fspath(dst), f"GGUF v3 ({migrate_tables().examples[f.profile].arch})")
    metadata = example_metadata(f, name)
    planned: list[PlannedTensor] = []
    for key in ("mel_filters", "window"):
        if key in f.metadata and np.asarray(f.metadata[key]).size:
            planned.append(_array_tensor(key, np.asarray(f.metadata[key])))
    taken = {p.name for p in planned}
    for t in f.tensors.records():
        if t.name in taken:
            raise rules.MIGRATE_TENSOR_NAME.error(f"tensor {t.name!r} clashes with a header section of the same name")
        planned.append(plan_tensor(t, t.name, report))
    report.copied += sum(1 for p in planned if p.name in taken)
    return finish_gguf(dst, metadata, planned, report, progress=progress)


def default_name(path: Any) -> str:
    return Path(path).stem
