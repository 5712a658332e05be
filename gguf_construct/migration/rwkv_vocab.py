"""RWKV vocabularies as llama.cpp's ``rwkv`` tokenizer reads them (schema/rwkv_llama.json "vocabulary").

rwkv.cpp files carry no vocabulary. A byte-level model (256 tokens, token id = byte) gets its 256 bytes; a World
model gets the World vocabulary (``rwkv_vocab_v20230424.txt``, shipped in ``gguf_construct/data``, or any file of
that format), laid out as llama.cpp's converter does: token 0 ``<s>``, the file's tokens, ``[PAD<i>]`` up to the
model's size. Every token is stored as Python's repr of its bytes without the ``b''`` (:func:`escape_token`), which
llama.cpp's ``llama_unescape_rwkv_token`` turns back into the bytes (:func:`unescape_token`).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..api.metadata import Metadata
from ..core import rules
from ..core.tables import load_table

#: A World vocabulary line is short ("65529 '<128 spaces>' 128"); longer ones are refused before evaluating them.
MAX_LINE = 4096
#: The World vocabulary is 1 MiB; a vocabulary file is read whole, so larger ones than this are refused.
MAX_FILE = 64 << 20


def vocab_table() -> Mapping[str, Any]:
    return load_table("rwkv_llama").vocabulary


def world_vocab_path() -> Path:
    """The World vocabulary shipped with the package (see data/RWKV_VOCAB_NOTICE.txt for its licence)."""
    return Path(__file__).resolve().parents[1] / "data" / vocab_table()["world_file"]


def escape_token(token: bytes) -> str:
    """llama.cpp's converter form of a token: ``repr(bytes)[2:-1]`` (``b'\\n'`` → ``\\n``, ``b'\\xe4'`` → ``\\xe4``)."""
    return repr(bytes(token))[2:-1]


def unescape_token(text: str) -> bytes:
    """The bytes llama.cpp's ``llama_unescape_rwkv_token`` reads from a stored token (its rules, for checks)."""
    out, i, raw = bytearray(), 0, text.encode("utf-8")
    while i < len(raw):
        c = raw[i]
        if c != 0x5C or i + 1 >= len(raw):
            out.append(c)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == ord("x") and i + 4 <= len(raw):
            out.append(int(raw[i + 2 : i + 4], 16))
            i += 4
            continue
        out.append({ord("t"): 9, ord("n"): 10, ord("r"): 13}.get(nxt, nxt))
        i += 2
    return bytes(out)


def read_world_vocab(path: str | os.PathLike[str]) -> list[bytes]:
    """The tokens of a World vocabulary file (``id python-literal byte-length`` per line, ids 1, 2, 3 … in order)."""
    tokens: list[bytes] = []
    from ..formats.base import open_regular

    with open_regular(path, blocking=False) as f:  # a FIFO or a device is refused before a byte is read; nothing waits
        size = os.fstat(f.fileno()).st_size
        if size > MAX_FILE:
            raise rules.VOCAB_SIZE.error(f"{os.fspath(path)} has {size} bytes: more than {MAX_FILE} for a vocabulary")
        raw = f.read(MAX_FILE + 1)
    if len(raw) > MAX_FILE:
        raise rules.VOCAB_SIZE.error(f"{os.fspath(path)} grew past {MAX_FILE} bytes while it was read")
    try:
        lines = raw.decode("utf-8").split("\n")
    except UnicodeDecodeError as e:
        raise rules.VOCAB_UTF8.error(f"{os.fspath(path)} is not UTF-8 text: {e.reason}", offset=e.start) from None
    if lines and lines[-1] == "":
        lines.pop()
    for n, line in enumerate(lines, 1):
        where = f"line {n}"
        if len(line) > MAX_LINE:
            raise rules.VOCAB_LINE.error(f"{len(line)} characters: longer than {MAX_LINE}", path=where)
        first, last = line.find(" "), line.rfind(" ")
        if first <= 0 or last <= first:
            raise rules.VOCAB_LINE.error("not 'id literal length'", path=where)
        try:
            token_id, literal, length = int(line[:first]), ast.literal_eval(line[first + 1 : last]), int(line[last + 1 :])
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            raise rules.VOCAB_LINE.error("not 'id literal length' with a Python str or bytes literal", path=where) from None
        if not isinstance(literal, (str, bytes)):
            raise rules.VOCAB_TOKEN.error(f"the token is a {type(literal).__name__}, not str or bytes", path=where)
        token = literal.encode("utf-8") if isinstance(literal, str) else literal
        if token_id != n:
            raise rules.VOCAB_ID.error(f"id {token_id} where {n} was expected (ids count up from 1)", path=where)
        if len(token) != length or not token:
            raise rules.VOCAB_LENGTH.error(f"the token has {len(token)} bytes, the line says {length}", path=where)
        tokens.append(token)
    return tokens


def rwkv_tokenizer(md: Metadata, n_vocab: int, vocab: str | os.PathLike[str] | None) -> str:
    """Write the ``rwkv`` tokenizer of a model with ``n_vocab`` tokens into ``md``; returns what was written.

    Without ``vocab`` a 256-token model gets its bytes and a larger one the shipped World vocabulary."""
    spec = vocab_table()
    types = spec["token_types"]
    if vocab is None and n_vocab == spec["byte_level_size"]:
        texts = [escape_token(bytes([i])) for i in range(n_vocab)]
        kinds = [types["normal"]] * n_vocab
        what = f"byte-level vocabulary ({n_vocab} tokens)"
    else:
        path = Path(vocab) if vocab is not None else world_vocab_path()
        if not path.is_file():
            raise rules.MIGRATE_VOCAB.error(f"vocabulary file {os.fspath(path)} not found: give the World vocabulary with --vocab FILE")
        words = read_world_vocab(path)
        used = len(words) + 1
        if used > n_vocab:
            raise rules.MIGRATE_VOCAB_SIZE.error(
                f"{path.name} has {used} tokens ('{spec['world_first']}' and {len(words)} lines) but the model has {n_vocab}: "
                + (
                    "this byte-level model needs no --vocab"
                    if n_vocab == spec["byte_level_size"]
                    else "give the model's own vocabulary with --vocab FILE"
                ),
            )
        texts = [spec["world_first"]] + [escape_token(w) for w in words] + [spec["world_pad"].format(i=i) for i in range(used, n_vocab)]
        kinds = [types["control"]] + [types["normal"]] * len(words) + [types["unused"]] * (n_vocab - used)
        what = (
            f"World vocabulary {path.name} ({len(words)} tokens + '{spec['world_first']}'"
            + (f", {n_vocab - used} padding" if n_vocab > used else "")
            + ")"
        )
    md.set("tokenizer.ggml.model", "rwkv")
    md.set("tokenizer.ggml.tokens", texts, type="arr[str]")
    md.set("tokenizer.ggml.token_type", np.array(kinds, np.int32), type="arr[i32]")
    if texts[0] == spec["world_first"]:
        for key, value in spec["world_special"].items():
            md.set(key, value, type="u32")
        md.set("tokenizer.chat_template", spec["world_chat_template"])
    return what
