"""Write ``q2_0.npz``: inputs and the blocks ggml's reference quantizer makes of them, from a ggml source tree.

    python tests/quants/vectors/make_q2_0.py GGML_SOURCE_DIR

compiles GGML_SOURCE_DIR/src/ggml-quants.c with ``cc`` into a shared library (with stubs for the four ggml
functions the file names but ``quantize_row_q2_0_ref``/``dequantize_row_q2_0`` never reach) and records, per kind
of input, the float32 rows, the bytes of ``quantize_row_q2_0_ref`` and the floats of ``dequantize_row_q2_0``. The
shipped file was made from ggml-org/ggml at d99724f (the tree ``schema/ggml_types.json`` cites for q2_0).
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SHIM = r"""
#include <stdint.h>
#include <stddef.h>
#include "ggml.h"
#include "ggml-quants.h"
void q2_0_quantize(const float * x, void * y, int64_t k) { quantize_row_q2_0_ref(x, (block_q2_0 *) y, k); }
void q2_0_dequantize(const void * x, float * y, int64_t k) { dequantize_row_q2_0((const block_q2_0 *) x, y, k); }
void ggml_abort(const char * file, int line, const char * fmt, ...) { (void) file; (void) line; (void) fmt; __builtin_trap(); }
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void) type; (void) ne; __builtin_trap(); }
const char * ggml_type_name(enum ggml_type type) { (void) type; return "?"; }
size_t ggml_type_size(enum ggml_type type) { (void) type; __builtin_trap(); }
"""


def inputs() -> dict[str, np.ndarray]:
    r = np.random.default_rng(42)
    shape = (2, 256)
    specials = r.choice(np.array([np.nan, np.inf, -np.inf, 7e4, -7e4, 1e-45]), shape)
    return {
        k: v.astype(np.float32)
        for k, v in {
            "normal": r.standard_normal(shape),
            "uniform": r.uniform(-1, 1, shape),
            "heavy": r.standard_t(2, shape) * 0.05,
            "zero": np.zeros(shape),
            "subnormal": r.standard_normal(shape) * 1e-41,
            "huge": r.standard_normal(shape) * 1e37,
            "mixed": r.standard_normal(shape) * 10.0 ** r.integers(-20, 20, shape),
            "integers": r.integers(-3, 4, shape),
            "halves": r.integers(-6, 6, shape) * 0.5,  # ties of roundf: away from zero
            "positive": r.uniform(0, 1, shape),
            "specials": np.where(r.random(shape) < 0.05, specials, r.standard_normal(shape)),
        }.items()
    }


def main(source: Path, out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        shim, lib_path = Path(tmp, "shim.c"), Path(tmp, "libq2_0.so")
        shim.write_text(SHIM)
        includes = [f"-I{source / 'include'}", f"-I{source / 'src'}"]
        files = [str(source / "src" / "ggml-quants.c"), str(shim)]
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-DNDEBUG", *includes, *files, "-o", str(lib_path), "-lm"], check=True)
        lib = ctypes.CDLL(str(lib_path))
        arrays: dict[str, np.ndarray] = {}
        for kind, x in inputs().items():
            blocks = np.zeros(x.size // 64 * 18, np.uint8)
            lib.q2_0_quantize(x.ctypes.data_as(ctypes.c_void_p), blocks.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(x.size))
            values = np.zeros(x.size, np.float32)
            lib.q2_0_dequantize(blocks.ctypes.data_as(ctypes.c_void_p), values.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(x.size))
            arrays[f"{kind}.x"], arrays[f"{kind}.blocks"], arrays[f"{kind}.values"] = x, blocks, values
    np.savez_compressed(out, **arrays)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(__file__).with_name("q2_0.npz"))
