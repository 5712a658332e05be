"""rwkv.cpp RWKV v6/v7 files → llama.cpp's rwkv6/rwkv7, proven by llama.cpp itself (llama-cpp-python):

- corpus tier: every rwkv-v6-v7 corpus file, and its variants in every data type rwkv.cpp writes, migrates, runs
  in llama.cpp with rwkv.cpp's expected logits after '"in' (same argmax; 1e-3 / 0.05 / 0.25 for FP32 / FP16 /
  quantized), and exports back to the same bytes;
- without ../shared: synthetic v6/v7 models of other sizes (several heads, unequal LoRA ranks) run by llama.cpp
  against a numpy forward pass over the rwkv.cpp file (tests/rwkv_reference.py), a GGUF laid out
  like llama.cpp's HF converter (rescaled blocks, separate lerp tensors), the World vocabulary tokenized by
  llama.cpp against rwkv.cpp's trie tokenizer, and every refusal.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_file, corpus_tier_files
from oracles import llama_logits
from rwkv_models import synthetic_v6, synthetic_v7, variant
from rwkv_reference import RwkvReference

import gguf_construct as gc
from gguf_construct import MigrationError, export, migrate
from gguf_construct.api.gguf_file import load_gguf, new
from gguf_construct.api.legacy_file import load_rwkv
from gguf_construct.api.metadata import Metadata
from gguf_construct.errors import FormatError
from gguf_construct.migration.rwkv_vocab import escape_token, read_world_vocab, rwkv_tokenizer, unescape_token, world_vocab_path

PROMPT = [34, 105, 110]  # '"in', rwkv.cpp's tests/test_tiny_rwkv.c prompt
KINDS = ["FP32", "FP16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]
TOLERANCE = {"FP32": 1e-3, "FP16": 0.05}  # else 0.25 (quantization noise)
FILE_TYPE = {"FP32": 0, "FP16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9}  # llama.cpp's llama_ftype

#: rwkv.cpp's own bounds on the logit difference *sum* (tests/test_tiny_rwkv.c at rwkv.cpp 4358e70: its
#: expected_difference_sum_full and _quantized_FP32 tables; it asserts |sum| <= |bound| * 1.05).
RWKV_CPP_SUM = {
    "6v0-3m": {
        "FP32": 0.001,
        "FP16": -0.416620,
        "Q4_0": -7.588121,
        "Q4_1": 21.939022,
        "Q5_0": -27.332073,
        "Q5_1": 3.576909,
        "Q8_0": -9.539596,
    },
    "7v0-834K": {
        "FP32": 0.001,
        "FP16": 0.005766,
        "Q4_0": 0.136785,
        "Q4_1": 0.002614,
        "Q5_0": -0.063645,
        "Q5_1": -0.064663,
        "Q8_0": 0.011924,
    },
}

V6V7 = corpus_tier_files("rwkv-v6-v7/tiny-rwkv-*.bin")  # the models (the expected logits are .bin too); too big for tests/data


def _model_and_kind(path: Path) -> tuple[str, str]:
    m = re.fullmatch(r"tiny-rwkv-(\dv\d-[^-]+)-(\w+)\.bin", path.name)
    assert m, path
    return m.group(1), m.group(2)


def _expected(model: str) -> np.ndarray:
    return np.fromfile(corpus_file(f"rwkv-v6-v7/expected-logits-{model}.bin"), "<f4")


def _check_logits(got: np.ndarray, want: np.ndarray, bound: float, what: str, *, near_ties: bool = False) -> None:
    """Same argmax, max |diff| <= bound. ``near_ties``: for untrained random models, whose top logits may lie closer
    together than quantization noise, llama.cpp's choice only has to be within 2 * bound of the top."""
    diff = got.astype(np.float64) - want
    assert got.shape == want.shape and np.isfinite(got).all(), what
    if near_ties:
        assert want[got.argmax()] >= want.max() - 2 * bound, f"{what}: argmax {got.argmax()} is not a near tie of {want.argmax()}"
    else:
        assert got.argmax() == want.argmax(), f"{what}: argmax {got.argmax()} vs {want.argmax()}"
    assert np.abs(diff).max() <= bound, f"{what}: max |diff| {np.abs(diff).max():.3g} > {bound}"


def _migrate_run_export(src: Path, tmp: Path) -> np.ndarray:
    """Migrate ``src``, check the export back is the same bytes, return llama.cpp's logits after the prompt."""
    out, back = tmp / f"{src.stem}.gguf", tmp / f"{src.stem}.back.bin"
    migrate(src, out)
    export(out, back, to="rwkv")
    assert back.read_bytes() == src.read_bytes()
    return llama_logits(out, PROMPT)


