"""Validation of GGML/GGMF/GGJT and rwkv.cpp files: every finding as a ``validation.Issue``.

The schemas already reject what makes a file unreadable (unknown magic or version, a type id its era does not
define, lengths past the end, a short last record). These checks cover what a readable file can still get
wrong. Profile 'spec' is the format as its reference describes it; profile 'ggml' adds what the last loader of
that format accepted (llama.cpp of 2023-08-21 for llama files, whisper.cpp today, rwkv.cpp today): the same
gates those loaders apply, e.g. no pre-GGJT-v2 quantized llama files, no rwkv.cpp version-100 quantized files.
"""

from __future__ import annotations

from typing import Any

from construct import Container

from ..core import rules
from ..core.tables import FILE_TYPES
from ..core.untrusted import decimal
from ..formats.legacy.schema import GGML, LegacyType, hparam_items, legacy_tables, resolve_type
from ..formats.rwkv.schema import RWKV
from .issue import Issue, parse_then_check
from .profiles import LEGACY_PROFILES, LegacyProfile, require

__all__ = ["LLAMA_LOADER_TYPES", "ZERO_OK", "check_legacy", "check_rwkv", "validate_legacy_bytes", "validate_rwkv_bytes"]

#: Hyper-parameters that may be 0 (the rest count things and must be positive).
ZERO_OK = {"ftype", "par_res", "version_major", "version_minor", "version_patch"}
#: Tensor type ids llama.cpp's last legacy loader accepted (ggml-org/llama.cpp: llama.cpp at commit dadbed99e, 2023-08-21).
LLAMA_LOADER_TYPES = legacy_tables().llama_loader_types


def _profile(profile: str) -> bool:
    require(profile, LEGACY_PROFILES)
    return profile == "ggml"


def validate_legacy_bytes(data: Any, profile: LegacyProfile | str = "spec", hparams: str | None = None) -> list[Issue]:
    """Parse and check a GGML/GGMF/GGJT file; a file the schema cannot read gives one issue."""
    return parse_then_check(lambda: GGML.parse(data, **({"profile": hparams} if hparams else {})), lambda c: check_legacy(c, profile))


def validate_rwkv_bytes(data: Any, profile: LegacyProfile | str = "spec") -> list[Issue]:
    """Parse and check an rwkv.cpp file."""
    return parse_then_check(lambda: RWKV.parse(data), lambda c: check_rwkv(c, profile))


def check_legacy(c: Container, profile: LegacyProfile | str = "spec") -> list[Issue]:
    """Every rule of ``profile`` applied to a parsed GGML/GGMF/GGJT container."""
    loader = _profile(profile)
    out: list[Issue] = []
    prof = legacy_tables().profiles[c["profile"]]
    hp = {k: v for _, k, v in hparam_items(c)}
    for block, k, v in hparam_items(c):
        if isinstance(v, int) and (v < 0 or (v == 0 and k not in ZERO_OK)):
            out.append(Issue(rules.HPARAMS_VALUE, f"{k} = {v}: must be {'≥ 0' if k in ZERO_OK else 'positive'}", f"{block}.{k}"))
    if c["profile"] == "llama":
        _check_llama_header(c, hp, loader, out)
    else:
        _check_example_header(c, hp, out)
    _check_tensors(c, prof["max_dims"], out)
    if loader and c["profile"] == "llama":
        for i, t in enumerate(c["tensors"]):
            if int(t["type"]) not in LLAMA_LOADER_TYPES:
                out.append(
                    Issue(
                        rules.LOADER_TYPE,
                        f"llama.cpp's loader does not accept tensor type {t['type']}",
                        f"tensors[{i}].type",
                        t["_offset"] + 8,
                    )
                )
    return out


def _check_llama_header(c: Container, hp: dict[str, Any], loader: bool, out: list[Issue]) -> None:
    ftype = hp["ftype"]
    if ftype not in FILE_TYPES or ftype > 18:
        out.append(Issue(rules.HPARAMS_FTYPE, f"ftype {ftype} is not a llama.cpp legacy file type (0-18)", "hparams.ftype"))
    if hp["n_head"] > 0 and hp["n_rot"] != hp["n_embd"] // hp["n_head"]:
        out.append(
            Issue(
                rules.HPARAMS_N_ROT,
                f"n_rot {hp['n_rot']} is not n_embd / n_head = {hp['n_embd'] // hp['n_head']} "
                "(the first release wrote 64; loaders ignore it)",
                "hparams.n_rot",
                severity="warning",
            )
        )
    if not loader:
        return
    fmt, version = c["format"], c.get("version")
    pre_v2 = fmt in ("ggml", "ggmf") or (fmt == "ggjt" and version == 1)
    if pre_v2 and ftype not in (0, 1, 7):
        out.append(
            Issue(
                rules.LOADER_VERSION,
                f"{fmt} v{version or '-'} files with quantized ftype {ftype} predate GGJT v2's block layouts: "
                "llama.cpp refused them (migrate re-encodes them)",
                "hparams.ftype",
            )
        )
    elif (pre_v2 or version == 2) and ftype in (2, 3, 7):
        out.append(
            Issue(
                rules.LOADER_VERSION,
                f"files before GGJT v3 with ftype {ftype} use f32 block scales: llama.cpp refused them",
                "hparams.ftype",
            )
        )


