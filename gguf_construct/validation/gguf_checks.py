"""Validation of a parsed GGUF file against the spec ('spec') or what ggml's C reader demands ('ggml').

The schema already rejects what makes a file unreadable (bad magic, unknown version or value type, counts and
lengths past the end, nesting too deep, invalid UTF-8 in keys and string values). ``check`` applies the rules a
readable file can still break, and returns every finding as an ``Issue`` naming its rule, field path and byte
offset. The 'ggml' profile adds ggml's own rules: no v1, no nested arrays, tensor names shorter than 64 bytes,
a power-of-two alignment and tensor offsets equal to the running sum of padded sizes; ``validate`` under 'ggml'
adds, for an architecture ``schema/arch_tensors.json`` knows, the tensors llama.cpp's loader requires with their
shapes (``model_issues``).
"""

from __future__ import annotations

import bisect
import re
from fractions import Fraction
from typing import Any

import numpy as np
from construct import Container

from .. import errors
from ..core import rules
from ..core.tables import GGML_MAX_DIMS, GGML_TYPES, USER_TYPES_ENV, VALUE_TYPES, GGMLType, architecture_required_keys, standard_key
from ..core.untrusted import decimal
from ..formats.fields import StringArray, value_type_id
from ..formats.gguf.schema import GGUF, MAX_TENSOR_NAME, align_offset, sized_type
from . import fork_types
from .arch_tensors import check_architecture_tensors
from .issue import Issue, Severity, parse_then_check, raise_first
from .layer_arrays import check_layer_arrays
from .profiles import GGUF_PROFILES, GGUFProfile, require

__all__ = [
    "Issue",
    "check",
    "check_keys",
    "densest_type",
    "key_issues",
    "parameter_issue",
    "raise_first",
    "tensor_issues",
    "validate_gguf_bytes",
]
INT64_MAX = 2**63 - 1
KEY_SEGMENT = re.compile(r"[a-z0-9_]+\Z")


def validate_gguf_bytes(data: Any, profile: GGUFProfile | str = "spec") -> list[Issue]:
    """Parse and check a GGUF file; a file the schema cannot read gives one issue. Under 'ggml', also what
    llama.cpp's model loader refuses of a known architecture (``model_issues``)."""
    return parse_then_check(lambda: GGUF.parse(data), lambda c: check(c, len(memoryview(data)), profile) + model_issues(c, profile))


def validate_gguf_source(src: Any, profile: GGUFProfile | str = "spec") -> list[Issue]:
    """``validate_gguf_bytes`` for a file read by ranges (a ``sources.byte_source.ByteSource``): the header is
    fetched and checked, the tensor data is not (its placement is checked against the source's size)."""
    return parse_then_check(lambda: src.parse_header(GGUF, "tensor_data"), lambda c: check(c, src.size, profile) + model_issues(c, profile))


def model_issues(c: Container, profile: GGUFProfile | str) -> list[Issue]:
    """Under 'ggml', the tensors llama.cpp's loader requires of the file's architecture (``arch_tensors``): a rule of
    ``validate``, not of reading (``load(strict=True)`` accepts what ggml's reader accepts)."""
    if profile != "ggml":
        return []
    arch = next((kv["value"] for kv in c["metadata_kv"] if kv["key"] == "general.architecture"), None)
    out: list[Issue] = []
    check_architecture_tensors(c, arch if isinstance(arch, str) else None, out)
    check_layer_arrays(c, arch if isinstance(arch, str) else None, out)
    return out


def check(c: Container, file_size: int, profile: GGUFProfile | str = "spec", *, unknown_types: Severity = "error") -> list[Issue]:
    """Every rule of ``profile`` applied to a parsed GGUF container. ``unknown_types='warning'`` makes a
    tensor type id no table knows a warning (forward compatibility: what ``split`` and ``merge`` accept; the
    bytes of such a tensor reach up to the next tensor's offset)."""
    if unknown_types not in ("error", "warning"):
        raise ValueError("unknown_types must be 'error' or 'warning'")
    require(profile, GGUF_PROFILES)
    ggml = profile == "ggml"
    out: list[Issue] = []
    if ggml and int(c["version"]) == 1:
        out.append(Issue(rules.HEADER_VERSION, "ggml no longer reads GGUF v1 files", "version", 4))
    arch = _check_metadata(c, ggml, out)
    alignment = _check_alignment(c, ggml, out)
    _check_tensors(c, file_size, alignment, ggml, arch, out, unknown_types)
    return out


