"""numpy quantization against ggml's own C quantizer (ggml-python's libggml, through ctypes).

For every type :func:`gguf_construct.quants.quantize.quantize` supports, its bytes must equal
``ggml_quantize_chunk``'s (Q8_1 and Q8_K: their exported ``quantize_row_*_ref``) on random normal, uniform,
heavy-tailed, all-zero, subnormal, huge and mixed-magnitude inputs, on real weights (the rwkv corpus tensors), and,
for the types ggml weights, with an importance matrix. Properties: dequantize(quantize(x)) is within the type's
error bound, and re-quantizing ggml's own dequantized blocks gives the same blocks where the type is idempotent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_files
from oracles import ggml_quantize

from gguf_construct.quants import dequantize
from gguf_construct.quants.blocks import block_dtype, block_elements, resolve
from gguf_construct.quants.quantize import REQUIRES_IMATRIX, WEIGHTED, fast, quantize, supported
from gguf_construct.quants.quantize.cfloat import roundf

TYPES = sorted(supported())
#: types newer than ggml-python's libggml (the oracle): checked against vectors from ggml's own C instead
NEWER_THAN_ORACLE = {"q2_0"}
QUANTIZED = [t for t in TYPES if t not in ("f32", "f16", "bf16") and t not in NEWER_THAN_ORACLE]
UNWEIGHTED = [t for t in TYPES if t not in REQUIRES_IMATRIX and t not in NEWER_THAN_ORACLE]  # ggml quantizes these without an imatrix
#: types whose ggml tables take long to build in C (IQ1_S/IQ1_M share them: ~25 s): in tests/quants/test_quantize_iq1.py
SLOW_ORACLE = {"iq1_s", "iq1_m"}
ORACLE_WEIGHTED = sorted(set(WEIGHTED) - SLOW_ORACLE)
N_PER_ROW = 512
ROWS = 4


def inputs(seed: int = 0) -> dict[str, np.ndarray]:
    r = np.random.default_rng(seed)
    shape = (ROWS, N_PER_ROW)
    return {
        "normal": r.standard_normal(shape),
        "uniform": r.uniform(-1, 1, shape),
        "heavy": r.standard_t(2, shape) * 0.05,
        "zero": np.zeros(shape),
        "subnormal": r.standard_normal(shape) * 1e-41,
        "tiny": r.standard_normal(shape) * 1e-30,
        "huge": r.standard_normal(shape) * 1e37,
        "mixed": r.standard_normal(shape) * 10.0 ** r.integers(-20, 20, shape),
        "integers": r.integers(-8, 8, shape),
        "positive": r.uniform(0, 1, shape),
        "one-outlier": np.where(np.arange(N_PER_ROW) % 97 == 0, 100.0, r.standard_normal(shape) * 0.01),
        "zero-sub-blocks": np.where((np.arange(N_PER_ROW) // 32) % 3 == 1, 0.0, r.standard_normal(shape)),
    }


INPUTS = {k: v.astype(np.float32) for k, v in inputs().items()}


def mismatches(name: str, ours: bytes, ref: bytes) -> list[int]:
    dt = block_dtype(name)
    a = np.frombuffer(ours, np.uint8).reshape(-1, dt.itemsize)
    b = np.frombuffer(ref, np.uint8).reshape(-1, dt.itemsize)
    assert a.shape == b.shape
    return np.flatnonzero((a != b).any(axis=1)).tolist()


def ggml_aborts(name: str, x: np.ndarray, imatrix: np.ndarray | None) -> bool:
    """Whether ggml's quantizer aborts (GGML_ASSERT) on this input: run in a child process, which it kills."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        np.save(f"{tmp}/x.npy", x)
        np.save(f"{tmp}/w.npy", np.zeros(0, np.float32) if imatrix is None else imatrix)
        code = (
            f"import sys; sys.path.insert(0, {str(Path(__file__).parents[1])!r}); import numpy as np; from oracles import ggml_quantize; "
            f"w = np.load('{tmp}/w.npy'); ggml_quantize(np.load('{tmp}/x.npy'), {resolve(name).id}, w if w.size else None)"
        )
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    return run.returncode != 0 and "GGML_ASSERT" in run.stderr