def _check_example_header(c: Container, hp: dict[str, Any], out: list[Issue]) -> None:
    if "vocab_count" in c and "n_vocab" in hp:
        n, want = int(c["vocab_count"]), hp["n_vocab"]
        if c["profile"] in ("gpt2", "gptj", "starcoder") and n != want:
            out.append(Issue(rules.VOCAB_COUNT, f"{n} tokens stored, n_vocab is {want}", "vocab_count"))
        elif n > want:
            out.append(Issue(rules.VOCAB_COUNT, f"{n} tokens stored, more than n_vocab {want}", "vocab_count"))
    m = c.get("mel_filters")
    if m is not None and "n_mels" in hp and "n_mel" in m and m["n_mel"] != hp["n_mels"]:
        out.append(
            Issue(rules.MEL_FILTERS_N_MEL, f"{m['n_mel']} filter rows, n_mels is {hp['n_mels']}", "mel_filters.n_mel", severity="warning")
        )


def _check_tensors(
    c: Container,
    max_dims: int,
    out: list[Issue],
    records: str = "tensors",
    fields: tuple[str, str, str, str] = ("type", "ne", "name", "n_dims"),
    min_dims: int = 0,
) -> None:
    """Tensor records of either schema; ``fields`` names its type, extents, name and dimension count fields."""
    type_f, dims_f, name_f, count_f = fields
    seen: dict[str, int] = {}
    for i, t in enumerate(c[records]):
        path, at = f"{records}[{i}]", int(t["_offset"])
        ne, name = list(t[dims_f]), t[name_f]
        if not min_dims <= len(ne) <= max_dims:
            out.append(
                Issue(rules.TENSOR_N_DIMS, f"{name!r}: {len(ne)} dimensions, {min_dims} to {max_dims} allowed", f"{path}.{count_f}", at)
            )
        if any(d < 1 for d in ne):
            out.append(Issue(rules.TENSOR_NE, f"{name!r}: dimension of 0 in {ne}", f"{path}.{dims_f}", at + 12))
        ltype: LegacyType = resolve_type(c["type_table"], int(t[type_f]))
        if ne and ne[0] % ltype.elements:
            out.append(
                Issue(
                    rules.TENSOR_NE0,
                    f"{name!r}: ne0 = {ne[0]} is not a multiple of {ltype.layout}'s block of {ltype.elements}",
                    f"{path}.{dims_f}",
                    at + 12,
                )
            )
        if not name:
            out.append(Issue(rules.TENSOR_NAME, "empty tensor name", f"{path}.{name_f}", at))
        if name in seen:
            out.append(Issue(rules.TENSOR_DUPLICATE, f"{name!r} also at record {seen[name]}", f"{path}.{name_f}", at))
        seen.setdefault(name, i)
        pad = t.get("_padding")
        if pad and any(pad):
            out.append(Issue(rules.TENSOR_PADDING, f"{name!r}: non-zero alignment padding", f"{path}._padding", at, severity="warning"))


def check_rwkv(c: Container, profile: LegacyProfile | str = "spec") -> list[Issue]:
    """Every rule of ``profile`` applied to a parsed rwkv.cpp container."""
    loader = _profile(profile)
    out: list[Issue] = []
    version, header_type = int(c["version"]), int(c["data_type"])
    table = legacy_tables().rwkv.types[version]
    removed = legacy_tables().rwkv.removed
    for k in ("n_vocab", "n_embed", "n_layer"):
        if int(c[k]) == 0:
            out.append(Issue(rules.HEADER_VALUE, f"{k} is 0", k, None))
    if header_type not in table:
        out.append(Issue(rules.HEADER_DATA_TYPE, f"data_type {header_type} is not defined for version {version}", "data_type", 20))
    elif loader and header_type in removed:
        out.append(Issue(rules.LOADER_TYPE, f"data_type {header_type} ({removed[header_type]}) was removed from rwkv.cpp", "data_type", 20))
    elif loader and version == 100 and header_type > 1:
        out.append(
            Issue(
                rules.LOADER_VERSION,
                "rwkv.cpp refuses quantized version-100 files (pre-GGJT-v2 layouts; migrate re-encodes them)",
                "version",
                4,
            )
        )
    _check_tensors(c, 3, out, "parameters", ("data_type", "shape", "key", "dim_count"), min_dims=1)
    if loader:
        for i, p in enumerate(c["parameters"]):
            if int(p["data_type"]) in removed:
                out.append(
                    Issue(
                        rules.LOADER_TYPE,
                        f"{p['key']!r}: type {p['data_type']} was removed from rwkv.cpp",
                        f"parameters[{i}].data_type",
                        p["_offset"] + 8,
                    )
                )
    shapes = {p["key"]: list(p["shape"]) for p in c["parameters"]}
    emb = shapes.get("emb.weight")
    if emb is None:
        out.append(Issue(rules.PARAMETER_MISSING, "no emb.weight", "parameters", None))
    elif emb != [int(c["n_embed"]), int(c["n_vocab"])]:
        out.append(
            Issue(
                rules.HEADER_SHAPE,
                f"emb.weight has shape {emb}, the header says n_embed {c['n_embed']}, n_vocab {c['n_vocab']}",
                "n_embed",
                12,
            )
        )
    blocks = {b for k in shapes if k.startswith("blocks.") and (b := decimal(k.split(".")[1])) is not None}
    if blocks and max(blocks) + 1 != int(c["n_layer"]):
        out.append(Issue(rules.HEADER_N_LAYER, f"parameters for {max(blocks) + 1} blocks, n_layer is {c['n_layer']}", "n_layer", 16))
    return out