# -- metadata -------------------------------------------------------------------------------------------
def _check_metadata(c: Container, ggml: bool, out: list[Issue]) -> str | None:
    seen: dict[str, int] = {}
    arch = None
    values: dict[str, tuple[int, Any]] = {}
    for i, kv in enumerate(c["metadata_kv"]):
        key, at, path = kv["key"], kv.get("_offset"), f"metadata_kv[{i}]"
        values.setdefault(key, (i, kv))
        if key == "general.architecture" and isinstance(kv["value"], str):
            arch = kv["value"]
        _check_key(key, f"{path}.key", at, out)
        if key in seen:
            out.append(Issue(rules.KEY_DUPLICATE, f"key {key!r} also at metadata_kv[{seen[key]}]", f"{path}.key", at))
        seen.setdefault(key, i)
        _check_value(kv, f"{path}.value", at, ggml, out)
        if int(c["version"]) == 1:
            _check_v1_type(kv, f"{path}.value_type", at, out)
    _check_standard_types(c, arch, out)
    _check_tokenizer_lengths(values, out)
    _check_tokens(values, out)
    return arch


def key_issues(key: str) -> list[Issue]:
    """What the spec's key rules say about one key (what ``set`` checks before it writes one)."""
    out: list[Issue] = []
    _check_key(key, "key", None, out)
    return out


def _check_key(key: str, path: str, at: int | None, out: list[Issue]) -> None:
    raw = key.encode("utf-8")
    if not raw:
        out.append(Issue(rules.KEY_EMPTY, "empty key", path, at))
        return
    if len(raw) > 65535:
        out.append(Issue(rules.KEY_LENGTH, f"key of {len(raw)} bytes (at most 65535)", path, at))
    if not key.isascii():
        out.append(Issue(rules.KEY_ASCII, f"key {key!r} is not ASCII", path, at))
        return
    segments = key.split(".")
    bad = [s for s in segments if not KEY_SEGMENT.match(s)]
    if bad:
        # llama.cpp names some architectures with a hyphen ('command-r'); the spec asks for lower_snake_case.
        hyphen_only = all(KEY_SEGMENT.match(s.replace("-", "_")) for s in bad) and bad == segments[:1]
        out.append(Issue(rules.KEY_SYNTAX, f"key {key!r} is not dotted lower_snake_case", path, at, "warning" if hyphen_only else "error"))


def _check_value(kv: Container, path: str, at: int | None, ggml: bool, out: list[Issue]) -> None:
    vt = VALUE_TYPES[value_type_id(kv["value_type"])].name
    value = kv["value"]
    if vt == "bool" and value not in (True, False):
        out.append(Issue(rules.VALUE_BOOL, f"bool byte is {value}, not 0 or 1", path, at))
    if vt == "arr":
        _check_array(value, path, at, ggml, out)


def _check_v1_type(kv: Container, path: str, at: int | None, out: list[Issue]) -> None:
    """GGUF v1 had value types 0-9 only (u64, i64 and f64 came with v2): the reader is lenient about them,
    the spec is not. Nested arrays are followed into each inner array; the first offender is reported."""
    vt = VALUE_TYPES[value_type_id(kv["value_type"])]
    todo = [(kv["value"], path.removesuffix("_type"))] if vt.name == "arr" else []
    if vt.since > 1:
        todo, bad = [], (vt, path)
    else:
        bad = None
    while todo and bad is None:
        arr, where = todo.pop()
        et = VALUE_TYPES[value_type_id(arr["type"])]
        if et.since > 1:
            bad = (et, f"{where}.type")
        elif et.name == "arr":
            todo += [(inner, f"{where}.array[{j}]") for j, inner in enumerate(arr["array"])][::-1]
    if bad is not None:
        t, where = bad
        out.append(
            Issue(
                rules.VALUE_TYPE_V1,
                f"{kv['key']}: value type {t.id} ({t.name}) does not exist in GGUF v1 (it came with v{t.since})",
                where,
                at,
            )
        )


