"""Write the seed corpus of every harness into a folder: small real files, prefixes of the large ones, files
drawn from ``gguf_construct.testing.strategies`` (valid, and broken one class at a time) and raw blocks of each type.

Usage: ``python fuzz/make_seeds.py OUT_DIR [--max-len 65536]``. The corpus is ``../shared/corpus`` beside the
project (or ``$GGUF_CORPUS``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("GGUF_CORPUS", ROOT.parent / "shared" / "corpus"))


def corpus_seeds(max_len: int) -> list[bytes]:
    """Every corpus file that fits, and a prefix of those that do not (so the header paths are covered)."""
    out = []
    for path in sorted(CORPUS.rglob("*")):
        if path.is_file() and path.suffix in (".gguf", ".bin", ".safetensors"):
            with open(path, "rb") as f:
                out.append(f.read(max_len))
    return out


def generated_seeds(n: int, seed: int) -> list[bytes]:
    """Valid and labelled-invalid files from the strategies (skipped when hypothesis is not installed)."""
    try:
        from gguf_construct.testing.strategies import draw_examples, gguf_bytes, invalid_gguf, legacy_bytes, rwkv_bytes, safetensors_bytes
    except ImportError:
        return []
    valid = draw_examples(gguf_bytes(), n, seed_value=seed)
    broken = [x.data for x in draw_examples(invalid_gguf(), n, seed_value=seed + 1)]
    others = [draw_examples(s, max(1, n // 4), seed_value=seed + 2) for s in (legacy_bytes(), rwkv_bytes(), safetensors_bytes())]
    return valid + broken + [x for group in others for x in group]


def hostile_seeds(n: int, seed: int, max_len: int) -> list[bytes]:
    """The crafted inputs that fit (``testing.strategies.hostile``): the catalogue and ``n`` drawn variations."""
    try:
        from gguf_construct.testing.strategies import HOSTILE, draw_examples, hostile_bytes
    except ImportError:
        return []
    fixed = [h.make() for h in HOSTILE]
    return [d for d in fixed if len(d) <= max_len] + draw_examples(hostile_bytes(max_len), n, seed_value=seed)


def block_seeds(seed: int) -> list[bytes]:
    """``type byte + a few random blocks`` for the raw mode of fuzz_dequant."""
    from gguf_construct.core.tables import GGML_TYPES
    from gguf_construct.quants import SUPPORTED

    rng = random.Random(seed)
    types = sorted((t for t in GGML_TYPES.values() if t.name in SUPPORTED), key=lambda t: t.id)
    return [bytes([i]) + rng.randbytes(t.type_size * rng.randint(1, 4)) for i, t in enumerate(types)]


def write(folder: Path, items: list[bytes], max_len: int) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    n = 0
    for data in items:
        data = data[:max_len]
        name = hashlib.sha1(data).hexdigest()
        target = folder / name
        if not target.exists():
            target.write_bytes(data)
            n += 1
    return n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--max-len", type=int, default=65536)
    p.add_argument("--generated", type=int, default=200, help="valid and invalid files drawn from the strategies (each)")
    p.add_argument("--hostile", type=int, default=200, help="crafted inputs drawn around the hostile-input classes")
    args = p.parse_args()
    out = Path(args.out)
    files = corpus_seeds(args.max_len) + generated_seeds(args.generated, seed=6) + hostile_seeds(args.hostile, 12, args.max_len)
    for harness in ("parse", "load", "validate", "dispatch"):
        print(f"{harness}: {write(out / harness, files, args.max_len)} new seeds")
    print(f"dequant: {write(out / 'dequant', files + block_seeds(6), args.max_len)} new seeds")


if __name__ == "__main__":
    main()
