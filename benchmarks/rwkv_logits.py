"""llama.cpp's logits on migrated rwkv.cpp v6/v7 files against rwkv.cpp's expected ones: the RWKV tables of docs/howto/migrate.md.

For every ``tiny-rwkv-*.bin`` (rwkv.cpp's test models, ``RWKV/rwkv.cpp`` ``tests/`` at 4358e70; found in
../shared/corpus/rwkv-v6-v7) and its variants in every data type rwkv.cpp writes
(made as rwkv.cpp makes them: tests/rwkv_models.py), migrate to GGUF, run llama.cpp (llama-cpp-python) on the
prompt '"in' (token ids 34 105 110) and compare the last logits with rwkv.cpp's expected FP32 logits: max |diff|,
argmax, the difference sum, and rwkv.cpp's own bound on that sum (tests/test_tiny_rwkv.c, which allows 1.05x it).
Then synthetic models of other sizes (tests/rwkv_models.py: several heads, unequal LoRA ranks; d = 256 for the
k-quants), where llama.cpp's logits are compared with a numpy forward pass over the same rwkv.cpp file
(tests/rwkv_reference.py). Prints markdown tables.

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
from rwkv_models import synthetic_v6, synthetic_v7, variant  # noqa: E402
from rwkv_reference import RwkvReference  # noqa: E402

from gguf_construct.migration import export, migrate  # noqa: E402
from tests.migration.test_rwkv_llama import KINDS, PROMPT, RWKV_CPP_SUM  # noqa: E402


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
                print(
                    f"| {src.name} ({made}) | {kind} | {np.abs(diff).max():.3g} | {got.argmax() == want.argmax()} "
                    f"| {diff.sum():+.6f} | {bound} | {back.read_bytes() == v.read_bytes()} |"
                )
        synthetic(Path(tmp))


def synthetic(tmp: Path) -> None:
    models = {
        "v7 d=128, 2 heads of 64, ranks 32/64/16/48": (synthetic_v7(tmp / "s7.bin", d=128, ffn=192), KINDS),
        "v6 d=64, 4 heads, tm 32, td 64": (synthetic_v6(tmp / "s6.bin"), KINDS),
        "v7 d=256, 4 heads, ranks 64/64/32/128": (
            synthetic_v7(tmp / "s7k.bin", d=256, head_size=64, ffn=512, ranks=(64, 64, 32, 128)),
            ["FP32", "Q4_K", "Q5_K"],
        ),
    }
    print()
    print("| synthetic model | type | max abs diff, llama.cpp vs numpy reference on the same file | export byte-identical |")
    print("|---|---|---|---|")
    for label, (src, kinds) in models.items():
        for kind in kinds:
            v = variant(src, tmp / f"{src.stem}-{kind}.bin", kind)
            out, back = tmp / f"{v.stem}.gguf", tmp / f"{v.stem}.back.bin"
            migrate(v, out)
            export(out, back, to="rwkv")
            diff = llama_logits(out, PROMPT) - RwkvReference(v).logits(PROMPT)
            print(f"| {label} | {kind} | {np.abs(diff).max():.3g} | {back.read_bytes() == v.read_bytes()} |")


if __name__ == "__main__":
    main()