def assert_exact(name: str, x: np.ndarray, imatrix: np.ndarray | None = None) -> None:
    """Our bytes equal ggml's; where ours refuses (a grid search with no finite error), ggml must abort there."""
    import gguf_construct as gc

    try:
        ours = quantize(x, name, imatrix=imatrix)
    except gc.FormatError as e:
        assert e.rule == "quantize.grid", e
        assert ggml_aborts(name, x, imatrix), f"{name}: ours refused an input ggml quantizes"
        return
    ref = ggml_quantize(x, resolve(name).id, imatrix)
    bad = mismatches(name, ours, ref)
    assert not bad, f"{name}: {len(bad)} blocks differ from ggml, first {bad[:5]}"


#: (type, input) pairs left out to keep the module fast: ggml aborts on them like on "huge", and checking that
#: takes a child process that rebuilds ggml's grid tables (seconds each)
SLOW_ABORTS = {("iq3_xxs", "mixed"), ("iq3_s", "mixed"), ("iq2_xs", "mixed"), ("iq2_s", "mixed"), ("iq2_s", "huge")}


@pytest.mark.parametrize(
    ("name", "kind"), [(n, k) for n in UNWEIGHTED if n not in SLOW_ORACLE for k in sorted(INPUTS) if (n, k) not in SLOW_ABORTS]
)
def test_bit_exact_with_ggml(name, kind):
    assert_exact(name, INPUTS[kind])


IMATRIX_KINDS = ["normal", "uniform", "heavy", "zero", "subnormal", "tiny", "huge", "mixed", "integers"]


@pytest.mark.parametrize(("name", "kind"), [(n, k) for n in ORACLE_WEIGHTED for k in IMATRIX_KINDS if (n, k) not in SLOW_ABORTS])
def test_bit_exact_with_imatrix(name, kind):
    r = np.random.default_rng(7)
    qw = r.uniform(0, 4, N_PER_ROW).astype(np.float32) ** 2
    qw[::13] = 0  # columns never activated
    assert_exact(name, INPUTS[kind], qw)


def test_types_cover_ggml():
    """The supported set: every type ggml_quantize_chunk quantizes, plus Q8_1 and Q8_K."""
    expected = {
        "f32",
        "f16",
        "bf16",
        "q4_0",
        "q4_1",
        "q5_0",
        "q5_1",
        "q8_0",
        "q8_1",
        "q8_K",
        "q1_0",
        "q2_0",
        "mxfp4",
        "nvfp4",
        "q2_K",
        "q3_K",
        "q4_K",
        "q5_K",
        "q6_K",
        "tq1_0",
        "tq2_0",
        "iq4_nl",
        "iq4_xs",
        "iq2_xxs",
        "iq2_xs",
        "iq2_s",
        "iq3_xxs",
        "iq3_s",
        "iq1_s",
        "iq1_m",
    }
    assert {"iq2_xxs", "iq2_xs", "iq1_s"} == REQUIRES_IMATRIX
    ggml = __import__("ggml")
    assert all(bool(ggml.ggml_quantize_requires_imatrix(resolve(t).id)) == (t in REQUIRES_IMATRIX) for t in set(TYPES) - NEWER_THAN_ORACLE)
    assert set(TYPES) == expected


def float_rwkv():
    """An rwkv.cpp float model: the first FP32 one in the full corpus, else tests/data's FP16 one."""
    files = corpus_files("rwkv/*-FP*.bin")
    return next((p for p in files if p.name.endswith("-FP32.bin")), files[0])


