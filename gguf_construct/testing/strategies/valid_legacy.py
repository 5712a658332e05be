"""Hypothesis strategies drawing valid legacy files: GGML (every hyper-parameter profile), GGMF v1, GGJT v1–v3
and rwkv.cpp 100/101, as schema containers (``legacy_containers()``, ``rwkv_containers()``) and as bytes
(``legacy_bytes()``, ``rwkv_bytes()``). Each profile's fields are drawn from its declaration (formats/legacy/hparams.py); tensor types from
the
era's own table (schema/legacy.json), so
retired block layouts appear in the files that could hold them; tensor data is random whole blocks."""

from __future__ import annotations

from typing import Any

import numpy as np
from construct import Container, Rebuild, Renamed, Struct, evaluate
from hypothesis import strategies as st

from ...formats.legacy.hparams import PROFILE_FIELDS
from ...formats.legacy.legacy_fields import LegacyName, LegacyVocab, NumpyArray, VocabArray
from ...formats.legacy.schema import GGML, legacy_tables, resolve_type, table_for, type_table
from ...formats.rwkv.schema import RWKV

__all__ = ["legacy_bytes", "legacy_containers", "rwkv_bytes", "rwkv_containers"]

_names = st.from_regex(r"[a-z][a-z0-9_.]{0,20}", fullmatch=True)


def _tensor(draw: Any, table: str, ids: list[int], max_dims: int, min_dims: int, fields: tuple[str, str, str]) -> Container:
    type_id = draw(st.sampled_from(ids))
    t = resolve_type(table, type_id)
    n_dims = draw(st.integers(min_dims, max_dims))
    ne = [draw(st.integers(1, 2)) * t.elements] + [draw(st.integers(1, 3)) for _ in range(n_dims - 1)] if n_dims else []
    n = int(np.prod(ne)) if ne else 1
    if n % t.elements:
        ne, n = [t.elements], t.elements
    data = draw(st.binary(min_size=t.nbytes(n), max_size=t.nbytes(n)))
    type_f, dims_f, name_f = fields
    return Container({type_f: type_id, dims_f: ne, name_f: draw(_names), "data": data})


def _draw_fields(draw: Any, fields: Any, c: Container, fmt: str, ftypes: list[int]) -> None:
    """Draw a value for each field of a profile's declaration (``legacy_profiles``) into ``c``: small positive
    integers, finite floats, ``ftype`` from ``ftypes``, counted arrays as long as the fields before them say."""
    for field in fields:
        name, con = field.name, field.subcon if isinstance(field, Renamed) else field
        if isinstance(con, Struct):
            inner = Container(_=c)
            _draw_fields(draw, con.subcons, inner, fmt, ftypes)
            del inner["_"]
            c[name] = inner
        elif isinstance(con, Rebuild):
            continue  # counts and lengths: the schema computes them
        elif isinstance(con, VocabArray):
            n = evaluate(con.count, c) if con.count != "vocab_count" else draw(st.integers(0, 6))
            scored = bool(evaluate(con.scored, Container(c, format=fmt)))
            texts = draw(st.lists(st.binary(max_size=6), min_size=n, max_size=n))
            scores = np.array(draw(st.lists(st.floats(-100, 0, width=32), min_size=n, max_size=n)), "<f4") if scored else None
            c[name] = LegacyVocab(texts, scores)
        elif isinstance(con, NumpyArray):
            c[name] = np.arange(con._count(c), dtype=con.dtype)
        elif isinstance(con, LegacyName):
            c[name] = draw(st.text("abc-16k", max_size=12))
        elif name == "ftype":
            c[name] = draw(st.sampled_from(ftypes))
        elif con.sizeof() == 4 and con.fmtstr[-1] == "f":
            c[name] = float(np.float32(draw(st.floats(-8, 8, width=32))))
        else:
            c[name] = draw(st.integers(1, 6))


@st.composite
def legacy_containers(draw: Any, fmt: str | None = None, profile: str | None = None) -> Container:
    """A GGML/GGMF/GGJT container; ``fmt``/``profile`` fix the container and hyper-parameter profile."""
    profiles = legacy_tables().profiles
    profile = profile or draw(st.sampled_from(sorted(profiles)))
    prof = profiles[profile]
    fmt = fmt or draw(st.sampled_from(prof["containers"]))
    version = None if fmt == "ggml" else draw(st.sampled_from(legacy_tables().magics[fmt].versions))
    c = Container(format=fmt, version=version, profile=profile)
    ftypes = [0, 1, 1002, 1008] if prof["quant_era"] == "ftype" else list(range(10))
    _draw_fields(draw, PROFILE_FIELDS[profile], c, fmt, ftypes)
    hp = {k: v for block in ("hparams", "hparams2") if block in c for k, v in c[block].items()}
    table = table_for(fmt, version, profile, hp)
    ids = sorted(type_table(table)) if not table.startswith("rwkv") else []
    ids = [i for i in ids if resolve_type(table, i).elements <= 256]
    c["tensors"] = [_tensor(draw, table, ids, min(prof["max_dims"], 3), 1, ("type", "ne", "name")) for _ in range(draw(st.integers(0, 3)))]
    return c


def legacy_bytes(fmt: str | None = None, profile: str | None = None) -> st.SearchStrategy[bytes]:
    """Valid legacy files as bytes (built with the schema)."""
    return legacy_containers(fmt, profile).map(GGML.build)


@st.composite
def rwkv_containers(draw: Any, version: int | None = None) -> Container:
    """An rwkv.cpp container of version 100 or 101 with parameters of that version's types."""
    version = version or draw(st.sampled_from([100, 101]))
    table = f"rwkv{version}"
    ids = sorted(legacy_tables().rwkv.types[version])
    ids = [i for i in ids if resolve_type(table, i).elements <= 256]
    params = [_tensor(draw, table, ids, 3, 1, ("data_type", "shape", "key")) for _ in range(draw(st.integers(0, 4)))]
    return Container(
        version=version,
        n_vocab=draw(st.integers(1, 300)),
        n_embed=draw(st.integers(1, 64)),
        n_layer=draw(st.integers(1, 12)),
        data_type=draw(st.sampled_from(ids)),
        parameters=params,
    )


def rwkv_bytes(version: int | None = None) -> st.SearchStrategy[bytes]:
    """Valid rwkv.cpp files as bytes."""
    return rwkv_containers(version).map(RWKV.build)
