"""Which of llama.cpp's legacy formats (or rwkv.cpp's) a file's first bytes name, by magic and version
(``schema/legacy.json``), and which recognisable files are no model at all.

``fmgg`` is both GGMF (version 1) and rwkv.cpp (versions 100 and 101): the version decides. A known magic with
a version no table lists is an ``UnknownFormatError`` (rule ``header.version``), so a newer file is named as
such rather than as "not a model file".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...core import rules
from ...core.tables import load_table

if TYPE_CHECKING:
    from ...core.tables import LegacyTable


def legacy_tables() -> LegacyTable:
    """schema/legacy.json: magics, hyper-parameter profiles, per-era type tables, rwkv.cpp's types (here, not in
    ``formats.legacy.schema``, which re-exports it: recognising a file must not import the GGML schema)."""
    return load_table("legacy")


#: The hyper-parameter layouts (``--hparams``): which program wrote a legacy file's header (not a validation
#: profile: those are ``validation.profiles``).
HPARAM_PROFILES: tuple[str, ...] = tuple(legacy_tables().profiles)


def legacy_format(head: bytes) -> str | None:
    """'ggml', 'ggmf', 'ggjt' or 'rwkv'; None when the magic is none of theirs (or is an adapter's, 'ggla')."""
    magics = {m.bytes.encode(): name for name, m in legacy_tables().magics.items()}
    name = magics.get(head[:4])
    if name is None or name == "ggla":
        return None
    if name == "ggml":
        return name
    version = int.from_bytes(head[4:8], "little") if len(head) >= 8 else None
    if name == "ggmf" and version in legacy_tables().rwkv.versions:
        return "rwkv"
    if version not in legacy_tables().magics[name].versions:
        raise rules.HEADER_VERSION.error(f"{name} magic with unknown version {version}", offset=4)
    return name


def sniffer(fmt: str) -> Callable[[bytes], bool]:
    """The sniffer of one legacy format: True when ``legacy_format`` names it."""

    def sniff(head: bytes) -> bool:
        return legacy_format(head) == fmt

    sniff.__name__ = sniff.__qualname__ = f"sniff_{fmt}"
    return sniff


def refuse_non_model(head: bytes) -> None:
    """Raise ``UnknownFormatError('format.not_a_model')`` for what llama.cpp wrote that is not a model: a LoRA
    adapter ('ggla'), or a bare vocabulary dump (no magic: a token count, then the first token's length)."""
    if head[:4] == legacy_tables().magics["ggla"].bytes.encode():
        raise rules.FORMAT_NOT_A_MODEL.error("a llama.cpp legacy LoRA adapter ('ggla'): not a model file, not supported", offset=0)
    count, first = int.from_bytes(head[:4], "little"), int.from_bytes(head[4:8], "little")
    if len(head) >= 8 and 0 < count <= 1 << 21 and first <= 256:
        raise rules.FORMAT_NOT_A_MODEL.error(
            f"no magic: this looks like a bare vocabulary dump ({count} tokens, then the tokens; "
            "llama.cpp wrote one on 2023-03-21), not a model file",
            offset=0,
        )
