"""Real 2023 llama files (corpus ``legacy-real/``), written by llama.cpp's own tools from March to June 2023, each
with the logits that era's llama.cpp computed on it (manifest.json: formats, types, token ids, eval settings).

Checked here: byte-for-byte round trips; ``info`` reporting the tensors' own types (not the header's ftype); the
decoded values of every layout, retired ones included, through the era's logits (a float64 numpy forward pass, so
the transcription is checked without llama.cpp, and a wrong nibble order is shown to fail it); every file migrated
by the command line and run by today's llama.cpp (``llama-cpp-python``) against the era's logits; llama.cpp's
tokenizer on the migrated vocabulary; GGJT v3 → GGUF → GGJT v3 identity.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import gguf_construct as gc
from gguf_construct.api.legacy_file import load_legacy
from gguf_construct.cli.main import main
from gguf_construct.core.tables import FILE_TYPES
from gguf_construct.formats.legacy.schema import GGML
from gguf_construct.migration import export, migrate
from gguf_construct.migration.llama import legacy_texts
from gguf_construct.quants.dequant import dequantize
from gguf_construct.quants.floats import half_to_float
from gguf_construct.quants.retired import dequantize_retired
from tests.conftest import corpus_file, corpus_files
from tests.formats.test_legacy_schemas import llama_file, random_blocks
from tests.oracles import llama_logits

REAL = [p for p in corpus_files("legacy-real/**/*.bin") if not p.name.endswith(".logits.bin")]
SHIPPED = "legacy-real/ggjt-v3/t256-ggjt-v3-Q4_0.bin"  # in tests/data: the module runs without ../shared


@cache
def manifest() -> dict[str, dict]:
    with open(corpus_file("legacy-real/manifest.json"), encoding="utf-8") as f:
        return {e["file"]: e for e in json.load(f)}


def entry(path: Path) -> dict:
    rel = path.as_posix().split("legacy-real/", 1)[1]
    return manifest()[rel]


def era_logits(path: Path) -> np.ndarray:
    e = entry(path)
    return np.fromfile(corpus_file("legacy-real/" + e["logits_file"]), "<f4")


def bound(e: dict) -> float:
    """The issue's bounds: F32/F16 files 2e-3; GGJT quantized 0.05; GGML/GGMF Q4 (activations quantized to Q4 in
    that era) 0.3."""
    if set(e["tensor_types"]) <= {"F32", "F16"}:
        return 2e-3
    return 0.05 if e["format"] == "ggjt" else 0.3


def cli(capsys, *args) -> tuple[int, str]:
    """The command line, in process: exit code and stdout."""
    capsys.readouterr()
    code = main([str(a) for a in args])
    return code, capsys.readouterr().out


# -- a float64 llama forward pass: the decoded values, checked against the era's logits ---------------------
def numpy_llama_logits(weights: dict[str, np.ndarray], hp: dict, token_ids: list[int], eps: float = 1e-6) -> np.ndarray:
    """The last token's logits of llama (2023: RMS norm, rotary of adjacent pairs with base 10000, SwiGLU), from
    weights in numpy order (``(rows, columns)``), computed in float64."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    n_embd, n_head, n = hp["n_embd"], hp["n_head"], len(token_ids)
    hd = n_embd // n_head
    angles = np.arange(n)[:, None] * 10000.0 ** (-np.arange(0, hd, 2) / hd)[None]
    cos, sin = np.cos(angles)[:, None], np.sin(angles)[:, None]

    def rms(v, g):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * g

    def rope(q):
        out = np.empty_like(q)
        out[..., 0::2] = q[..., 0::2] * cos - q[..., 1::2] * sin
        out[..., 1::2] = q[..., 0::2] * sin + q[..., 1::2] * cos
        return out

    x = w["tok_embeddings.weight"][token_ids]
    for layer in range(hp["n_layer"]):
        p = f"layers.{layer}."
        h = rms(x, w[p + "attention_norm.weight"])
        q, k, v = ((h @ w[p + f"attention.{m}.weight"].T).reshape(n, n_head, hd) for m in ("wq", "wk", "wv"))
        s = np.einsum("qhd,khd->hqk", rope(q), rope(k)) / np.sqrt(hd) + np.triu(np.full((n, n), -np.inf), 1)
        s = np.exp(s - s.max(-1, keepdims=True))
        x = x + np.einsum("hqk,khd->qhd", s / s.sum(-1, keepdims=True), v).reshape(n, n_embd) @ w[p + "attention.wo.weight"].T
        h = rms(x, w[p + "ffn_norm.weight"])
        gate, up = h @ w[p + "feed_forward.w1.weight"].T, h @ w[p + "feed_forward.w3.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "feed_forward.w2.weight"].T
    return rms(x[-1], w["norm.weight"]) @ w["output.weight"].T


def decoded(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    f = load_legacy(path, strict=True)
    return {t.name: t.to_numpy() for t in f.tensors.records()}, dict(f.metadata)


# -- the tests ------------------------------------------------------------------------------------------
def test_shipped_file_is_found():
    """The file tests/data ships is among the parametrised ones, so every test below runs without ../shared."""
    assert any(p.as_posix().endswith(SHIPPED) for p in REAL)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_round_trip_byte_for_byte(path):
    data = path.read_bytes()
    assert GGML.build(GGML.parse(data)) == data
    e = entry(path)
    f = gc.load(path)
    assert (f.format, f.version) == (e["format"], e["version"])


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_info_shows_the_tensors_own_types(path, capsys):
    e = entry(path)
    code, out = cli(capsys, "info", "--json", path)
    assert code == 0
    info = json.loads(out)
    got: dict[str, int] = {}
    for t in info["tensors"].values():
        got[t["type"].upper()] = got.get(t["type"].upper(), 0) + 1
    assert got == e["tensor_types"]
    assert info["summary"]["header_ftype"] == {"id": e["ftype"], "name": e["ftype_name"]}
    code, text = cli(capsys, "info", path)
    assert code == 0
    assert f"header ftype      {e['ftype']} ({e['ftype_name']})" in text
    retired = {name: t["layout"] for name, t in info["tensors"].items() if "layout" in t}
    expect_retired = e["format"] in ("ggml", "ggmf") or e["version"] == 1
    assert bool(retired) == (expect_retired and not set(e["tensor_types"]) <= {"F32", "F16"})
    for name, layout in retired.items():
        assert f"{layout}" in text and name in text


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_decoded_values_reproduce_the_era_logits(path):
    """to_numpy() of every layout (the retired Q4_2, pre-v2 Q4_0/Q5_0 included) against the era's logits."""
    e = entry(path)
    weights, hp = decoded(path)
    got, want = numpy_llama_logits(weights, hp, e["token_ids"]), era_logits(path)
    assert got.argmax() == want.argmax()
    assert np.abs(got - want).max() <= bound(e)


def _q4_2_as_halves(raw: np.ndarray) -> np.ndarray:
    """Q4_2 decoded with today's nibble order instead of its own (a deliberately wrong transcription)."""
    blocks = np.frombuffer(raw.tobytes(), np.dtype([("d", "<u2"), ("qs", "u1", 8)]))
    codes = np.concatenate([blocks["qs"] & 15, blocks["qs"] >> 4], axis=1).astype(np.float32)
    return ((codes - 8) * half_to_float(blocks["d"])[:, None]).reshape(-1)


WRONG_ORDER = {
    "q4_2": _q4_2_as_halves,
    "q4_0.v1": lambda raw: dequantize_retired(raw, "q4_0.v2"),  # same f32 scales, halves
    "q5_0.v1": lambda raw: dequantize(raw, "q5_0"),  # today's Q5_0: same struct, halves
}


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_a_wrong_nibble_order_fails_the_logits_check(path):
    """The check above has teeth: the same bytes decoded in today's order miss the era's logits by far. Files
    without retired layouts (F16, GGJT v3) are checked to have none."""
    e = entry(path)
    f = load_legacy(path, strict=True)
    weights, swapped = {}, 0
    for t in f.tensors.records():
        if t.retired:
            weights[t.name] = WRONG_ORDER[t.layout](np.asarray(t.data)).reshape(t.to_numpy().shape)
            swapped += 1
        else:
            weights[t.name] = t.to_numpy()
    if not swapped:
        assert set(e["tensor_types"]) <= {"F32", "F16"} or (e["format"], e["version"]) == ("ggjt", 3)
        return
    got = numpy_llama_logits(weights, dict(f.metadata), e["token_ids"])
    assert np.abs(got - era_logits(path)).max() > 10 * bound(e)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_migrated_file_reproduces_the_era_logits_in_llama_cpp(path, tmp_path, capsys):
    e = entry(path)
    out = tmp_path / "migrated.gguf"
    code, said = cli(capsys, "migrate", path, out)
    assert code == 0 and "verified" in said
    g = gc.load(out)
    md = g.metadata
    assert md["llama.attention.layer_norm_rms_epsilon"] == pytest.approx(e["legacy_eval"]["rms_norm_eps"])
    assert md["llama.rope.dimension_count"] == e["hparams"]["n_rot"]
    assert len(md["tokenizer.ggml.tokens"]) == e["hparams"]["n_vocab"]
    elements: dict[str, int] = {}
    for t in g.tensors.values():
        elements[t.type.name] = elements.get(t.type.name, 0) + int(np.prod(t.shape))
    main = max(elements, key=elements.__getitem__)  # the header's ftype unless tensors were widened
    assert FILE_TYPES[md["general.file_type"]] in ("ALL_F32" if main == "f32" else f"MOSTLY_{main.upper()}", e["ftype_name"])
    got, want = llama_logits(out, e["token_ids"]), era_logits(path)
    assert got.shape == want.shape
    assert got.argmax() == want.argmax()
    assert np.abs(got - want).max() <= bound(e)


TOKENIZE_IN_SUBPROCESS = """
import json, sys
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)
print(json.dumps([llm.tokenize(t.encode("latin-1"), add_bos=True) for t in json.loads(sys.argv[2])]))
llm.close()
"""


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_migrated_vocabulary_tokenizes_in_llama_cpp(path, tmp_path):
    """llama.cpp's tokenizer on the migrated vocabulary (scores, token types, byte tokens) gives the file's token
    ids back for their own text, and a NUL byte becomes token 3 as in 2023 (an empty token 3 made it abort)."""
    e = entry(path)
    out = tmp_path / "migrated.gguf"
    migrate(path, out)
    texts = gc.load(path).metadata["vocab.tokens"]
    text = b"".join(texts[i] for i in e["token_ids"][1:]).decode("latin-1").removeprefix(" ")  # the tokenizer adds it
    res = subprocess.run(
        [sys.executable, "-c", TOKENIZE_IN_SUBPROCESS, str(out), json.dumps([text, "a\x00b"])], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-2000:]
    ids, nul = json.loads(res.stdout)
    assert ids == e["token_ids"]
    assert 3 in nul
    g = gc.load(out)
    assert g.metadata["tokenizer.ggml.tokens"][3] == "<0x00>"


@pytest.mark.parametrize("path", [p for p in REAL if entry(p)["format"] == "ggjt" and entry(p)["version"] == 3], ids=lambda p: p.name)
def test_ggjt_v3_exports_back_byte_for_byte(path, tmp_path):
    """GGJT v3 → GGUF → GGJT v3 is the identity, the empty token 3 of train-text-from-scratch files included."""
    out, back = tmp_path / "m.gguf", tmp_path / "back.bin"
    migrate(path, out)
    export(out, back, to="ggjt")
    assert back.read_bytes() == path.read_bytes()


@pytest.mark.parametrize("byte_layout", [True, False])
def test_synthetic_train_text_vocab_and_widened_file_type(byte_layout, tmp_path):
    """Without the corpus: token 3 written empty beside LLaMA's byte tokens comes back as <0x00> (and exports back
    empty); an empty token 3 in another vocabulary stays an empty control token; a widened Q4_2 tensor makes
    general.file_type name the written type, not the header's MOSTLY_Q4_2."""
    vocab = (b" \xe2\x81\x87 ", b"", b"", b"", b"\x01" if byte_layout else b"x", b" hello")
    q4_2 = random_blocks("q4_2", 4, np.random.default_rng(3))
    src = tmp_path / "old.bin"
    src.write_bytes(llama_file("ggjt", 1, [("layers.0.feed_forward.w1.weight", 4, [32, 2], q4_2)], ftype=5, vocab=vocab))
    out = tmp_path / "new.gguf"
    report = migrate(src, out)
    md = gc.load(out).metadata
    assert md["tokenizer.ggml.tokens"][3] == ("<0x00>" if byte_layout else "")
    assert ("llama.legacy.empty_tokens" in md) == byte_layout
    assert any("restored as <0x00>" in n for n in report.notices) == byte_layout
    written = gc.load(out).tensors["blk.0.ffn_gate.weight"].type.name
    assert written in ("f16", "f32") and report.widened == 1
    assert FILE_TYPES[md["general.file_type"]] == ("ALL_F32" if written == "f32" else "MOSTLY_F16")
    if byte_layout:
        tokens, types = md["tokenizer.ggml.tokens"], [int(t) for t in md["tokenizer.ggml.token_type"]]
        assert legacy_texts(tokens, types, md["llama.legacy.empty_tokens"])[3] == b""
