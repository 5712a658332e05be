"""rwkv.cpp files for the RWKV v6/v7 migration tests, written with our RWKV declaration.

- :func:`variant`: an rwkv.cpp file in another data type, made the way rwkv.cpp makes it: FP16 by
  ``convert_pytorch_to_ggml.py``'s rule, Q4_0…Q8_0 by ``rwkv_quantize.inc``'s (only 2-D parameters, never
  ``emb``/``head``, for v7 never the LoRA matrices or ``r_k``), the blocks by ``ggml_quantize_chunk`` (ggml's C
  library through ggml-python), the function rwkv.cpp's quantizer calls; also Q4_K/Q5_K, which its Python tool offers.
- :func:`synthetic_v7` / :func:`synthetic_v6`: random models of sizes no corpus file has, in rwkv.cpp's
  parameter order and shapes (RWKV/rwkv.cpp: rwkv_model_loading.inc).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import ggml
import numpy as np
from construct import Container

from gguf_construct.formats.legacy.schema import legacy_tables
from gguf_construct.formats.rwkv.schema import RWKV

RWKV_IDS = legacy_tables().rwkv.ids(101)
FP16_KEEP = (".time_", ".k_k", ".k_a", ".r_k", ".x_rwkvag", ".x_k", ".w0", ".a0", ".v0")
QUANT_KEEP = ("att.v1", "att.v2", "att.g1", "att.g2", "att.a1", "att.a2", "att.w1", "att.w2", "att.r_k")


def quantize(values: np.ndarray, kind: str) -> bytes:
    """Rows of float32 ``values`` (numpy order: the last axis is ggml's ne0) quantized by ggml_quantize_chunk."""
    t = getattr(ggml, f"GGML_TYPE_{kind}")
    rows = np.ascontiguousarray(values, np.float32).reshape(-1, values.shape[-1])
    out = np.zeros(ggml.ggml_row_size(t, rows.shape[1]) * rows.shape[0], np.uint8)
    src = rows.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    n = ggml.ggml_quantize_chunk(t, src, out.ctypes.data_as(ctypes.c_void_p), 0, rows.shape[0], rows.shape[1], None)
    assert n == len(out)
    return out.tobytes()


def _values(p: Container) -> np.ndarray:
    from gguf_construct.api.legacy_file import dequantize_legacy
    from gguf_construct.formats.legacy.schema import resolve_type

    return dequantize_legacy(np.frombuffer(bytes(p["data"]), np.uint8), resolve_type("rwkv101", int(p["data_type"])))


def variant(src: Path, dst: Path, kind: str) -> Path:
    """``src`` (an FP32 rwkv.cpp file, or any: values are dequantized first) written as ``kind`` ('FP16', 'Q5_1' …)."""
    c = RWKV.parse_file(str(src))
    params = []
    for p in c["parameters"]:
        key, shape, values = p["key"], list(p["shape"]), _values(p)
        if kind == "FP32":
            t, data = "f32", values.astype("<f4").tobytes()
        elif kind == "FP16":
            half = len(shape) > 1 and not any(s in key for s in FP16_KEEP)
            t, data = ("f16", values.astype("<f2").tobytes()) if half else ("f32", values.astype("<f4").tobytes())
        elif len(shape) == 2 and key not in ("emb.weight", "head.weight") and not any(s in key for s in QUANT_KEEP):
            t, data = kind.lower().replace("_k", "_K"), quantize(values.reshape(shape[::-1]), kind)
        else:
            t, data = "f32", values.astype("<f4").tobytes()
        params.append(Container(key=key, data_type=RWKV_IDS[t], shape=shape, data=data))
    header = {"FP32": "f32", "FP16": "f16"}.get(kind, kind.lower().replace("_k", "_K"))
    obj = Container(
        version=101, n_vocab=c["n_vocab"], n_embed=c["n_embed"], n_layer=c["n_layer"], data_type=RWKV_IDS[header], parameters=params
    )
    dst.write_bytes(RWKV.build(obj))
    return dst


def _write(dst: Path, n_vocab: int, d: int, n_layer: int, params: list[tuple[str, list[int], np.ndarray]]) -> Path:
    out = [Container(key=k, data_type=0, shape=s, data=v.astype("<f4").tobytes()) for k, s, v in params]
    dst.write_bytes(RWKV.build(Container(version=101, n_vocab=n_vocab, n_embed=d, n_layer=n_layer, data_type=0, parameters=out)))
    return dst


def _rand(rng: np.random.Generator, shape: list[int], scale: float = 0.2) -> np.ndarray:
    return (rng.standard_normal(int(np.prod(shape))) * scale).astype(np.float32)


def _norms(rng, d: int, prefix: str) -> list[tuple[str, list[int], np.ndarray]]:
    return [(f"{prefix}.weight", [d], 1 + _rand(rng, [d], 0.05)), (f"{prefix}.bias", [d], _rand(rng, [d], 0.05))]


def synthetic_v7(
    dst: Path,
    *,
    d: int = 64,
    head_size: int = 64,
    n_layer: int = 2,
    ffn: int = 128,
    n_vocab: int = 256,
    ranks: tuple[int, int, int, int] = (32, 64, 16, 48),
    seed: int = 7,
    block0_v: int | None = None,
) -> Path:
    """A random RWKV v7 model (ranks: decay, ICLR, value-residual, gate) in rwkv.cpp's layout; ``block0_v``: give
    block 0 dummy v0/v1/v2 of that rank, as some checkpoints have. For llama.cpp to run it on any CPU, ``head_size``
    must be a multiple of 64: its SIMD wkv7 kernel steps through a head 64 floats at a time on AVX-512 (32 on
    AVX2) and overruns shorter heads (tests/wkv7_kernel.py, docs/findings.md)."""
    rng = np.random.default_rng(seed)
    rw, ra, rv, rg = ranks
    p: list[tuple[str, list[int], np.ndarray]] = [("emb.weight", [d, n_vocab], _rand(rng, [d, n_vocab], 1.0))]
    for i in range(n_layer):
        b = f"blocks.{i}"
        p += _norms(rng, d, f"{b}.ln1") + _norms(rng, d, f"{b}.ln2")
        if i == 0:
            p += _norms(rng, d, f"{b}.ln0")
        p += [(f"{b}.att.x_rwkvag", [d, 1, 6], rng.uniform(0, 1, 6 * d).astype(np.float32))]
        for name, r in (("w", rw), ("a", ra), ("v", rv), ("g", rg)):
            if name == "v" and i == 0:
                if block0_v is None:
                    continue
                r = block0_v
            p += [(f"{b}.att.{name}1", [d, r], _rand(rng, [d, r], d**-0.5)), (f"{b}.att.{name}2", [r, d], _rand(rng, [r, d], r**-0.5))]
            if name != "g":
                p += [(f"{b}.att.{name}0", [d, 1, 1], _rand(rng, [d], 0.5))]
        p += [
            (f"{b}.att.k_k", [d, 1, 1], rng.uniform(0.5, 1, d).astype(np.float32)),
            (f"{b}.att.k_a", [d, 1, 1], rng.uniform(0.5, 1, d).astype(np.float32)),
        ]
        p += [(f"{b}.att.r_k", [head_size, d // head_size], _rand(rng, [d], 0.3))]
        for name in ("receptance", "key", "value", "output"):
            p += [(f"{b}.att.{name}.weight", [d, d], _rand(rng, [d, d], d**-0.5))]
        p += _norms(rng, d, f"{b}.att.ln_x")
        p += [(f"{b}.ffn.x_k", [d, 1, 1], rng.uniform(0, 1, d).astype(np.float32))]
        p += [
            (f"{b}.ffn.key.weight", [d, ffn], _rand(rng, [d, ffn], d**-0.5)),
            (f"{b}.ffn.value.weight", [ffn, d], _rand(rng, [ffn, d], ffn**-0.5)),
        ]
    p += _norms(rng, d, "ln_out") + [("head.weight", [d, n_vocab], _rand(rng, [d, n_vocab], d**-0.5))]
    return _write(dst, n_vocab, d, n_layer, p)


def synthetic_v6(
    dst: Path,
    *,
    d: int = 64,
    head_size: int = 16,
    n_layer: int = 2,
    ffn: int = 224,
    n_vocab: int = 256,
    tm: int = 32,
    td: int = 64,
    seed: int = 6,
) -> Path:
    """A random RWKV v6 model in rwkv.cpp's layout."""
    rng = np.random.default_rng(seed)
    n_head = d // head_size
    p: list[tuple[str, list[int], np.ndarray]] = [("emb.weight", [d, n_vocab], _rand(rng, [d, n_vocab], 1.0))]
    for i in range(n_layer):
        b = f"blocks.{i}"
        p += _norms(rng, d, f"{b}.ln1") + _norms(rng, d, f"{b}.ln2")
        if i == 0:
            p += _norms(rng, d, f"{b}.ln0")
        p += [(f"{b}.att.time_maa_{x}", [d], rng.uniform(0, 1, d).astype(np.float32)) for x in "xwkvrg"]
        p += [
            (f"{b}.att.time_maa_w1", [d, 5 * tm], _rand(rng, [d, 5 * tm], 0.05)),
            (f"{b}.att.time_maa_w2", [tm, d, 5], _rand(rng, [tm, d, 5], 0.05)),
        ]
        p += [(f"{b}.att.time_decay", [1, head_size, n_head], rng.uniform(-3, 0, d).astype(np.float32))]
        p += [
            (f"{b}.att.time_decay_w1", [d, td], _rand(rng, [d, td], 0.05)),
            (f"{b}.att.time_decay_w2", [td, d], _rand(rng, [td, d], 0.05)),
        ]
        p += [(f"{b}.att.time_faaaa", [1, head_size, n_head], _rand(rng, [d], 0.3))]
        for name in ("receptance", "key", "value", "output", "gate"):
            p += [(f"{b}.att.{name}.weight", [d, d], _rand(rng, [d, d], d**-0.5))]
        p += _norms(rng, d, f"{b}.att.ln_x")
        p += [(f"{b}.ffn.time_maa_{x}", [d], rng.uniform(0, 1, d).astype(np.float32)) for x in "kr"]
        p += [
            (f"{b}.ffn.key.weight", [d, ffn], _rand(rng, [d, ffn], d**-0.5)),
            (f"{b}.ffn.receptance.weight", [d, d], _rand(rng, [d, d], d**-0.5)),
        ]
        p += [(f"{b}.ffn.value.weight", [ffn, d], _rand(rng, [ffn, d], ffn**-0.5))]
    p += _norms(rng, d, "ln_out") + [("head.weight", [d, n_vocab], _rand(rng, [d, n_vocab], d**-0.5))]
    return _write(dst, n_vocab, d, n_layer, p)