# -- corpus tier -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", V6V7, ids=lambda p: p.name)
def test_corpus_file_runs_in_llama_cpp_with_rwkv_cpp_logits(path, tmp_path):
    model, kind = _model_and_kind(path)
    got = _migrate_run_export(path, tmp_path)
    want = _expected(model)
    _check_logits(got, want, TOLERANCE.get(kind, 0.25), path.name)
    bound = RWKV_CPP_SUM[model][kind]
    assert abs(float(np.sum(got - want))) <= abs(bound) * 1.05  # rwkv.cpp's own acceptance rule
    g = load_gguf(tmp_path / f"{path.stem}.gguf")
    assert g.metadata["general.architecture"] == {"6v0": "rwkv6", "7v0": "rwkv7"}[model[:3]]
    assert g.metadata["general.file_type"] == {"FP32": 0, "FP16": 1, "Q5_1": 9}[kind]
    assert g.metadata["tokenizer.ggml.model"] == "rwkv" and len(g.metadata["tokenizer.ggml.tokens"]) == 256


@pytest.fixture(scope="module")
def same_weights(tmp_path_factory):
    """llama.cpp's logits of a corpus file's weights written as FP32 (computed once per file)."""
    cache: dict[Path, np.ndarray] = {}

    def logits(path: Path) -> np.ndarray:
        if path not in cache:
            tmp = tmp_path_factory.mktemp("same-weights")
            cache[path] = llama_logits(_migrated(variant(path, tmp / f"{path.stem}-as-FP32.bin", "FP32"), tmp), PROMPT)
        return cache[path]

    return logits


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", V6V7, ids=lambda p: p.name)
def test_every_data_type_rwkv_cpp_writes(path, kind, tmp_path, same_weights):
    """The corpus file rewritten in each type as rwkv.cpp's converter/quantizer would. From an FP32 file the logits
    are held against rwkv.cpp's expected ones (and its difference-sum bound); from a quantized file (the corpus has
    v6 only as Q5_1) against llama.cpp's logits of the same weights written as FP32."""
    model, source_kind = _model_and_kind(path)
    v = variant(path, tmp_path / f"tiny-rwkv-{model}-{kind}.bin", kind)
    got = _migrate_run_export(v, tmp_path)
    assert load_gguf(tmp_path / f"{v.stem}.gguf").metadata["general.file_type"] == FILE_TYPE[kind]
    if source_kind == "FP32":
        want = _expected(model)
        _check_logits(got, want, TOLERANCE.get(kind, 0.25), f"{model} {kind}")
        assert abs(float(np.sum(got - want))) <= abs(RWKV_CPP_SUM[model][kind]) * 1.05
        return
    if kind == "FP32":
        _check_logits(got, _expected(model), TOLERANCE.get(source_kind, 0.25), f"{model} {source_kind} as FP32")
        return
    _check_logits(got, same_weights(path), TOLERANCE.get(kind, 0.25), f"{model} {source_kind} as {kind}")


def _migrated(src: Path, tmp: Path) -> Path:
    out = tmp / f"{src.stem}.gguf"
    migrate(src, out)
    return out


@pytest.mark.corpus_tier
def test_numpy_reference_reproduces_rwkv_cpp():
    """The reference used for the synthetic models reproduces rwkv.cpp's expected logits (v6: from Q5_1 weights)."""
    v7 = RwkvReference(corpus_file("rwkv-v6-v7/tiny-rwkv-7v0-834K-FP32.bin")).logits(PROMPT)
    _check_logits(v7, _expected("7v0-834K"), 1e-5, "reference v7")
    v6 = RwkvReference(corpus_file("rwkv-v6-v7/tiny-rwkv-6v0-3m-Q5_1.bin")).logits(PROMPT)
    _check_logits(v6, _expected("6v0-3m"), 0.1, "reference v6 (Q5_1 weights)")