def rwkv_weights() -> np.ndarray:
    import gguf_construct as gc

    f = gc.load(float_rwkv())
    parts = [t.to_numpy().reshape(-1) for t in f.tensors.values() if len(t.to_numpy().shape) == 2]
    flat = np.concatenate(parts)
    return flat[: flat.size // 256 * 256].reshape(-1, 256)[:64]


@pytest.mark.parametrize("name", sorted(set(QUANTIZED) - SLOW_ORACLE))
def test_real_weights(name):
    x = rwkv_weights()
    if name not in REQUIRES_IMATRIX:
        assert_exact(name, x)
    if name in WEIGHTED:
        qw = np.mean(x * x, axis=0).astype(np.float32)  # an imatrix-like weight: mean square activation
        assert_exact(name, x, qw)


# -- edge values ------------------------------------------------------------------------------------------


def test_rounding_edges():
    """Halves, values just below halves, powers of two and their neighbours (roundf, nearest_int, log2f)."""
    base = np.array([0.5, 0.49999997, 1.5, 2.5, -0.5, -2.5, 1.0, 2.0, 4.0, 0.25, 8.0, 6.0, 3.0], np.float32)
    near = np.concatenate([base, np.nextafter(base, np.float32(0)), np.nextafter(base, np.float32(100))])
    scales = np.float32(2.0) ** (np.arange(512) % 16 - 8).astype(np.float32)
    x = (np.resize(near, (2, 512)) * scales).astype(np.float32)
    for name in sorted(set(QUANTIZED) - SLOW_ORACLE):
        assert_exact(name, x, np.ones(512, np.float32) if name in REQUIRES_IMATRIX else None)


@pytest.mark.parametrize("weighted", [False, True])
def test_nan_inf_and_signed_zeros(weighted):
    """NaN, ±inf, a row of -0.0 with one +0.0, a run of -0.0: C's comparisons skip NaNs and keep the first of equal
    zeros, and x86's float→int conversions give INT_MIN; every type must do what ggml does."""
    r = np.random.default_rng(5)
    x = r.standard_normal((4, 512)).astype(np.float32)
    x[0, 3], x[1, 100], x[2, 7] = np.nan, np.inf, -np.inf
    x[3, :] = -0.0
    x[3, 5] = 0.0
    x[2, 300:340] = -0.0
    for name in sorted(WEIGHTED) if weighted else UNWEIGHTED:
        if name in REQUIRES_IMATRIX or name in ("iq2_s", "iq3_xxs", "iq3_s", "iq1_m"):  # ggml's grid searches assert on these NaNs
            continue
        assert_exact(name, x, np.ones(512, np.float32) if weighted else None)


FAST = sorted(fast.QUANTIZERS)


def test_roundf_shortcut_is_roundf():
    """The fast paths' ``roundf(v) == trunc(v + copysign(0.49999997f, v))``, on every float32 in [0.25, 256) (below
    0.25 both give 0) and their negatives, against the reference emulation."""
    start, stop = np.array([0.25, 256.0], np.float32).view(np.uint32)
    for lo in range(int(start), int(stop), 1 << 23):
        v = np.arange(lo, min(lo + (1 << 23), int(stop)), dtype=np.uint32).view(np.float32)
        for w in (v, -v):
            half = np.copysign(np.float32(0.49999997), w)
            assert np.array_equal(np.trunc(w + half), roundf(w)), f"binade starting at {w[0]}"


@pytest.mark.parametrize("name", FAST)
def test_fast_path_covers_finite_pieces(name, monkeypatch):
    """The fast path takes finite pieces (so the bit-exact tests above exercise it) and declines a piece with a NaN
    or an infinity; a tensor whose pieces go either way, with first-index ties (``v`` and ``-v``, ``-0.0`` before
    ``+0.0``) in the fast pieces, still matches ggml byte for byte."""
    import gguf_construct.quants.quantize as qmod

    block = block_elements(name)
    r = np.random.default_rng(11)
    x = r.standard_normal((8, 512)).astype(np.float32)
    assert fast.QUANTIZERS[name](x.reshape(-1, block), np.zeros(x.size // block, block_dtype(name)))
    bad = x.copy()
    bad[0, 1] = np.nan
    assert not fast.QUANTIZERS[name](bad.reshape(-1, block), np.zeros(x.size // block, block_dtype(name)))
    x[1, :] = r.integers(-3, 4, 512)  # many blocks whose extremes tie as v and -v
    x[2, :] = -0.0
    x[2, 9] = 0.0
    x[3, :] = np.abs(x[3, :])
    x[3, ::7] = -0.0  # min is a zero: the first one's sign
    x[3, 3::7] = 0.0
    x[4, 100], x[6, 5] = np.inf, np.nan  # these pieces take the reference path
    monkeypatch.setattr(qmod, "FAST_CHUNK", 512)  # one row a piece
    assert_exact(name, x)


def test_f16_bf16_specials():
    """Infinities, NaNs with payloads and signs, overflow to inf, subnormal halves and ties."""
    bits = np.array(
        [
            0x7F800000,
            0xFF800000,
            0x7FC00001,
            0xFFA00000,
            0x7F800001,
            0x477FF000,
            0x477FE000,
            0x33800000,
            0x33000001,
            0x00000001,
            0x3F808000,
            0x3F818000,
            0x80000000,
            0x7F7FFFFF,
        ],
        np.uint32,
    )
    x = np.resize(bits, 64).view(np.float32)
    for name in ("f16", "bf16"):
        assert quantize(x, name) == ggml_quantize(x, resolve(name).id)


# -- properties -------------------------------------------------------------------------------------------

#: worst |x - dequantize(quantize(x))| relative to the block's max |x| that each type guarantees on a normal input
#: (half a step of the type's grid, plus the rounding of the scale to a half; searched types may pick a coarser
#: scale than max/levels, so their bound is a step)
ERROR_BOUND = {
    "f32": 0.0,
    "f16": 2**-11,
    "bf16": 2**-8,
    "q8_0": 1 / 127,
    "q8_1": 1 / 127,
    "q8_K": 1 / 127,
    "q6_K": 2 / 32,
    "q5_0": 1 / 16,
    "q5_1": 1 / 31,
    "q5_K": 2 / 31,
    "q4_0": 1 / 8,
    "q4_1": 1 / 15,
    "q4_K": 2 / 15,
    "iq4_nl": 0.2,
    "iq4_xs": 0.2,
    "q3_K": 2 / 4,
    "q2_K": 2 / 3,
    "mxfp4": 0.5,
    "nvfp4": 0.25,
    "tq1_0": 1.0,
    "tq2_0": 1.0,
    "q1_0": 2.0,
    "q2_0": 0.5,
    "iq2_xxs": 0.75,
    "iq2_xs": 0.75,
    "iq3_xxs": 0.5,
    "iq3_s": 0.5,
    "iq2_s": 0.75,
    "iq1_s": 1.5,
    "iq1_m": 1.5,
}


@pytest.mark.parametrize("name", TYPES)
def test_error_bound(name):
    x = INPUTS["normal"]
    q = quantize(x, name, imatrix=np.ones(x.shape[1], np.float32) if name in REQUIRES_IMATRIX else None)
    back = dequantize(q, name).reshape(x.shape)
    block = block_elements(name) if block_elements(name) in (64, 256) else 32
    amax = np.abs(x).reshape(-1, block).max(axis=1, keepdims=True)
    err = np.abs(back - x).reshape(-1, block) / amax
    assert err.max() <= ERROR_BOUND[name] + 1e-3, err.max()
    assert np.sqrt(np.mean((back - x) ** 2)) < np.sqrt(np.mean(x**2))  # better than all zeros


#: types whose ggml quantizer gives back its own blocks from their dequantized values. Not idempotent: the
#: searched types (k-quants, IQ4_*, Q4_1/Q5_1's min-max) re-derive scales from the dequantized values, and a
#: search over a different input can pick another scale; Q1_0's d is the mean |x|, which the ±d values keep, but
#: Q4_1 and Q5_1 store m = min as a half while d comes from (max - min) / levels of the rounded values.
IDEMPOTENT = ["f16", "bf16", "q8_0", "q4_0", "q5_0", "q1_0", "tq2_0", "tq1_0", "mxfp4"]


@pytest.mark.parametrize("name", IDEMPOTENT)
def test_requantize_is_identity(name):
    x = INPUTS["normal"]
    ref = ggml_quantize(x, resolve(name).id)
    back = dequantize(ref, name).reshape(x.shape)
    again = quantize(back, name)
    bad = mismatches(name, again, ref)
    assert not bad, bad[:5]


# -- importance-matrix files ----------------------------------------------------------------------------------


def _stats():
    r = np.random.default_rng(3)
    return {
        "blk.0.attn_q.weight": (r.uniform(0, 5, (1, 256)).astype(np.float32), np.array([7], np.float32)),
        "blk.0.ffn_up.weight": (r.uniform(0, 5, (1, 512)).astype(np.float32), np.array([3], np.float32)),
    }


def test_imatrix_dat_round_trip(tmp_path):
    from gguf_construct.convert.imatrix import read_imatrix, read_stats, write_dat
    from gguf_construct.formats.gguf.imatrix_dat import IMATRIX_DAT

    stats = _stats()
    write_dat(tmp_path / "m.dat", stats, chunk_count=5, dataset="wiki.train.raw")
    blob = (tmp_path / "m.dat").read_bytes()
    assert IMATRIX_DAT.build(IMATRIX_DAT.parse(blob)) == blob
    back, meta = read_stats(tmp_path / "m.dat")
    assert meta == {"format": "dat", "chunk_count": 5, "datasets": ["wiki.train.raw"]}
    for name, (sums, counts) in stats.items():
        assert np.array_equal(back[name][0], sums) and back[name][1][0] == counts[0]
    weights = read_imatrix(tmp_path / "m.dat")
    assert np.array_equal(weights["blk.0.attn_q.weight"], stats["blk.0.attn_q.weight"][0] / np.float32(7))
    # without the optional trailer, as the loader accepts; hostile counts are rejected before allocating
    no_trailer = blob[: blob.rindex(b"wiki") - 8]
    assert IMATRIX_DAT.parse(no_trailer).trailer is None
    import gguf_construct as gc

    with pytest.raises(gc.FormatError):
        IMATRIX_DAT.parse(b"\xff\xff\xff\x7f" + blob[4:])
    with pytest.raises(gc.FormatError):
        IMATRIX_DAT.parse(blob[:40])


def test_imatrix_gguf_round_trip_and_gguf_py(tmp_path):
    import gguf

    from gguf_construct.convert.imatrix import read_imatrix, read_stats, write_dat, write_gguf

    stats = _stats()
    write_gguf(tmp_path / "m.gguf", stats, datasets=["wiki.train.raw"], chunk_count=5, chunk_size=512)
    back, meta = read_stats(tmp_path / "m.gguf")
    assert meta["datasets"] == ["wiki.train.raw"] and meta["chunk_count"] == 5 and meta["chunk_size"] == 512
    for name, (sums, counts) in stats.items():
        assert np.array_equal(back[name][0], sums) and np.array_equal(back[name][1], counts)
    reader = gguf.GGUFReader(tmp_path / "m.gguf")  # llama.cpp's shapes: in_sum2 [n, n_mat], counts [1, n_mat]
    shapes = {t.name: [int(d) for d in t.shape] for t in reader.tensors}
    assert shapes["blk.0.attn_q.weight.in_sum2"] == [256, 1] and shapes["blk.0.attn_q.weight.counts"] == [1, 1]
    # the same statistics as .dat and as GGUF give llama-quantize the same weights
    write_dat(tmp_path / "m.dat", {n: (s / c[0] * c[0], c) for n, (s, c) in stats.items()})
    a, b = read_imatrix(tmp_path / "m.gguf"), read_imatrix(tmp_path / "m.dat")
    for name in stats:
        assert np.allclose(a[name], b[name], rtol=1e-6)


# -- the command ----------------------------------------------------------------------------------------------


def test_quantize_command(tmp_path):
    """A real file (an rwkv.cpp float model) quantized by the CLI: migrated to GGUF first (GGUF names and keys),
    then every quantized tensor equals ggml's bytes."""
    import subprocess
    import sys

    import gguf_construct as gc
    from gguf_construct.convert.imatrix import write_gguf
    from gguf_construct.migration import migrate

    src = float_rwkv()
    migrate(src, tmp_path / "migrated.gguf")
    model = gc.load(tmp_path / "migrated.gguf")
    imatrix = tmp_path / "m.gguf"
    write_gguf(imatrix, {"blk.0.channel_mix_value.weight": (np.linspace(0.1, 3, 256, dtype=np.float32)[None], np.array([1], np.float32))})
    out = tmp_path / "q.gguf"
    cmd = [
        sys.executable,
        "-m",
        "gguf_construct.cli.main",
        "quantize",
        str(src),
        str(out),
        "--type",
        "q4_K",
        "--imatrix",
        str(imatrix),
        "--keep",
        "token_embd.*",
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "rmse" in run.stderr
    q = gc.load(out)
    assert set(q.tensors) == set(model.tensors)
    assert q.metadata["general.architecture"] == model.metadata["general.architecture"]
    types = {n: q.tensors[n].type.name for n in q.tensors}
    assert types["token_embd.weight"] == model.tensors["token_embd.weight"].type.name  # --keep
    assert types["blk.0.attn_norm.weight"] == model.tensors["blk.0.attn_norm.weight"].type.name  # 1-D
    assert types["blk.0.channel_mix_value.weight"] == "q4_K"  # rows of 256
    assert types["blk.0.time_mix_key.weight"] == "q5_0"  # rows of 64: llama.cpp's fallback for Q4_K
    for name in ("blk.0.channel_mix_value.weight", "blk.0.time_mix_key.weight"):
        x = model.tensors[name].to_numpy()
        x = x.reshape(-1, x.shape[-1])
        qw = np.linspace(0.1, 3, 256, dtype=np.float32) if name == "blk.0.channel_mix_value.weight" else None
        assert bytes(q.tensors[name].data) == ggml_quantize(x, resolve(types[name]).id, qw)


def test_policy_follows_llama_quantize():
    from gguf_construct.quants.quantize.policy import tensor_type

    assert tensor_type("blk.0.attn_norm.weight", (4096,), "q4_K", has_output=True) is None
    assert tensor_type("blk.0.ffn_gate_inp.weight", (4096, 8), "q4_K", has_output=True) is None
    assert tensor_type("output.weight", (4096, 32000), "q4_K", has_output=True) == "q6_K"
    assert tensor_type("output.weight", (4096, 32000), "q8_0", has_output=True) == "q8_0"
    assert tensor_type("token_embd.weight", (4096, 32000), "q4_0", has_output=False) == "q6_K"  # tied embeddings
    assert tensor_type("token_embd.weight", (4096, 32000), "q4_0", has_output=True) == "q4_0"
    assert tensor_type("blk.0.attn_q.weight", (4096, 4096), "q4_K", has_output=True) == "q4_K"
    assert tensor_type("blk.0.attn_q.weight", (96, 4096), "q4_K", has_output=True) == "q5_0"
    assert tensor_type("blk.0.attn_q.weight", (40, 4096), "q6_K", has_output=True) == "f16"
    assert tensor_type("blk.0.attn_q.weight", (4096, 4096), "q4_K", has_output=True, keep=["blk.0.*"]) is None


def test_convert_type(tmp_path):
    """``convert --type`` quantizes like the quantize command (here a GGUF made in the test, no corpus needed)."""
    import subprocess
    import sys

    import gguf_construct as gc

    f = gc.new()
    f.metadata["general.architecture"] = "llama"
    x = np.random.default_rng(1).standard_normal((8, 256)).astype(np.float32)
    f.tensors.add("blk.0.attn_q.weight", x)
    f.tensors.add("blk.0.attn_norm.weight", x[0])
    f.save(tmp_path / "in.gguf")
    cmd = [
        sys.executable,
        "-m",
        "gguf_construct.cli.main",
        "convert",
        str(tmp_path / "in.gguf"),
        str(tmp_path / "out.gguf"),
        "--type",
        "q4_K",
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    out = gc.load(tmp_path / "out.gguf")
    assert out.metadata["general.architecture"] == "llama"
    assert out.tensors["blk.0.attn_q.weight"].type.name == "q4_K"
    assert out.tensors["blk.0.attn_norm.weight"].type.name == "f32"
    assert bytes(out.tensors["blk.0.attn_q.weight"].data) == ggml_quantize(x, resolve("q4_K").id)


def test_q2_0_bit_exact_with_ggml_reference():
    """ggml-python's libggml predates Q2_0: tests/quants/vectors/q2_0.npz holds the blocks ggml's own
    ``quantize_row_q2_0_ref`` made and the values its ``dequantize_row_q2_0`` read back (make_q2_0.py compiles
    them from a ggml source tree), over normal, heavy-tailed, huge, subnormal, tied and NaN/inf inputs."""
    from pathlib import Path

    ref = np.load(Path(__file__).parent / "vectors" / "q2_0.npz")
    kinds = sorted({k.split(".")[0] for k in ref.files})
    assert len(kinds) >= 10
    for kind in kinds:
        x, blocks = ref[f"{kind}.x"], ref[f"{kind}.blocks"]
        assert quantize(x, "q2_0") == blocks.tobytes(), kind
        assert np.array_equal(dequantize(blocks, "q2_0"), ref[f"{kind}.values"], equal_nan=True), kind
