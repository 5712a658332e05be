"""llama.cpp's logits on migrated rwkv.cpp v6/v7 files against rwkv.cpp's expected ones: README's RWKV table.

For every ``tiny-rwkv-*.bin`` of ../shared/corpus/rwkv-v6-v7 and its variants in every data type rwkv.cpp writes
(made as rwkv.cpp makes them: tests/rwkv_models.py), migrate to GGUF, run llama.cpp (llama-cpp-python) on the
prompt '"in' (token ids 34 105 110) and compare the last logits with rwkv.cpp's expected FP32 logits: max |diff|,
argmax, the difference sum, and rwkv.cpp's own bound on that sum (tests/test_tiny_rwkv.c, which allows 1.05x it).
Prints a markdown table.

    PYTHONPATH=.:tests python benchmarks/rwkv_logits.py [--corpus ../shared/corpus]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from oracles import llama_logits  # noqa: E402
from rwkv_models import variant  # noqa: E402
from test_rwkv_llama import KINDS, PROMPT, RWKV_CPP_SUM  # noqa: E402

from gguf_construct.migrate import export, migrate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(Path(__file__).resolve().parents[2] / "shared" / "corpus"))
    args = ap.parse_args()
    folder = Path(args.corpus) / "rwkv-v6-v7"
    print("| file | type | max abs diff | argmax equal | difference sum | rwkv.cpp's bound on the sum | export byte-identical |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for src in sorted(folder.glob("tiny-rwkv-*.bin")):
            model, source_kind = re.fullmatch(r"tiny-rwkv-(\dv\d-[^-]+)-(\w+)\.bin", src.name).groups()  # type: ignore[union-attr]
            want = np.fromfile(folder / f"expected-logits-{model}.bin", "<f4")
            for kind in KINDS:
                v = src if kind == source_kind else variant(src, Path(tmp) / f"{model}-{kind}.bin", kind)
                out, back = Path(tmp) / f"{model}-{kind}.gguf", Path(tmp) / f"{model}-{kind}.back.bin"
                migrate(v, out)
                export(out, back, to="rwkv")
                got = llama_logits(out, PROMPT).astype(np.float64)
                diff = got - want
                made = "the corpus file" if v is src else (f"from {source_kind}" if source_kind != "FP32" else "from FP32")
                bound = f"{RWKV_CPP_SUM[model][kind]:+.6f}" if source_kind == "FP32" or v is src else "—"
                print(f"| {src.name} ({made}) | {kind} | {np.abs(diff).max():.3g} | {got.argmax() == want.argmax()} | {diff.sum():+.6f} | {bound} | {back.read_bytes() == v.read_bytes()} |")


if __name__ == "__main__":
    main()