@pytest.mark.corpus_tier
def test_cli_and_api_end_to_end(tmp_path):
    src = corpus_file("rwkv-v6-v7/tiny-rwkv-7v0-834K-FP32.bin")
    out = tmp_path / "out.gguf"
    run = subprocess.run(
        [sys.executable, "-m", "gguf_construct.cli.main", "migrate", str(src), str(out)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert "rwkv7" in run.stdout and "blk.0.time_mix_v0.weight" in run.stderr and "byte-level vocabulary" in run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "gguf_construct.cli.main", "export", str(out), str(tmp_path / "back.bin"), "--to", "rwkv"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()
    report = gc.migrate(src, tmp_path / "api.gguf", name="tiny v7")
    assert report.tensors == 342 and report.copied == 342
    assert (tmp_path / "api.gguf").read_bytes() != out.read_bytes()  # general.name differs
    assert load_gguf(tmp_path / "api.gguf").metadata["general.name"] == "tiny v7"


@pytest.mark.parametrize("rel", ["rwkv/tiny-rwkv-4v0-660K-FP16.bin", "rwkv/tiny-rwkv-5v2-730K-Q5_1.bin"])
def test_v4_v5_stay_on_the_spec_rwkv_architecture_and_say_so(rel, tmp_path):
    src = corpus_file(rel)
    report = migrate(src, tmp_path / "out.gguf")
    assert any("llama.cpp has no RWKV v4/v5 architecture" in n for n in report.notices)
    assert load_gguf(tmp_path / "out.gguf").metadata["general.architecture"] == "rwkv"
    run = subprocess.run([sys.executable, "-m", "gguf_construct.cli.main", "info", str(src)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "`migrate` writes the GGUF specification's 'rwkv' architecture" in run.stdout
    assert "llama.cpp has no RWKV v4/v5 architecture" in run.stdout


# -- synthetic models: no ../shared needed --------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_synthetic_v7_of_other_sizes(kind, tmp_path):
    """Two heads of 64 (the corpus model has one), four unequal LoRA ranks and a feed-forward width of 3 d / 2.
    Heads are multiples of 64, which every llama.cpp CPU kernel takes (shorter ones: test_wkv7_kernel.py)."""
    src = variant(
        synthetic_v7(tmp_path / "v7.bin", d=128, head_size=64, ffn=192, ranks=(32, 64, 16, 48)), tmp_path / f"v7-{kind}.bin", kind
    )
    got = _migrate_run_export(src, tmp_path)
    md = load_gguf(tmp_path / f"v7-{kind}.gguf").metadata
    assert (md["rwkv7.wkv.head_size"], md["rwkv7.attention.decay_lora_rank"], md["rwkv7.attention.iclr_lora_rank"]) == (64, 32, 64)
    assert (md["rwkv7.attention.value_residual_mix_lora_rank"], md["rwkv7.attention.gate_lora_rank"], md["rwkv7.feed_forward_length"]) == (
        16,
        48,
        192,
    )
    assert md["rwkv7.embedding_length"] == 128
    assert md.type_of("rwkv7.wkv.head_size") == "u32" and md.type_of("rwkv7.attention.layer_norm_epsilon") == "f32"
    _check_logits(
        got, RwkvReference(src).logits(PROMPT), 1e-4 if kind == "FP32" else TOLERANCE.get(kind, 0.25), kind, near_ties=kind != "FP32"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_synthetic_v6_of_other_sizes(kind, tmp_path):
    """Heads of 16: llama.cpp's wkv6 kernel has a remainder loop, so any head size runs the same on every CPU."""
    src = variant(synthetic_v6(tmp_path / "v6.bin", d=64, head_size=16, tm=32, td=64, ffn=224), tmp_path / f"v6-{kind}.bin", kind)
    got = _migrate_run_export(src, tmp_path)
    g = load_gguf(tmp_path / f"v6-{kind}.gguf")
    md = g.metadata
    assert (
        md["rwkv6.wkv.head_size"],
        md["rwkv6.time_mix_extra_dim"],
        md["rwkv6.time_decay_extra_dim"],
        md["rwkv6.feed_forward_length"],
    ) == (16, 32, 64, 224)
    assert list(g.tensors["blk.1.time_mix_lerp_fused.weight"].shape) == [64, 1, 1, 5]
    assert list(g.tensors["blk.1.time_mix_first.weight"].shape) == [16, 4]
    _check_logits(
        got, RwkvReference(src).logits(PROMPT), 1e-4 if kind == "FP32" else TOLERANCE.get(kind, 0.25), kind, near_ties=kind != "FP32"
    )


@pytest.mark.parametrize("kind", ["Q4_K", "Q5_K"])
def test_k_quant_files_of_rwkv_cpps_python_tool(kind, tmp_path):
    """rwkv.cpp's quantizer also offers Q4_K/Q5_K (rows of 256): a v7 model with d = 256, four heads."""
    src = variant(
        synthetic_v7(tmp_path / "v7.bin", d=256, head_size=64, ffn=512, ranks=(64, 64, 32, 128)), tmp_path / f"v7-{kind}.bin", kind
    )
    got = _migrate_run_export(src, tmp_path)
    md = load_gguf(tmp_path / f"v7-{kind}.gguf").metadata
    assert md["general.file_type"] == {"Q4_K": 14, "Q5_K": 16}[kind]  # MOSTLY_Q4_K_S, MOSTLY_Q5_K_S
    _check_logits(got, RwkvReference(src).logits(PROMPT), 0.25, kind, near_ties=True)


def test_block0_dummy_value_residual_tensors(tmp_path):
    """Checkpoints with dummy block-0 v0/v1/v2: kept when llama.cpp can take their shape (the export is then the
    same file), else replaced by copies of a0/a1/a2 and reported."""
    fits = synthetic_v7(tmp_path / "fits.bin", ranks=(32, 64, 16, 48), block0_v=64)  # ICLR rank: llama.cpp's block-0 shape
    got = _migrate_run_export(fits, tmp_path)
    g = load_gguf(tmp_path / "fits.gguf")
    assert bytes(g.tensors["blk.0.time_mix_v1.weight"].data) == bytes(load_rwkv(fits).tensors["blocks.0.att.v1"].data)
    _check_logits(got, RwkvReference(fits).logits(PROMPT), 1e-4, "dummy kept")
    odd = synthetic_v7(tmp_path / "odd.bin", ranks=(32, 64, 16, 48), block0_v=16)
    report = migrate(odd, tmp_path / "odd.gguf")
    assert any("blocks.0.att.v1 [64, 16]: a dummy" in n for n in report.notices)
    g = load_gguf(tmp_path / "odd.gguf")
    assert list(g.tensors["blk.0.time_mix_v1.weight"].shape) == [64, 64]
    _check_logits(llama_logits(tmp_path / "odd.gguf", PROMPT), RwkvReference(odd).logits(PROMPT), 1e-4, "dummy replaced")
    export(tmp_path / "odd.gguf", tmp_path / "odd.back.bin", to="rwkv")
    # v0 ({d}) fits and is kept; v1/v2 of rank 16 do not and were replaced
    assert sorted(load_rwkv(tmp_path / "odd.back.bin").tensors) == sorted(
        n for n in load_rwkv(odd).tensors if n not in ("blocks.0.att.v1", "blocks.0.att.v2")
    )


def test_quantized_tensors_are_copied_bit_for_bit(tmp_path):
    src = variant(synthetic_v6(tmp_path / "v6.bin"), tmp_path / "v6-Q4_0.bin", "Q4_0")
    migrate(src, tmp_path / "q.gguf")
    g, f = load_gguf(tmp_path / "q.gguf"), load_rwkv(src)
    assert g.metadata["general.file_type"] == 2 and g.metadata["general.quantization_version"] == 2
    for rwkv_name, gguf_name in (
        ("blocks.1.att.time_maa_w1", "blk.1.time_mix_w1.weight"),
        ("blocks.0.ffn.value.weight", "blk.0.channel_mix_value.weight"),
    ):
        assert f.tensors[rwkv_name].type == "q4_0" and g.tensors[gguf_name].type.name == "q4_0"
        assert bytes(g.tensors[gguf_name].data) == bytes(f.tensors[rwkv_name].data)
    fused = bytes(g.tensors["blk.0.time_mix_lerp_fused.weight"].data)
    assert fused == b"".join(bytes(f.tensors[f"blocks.0.att.time_maa_{x}"].data) for x in "wkvrg")


def _hf_layout(src_gguf: Path, dst: Path, *, rescale: int, split_lerp: bool) -> None:
    """A GGUF laid out as llama.cpp's convert_hf_to_gguf.py writes rwkv6 (conversion/rwkv.py): tensors divided by
    2^(block // rescale) and rescale_every_n_layers recorded; optionally the lerps as five separate tensors."""
    g = load_gguf(src_gguf)
    out = new()
    for f in g.metadata.fields():
        out.metadata.set(f.key, f.value, type=f.type_label)
    out.metadata.set("rwkv6.rescale_every_n_layers", rescale, type="u32")
    for name, t in g.tensors.items():
        values = t.to_numpy()
        m = re.match(r"blk\.(\d+)\.(time_mix_output|channel_mix_value)\.weight", name)
        if m:
            values = values / np.float32(2 ** (int(m.group(1)) // rescale))
        if split_lerp and name.endswith("time_mix_lerp_fused.weight"):
            for i, x in enumerate("wkvrg"):
                out.tensors.add(name.replace("lerp_fused", f"lerp_{x}"), values[i].copy())
            continue
        out.tensors.add(name, values)
    out.save(dst)


@pytest.mark.parametrize("split_lerp", [False, True])
def test_gguf_in_llama_cpp_converter_layout_exports(split_lerp, tmp_path):
    src = synthetic_v6(tmp_path / "v6.bin", n_layer=3)
    ours = _migrated(src, tmp_path)
    hf = tmp_path / "hf.gguf"
    _hf_layout(ours, hf, rescale=1, split_lerp=split_lerp)
    # llama.cpp undoes the rescaling in its graph: same model, same logits
    np.testing.assert_allclose(
        llama_logits(hf, PROMPT), llama_logits(ours, PROMPT), atol=1e-3
    )  # halving the residual stream moves only the layer norms' epsilon
    export(hf, tmp_path / "back.bin", to="rwkv")
    back, orig = load_rwkv(tmp_path / "back.bin"), load_rwkv(src)
    assert sorted(back.tensors) == sorted(orig.tensors)
    for name, t in orig.tensors.items():  # powers of two: undone exactly
        assert list(back.tensors[name].shape) == list(t.shape) and bytes(back.tensors[name].data) == bytes(t.data), name


def test_rwkv7_gguf_in_llama_cpp_converter_layout_exports(tmp_path):
    """llama.cpp's converter writes rwkv7 in its own tensor order, with its rwkv tokenizer and the block-0 copies:
    the export holds every rwkv.cpp parameter with the original's shape and bytes."""
    src = synthetic_v7(tmp_path / "v7.bin", n_layer=2)
    g = load_gguf(_migrated(src, tmp_path))
    out = new()
    for f in g.metadata.fields():
        if not f.key.startswith("tokenizer."):
            out.metadata.set(f.key, f.value, type=f.type_label)
    rwkv_tokenizer(out.metadata, 256, None)
    for name in sorted(g.tensors, key=lambda n: (n.startswith("blk."), n[::-1])):  # another order
        t = g.tensors[name]
        out.tensors.add(name, bytes(t.data), ggml_type=t.type.name, shape=list(t.shape))
    out.save(tmp_path / "hf.gguf")
    export(tmp_path / "hf.gguf", tmp_path / "back.bin", to="rwkv")
    back, orig = load_rwkv(tmp_path / "back.bin"), load_rwkv(src)
    assert [t.name for t in back.tensors.records()] != [t.name for t in orig.tensors.records()]
    assert {n: (list(t.shape), bytes(t.data)) for n, t in back.tensors.items()} == {
        n: (list(t.shape), bytes(t.data)) for n, t in orig.tensors.items()
    }


def test_rescaled_quantized_blocks_are_multiplied_back_exactly(tmp_path):
    src = variant(synthetic_v6(tmp_path / "v6.bin", n_layer=2), tmp_path / "q.bin", "Q8_0")
    ours = _migrated(src, tmp_path)
    g = load_gguf(ours)
    out = new()
    for f in g.metadata.fields():
        out.metadata.set(f.key, f.value, type=f.type_label)
    out.metadata.set("rwkv6.rescale_every_n_layers", 1, type="u32")
    for name, t in g.tensors.items():
        data = bytes(t.data)
        if name in ("blk.1.time_mix_output.weight", "blk.1.channel_mix_value.weight"):  # halve the f16 scales: the values halve exactly
            blocks = np.frombuffer(data, np.dtype([("d", "<f2"), ("qs", "i1", 32)])).copy()
            blocks["d"] = blocks["d"] / np.float16(2)
            data = blocks.tobytes()
            assert np.array_equal(gc.dequantize(data, "q8_0") * 2, t.to_numpy().reshape(-1))
        out.tensors.add(name, data, ggml_type=t.type.name, shape=list(t.shape))
    out.save(tmp_path / "hf.gguf")
    export(tmp_path / "hf.gguf", tmp_path / "back.bin", to="rwkv")
    assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()


# -- vocabulary --------------------------------------------------------------------------------------------------
class WorldTokenizer:
    """rwkv.cpp's World tokenizer (python/rwkv_cpp/rwkv_world_tokenizer.py, from BlinkDL's ChatRWKV): a byte trie,
    greedy longest match. Written again here from that public description, as the reference."""

    def __init__(self, tokens: list[bytes]):
        self.root: dict = {}
        for i, token in enumerate(tokens, 1):
            node = self.root
            for b in token:
                node = node.setdefault(b, {})
            node[None] = i

    def encode(self, text: str) -> list[int]:
        data, out, i = text.encode("utf-8"), [], 0
        while i < len(data):
            node, j, best = self.root, i, None
            while j < len(data) and data[j] in node:
                node = node[data[j]]
                j += 1
                if None in node:
                    best = (node[None], j)
            assert best is not None, data[i:]
            out.append(best[0])
            i = best[1]
        return out


SAMPLE = (
    "I'll 'd test блабла 以下は、]) -> <|endoftext|><|padding|> int\n"
    "The quick brown fox jumps over the lazy dog.\n\n"
    "RWKV 是一种具有 Transformer 级别性能的 RNN。今日は良い天気ですね。\n"
    "Съешь же ещё этих мягких французских булок, да выпей чаю.\n"
    "مرحبا بالعالم — नमस्ते दुनिया — 안녕하세요 세계 — Γειά σου Κόσμε — Ça va? Größe, naïve café.\n"
    "def f(x):\n\treturn {'a': [1, 2.5e-3, None]}  # tabs\tand   spaces\r\n"
    "emoji 🦙🚀👍🏽 and \\x41 backslashes \\n \"quotes\" 'single' `back`"
)


def test_world_tokenizer_reference_matches_rwkv_cpp():
    """The reference reproduces rwkv.cpp's own test vector (python/rwkv_cpp/rwkv_world_tokenizer.test.py)."""
    ref = WorldTokenizer(read_world_vocab(world_vocab_path()))
    expected = [
        74,
        5229,
        274,
        101,
        32223,
        5092,
        27980,
        2795,
        27980,
        33,
        10399,
        10258,
        10139,
        10079,
        1682,
        3463,
        295,
        125,
        25258,
        7588,
        2318,
        125,
        790,
        125,
        49520,
        125,
        63,
        21888,
    ]
    assert ref.encode("I'll 'd test блабла 以下は、]) -> <|endoftext|><|padding|> int") == expected


def test_world_vocabulary_in_llama_cpp_tokenizes_like_rwkv_cpp(tmp_path):
    """A vocab-only rwkv7 GGUF with the shipped World vocabulary, tokenized by llama.cpp."""
    from llama_cpp import Llama

    src = synthetic_v7(tmp_path / "v7.bin", n_layer=1)
    ours = load_gguf(_migrated(src, tmp_path))
    md = Metadata([])
    for f in ours.metadata.fields():
        if not f.key.startswith("tokenizer."):
            md.set(f.key, f.value, type=f.type_label)
    what = rwkv_tokenizer(md, 65536, None)
    assert "65529 tokens" in what and "6 padding" in what
    vocab_only = new()
    for f in md.fields():
        vocab_only.metadata.set(f.key, f.value, type=f.type_label)
    vocab_only.save(tmp_path / "world.gguf")
    tokens = load_gguf(tmp_path / "world.gguf").metadata["tokenizer.ggml.tokens"]
    assert tokens[0] == "<s>" and tokens[261] == "\\n\\n" and tokens[65535] == "[PAD65535]"
    llm = Llama(model_path=str(tmp_path / "world.gguf"), vocab_only=True, verbose=False)
    try:
        ref = WorldTokenizer(read_world_vocab(world_vocab_path()))
        for text in [SAMPLE, *SAMPLE.split("\n")]:
            assert llm.tokenize(text.encode("utf-8"), add_bos=False, special=False) == ref.encode(text), text
        ids = ref.encode(SAMPLE)
        assert llm.detokenize(ids) == SAMPLE.encode("utf-8")
    finally:
        llm.close()


@pytest.mark.parametrize("how", ["api, shipped vocabulary", "cli --vocab"])
def test_world_model_migrates_with_the_world_vocabulary_and_runs(how, tmp_path):
    src = synthetic_v7(tmp_path / "world.bin", d=64, head_size=64, n_layer=1, ffn=64, n_vocab=65536, ranks=(32, 32, 32, 32))
    out = tmp_path / "world.gguf"
    if how.startswith("api"):
        report = migrate(src, out)
        assert any("World vocabulary rwkv_vocab_v20230424.txt (65529 tokens + '<s>', 6 padding)" in n for n in report.notices)
    else:
        run = subprocess.run(
            [sys.executable, "-m", "gguf_construct.cli.main", "migrate", str(src), str(out), "--vocab", str(world_vocab_path())],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr
    md = load_gguf(out).metadata
    assert (md["tokenizer.ggml.eot_token_id"], md["tokenizer.ggml.bos_token_id"], len(md["tokenizer.ggml.tokens"])) == (261, 0, 65536)
    ids = WorldTokenizer(read_world_vocab(world_vocab_path())).encode("Hello, 世界")
    _check_logits(llama_logits(out, ids), RwkvReference(src).logits(ids), 1e-4, "World-sized v7")


def test_token_escaping_is_what_llama_cpp_reads_back():
    for i in range(256):
        assert unescape_token(escape_token(bytes([i]))) == bytes([i])
    words = read_world_vocab(world_vocab_path())
    assert len(words) == 65529 and all(unescape_token(escape_token(w)) == w for w in words)
    assert escape_token(b"\n\n") == "\\n\\n" and escape_token("以".encode()) == "\\xe4\\xbb\\xa5" and escape_token(b"'\"") == "\\'\""


def test_vocabulary_that_does_not_fit_is_refused(tmp_path):
    md = Metadata([])
    with pytest.raises(FormatError, match="65530 tokens.*model has 1000"):
        rwkv_tokenizer(md, 1000, None)
    with pytest.raises(FormatError, match="byte-level model needs no --vocab"):
        rwkv_tokenizer(md, 256, world_vocab_path())
    with pytest.raises(FormatError, match="not found: give the World vocabulary with --vocab"):
        rwkv_tokenizer(md, 65536, tmp_path / "missing.txt")
    src = synthetic_v7(tmp_path / "v7.bin", n_layer=1)
    with pytest.raises(FormatError, match="byte-level model needs no --vocab"):
        migrate(src, tmp_path / "out.gguf", vocab=world_vocab_path())
    assert not (tmp_path / "out.gguf").exists()


def test_oversized_vocabulary_file_is_refused_before_reading(tmp_path, monkeypatch):
    from gguf_construct.migration import rwkv_vocab

    monkeypatch.setattr(rwkv_vocab, "MAX_FILE", 1000)
    with pytest.raises(FormatError) as e:
        read_world_vocab(world_vocab_path())
    assert e.value.rule == "vocab.size"


@pytest.mark.parametrize(
    "text, rule",
    [
        ("1 'a' 1\n3 'b' 1\n", "vocab.id"),
        ("1 'ab' 1\n", "vocab.length"),
        ("1 [1] 1\n", "vocab.token"),
        ("1 (((((((((((( 1\n", "vocab.line"),
        ("x 'a' 1\n", "vocab.line"),
        ("1 " + "(" * 3000 + " 1\n", "vocab.line"),
        ("1 'a' 1\n" + "2 '" + "a" * 5000 + "' 5000\n", "vocab.line"),
    ],
)
def test_hostile_vocabulary_files_are_format_errors(text, rule, tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError) as e:
        read_world_vocab(path)
    assert e.value.rule == rule
    path.write_bytes(b"1 '\xff' 1\n")
    with pytest.raises(FormatError, match="not UTF-8"):
        read_world_vocab(path)


# -- refusals ----------------------------------------------------------------------------------------------------
def _rewrite(src: Path, dst: Path, edit) -> Path:
    from gguf_construct.formats.rwkv.schema import RWKV

    c = RWKV.parse_file(str(src))
    c["parameters"] = edit(list(c["parameters"]))
    dst.write_bytes(RWKV.build(c))
    return dst


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda ps: [p for p in ps if p["key"] != "blocks.1.att.g2"], "needs rwkv.cpp parameter 'blocks.1.att.g2'"),
        (lambda ps: ps + [dict(ps[1], key="blocks.0.att.extra")], "'blocks.0.att.extra' has no place"),
        (
            lambda ps: [dict(p, shape=[64, 16]) if p["key"] == "blocks.1.att.w2" else p for p in ps],
            r"blocks.1.att.w2 has shape \[64, 16\]; llama.cpp's blk.1.time_mix_w2.weight needs \[16, 64\]",
        ),
    ],
)
def test_inconsistent_files_are_refused_before_llama_cpp_sees_them(edit, match, tmp_path):
    src = _rewrite(synthetic_v7(tmp_path / "v7.bin", ranks=(16, 32, 32, 32)), tmp_path / "bad.bin", edit)
    with pytest.raises(MigrationError, match=match):
        migrate(src, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


@pytest.mark.parametrize(
    "key, value, match",
    [
        ("rwkv7.wkv.head_size", 48, "not a multiple of the head size"),
        ("rwkv7.wkv.head_size", 0, "not a positive integer"),
        ("rwkv7.attention.decay_lora_rank", 8, "expects"),
        ("rwkv7.feed_forward_length", "wide", "feed_forward_length is str"),  # the strict load refuses it first
    ],
)
def test_export_refuses_inconsistent_keys(key, value, match, tmp_path):
    ours = _migrated(synthetic_v7(tmp_path / "v7.bin", n_layer=1), tmp_path)
    g = load_gguf(ours)
    g.metadata.set(key, value, type="str" if isinstance(value, str) else "u32")
    g.save(tmp_path / "bad.gguf", keep_valid=False)  # a file that breaks the spec on purpose
    with pytest.raises(FormatError, match=match):
        export(tmp_path / "bad.gguf", tmp_path / "x.bin", to="rwkv")
    assert not (tmp_path / "x.bin").exists()


def test_damaged_ggufs_export_or_raise_format_errors(tmp_path):
    """Single-byte damage anywhere in the header of a migrated file: an export succeeds or raises a FormatError."""
    ours = _migrated(synthetic_v7(tmp_path / "v7.bin", n_layer=1, n_vocab=256), tmp_path)
    data = ours.read_bytes()
    header_end = load_gguf(ours).data_offset
    rng = np.random.default_rng(17)
    outcomes = {"exported": 0, "refused": 0}
    for n in range(60):
        damaged = bytearray(data)
        at = int(rng.integers(0, header_end))
        damaged[at] ^= int(rng.integers(1, 256))
        path = tmp_path / f"d{n}.gguf"
        path.write_bytes(bytes(damaged))
        try:
            export(path, tmp_path / f"d{n}.bin", to="rwkv")
            outcomes["exported"] += 1
        except FormatError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and sum(outcomes.values()) == 60


def test_a_stack_of_mixed_types_is_refused(tmp_path):
    """v6's five lerps are stacked byte for byte into one tensor, so they must share a type (rwkv.cpp's tools keep
    them all F32); a file that mixes them is refused rather than silently widened."""

    def half(ps):
        return [
            dict(p, data_type=1, data=np.frombuffer(bytes(p["data"]), "<f4").astype("<f2").tobytes())
            if p["key"] == "blocks.0.att.time_maa_k"
            else p
            for p in ps
        ]

    src = _rewrite(synthetic_v6(tmp_path / "v6.bin"), tmp_path / "mixed.bin", half)
    with pytest.raises(MigrationError, match=r"blk.0.time_mix_lerp_fused.weight: .* are \['f16', 'f32'\]"):
        migrate(src, tmp_path / "out.gguf")


def test_a_reshape_that_would_split_quantized_blocks_is_refused(tmp_path):
    """r_k is {d} in llama.cpp and (head_size, n_head) in rwkv.cpp: Q8_0 data (blocks of 32) cannot take rows of 16
    without re-quantizing, so the export says so instead."""
    from rwkv_models import quantize

    g = load_gguf(_migrated(synthetic_v7(tmp_path / "v7.bin", d=64, head_size=16, n_layer=1), tmp_path))
    out = new()
    for f in g.metadata.fields():
        out.metadata.set(f.key, f.value, type=f.type_label)
    for name, t in g.tensors.items():
        if name == "blk.0.time_mix_r_k.weight":
            out.tensors.add(name, quantize(t.to_numpy().reshape(1, -1), "Q8_0"), ggml_type="q8_0", shape=list(t.shape))
        else:
            out.tensors.add(name, bytes(t.data), ggml_type=t.type.name, shape=list(t.shape))
    out.save(tmp_path / "q.gguf")
    with pytest.raises(
        MigrationError, match=r"blocks.0.att.r_k: q8_0 data in blocks of 32 cannot take the shape \[16, 4\] without re-quantizing"
    ):
        export(tmp_path / "q.gguf", tmp_path / "x.bin", to="rwkv")


def test_export_refuses_what_rwkv_cpp_cannot_hold(tmp_path):
    ours = _migrated(synthetic_v7(tmp_path / "v7.bin", n_layer=1), tmp_path)
    g = load_gguf(ours)
    g.metadata.set("general.architecture", "rwkv8")
    g.save(tmp_path / "other.gguf")
    with pytest.raises(MigrationError, match="architectures rwkv .version 4 or 5., rwkv6 and rwkv7"):
        export(tmp_path / "other.gguf", tmp_path / "x.bin", to="rwkv")
    g = load_gguf(ours)
    g.tensors.add("blk.0.mystery.weight", np.zeros(4, np.float32))
    g.save(tmp_path / "extra.gguf")
    with pytest.raises(MigrationError, match="'blk.0.mystery.weight' has no rwkv.cpp parameter"):
        export(tmp_path / "extra.gguf", tmp_path / "x.bin", to="rwkv")
    assert not (tmp_path / "x.bin").exists()
