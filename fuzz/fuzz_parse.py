"""Harness: ``GGUF.parse`` on any bytes, and ``GGUF.build`` of whatever parses gives the same bytes back.

Run: ``python fuzz/fuzz_parse.py SEED_DIR -max_len=65536 -timeout=1`` (or ``fuzz/run.sh``).
"""

from __future__ import annotations

from common import ContractBreach, expect_format_error, main

from gguf_construct import GGUF


def test_one(data: bytes) -> None:
    parsed = expect_format_error(lambda: GGUF.parse(data))
    if parsed is None:
        return
    try:
        rebuilt = GGUF.build(parsed)
    except Exception as e:  # a parsed file must always build back
        raise ContractBreach(f"build(parse(b)) raised {e!r}") from e
    if rebuilt != data:
        at = next((i for i, (a, b) in enumerate(zip(rebuilt, data)) if a != b), min(len(rebuilt), len(data)))
        raise ContractBreach(f"build(parse(b)) != b: first difference at byte {at} ({len(rebuilt)} vs {len(data)} bytes)")


if __name__ == "__main__":
    main(test_one)
