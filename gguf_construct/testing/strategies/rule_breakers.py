"""One crafted input per rule the GGUF strategies and the hostile catalogue do not already break.

Each ``RuleBreaker`` names the catalogue rule it breaks (``gguf_construct.core.rules``) and makes an input that breaks
it: file bytes (read by validation, the strict loader and each tensor's decoding), every prefix of a file's bytes
(``via='prefixes'``: the truncation rules of each field), a chat template (``via='template'``; ``'template-render'``
renders it in the sandbox, ``'template-unrendered'`` scans it in a file whose render time is spent), an Ollama manifest
(``via='manifest'``) or a GGUF file checked with ``validate --keys`` (``via='keys'``). ``rules_broken`` reads the
input the way its ``via`` says and returns every rule it was rejected with; tests/core/test_rule_catalogue.py asserts
that each breaker's rule is among them, and that together with ``INVALID_CLASSES`` and ``HOSTILE`` they break
every catalogue rule not exempted (``breaker`` in ``schema/rules.json`` says why).
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core.limits import limits
from ...errors import FormatError
from ...validation import check_keys
from ...validation.profiles import Profile
from .hostile import _s, ggjt_raw, gguf_raw, kv_str, kv_u32, safetensors_raw

__all__ = ["RULE_BREAKERS", "RuleBreaker", "rules_broken"]


@dataclass(frozen=True)
class RuleBreaker:
    """An input breaking ``rule``: ``make()`` gives it, ``via`` says how it is read (see the module docstring)."""

    rule: str
    name: str
    make: Callable[[], Any]
    via: str = "file"
    profile: Profile = "spec"
    hparams: str | None = None
    limits: dict[str, int] = field(default_factory=dict)


# -- raw pieces -------------------------------------------------------------------------------------------------
def kv_raw(key: str | bytes, type_id: int, payload: bytes) -> bytes:
    return _s(key) + struct.pack("<I", type_id) + payload


def kv_arr(key: str, elem: int, items: list[bytes]) -> bytes:
    return kv_raw(key, 9, struct.pack("<IQ", elem, len(items)) + b"".join(items))


def f32_tensor(name: str = "t", dims: tuple[int, ...] = (8,), t: int = 0) -> tuple[str, list[int], int]:
    return (name, list(dims), t)


def gguf_with_tensor(dims: list[int], ggml_type: int, data: bytes, kvs: Sequence[bytes] = ()) -> bytes:
    return gguf_raw(list(kvs), [("t", dims, ggml_type)], data)


def ggjt(ftype: int = 0, tensors: Sequence[tuple[bytes, list[int], int, bytes]] = (), **hp: int) -> bytes:
    """A GGJT v3 llama file (n_vocab 0): hparams n_vocab, n_embd, n_mult, n_head, n_layer, n_rot, ftype."""
    names = ["n_vocab", "n_embd", "n_mult", "n_head", "n_layer", "n_rot", "ftype"]
    values = dict(zip(names, (0, 8, 256, 1, 1, 8, ftype)))
    values.update(hp)
    return ggjt_raw(tuple(values[n] for n in names), list(tensors))


def ggjt_vocab(tokens: list[tuple[int, bytes]], n_vocab: int | None = None) -> bytes:
    """A GGJT v3 llama file with a vocabulary of (length field, bytes) tokens, each with a score."""
    hp = (len(tokens) if n_vocab is None else n_vocab, 8, 256, 1, 1, 8, 0)
    out = b"tjgg" + struct.pack("<I", 3) + struct.pack("<7i", *hp)
    return out + b"".join(struct.pack("<i", n) + raw + struct.pack("<f", 0.0) for n, raw in tokens)


def rwkv(
    params: list[tuple[bytes, list[int], int, bytes]],
    version: int = 101,
    n_vocab: int = 4,
    n_embed: int = 4,
    n_layer: int = 1,
    data_type: int = 0,
) -> bytes:
    out = bytearray(b"fmgg" + struct.pack("<5I", version, n_vocab, n_embed, n_layer, data_type))
    for key, shape, t, data in params:
        out += struct.pack("<3i", len(shape), len(key), t) + struct.pack(f"<{len(shape)}i", *shape) + key + data
    return bytes(out)


EMB = (b"emb.weight", [4, 4], 0, bytes(64))
F32_8 = bytes(32)


def st(header: Any, data: bytes = b"") -> bytes:
    return safetensors_raw(header if isinstance(header, (str, bytes)) else json.dumps(header), data)


def st_entry(dtype: str = "F32", shape: Sequence[int] = (2,), offsets: Sequence[int] = (0, 8)) -> dict[str, Any]:
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


def manifest(obj: Any) -> bytes:
    return obj if isinstance(obj, bytes) else json.dumps(obj).encode()


LAYER = {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + "0" * 64, "size": 1}


def imatrix_dat(entries: list[tuple[bytes, int, list[float]]], trailer: tuple[int, bytes] | None = None) -> bytes:
    out = struct.pack("<i", len(entries))
    for name, ncall, values in entries:
        out += struct.pack("<i", len(name)) + name + struct.pack("<ii", ncall, len(values)) + struct.pack(f"<{len(values)}f", *values)
    if trailer is not None:
        out += struct.pack("<ii", trailer[0], len(trailer[1])) + trailer[1]
    return out


# -- the table ----------------------------------------------------------------------------------------------------
B = RuleBreaker
RULE_BREAKERS: list[RuleBreaker] = [
    # GGUF: what the strategies' classes do not reach
    B("string.truncated", "gguf-prefixes", lambda: gguf_raw([kv_str("general.name", "abc")]), "prefixes"),
    B("value.truncated", "gguf-prefixes-u32", lambda: gguf_raw([kv_u32("general.x", 7)]), "prefixes"),
    B("array.truncated", "gguf-prefixes-array", lambda: gguf_raw([kv_arr("general.a", 4, [struct.pack("<I", 1)])]), "prefixes"),
    B("data.padding", "gguf-prefixes-padding", lambda: gguf_raw([], [f32_tensor()], F32_8), "prefixes"),
    B(
        "tokenizer.duplicate",
        "gguf-vocab-duplicate-token",  # a warning: valid GGUF that llama.cpp's vocabulary loader refuses
        lambda: gguf_raw([kv_str("tokenizer.ggml.model", "llama"), kv_arr("tokenizer.ggml.tokens", 8, [_s("a"), _s("b"), _s("a")])]),
    ),
    B(
        "tokenizer.byte_token",
        "gguf-vocab-wpm-byte-token",  # a warning, as above: llama.cpp's token_to_byte aborts for WPM
        lambda: gguf_raw(
            [
                kv_str("tokenizer.ggml.model", "bert"),
                kv_arr("tokenizer.ggml.tokens", 8, [_s("[PAD]"), _s("a")]),
                kv_arr("tokenizer.ggml.token_type", 5, [struct.pack("<i", 3), struct.pack("<i", 6)]),
            ]
        ),
    ),
    B(
        "tokenizer.byte_token",
        "gguf-vocab-spm-byte-token-spelling",
        lambda: gguf_raw(
            [
                kv_str("tokenizer.ggml.model", "llama"),
                kv_arr("tokenizer.ggml.tokens", 8, [_s("<unk>"), _s("<0x-1>")]),
                kv_arr("tokenizer.ggml.token_type", 5, [struct.pack("<i", 2), struct.pack("<i", 6)]),
            ]
        ),
    ),
    B("key.ascii", "gguf-key-non-ascii", lambda: gguf_raw([kv_u32("général.x", 1)])),
    B("key.syntax", "gguf-key-upper", lambda: gguf_raw([kv_u32("General.X", 1)])),
    B("key.length", "gguf-key-65536", lambda: gguf_raw([kv_u32("a" * 65536, 1)])),
    B("tensor.block", "gguf-q8_0-ne0-16", lambda: gguf_with_tensor([16], 8, bytes(34))),
    B("data.padding", "gguf-padding-not-zero", lambda: gguf_raw([], [f32_tensor()])[:-1] + b"\1" + F32_8),
    B("format.not_a_model", "ggla-adapter", lambda: b"algg" + struct.pack("<I", 1) + bytes(16)),
    B("keys.format", "keys-of-a-safetensors-file", lambda: st({"t": st_entry()}, bytes(8)), "keys"),
    B("key.missing", "keys-no-architecture", lambda: gguf_raw([kv_u32("general.alignment", 32)]), "keys"),
    # legacy llama files (GGJT v3) and the ggml examples
    B("hparams.value", "ggjt-n_layer-0", lambda: ggjt(n_layer=0)),
    B("hparams.ftype", "ggjt-ftype-19", lambda: ggjt(ftype=19)),
    B("hparams.n_rot", "ggjt-n_rot-3", lambda: ggjt(n_rot=3)),
    B("hparams.implausible", "ggjt-negative-n_embd", lambda: ggjt(n_embd=-8)),
    B("loader.type", "ggjt-type-9", lambda: ggjt(tensors=[(b"w", [32], 9, bytes(36))]), profile="ggml"),
    B("tensor.n_dims", "ggjt-3-dims", lambda: ggjt(tensors=[(b"w", [1, 2, 4], 0, F32_8)])),
    B("tensor.ne", "ggjt-zero-extent", lambda: ggjt(tensors=[(b"w", [8, 0], 0, b"")])),
    B("tensor.ne0", "ggjt-q4_0-ne0-16", lambda: ggjt(tensors=[(b"w", [16, 2], 2, bytes(18))])),
    B("tensor.name", "ggjt-empty-name", lambda: ggjt(tensors=[(b"", [8], 0, F32_8)])),
    B("tensor.name.utf8", "ggjt-name-not-utf8", lambda: ggjt(tensors=[(b"\xff", [8], 0, F32_8)])),
    B("tensor.duplicate", "ggjt-duplicate", lambda: ggjt(tensors=[(b"w", [8], 0, F32_8), (b"w", [8], 0, F32_8)])),
    B(
        "tensor.padding",
        "ggjt-padding-byte",
        lambda: (lambda d: d[: len(d) - 33] + b"\xaa" + d[len(d) - 32 :])(ggjt(tensors=[(b"w", [8], 0, F32_8)])),
    ),
    B("tensor.truncated", "ggjt-prefixes", lambda: ggjt(tensors=[(b"w", [8], 0, F32_8)]), "prefixes"),
    B("tensor.data", "ggjt-prefixes-data", lambda: ggjt(tensors=[(b"w", [8], 0, F32_8)]), "prefixes"),
    B("vocab.length", "ggjt-vocab-negative-length", lambda: ggjt_vocab([(-1, b"")])),
    B(
        "vocab.count",
        "ggml-gpt2-vocab-count",
        lambda: (
            b"lmgg"
            + struct.pack("<6i", 3, 16, 8, 2, 1, 0)
            + struct.pack("<i", 2)
            + b"".join(struct.pack("<I", 1) + t for t in (b"a", b"b"))
        ),
        hparams="gpt2",
    ),
    B("header.profile", "ggml-no-such-profile", lambda: b"lmgg" + bytes(64), hparams="no-such-profile"),
    B(
        "loader.version",
        "ggmf-quantized",
        lambda: b"fmgg" + struct.pack("<I", 1) + struct.pack("<7i", 0, 8, 256, 1, 1, 8, 2),
        profile="ggml",
    ),
    # rwkv.cpp
    B("header.value", "rwkv-n_layer-0", lambda: rwkv([EMB], n_layer=0)),
    B("header.data_type", "rwkv-data_type-4", lambda: rwkv([EMB], data_type=4)),
    B("header.shape", "rwkv-emb-shape", lambda: rwkv([EMB], n_embed=8)),
    B("header.n_layer", "rwkv-n_layer-2", lambda: rwkv([EMB, (b"blocks.0.x", [4], 0, bytes(16))], n_layer=2)),
    B("parameter.missing", "rwkv-no-emb", lambda: rwkv([(b"blocks.0.x", [4], 0, bytes(16))])),
    B("parameter.key", "rwkv-empty-key", lambda: rwkv([EMB, (b"", [4], 0, bytes(16))])),
    B("parameter.key.utf8", "rwkv-key-not-utf8", lambda: rwkv([EMB, (b"\xff", [4], 0, bytes(16))])),
    B("parameter.truncated", "rwkv-prefixes", lambda: rwkv([EMB]), "prefixes"),
    B("loader.type", "rwkv-removed-type", lambda: rwkv([EMB], version=100, data_type=5), profile="ggml"),
    B("tensor.blocks", "rwkv-q4_0-partial", lambda: rwkv([EMB, (b"blocks.0.w", [16, 1], 2, bytes(18))])),
    # safetensors
    B("header.utf8", "st-not-utf8", lambda: st(b'{"\xff":1}')),
    B("header.json", "st-not-json", lambda: st("{nope}")),
    B("header.entry", "st-entry-missing-field", lambda: st('{"t":{"dtype":"U8","shape":[1]}}', b"a")),
    B("header.padding", "st-nul-padding", lambda: st("{}\0\0\0\0\0\0"), profile="hf"),
    B("metadata.object", "st-metadata-list", lambda: st('{"__metadata__":[]}')),
    B("metadata.value", "st-metadata-int", lambda: st('{"__metadata__":{"n":1}}')),
    B("metadata.duplicate", "st-metadata-twice", lambda: st('{"__metadata__":{},"__metadata__":{}}'), profile="hf"),
    B("tensor.dtype", "st-unknown-dtype", lambda: st({"t": st_entry("u8", [1], [0, 1])}, b"a")),
    B("tensor.data_offsets", "st-end-before-begin", lambda: st({"t": st_entry("U8", [1], [2, 1])}, b"abc")),
    B("tensor.size", "st-size", lambda: st({"t": st_entry("F32", [2], [0, 4])}, bytes(4))),
    B("data.gap", "st-gap", lambda: st({"t": st_entry("F32", [2], [4, 12])}, bytes(12)), profile="hf"),
    B("data.trailing", "st-trailing", lambda: st({"t": st_entry("F32", [2], [0, 8])}, bytes(9)), profile="hf"),
    B("tensor.complex", "st-complex", lambda: st({"c": st_entry("C64", [2], [0, 16])}, bytes(16))),
    # Ollama manifests
    B("manifest.json", "manifest-not-json", lambda: b"{nope", "manifest"),
    B("manifest.object", "manifest-list", lambda: manifest([]), "manifest"),
    B("manifest.version", "manifest-v1", lambda: manifest({"schemaVersion": 1, "config": LAYER, "layers": []}), "manifest"),
    B("manifest.layers", "manifest-layers-object", lambda: manifest({"schemaVersion": 2, "config": LAYER, "layers": {}}), "manifest"),
    B(
        "manifest.layer",
        "manifest-layer-without-digest",
        lambda: manifest({"schemaVersion": 2, "config": LAYER, "layers": [{"mediaType": "x", "size": 1}]}),
        "manifest",
    ),
    B(
        "manifest.digest",
        "manifest-short-digest",
        lambda: manifest({"schemaVersion": 2, "config": LAYER, "layers": [dict(LAYER, digest="sha256:00")]}),
        "manifest",
    ),
    # imatrix .dat
    B(
        "imatrix.values",
        "imatrix-negative-count",
        lambda: struct.pack("<i", 1) + struct.pack("<i", 1) + b"w" + struct.pack("<ii", 1, -1),
        "imatrix",
    ),
    B("imatrix.entries", "imatrix-count-past-end", lambda: struct.pack("<i", 1000), "imatrix"),
    B("imatrix.name.utf8", "imatrix-name-not-utf8", lambda: imatrix_dat([(b"\xff", 1, [1.0])]), "imatrix"),
    B("imatrix.dataset.utf8", "imatrix-dataset-not-utf8", lambda: imatrix_dat([(b"w", 1, [1.0])], (1, b"\xff")), "imatrix"),
    B("imatrix.trailing", "imatrix-trailing", lambda: imatrix_dat([(b"w", 1, [1.0])], (1, b"d")) + b"xyz", "imatrix"),
    # chat templates
    B("template.syntax", "template-syntax", lambda: "{% if %}", "template"),
    B("template.dunder", "template-dunder", lambda: "{{ x.__class__ }}", "template"),
    B("template.private", "template-private", lambda: "{{ x._secret }}", "template"),
    B("template.introspection", "template-mro", lambda: "{{ x.mro }}", "template"),
    B("template.global_object", "template-cycler", lambda: "{{ cycler.next }}", "template"),
    B("template.self", "template-self", lambda: "{{ self.x }}", "template"),
    B("template.dynamic_attribute", "template-attr", lambda: "{{ x | attr(y) }}", "template"),
    B("template.size", "template-size", lambda: "x" * 1_100_000, "template"),
    B("template.format", "template-format", lambda: "{{ '{0.__class__}'.format(x) }}", "template"),
    B(
        "template.loop_bound",
        "template-loop-bound",
        lambda: "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "template",
    ),
    B("template.repetition", "template-repetition", lambda: "{{ 'x' * 10**10 }}", "template"),
    B("template.number", "template-number", lambda: "{{ 10 ** (10 ** 10) }}", "template"),
    B("template.recursion", "template-recursion", lambda: "{% macro f(n) %}{{ f(n) }}{{ f(n) }}{% endmacro %}{{ f(1) }}", "template"),
    B(
        "template.loop_growth",
        "template-loop-growth",
        lambda: "{% set l = [1] %}{% for x in l %}{% set _ = l.append(x) %}{% endfor %}",
        "template",
    ),
    B("template.unknown", "template-unknown", lambda: "{{ message.no_real_template_reads_this }}", "template"),
    B("template.member", "template-member", lambda: "{{ x.fromkeys }}", "template"),
    B("template.loader", "template-loader", lambda: "{% include 'other.jinja' %}", "template"),
    B("template.literal_attribute", "template-literal-attribute", lambda: "{{ x|join('', y) }}", "template"),
    B("template.complexity", "template-complexity", lambda: "{{ " + " ~ ".join(["a"] * 60001) + " }}", "template"),
    B(
        "template.render",
        "template-render",
        lambda: "{% for a in messages %}{% for b in messages %}{% for c in messages %}{{ a }}{% endfor %}{% endfor %}{% endfor %}",
        "template-render",
    ),
    B("template.sandbox", "template-sandbox", lambda: "{{ ''.__class__() }}", "template-render"),
    B("template.unrendered", "template-unrendered", lambda: "{{ messages[0].content }}", "template-unrendered"),
    B(
        "template.flow_limit",
        "template-flow-limit",
        lambda: "".join(f"{{% set a{i} = a{i + 1} %}}" for i in range(64)) + "{{ a0 }}",
        "template",
    ),
    # limits, at a lowered value
    B(
        "limit.kv_count",
        "gguf-kv-count-over-limit",
        lambda: gguf_raw([kv_u32(f"general.k{i}", 1) for i in range(3)]),
        limits={"kv_count": 2},
    ),
    B(
        "limit.tensor_count",
        "gguf-tensor-count-over-limit",
        lambda: gguf_raw([], [f32_tensor("a", (8,)), f32_tensor("b", (8,))], bytes(64)),
        limits={"tensor_count": 1},
    ),
    B("limit.string_length", "gguf-string-over-limit", lambda: gguf_raw([kv_str("general.name", "abcdef")]), limits={"string_length": 4}),
    B(
        "limit.array_length",
        "gguf-array-over-limit",
        lambda: gguf_raw([kv_arr("general.a", 4, [struct.pack("<I", 1)] * 5)]),
        limits={"array_length": 4},
    ),
]


# -- reading a breaker's input ------------------------------------------------------------------------------------
def rules_broken(b: RuleBreaker) -> set[str]:
    """Every rule ``b``'s input is rejected with (findings of any severity, and the readers' exceptions)."""
    with limits(b.limits or None):
        return _read(b)


def _read(b: RuleBreaker) -> set[str]:
    value = b.make()
    if b.via == "template":
        from ...security.chat_templates import scan_template

        return {i.rule for i in scan_template(value)}
    if b.via == "template-render":  # the dynamic check alone: a sandboxed render in a bounded child process
        from ...core.tables import template_rules
        from ...security.templates.render import render_check

        return {rule for _, rule, _ in render_check(value, template_rules().limits)}
    if b.via == "template-unrendered":  # a file whose render time is spent before its template is reached
        from types import SimpleNamespace

        from ...security.chat_templates import scan_templates

        return {i.rule for i in scan_templates(SimpleNamespace(metadata={"tokenizer.chat_template": value}), render_seconds=0)}
    if b.via == "manifest":
        from ...validation.ollama_checks import validate_manifest_bytes

        return {i.rule for i in validate_manifest_bytes(value)}
    if b.via == "imatrix":
        from ...convert.imatrix import read_stats

        try:
            _with_file(value, read_stats)
        except FormatError as e:
            return {e.rule}
        return set()
    if b.via == "keys":
        from ... import load

        return {i.rule for i in _with_file(value, lambda p: check_keys(load(p, strict=False)))}
    if b.via == "prefixes":
        out = set()
        for data in _prefixes(value):
            out |= _file_rules(data, b)
        return out
    return _file_rules(value, b)


def _prefixes(data: bytes) -> list[bytes]:
    return [data[:n] for n in range(len(data))]


def _with_file(data: bytes, action: Callable[[str], Any]) -> Any:
    fd, path = tempfile.mkstemp(prefix="gguf-construct-breaker-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return action(path)
    finally:
        os.unlink(path)


def _file_rules(data: bytes, b: RuleBreaker) -> set[str]:
    """Validation's findings, the strict loader's rejection, and each tensor's decoding's."""
    from ... import load
    from ...api.registry import validate_bytes
    from ...validation.legacy_checks import validate_legacy_bytes

    try:
        found = {i.rule for i in (validate_legacy_bytes(data, b.profile, b.hparams) if b.hparams else validate_bytes(data, b.profile))}
    except FormatError as e:
        found = {e.rule}

    def strict(path: str) -> None:
        from ...api.legacy_file import load_legacy

        f = load_legacy(path, profile=b.profile, hparams=b.hparams) if b.hparams else load(path, profile=b.profile)
        for name in f.tensors:
            f.tensors[name].to_numpy()

    try:
        _with_file(data, strict)
    except FormatError as e:
        found.add(e.rule)
    return found