def _check_array(arr: Container, path: str, at: int | None, ggml: bool, out: list[Issue]) -> None:
    et = VALUE_TYPES[value_type_id(arr["type"])].name
    items = arr["array"]
    if et == "arr":
        if ggml:
            out.append(Issue(rules.ARRAY_NESTED, "ggml does not read arrays of arrays", path, at))
        for j, inner in enumerate(items):
            _check_array(inner, f"{path}.array[{j}]", at, ggml, out)
    elif et == "bool" and len(items) and int(np.asarray(items).view(np.uint8).max()) > 1:
        j = int(np.flatnonzero(np.asarray(items).view(np.uint8) > 1)[0])
        out.append(Issue(rules.VALUE_BOOL, f"bool element {j} is not 0 or 1", f"{path}.array[{j}]", at))
    elif et == "str" and isinstance(items, StringArray):
        try:
            items.check_utf8()
        except errors.FormatError as e:
            out.append(Issue.from_error(e))


def _check_standard_types(c: Container, arch: str | None, out: list[Issue]) -> None:
    """Standard keys must have their standard types: a consumer trusts them (S6: scores read as f32)."""
    for i, kv in enumerate(c["metadata_kv"]):
        std = standard_key(kv["key"], arch)
        if std is None:
            continue
        vt = VALUE_TYPES[value_type_id(kv["value_type"])].name
        label = f"arr[{VALUE_TYPES[value_type_id(kv['value']['type'])].name}]" if vt == "arr" else vt
        if label not in std.types:
            out.append(
                Issue(
                    rules.KEY_TYPE,
                    f"{kv['key']} is {label}, the spec says {' or '.join(std.types)}",
                    f"metadata_kv[{i}].value_type",
                    kv.get("_offset"),
                )
            )


def _check_tokenizer_lengths(values: dict[str, tuple[int, Any]], out: list[Issue]) -> None:
    """scores and token_type must be as long as tokens, special token ids inside it (consumers index by them)."""
    arr = VALUE_TYPES.lookup("arr").id
    _, tokens = values.get("tokenizer.ggml.tokens", (None, None))
    if tokens is None or value_type_id(tokens["value_type"]) != arr:
        return
    n = int(tokens["value"]["len"])
    for key in ("tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        i, kv = values.get(key, (None, None))
        if kv is not None and value_type_id(kv["value_type"]) == arr and int(kv["value"]["len"]) != n:
            out.append(
                Issue(
                    rules.TOKENIZER_LENGTH,
                    f"{key} has {kv['value']['len']} entries, tokens has {n}",
                    f"metadata_kv[{i}].value",
                    kv.get("_offset"),
                )
            )
    for key in ("bos", "eos", "unknown", "separator", "padding"):
        i, kv = values.get(f"tokenizer.ggml.{key}_token_id", (None, None))
        if kv is not None and isinstance(kv["value"], int) and not isinstance(kv["value"], bool) and not 0 <= kv["value"] < n:
            out.append(
                Issue(
                    rules.TOKENIZER_TOKEN_ID,
                    f"{kv['key']} = {kv['value']} is not a token id (n = {n})",
                    f"metadata_kv[{i}].value",
                    kv.get("_offset"),
                )
            )


#: llama.cpp's token type of a byte token (llama_token_type LLAMA_TOKEN_TYPE_BYTE, include/llama.h).
BYTE_TOKEN = 6
_BYTE_SPELLING = re.compile(r"<0x[0-9A-Fa-f]{2}>\Z")


def _check_tokens(values: dict[str, tuple[int, Any]], out: list[Issue]) -> None:
    """Warnings for what llama.cpp's vocabulary loader aborts on or refuses (src/llama-vocab.cpp), which GGUF
    itself allows: two tokens of the same text (its map from text to id loses one, and it asserts both are the
    same size), and BYTE tokens it cannot decode (token_to_byte reads ``<0xHH>`` for SPM and aborts for WPM)."""
    arr = VALUE_TYPES.lookup("arr").id
    i, tokens = values.get("tokenizer.ggml.tokens", (None, None))
    if tokens is None or value_type_id(tokens["value_type"]) != arr or VALUE_TYPES[value_type_id(tokens["value"]["type"])].name != "str":
        return
    try:
        texts = list(tokens["value"]["array"])
    except errors.FormatError:  # a token that is no UTF-8: the string rules report it
        return
    seen: dict[str, int] = {}
    for t, text in enumerate(texts if len(set(texts)) < len(texts) else ()):  # the set answers a vocabulary without duplicates at C speed
        first = seen.setdefault(text, t)
        if first != t:
            # vocabularies llama.cpp never loads have them: whisper.cpp's, written with replacement characters
            why = f"token {t} is {text!r}, as token {first} is: llama.cpp's vocabulary loader refuses it"
            at = f"metadata_kv[{i}].value.array[{t}]"
            out.append(Issue(rules.TOKENIZER_DUPLICATE, why, at, tokens.get("_offset"), severity="warning"))
            break  # one is enough: a vocabulary with one collision is refused whole
    j, types = values.get("tokenizer.ggml.token_type", (None, None))
    _, model = values.get("tokenizer.ggml.model", (None, None))
    if types is None or value_type_id(types["value_type"]) != arr or model is None or model["value"] not in ("llama", "bert"):
        return
    for t in (int(k) for k in np.flatnonzero(np.asarray(types["value"]["array"]) == BYTE_TOKEN)):
        if t >= len(texts):
            break
        if model["value"] == "bert" or not _BYTE_SPELLING.match(texts[t]):
            why = "a WPM (bert) vocabulary has no byte tokens" if model["value"] == "bert" else "a byte token is spelled <0xHH>"
            at = f"metadata_kv[{j}].value.array[{t}]"
            message = f"token {t} {texts[t]!r} is a BYTE token: {why}; llama.cpp's vocabulary loader aborts on it"
            out.append(Issue(rules.TOKENIZER_BYTE_TOKEN, message, at, types.get("_offset"), severity="warning"))
            break


def _check_alignment(c: Container, ggml: bool, out: list[Issue]) -> int:
    for i, kv in enumerate(c["metadata_kv"]):
        if kv["key"] != "general.alignment":
            continue
        path, at = f"metadata_kv[{i}].value", kv.get("_offset")
        if VALUE_TYPES[value_type_id(kv["value_type"])].name != "u32":
            out.append(Issue(rules.ALIGNMENT_TYPE, "general.alignment must be a u32", path, at))
            return 32
        a = int(kv["value"])
        if a == 0 or (ggml and a & (a - 1)) or (not ggml and a % 8):
            need = "a power of two" if ggml else "a multiple of 8"
            out.append(Issue(rules.ALIGNMENT_VALUE, f"general.alignment = {a} is not {need} above 0", path, at))
        return a or 32
    return 32


# -- tensors --------------------------------------------------------------------------------------------
def _check_tensors(
    c: Container, file_size: int, alignment: int, ggml: bool, arch: str | None, out: list[Issue], unknown_types: Severity = "error"
) -> None:
    infos = c["tensor_infos"]
    data_offset = int(c["data_offset"])
    names: dict[str, int] = {}
    spans: list[tuple[int, int, int, int | None]] = []
    expected_offset = 0
    first_inconsistent: tuple[int, int] | None = None
    max_name = MAX_TENSOR_NAME - 1 if ggml else MAX_TENSOR_NAME
    for i, ti in enumerate(infos):
        path, at = f"tensor_infos[{i}]", ti.get("_offset")
        name = ti["name"]
        if len(name.encode("utf-8")) > max_name:
            out.append(
                Issue(rules.TENSOR_NAME_LENGTH, f"name of {len(name.encode('utf-8'))} bytes (at most {max_name})", f"{path}.name", at)
            )
        if name in names:
            out.append(Issue(rules.TENSOR_DUPLICATE, f"name {name!r} also at tensor_infos[{names[name]}]", f"{path}.name", at))
        names.setdefault(name, i)
        nbytes = _check_shape_and_type(ti, path, at, out, unknown_types)
        offset = int(ti["offset"])
        if offset % alignment:
            out.append(
                Issue(
                    rules.TENSOR_OFFSET_ALIGNMENT, f"offset {offset} is not a multiple of the alignment {alignment}", f"{path}.offset", at
                )
            )
        if nbytes is None:
            first_inconsistent = first_inconsistent or (i, expected_offset)
            continue
        if data_offset + offset + nbytes > file_size:
            out.append(
                Issue(rules.TENSOR_BOUNDS, f"data [{offset}, {offset + nbytes}) ends past the end of the file", f"{path}.offset", at)
            )
        if offset != expected_offset and first_inconsistent is None:
            first_inconsistent = (i, expected_offset)
        expected_offset = align_offset(offset + nbytes, alignment) if nbytes else offset
        spans.append((offset, offset + nbytes, i, at))
    _check_overlaps(spans, out)
    _check_fork_types(infos, file_size - data_offset, alignment, out)
    places = [(f"tensor_infos[{i}].dimensions", ti.get("_offset")) for i, ti in enumerate(infos)]
    issue = parameter_issue(
        [ti["dimensions"] for ti in infos], file_size - data_offset, all(sized_type(ti["type"]) for ti in infos), places
    )
    if issue is not None:
        out.append(issue)
    if ggml and first_inconsistent is not None:
        i, want = first_inconsistent
        ti = infos[i]
        out.append(
            Issue(
                rules.TENSOR_OFFSET_INCONSISTENT,
                f"offset {int(ti['offset'])} is not {want}, the running sum of padded sizes ggml lays data out by",
                f"tensor_infos[{i}].offset",
                ti.get("_offset"),
            )
        )
    if infos and bytes(c.get("_padding") or b"").strip(b"\0"):
        out.append(
            Issue(rules.DATA_PADDING, "padding before the tensor data is not zero", "_padding", data_offset - len(c["_padding"]), "warning")
        )
    _check_block_indices(c, arch, out)


def _check_fork_types(infos: Any, data_size: int, alignment: int, out: list[Issue]) -> None:
    """A tensor of a type id ggml knows whose data span fits a fork's type of that id and not ggml's: the file is the
    fork's (``schema/fork_types.json``), and reading it as ggml's type would misread every value."""
    starts = sorted({int(ti["offset"]) for ti in infos})
    for i, ti in enumerate(infos):
        type_id, t = int(ti["type"]), GGML_TYPES.get(int(ti["type"]))
        if t is None or t.removed or not fork_types.fork_types_of(type_id):
            continue
        offset = int(ti["offset"])
        after = bisect.bisect_right(starts, offset)
        span = (starts[after] if after < len(starts) else data_size) - offset
        n = 1
        for d in ti["dimensions"]:
            n *= int(d)
        names = fork_types.fitting(type_id, n, span, alignment)
        if names:
            out.append(
                Issue(
                    rules.TENSOR_TYPE,
                    f"type {type_id} is ggml's {t.name}, but its {span} bytes of data for {n} values fit "
                    f"{fork_types.describe(type_id)}: a fork's file, whose values ggml's {t.name} would misread",
                    f"tensor_infos[{i}].type",
                    ti.get("_offset"),
                )
            )


def tensor_issues(ti: Container, path: str = "tensor") -> list[Issue]:
    """What is wrong with one tensor info's dimensions, element count and type on its own (the checks that
    make its byte size and its dequantization well defined)."""
    out: list[Issue] = []
    _check_shape_and_type(ti, path, ti.get("_offset"), out)
    return out


def _check_shape_and_type(ti: Container, path: str, at: int | None, out: list[Issue], unknown_types: Severity = "error") -> int | None:
    """Dimensions, element count, type and byte size of one tensor; its byte size when all are valid."""
    dims = [int(d) for d in ti["dimensions"]]
    if not 1 <= len(dims) <= GGML_MAX_DIMS:
        out.append(Issue(rules.TENSOR_N_DIMS, f"{len(dims)} dimensions (1 to {GGML_MAX_DIMS})", f"{path}.n_dimensions", at))
        if not dims:
            return None
    if any(d < 1 for d in dims):
        out.append(Issue(rules.TENSOR_SHAPE, f"dimension {min(dims)} in {dims} (each must be at least 1)", f"{path}.dimensions", at))
        return None
    n = 1
    for d in dims:
        n *= d
    if n > INT64_MAX:
        out.append(Issue(rules.TENSOR_NE_OVERFLOW, f"{dims} has {n} elements, more than int64 holds", f"{path}.dimensions", at))
        return None
    type_id = int(ti["type"])
    t = GGML_TYPES.get(type_id)
    if t is None or t.removed:
        fork = fork_types.describe(type_id)
        why = (
            "has been removed from ggml"
            if t
            else f"is unknown (a newer ggml's? strict=False reads the rest; {USER_TYPES_ENV} can declare it)"
            + (f"; forks of llama.cpp number their own types so: {fork}" if fork else "")
        )
        out.append(Issue(rules.TENSOR_TYPE, f"ggml type {type_id} {why}", f"{path}.type", at, "error" if t else unknown_types))
        return None
    if dims[0] % t.block_size:
        out.append(
            Issue(
                rules.TENSOR_BLOCK, f"ne0 = {dims[0]} is not a multiple of {t.name}'s block size {t.block_size}", f"{path}.dimensions", at
            )
        )
        return None
    nbytes = t.nbytes(n)
    if nbytes > INT64_MAX - 64:
        out.append(Issue(rules.TENSOR_NBYTES_OVERFLOW, f"{nbytes} bytes of data, more than int64 holds", f"{path}.dimensions", at))
        return None
    return int(nbytes)


def densest_type() -> GGMLType:
    """The type with the most elements per byte in the tables (ggml's and the user's): it bounds how many
    parameters any number of bytes can hold."""
    sized: list[GGMLType] = [t for t in GGML_TYPES.values() if t.sized]
    return max(sized, key=lambda t: Fraction(t.block_size, t.type_size))


def parameter_issue(
    shapes: list[Any], data_bytes: int, all_sized: bool = True, places: list[tuple[str, int | None]] | None = None
) -> Issue | None:
    """Rule ``model.parameters``: tensors claiming more elements than their data can hold.

    ``data_bytes`` bytes of tensor data hold at most ``data_bytes × block_size / type_size`` elements of the
    densest type of the tables (``densest_type``); a file whose tensors add up to more is implausible, e.g.
    a crafted 70-byte header claiming 7e159 parameters. An error when every tensor's type has known sizes; a
    warning when one has not (a type newer than the tables could be denser). Products stop growing as soon as
    they pass the bound, so absurd shapes cost no big-integer work and no huge number is ever printed. The
    finding names the tensor whose count crosses the bound (``places[i]``: its path and offset, when given).
    """
    dense = densest_type()
    cap = max(0, data_bytes) * dense.block_size // dense.type_size
    total = 0
    for i, dims in enumerate(shapes):
        dims = [int(d) for d in dims]
        n = 0 if 0 in dims else 1
        for d in dims if n else ():
            n *= d
            if n > cap:
                break
        total += n
        if total > cap:
            path, at = places[i] if places else (f"tensors[{i}]", None)
            return Issue(
                rules.MODEL_PARAMETERS,
                f"the tensors claim more than {cap:,} parameters (from this one on), the most {max(0, data_bytes):,} bytes of tensor data "
                f"can hold ({dense.name}, the densest type, stores {dense.block_size} per {dense.type_size} bytes)",
                path,
                at,
                "error" if all_sized else "warning",
            )
    return None


def _check_overlaps(spans: list[tuple[int, int, int, int | None]], out: list[Issue]) -> None:
    spans = sorted(spans, key=lambda s: s[:3])
    for (s0, e0, i0, _), (s1, _e1, i1, at1) in zip(spans, spans[1:]):
        if s1 < e0:
            out.append(
                Issue(
                    rules.TENSOR_OVERLAP,
                    f"data of tensor_infos[{i1}] starts at {s1}, inside tensor_infos[{i0}] [{s0}, {e0})",
                    f"tensor_infos[{i1}].offset",
                    at1,
                )
            )


_BLOCK_INDEX = re.compile(r"blk\.([0-9]+)\.")  # ASCII only: ``\d`` takes other scripts' digits


def _check_block_indices(c: Container, arch: str | None, out: list[Issue]) -> None:
    """``blk.N.*`` tensors must have N < ``{arch}.block_count``: loaders size per-layer arrays by it (S17)."""
    if arch is None:
        return
    count = next((kv["value"] for kv in c["metadata_kv"] if kv["key"] == f"{arch}.block_count"), None)
    if not isinstance(count, int) or isinstance(count, bool):
        return
    for i, ti in enumerate(c["tensor_infos"]):
        m = _BLOCK_INDEX.match(ti["name"])
        index = decimal(m.group(1)) if m else None  # None: more digits than any count (int() refuses > 4,300)
        if m and (index is None or index >= count):
            out.append(
                Issue(
                    rules.TENSOR_BLOCK_INDEX,
                    f"{ti['name']!r} is beyond {arch}.block_count = {count}",
                    f"tensor_infos[{i}].name",
                    ti.get("_offset"),
                )
            )


# -- standard keys (validate --keys) --------------------------------------------------------------------
def check_keys(f: Any) -> list[Issue]:
    """The spec's key rules for a loaded file: required keys present, standard keys with their standard types.

    Required: ``general.architecture``; the keys the spec lists for that architecture (``schema/keys.json``,
    'architectures'); ``general.quantization_version`` when any tensor is quantized. A file without tensors
    (a vocab-only file) gets warnings for the missing architecture keys, not errors. A shard after the first
    (``split.no`` > 0) carries no model metadata by gguf-split's convention and is not checked. Files of other
    formats have no GGUF keys: one warning says so.
    """
    if getattr(f, "format", "gguf") != "gguf":
        return [Issue(rules.KEYS_FORMAT, f"standard GGUF keys do not apply to a {f.format} file", severity="warning")]
    meta = f.metadata
    out: list[Issue] = []
    type_of = getattr(meta, "type_of", None)
    offset_of = getattr(meta, "offset_of", lambda key: None)
    keys = list(meta)
    split_no = meta.get("split.no")
    if isinstance(split_no, int) and not isinstance(split_no, bool) and split_no > 0:
        return out
    arch = meta.get("general.architecture")
    arch = arch if isinstance(arch, str) else None
    if type_of is not None:
        for i, key in enumerate(keys):
            std = standard_key(key, arch)
            if std is not None and type_of(key) not in std.types:
                out.append(
                    Issue(
                        rules.KEY_TYPE,
                        f"{key} is {type_of(key)}, the spec says {' or '.join(std.types)}",
                        f"metadata_kv[{i}].value_type",
                        offset_of(key),
                    )
                )
    if "general.architecture" not in meta:
        out.append(Issue(rules.KEY_MISSING, "general.architecture is required", "metadata_kv"))
    tensors = getattr(f, "tensors", {})
    severity: Severity = "error" if len(tensors) else "warning"
    for key in architecture_required_keys(arch) if arch else []:
        if key not in meta:
            out.append(
                Issue(
                    rules.KEY_MISSING,
                    f"{key} is required for architecture {arch!r}" + ("" if len(tensors) else " (vocab-only file)"),
                    "metadata_kv",
                    severity=severity,
                )
            )
    quantized = sorted({t.type.name for t in tensors.values() if getattr(t.type, "block_size", 1) > 1})
    if quantized and "general.quantization_version" not in meta:
        out.append(
            Issue(
                rules.KEY_MISSING,
                f"general.quantization_version is required: tensors are quantized ({', '.join(quantized)})",
                "metadata_kv",
            )
        )
    return out
